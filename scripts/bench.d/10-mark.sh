#!/usr/bin/env bash
# 10-mark.sh - cost of one stepprof_mark() against an empty function call, in
# the same run (markgen -b: N calls of each through a function pointer, in
# short interleaved rounds, the best round of each). Two cases: a warm ring (STEPPROF_MAX_MB=4: the file wraps, its pages
# are mapped) and a fresh file at the default cap (each new 64 KiB chunk costs
# its zeros written and the mapping of its pages). clock_gettime(CLOCK_MONOTONIC)
# alone is printed as the floor of any timestamped record on this machine.
# Beside each, the whole-run figure: N more marks in one loop, by the thread's
# CPU time, every chunk start included (the best round leaves out a round
# whose chunk starts were slow), informative.
# A load-independent figure comes from valgrind's callgrind, when installed:
# user-space instructions per stepprof_mark() call (inclusive: the clock's glibc
# wrapper, the name cache, the record, the amortised chunk changes; under
# valgrind the clock is a plain syscall, so the vDSO's own work is not in it) and
# per empty call, from one markgen -b run of CG_CALLS calls of each.
set -u
B=${STEPPROF_BUILD:-build}
N=${MARK_BENCH_CALLS:-3000000}
BUDGET=30
so=$(readlink -f "$B/lib/libstepprof.so")
mg="$B/tests/bin/markgen"
if [ ! -x "$mg" ] || [ ! -f "$so" ]; then
	echo "10-mark: $mg or $so missing: run make first"
	exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

run() { # $1 = label, $2 = cap in MiB, $3 = STEPPROF_CLOCK (default auto)
	local out added clock verdict
	out=$(STEPPROF_CLOCK=${3:-auto} STEPPROF_DIR="$tmp/$2" STEPPROF_MAX_MB=$2 LD_PRELOAD="$so" "$mg" -b "$N")
	added=$(sed -n 's/.*added_ns=\([0-9.-]*\).*/\1/p' <<<"$out")
	whole=$(sed -n 's/.*whole_ns=\([0-9.-]*\).*/\1/p' <<<"$out")
	clock=$(sed -n 's/.*clock_ns=\([0-9.-]*\).*/\1/p' <<<"$out")
	if [ "${3:-auto}" = vdso ]; then # a comparison, not the budget's figure
		echo "BENCH stepprof_mark $1: $added ns added per call (budget n/a, comparison) ok"
	else
		verdict=$(awk -v a="$added" -v b=$BUDGET 'BEGIN { print (a <= b) ? "ok" : "OVER" }')
		echo "BENCH stepprof_mark $1: $added ns added per call (budget $BUDGET) $verdict"
	fi
	[ -n "$whole" ] && echo "BENCH stepprof_mark_whole_run $1: $whole ns added per call (budget n/a, CPU time of $N calls in one loop, every chunk start included) ok"
	echo "      ($out; clock_gettime alone adds $clock ns here)"
	rm -rf "${tmp:?}/$2"
}
run "warm ring" 4
run "fresh file" 1024
# the same with every timestamp from clock_gettime (STEPPROF_CLOCK=vdso): what the TSC clock saves
run "warm ring, clock_gettime clock" 4 vdso

# callgrind: instructions inside stepprof_mark (callees included) and inside the
# empty function, counted with --toggle-collect (by symbol: independent of how
# the debug info names files), divided by their calls: CG_CALLS = 9 rounds of
# 30,000, markgen's round size, so exactly CG_CALLS calls of each, and
# CG_CALLS marks more in markgen's whole-run loop: 2 x CG_CALLS marks.
CG_CALLS=270000
cg_count() { # function name
	STEPPROF_DIR="$tmp/cg" STEPPROF_MAX_MB=4 LD_PRELOAD="$so" valgrind --tool=callgrind --callgrind-out-file=/dev/null \
		--toggle-collect="$1" "$mg" -b $CG_CALLS 2>&1 >/dev/null | sed -n 's/.*Collected : \([0-9]*\).*/\1/p' | tail -1
}
if command -v valgrind >/dev/null; then
	mark=$(cg_count stepprof_mark)
	empty=$(cg_count empty)
	if [ -n "$mark" ] && [ -n "$empty" ] && ((mark > 0)); then
		awk -v m="$mark" -v e="$empty" -v n=$CG_CALLS 'BEGIN {
			printf "BENCH stepprof_mark_instructions: %.1f instructions per call (budget n/a, callgrind, user space; empty call %.1f) ok\n", m / (2 * n), e / n
		}'
	else
		echo "10-mark: callgrind gave no count for stepprof_mark or the empty call: no instruction figure"
	fi
	rm -rf "${tmp:?}/cg"
fi
