#!/usr/bin/env bash
# 52-ranks.sh - a 64-rank job analysed in turn and with --jobs 2 (docs/multi-node.md,
# "Scale"): the synthetic trainer with --ranks 64 (an all-reduce per step through the
# simulated NCCL) under the preload, then `stepprof analyze --json` of its 65 files,
# in turn and in two threads: records per second (every file's records over the
# wall time, best of the rounds), the speed-up of --jobs 2 over in turn (budget: not
# slower), and both peak RSS, which must not grow with --jobs by more than a job's
# tables (budget 32 MB).
set -u
B=${STEPPROF_BUILD:-build}
trainer="$B/tests/bin/trainer"
stepprof="$B/bin/stepprof"
lib=$(realpath "$B/lib/libstepprof.so" 2>/dev/null)
if [ ! -x "$trainer" ] || [ ! -x "$stepprof" ] || [ -z "$lib" ]; then
	echo "52-ranks: build/tests/bin/trainer, build/bin/stepprof or build/lib/libstepprof.so missing (make)" >&2
	exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
RANKS=${RANKS_BENCH_RANKS:-64}
ITERS=${RANKS_BENCH_ITERS:-200}
ROUNDS=${RANKS_BENCH_ROUNDS:-3}
STEPPROF_DIR="$tmp/t" STEPPROF_QUIET=1 LD_PRELOAD="$lib" "$trainer" --ranks "$RANKS" --iters "$ITERS" \
	--kernels 8 --kernel-us 200 --allreduce-bytes 64K --markers step >/dev/null 2>&1 ||
	{ echo "52-ranks: the trainer failed" >&2; exit 0; }
records=$("$stepprof" info --json "$tmp/t" | sed -n 's/.*"records": \([0-9]*\).*/\1/p' | awk '{s += $1} END {print s + 0}')
# wall seconds and peak RSS (KB) of one analysis
run() { /usr/bin/time -f '%e %M' "$stepprof" analyze --json "$@" "$tmp/t" 2>&1 >/dev/null | tail -1; }
best1=999999 best2=999999 rss1=0 rss2=0
for ((r = 0; r < ROUNDS; r++)); do
	read -r w m < <(run)
	awk -v a="$w" -v b="$best1" 'BEGIN {exit !(a < b)}' && best1=$w
	[ "$m" -gt "$rss1" ] && rss1=$m
	read -r w m < <(run --jobs 2)
	awk -v a="$w" -v b="$best2" 'BEGIN {exit !(a < b)}' && best2=$w
	[ "$m" -gt "$rss2" ] && rss2=$m
done
awk -v n="$records" -v w1="$best1" -v w2="$best2" -v m1="$rss1" -v m2="$rss2" -v k="$RANKS" 'BEGIN {
	if (w1 < 0.001) w1 = 0.001; if (w2 < 0.001) w2 = 0.001
	printf "%d ranks, %d records: in turn %.2f s, --jobs 2 %.2f s; peak RSS %.1f / %.1f MB\n", k, n, w1, w2, m1 / 1024, m2 / 1024
	printf "BENCH ranks_in_turn: %.2f Mrec/s (budget none) ok\n", n / w1 / 1e6
	printf "BENCH ranks_jobs2: %.2f Mrec/s (budget none) ok\n", n / w2 / 1e6
	s = w1 / w2
	printf "BENCH ranks_jobs2_speedup: %.2f x (budget >= 0.9) %s\n", s, (s >= 0.9) ? "ok" : "OVER"
	d = (m2 - m1) / 1024
	printf "BENCH ranks_jobs2_extra_rss: %.1f MB (budget 32) %s\n", d, (d <= 32) ? "ok" : "OVER"
}'
