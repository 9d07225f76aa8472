#!/usr/bin/env bash
# 60-trainer.sh - the simulated trainer's step time with all capture on, as a
# ratio to the same run without the preload (docs/architecture.md, "Budgets": <= 1.02x).
#
# The trainer measures its own iterations (ground truth, docs/workloads.md); the
# figure of a run is the first quartile of its iteration wall times. Runs
# alternate bare and profiled, 5 of each, and the best (lowest) figure of each
# kind is compared: on a shared machine the neighbours only ever add time. Scenario: compute-bound (20 kernels
# of 2 ms, a 4 MiB pinned copy, two 1 MiB files per step), 30 iterations.
set -u
B=${STEPPROF_BUILD:-build}
bin=$B/tests/bin/trainer
lib=$(realpath "$B/lib/libstepprof.so" 2>/dev/null) # STEPPROF_BUILD relative or absolute
ITERS=${SP_BENCH_TRAINER_ITERS:-30}
if [ ! -x "$bin" ] || [ ! -f "$lib" ]; then
	echo "BENCH trainer_step_ratio: skipped ($bin or $B/lib/libstepprof.so not built)"
	exit 0
fi
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

# env...: the first quartile of the iterations' wall times in the trainer's ground truth
# (a quantile below the median: the least disturbed steps of a run on a shared machine)
median() {
	env "$@" "$bin" --scenario compute-bound --iters "$ITERS" --data-dir "$dir/data" 2>/dev/null |
		grep -o '"index":[0-9]*,"start_ns":[0-9]*,"end_ns":[0-9]*,"wall_ns":[0-9]*' |
		sed 's/.*"wall_ns"://' | sort -n | awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 3) / 4)] }'
}

best0=0
best1=0
for r in 1 2 3 4 5; do
	m0=$(median LD_PRELOAD= STEPPROF_DIR=)
	m1=$(median LD_PRELOAD="$lib" STEPPROF_DIR="$dir/trace$r")
	if [ -z "$m0" ] || [ -z "$m1" ]; then
		echo "BENCH trainer_step_ratio: skipped (the trainer failed)"
		exit 0
	fi
	[ "$best0" = 0 ] || [ "$m0" -lt "$best0" ] && best0=$m0
	[ "$best1" = 0 ] || [ "$m1" -lt "$best1" ] && best1=$m1
done
awk -v a="$best0" -v b="$best1" 'BEGIN {
	r = b / a
	printf "BENCH trainer_step_ratio: %.3f x (budget 1.02) %s\n", r, (r <= 1.02 ? "ok" : "OVER")
	printf "  (step time, first quartile: %.2f ms bare, %.2f ms with all capture on; best of 5 runs each)\n", a / 1e6, b / 1e6
}'
