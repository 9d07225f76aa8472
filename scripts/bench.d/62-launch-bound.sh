#!/usr/bin/env bash
# 62-launch-bound.sh - the step time of a launch-bound loop (the trainer's
# launch-bound scenario: 200 kernels of 15 us a step, 40 us of host work before
# each launch) under STEPPROF_KERNEL_TIMING=auto, the default, as a ratio to the
# same loop without the preload (budget 1.03x: docs/cuda-capture.md, "GPU time at
# almost no cost"), with all's ratio beside it (informative: what timing every
# launch costs the loop that waits for its launches).
#
# As 60-trainer.sh: the figure of a run is the first quartile of its iteration
# wall times (the trainer's own ground truth); runs alternate bare, auto and
# all, 5 of each, and the best figure of each kind is compared.
set -u
B=${STEPPROF_BUILD:-build}
bin=$B/tests/bin/trainer
lib=$(realpath "$B/lib/libstepprof.so" 2>/dev/null) # STEPPROF_BUILD relative or absolute
ITERS=${SP_BENCH_LAUNCH_ITERS:-30}
RUNS=${SP_BENCH_LAUNCH_RUNS:-5}
if [ ! -x "$bin" ] || [ ! -f "$lib" ]; then
	echo "BENCH launch_bound_step_ratio_auto: skipped ($bin or $B/lib/libstepprof.so not built)"
	exit 0
fi
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

q1() { # env... -> the first quartile of the iterations' wall times, ns
	env "$@" "$bin" --scenario launch-bound --iters "$ITERS" 2>/dev/null |
		grep -o '"index":[0-9]*,"start_ns":[0-9]*,"end_ns":[0-9]*,"wall_ns":[0-9]*' |
		sed 's/.*"wall_ns"://' | sort -n | awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 3) / 4)] }'
}

b0=0 b1=0 b2=0
for r in $(seq 1 "$RUNS"); do
	m0=$(q1 LD_PRELOAD= STEPPROF_DIR=)
	m1=$(q1 LD_PRELOAD="$lib" STEPPROF_DIR="$dir/auto$r" STEPPROF_QUIET=1 STEPPROF_KERNEL_TIMING=auto)
	m2=$(q1 LD_PRELOAD="$lib" STEPPROF_DIR="$dir/all$r" STEPPROF_QUIET=1 STEPPROF_KERNEL_TIMING=all)
	if [ -z "$m0" ] || [ -z "$m1" ] || [ -z "$m2" ]; then
		echo "BENCH launch_bound_step_ratio_auto: skipped (the trainer failed)"
		exit 0
	fi
	[ "$b0" = 0 ] || [ "$m0" -lt "$b0" ] && b0=$m0
	[ "$b1" = 0 ] || [ "$m1" -lt "$b1" ] && b1=$m1
	[ "$b2" = 0 ] || [ "$m2" -lt "$b2" ] && b2=$m2
	rm -rf "${dir:?}/auto$r" "${dir:?}/all$r"
done
awk -v a="$b0" -v b="$b1" -v c="$b2" -v n="$RUNS" 'BEGIN {
	printf "BENCH launch_bound_step_ratio_auto: %.3f x (budget 1.03) %s\n", b / a, (b / a <= 1.03 ? "ok" : "OVER")
	printf "BENCH launch_bound_step_ratio_all: %.3f x (budget none) ok\n", c / a
	printf "  (step time, first quartile: %.3f ms bare, %.3f ms auto, %.3f ms all; best of %d runs each)\n", a / 1e6, b / 1e6, c / 1e6, n
}'
