#!/usr/bin/env bash
# 50-analyzer.sh - the analyzer's budgets (docs/architecture.md, "Budgets"): throughput of
# `stepprof analyze` on a generated trace of 50 million records (>= 10 M records/s
# on one core, the whole command: every pass over the files included), and its
# peak RSS on 5 M and 50 M records (memory independent of trace length: within 20%).
#
# build/tests/bin/gentrace writes the traces (a trainer with stepprof_step marks, 1000
# iterations, plus a loader worker) into /tmp; they are deleted at exit. The
# command runs pinned to one CPU (taskset) and timed with /usr/bin/time; the rate
# uses its CPU time (user + system: what one core spent, robust on a shared
# machine), the elapsed time is printed beside it.
# Prints:
#   BENCH analyzer_throughput: <M records/s> Mrec/s (budget >= 10) ok|OVER
#   BENCH analyzer_rss_ratio: <RSS 50M / RSS 5M> x (budget <= 1.2) ok|OVER
set -u
B=${STEPPROF_BUILD:-build}
BIG=${ANALYZER_BENCH_RECORDS:-50000000}
SMALL=$((BIG / 10))

if [ ! -x "$B/bin/stepprof" ] || [ ! -x "$B/tests/bin/gentrace" ] || [ ! -x /usr/bin/time ]; then
	echo "50-analyzer: skipped: $B/bin/stepprof, $B/tests/bin/gentrace or /usr/bin/time missing"
	exit 0
fi
tmp=$(mktemp -d /tmp/stepprof-bench-analyzer-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
pin=
command -v taskset >/dev/null && pin="taskset -c 0"

# run N: generate N records, analyze; prints "<records> <elapsed s> <maxrss KiB> <user s> <sys s>"
run() {
	local n=$1 dir="$tmp/t$1" recs
	recs=$("$B/tests/bin/gentrace" "$dir" "$n" | awk '{print $2}') || return 1
	# warm the page cache so that the disk is not what is measured
	cat "$dir"/* >/dev/null
	/usr/bin/time -f "%e %M %U %S" -o "$tmp/time" $pin "$B/bin/stepprof" analyze --json "$dir" >"$tmp/out.json" || return 1
	rm -rf "$dir"
	echo "$recs $(cat "$tmp/time")"
}

small=$(run "$SMALL") || { echo "50-analyzer: failed on $SMALL records"; exit 1; }
big=$(run "$BIG") || { echo "50-analyzer: failed on $BIG records"; exit 1; }
read -r srec ssec srss susr ssys <<<"$small"
read -r brec bsec brss busr bsys <<<"$big"
echo "50-analyzer: $srec records: ${ssec} s elapsed, ${susr}+${ssys} s CPU, ${srss} KiB; $brec records: ${bsec} s elapsed, ${busr}+${bsys} s CPU, ${brss} KiB"
awk -v r="$brec" -v u="$busr" -v y="$bsys" 'BEGIN { s = u + y; v = r / (s > 0 ? s : 0.01) / 1e6;
	printf "BENCH analyzer_throughput: %.1f Mrec/s (budget >= 10) %s\n", v, (v >= 10) ? "ok" : "OVER" }'
awk -v a="$brss" -v b="$srss" 'BEGIN { v = a / b;
	printf "BENCH analyzer_rss_ratio: %.2f x (budget <= 1.2) %s\n", v, (v <= 1.2 && v >= 1/1.2) ? "ok" : "OVER" }'
