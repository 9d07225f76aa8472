#!/usr/bin/env bash
# 55-watch.sh - the budgets of `stepprof watch` (docs/watch.md, "Cost and limits"):
#   - its CPU beside a live job that writes 1 M records a second (markgen -r: marks at
#     a paced rate, a stepprof_step every 1,000: a trainer of 1,000 iterations a
#     second), at the default interval: CPU seconds of the watcher over the job's
#     wall seconds (budget: under 5% of one core);
#   - its throughput on a backlog (a generated trace of 10 M records read by one
#     `watch --once`) against `stepprof analyze` on the same trace, both pinned to
#     one CPU, by CPU time (budget: at least analyze's rate, and >= 10 M records/s).
# Prints:
#   BENCH watch_cpu_live: <percent of one core> % (budget < 5) ok|OVER
#   BENCH watch_backlog: <M records/s> Mrec/s, <ratio> x analyze (budget >= 1 x, >= 10) ok|OVER
set -u
B=${STEPPROF_BUILD:-build}
RATE=${WATCH_BENCH_RATE:-1000000}
SECS=${WATCH_BENCH_SECONDS:-30}
BIG=${WATCH_BENCH_RECORDS:-10000000}
so=$(readlink -f "$B/lib/libstepprof.so" 2>/dev/null)
if [ ! -x "$B/bin/stepprof" ] || [ ! -x "$B/tests/bin/markgen" ] || [ ! -x "$B/tests/bin/gentrace" ] ||
	[ ! -f "$so" ] || [ ! -x /usr/bin/time ]; then
	echo "55-watch: skipped: $B/bin/stepprof, markgen, gentrace, libstepprof.so or /usr/bin/time missing"
	exit 0
fi
tmp=$(mktemp -d /tmp/stepprof-bench-watch-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
pin0= pin1=
if command -v taskset >/dev/null && [ "$(nproc)" -ge 2 ]; then
	pin0="taskset -c 0" pin1="taskset -c 1"
fi

# 1. live: the job on CPU 0, the watcher on CPU 1
mkdir -m 700 "$tmp/live"
/usr/bin/time -f "%e %U %S" -o "$tmp/watch.time" $pin1 "$B/bin/stepprof" watch "$tmp/live" >"$tmp/watch.out" 2>&1 &
wpid=$!
start=$(date +%s.%N)
STEPPROF_DIR="$tmp/live" LD_PRELOAD="$so" $pin0 "$B/tests/bin/markgen" -n $((RATE * SECS)) -r "$RATE" -E 1000 >/dev/null
end=$(date +%s.%N)
wait "$wpid"
read -r we wu ws <"$tmp/watch.time"
its=$(grep -o '[0-9]* it' "$tmp/watch.out" | tail -n 1)
echo "55-watch: live: $((RATE * SECS)) records in $(awk -v a="$start" -v b="$end" 'BEGIN{printf "%.1f", b-a}') s; watcher ${wu}+${ws} s CPU over ${we} s; last line: ${its:-none}"
awk -v u="$wu" -v s="$ws" -v a="$start" -v b="$end" 'BEGIN { v = 100 * (u + s) / (b - a);
	printf "BENCH watch_cpu_live: %.2f %% (budget < 5) %s\n", v, (v < 5) ? "ok" : "OVER" }'
rm -rf "$tmp/live"

# 2. backlog: the same trace through analyze and through one watch tick
recs=$("$B/tests/bin/gentrace" "$tmp/big" "$BIG" --markers step | awk '{print $2}')
cat "$tmp/big"/* >/dev/null
/usr/bin/time -f "%e %U %S" -o "$tmp/an.time" $pin0 "$B/bin/stepprof" analyze --json "$tmp/big" >/dev/null
/usr/bin/time -f "%e %U %S" -o "$tmp/w.time" $pin0 "$B/bin/stepprof" watch --once --json "$tmp/big" >"$tmp/w.json"
read -r ae au as <"$tmp/an.time"
read -r xe xu xs <"$tmp/w.time"
echo "55-watch: backlog of $recs records: analyze ${au}+${as} s CPU, watch --once ${xu}+${xs} s CPU"
awk -v r="$recs" -v au="$au" -v as="$as" -v xu="$xu" -v xs="$xs" 'BEGIN { a = au + as; x = xu + xs;
	v = r / (x > 0 ? x : 0.01) / 1e6; q = (a > 0 ? a : 0.01) / (x > 0 ? x : 0.01);
	printf "BENCH watch_backlog: %.1f Mrec/s, %.2f x analyze (budget >= 1 x, >= 10) %s\n", v, q,
		(q >= 1 && v >= 10) ? "ok" : "OVER" }'
