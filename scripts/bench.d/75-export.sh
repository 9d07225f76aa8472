#!/usr/bin/env bash
# 75-export.sh - the size of `stepprof export`'s document (docs/export.md, "Size and
# limits": <= 120 bytes per record uncompressed), on the demo's trace (the simulated
# trainer's input-bound scenario under the preload: its loader workers' file reads,
# copies, launches), plain and gzip-compressed; and on a launch-bound trace of
# gentrace (nearly every record a kernel launch or its GPU span), the same budget.
# Prints:
#   BENCH export_bytes_per_record: <bytes> (budget 120) ok|OVER
#   BENCH export_gz_bytes_per_record: <bytes> (n/a)
#   BENCH export_bytes_per_record_launch_bound: <bytes> (budget 120, ...) ok|OVER, gz <bytes>
set -u
B=${STEPPROF_BUILD:-build}
bin=$B/tests/bin/trainer
gen=$B/tests/bin/gentrace
lib=$(realpath "$B/lib/libstepprof.so" 2>/dev/null)
py=/usr/bin/python3
if [ ! -x "$bin" ] || [ ! -x "$gen" ] || [ ! -f "$lib" ] || [ ! -x "$py" ]; then
	echo "BENCH export_bytes_per_record: skipped (trainer, gentrace, libstepprof.so or python3 missing)"
	exit 0
fi
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
# $1 trace dir: "<records> <plain bytes> <gz bytes>"
sizes() {
	"$B/bin/stepprof" export -o "$dir/x.json" "$1" >/dev/null || return 1
	"$B/bin/stepprof" export -o "$dir/x.json.gz" "$1" >/dev/null || return 1
	"$py" -c 'import json, os, sys
d = json.load(open(sys.argv[1]))
print(d["otherData"]["records"], os.path.getsize(sys.argv[1]), os.path.getsize(sys.argv[2]))' "$dir/x.json" "$dir/x.json.gz"
}
STEPPROF_DIR=$dir/demo STEPPROF_QUIET=1 LD_PRELOAD=$lib "$bin" --scenario input-bound --data-dir "$dir/data" >/dev/null 2>&1
read -r rec plain gz < <(sizes "$dir/demo") || { echo "BENCH export_bytes_per_record: failed"; exit 0; }
awk -v r="$rec" -v p="$plain" -v g="$gz" 'BEGIN {
	b = p / r; printf "BENCH export_bytes_per_record: %.1f (budget 120, the demo: %d records) %s\n", b, r, b <= 120 ? "ok" : "OVER"
	printf "BENCH export_gz_bytes_per_record: %.1f (n/a)\n", g / r }'
"$gen" "$dir/gen" 1000000 --markers step >/dev/null 2>&1
read -r rec plain gz < <(sizes "$dir/gen") || exit 0
awk -v r="$rec" -v p="$plain" -v g="$gz" 'BEGIN {
	b = p / r; printf "BENCH export_bytes_per_record_launch_bound: %.1f (budget 120, %d records) %s, gz %.1f\n", b, r,
		b <= 120 ? "ok" : "OVER", g / r }'
