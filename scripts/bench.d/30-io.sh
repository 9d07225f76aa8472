#!/usr/bin/env bash
# 30-io.sh - the small-file loop of design.md §7: stat + open + read + close of
# cached 4 KiB files (build/bin/iogen bench), measured in one run
#   plain, under the libc wrappers (LD_PRELOAD, budget <= 1.15x), and under
#   strace -f (for comparison; not a budget).
# Rounds alternate between the modes and each mode keeps its best round (the
# least disturbed by other processes on a shared machine), so that a noisy
# neighbour hurts all of them alike. The eBPF figure is in the eBPF
# collector's own script.
set -u
B=${STEPPROF_BUILD:-build}
iogen="$B/bin/iogen"
lib=$(realpath "$B/lib/libstepprof.so" 2>/dev/null)
if [ ! -x "$iogen" ] || [ -z "$lib" ]; then
	echo "30-io: build/bin/iogen or build/lib/libstepprof.so missing (make)" >&2
	exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
NFILES=100
ITERS=${IO_BENCH_ITERS:-300}       # 30,000 files per plain/libc round
STRACE_ITERS=${IO_BENCH_STRACE_ITERS:-3}
ROUNDS=${IO_BENCH_ROUNDS:-7}
"$iogen" setup "$tmp/data" $NFILES 4096 >/dev/null || exit 0
"$iogen" bench "$tmp/data" $NFILES 20 >/dev/null # warm the page cache

ns_per_file() { sed -n 's/.*"ns_per_file":\([0-9.]*\).*/\1/p'; }

plain=() libc=() strace_ns=()
for ((r = 0; r < ROUNDS; r++)); do
	plain+=("$("$iogen" bench "$tmp/data" $NFILES "$ITERS" | ns_per_file)")
	rm -rf "$tmp/trace"
	libc+=("$(STEPPROF_DIR="$tmp/trace" STEPPROF_IO=libc LD_PRELOAD="$lib" "$iogen" bench "$tmp/data" $NFILES "$ITERS" |
		ns_per_file)")
	if command -v strace >/dev/null && ((r < 3)); then
		strace_ns+=("$(strace -f -qq -o /dev/null "$iogen" bench "$tmp/data" $NFILES "$STRACE_ITERS" | ns_per_file)")
	fi
done
# The libc run must really have recorded: 4 records per file.
recorded=$(ls "$tmp/trace" 2>/dev/null | wc -l)

best() { printf '%s\n' "$@" | sort -g | head -1; }
mp=$(best "${plain[@]}")
ml=$(best "${libc[@]}")
awk -v p="$mp" 'BEGIN {printf "BENCH io_small_file_loop_plain: %.0f ns/file (budget n/a) ok\n", p}'
awk -v p="$mp" -v l="$ml" -v rec="$recorded" 'BEGIN {
	x = l / p
	printf "BENCH io_small_file_loop_libc: %.3f x (budget 1.15) %s\n", x, (x <= 1.15 && rec > 0) ? "ok" : "OVER"
	if (rec == 0) print "30-io: the libc run wrote no trace file: the ratio measured nothing"
}'
if ((${#strace_ns[@]})); then
	ms=$(best "${strace_ns[@]}")
	awk -v p="$mp" -v s="$ms" 'BEGIN {printf "BENCH io_small_file_loop_strace: %.1f x (budget n/a, comparison) ok\n", s / p}'
else
	echo "30-io: strace not installed: no comparison figure"
fi
