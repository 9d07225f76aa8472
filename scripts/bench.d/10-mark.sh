#!/usr/bin/env bash
# 10-mark.sh - cost of one stepprof_mark() against an empty function call, in
# the same run (markgen -b: N calls of each through a function pointer, in
# short interleaved rounds, the best round of each). Two cases: a warm ring (STEPPROF_MAX_MB=4: the file wraps, its pages
# are mapped) and a fresh file at the default cap (each new 64 KiB chunk costs a
# fallocate and the mapping of its pages). clock_gettime(CLOCK_MONOTONIC) alone
# is printed as the floor of any timestamped record on this machine.
set -u
B=${STEPPROF_BUILD:-build}
N=${MARK_BENCH_CALLS:-3000000}
BUDGET=30
so=$(readlink -f "$B/lib/libstepprof.so")
mg="$B/bin/markgen"
if [ ! -x "$mg" ] || [ ! -f "$so" ]; then
	echo "10-mark: $mg or $so missing: run make first"
	exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

run() { # $1 = label, $2 = cap in MiB
	local out added clock verdict
	out=$(STEPPROF_DIR="$tmp/$2" STEPPROF_MAX_MB=$2 LD_PRELOAD="$so" "$mg" -b "$N")
	added=$(sed -n 's/.*added_ns=\([0-9.-]*\).*/\1/p' <<<"$out")
	clock=$(sed -n 's/.*clock_ns=\([0-9.-]*\).*/\1/p' <<<"$out")
	verdict=$(awk -v a="$added" -v b=$BUDGET 'BEGIN { print (a <= b) ? "ok" : "OVER" }')
	echo "BENCH stepprof_mark $1: $added ns added per call (budget $BUDGET) $verdict"
	echo "      ($out; clock_gettime alone adds $clock ns here)"
	rm -rf "${tmp:?}/$2"
}
run "warm ring" 4
run "fresh file" 1024
