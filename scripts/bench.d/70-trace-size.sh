#!/usr/bin/env bash
# 70-trace-size.sh - trace size per raw event (design.md §7: <= 32 bytes), on a
# realistic mix: the simulated trainer's input-bound scenario (launches, copies,
# syncs, gpu spans, allocations, file I/O in 4 loader workers) under the preload.
#
# Two figures: the record slots themselves (sum of each record's slots x 32 bytes,
# from `stepprof info --json` and the kinds' slot counts of `stepprof dump`), and
# the bytes the files really occupy on disk (du: chunk headers, interned strings,
# summaries, the partly filled last chunk of each thread) per record.
set -u
B=${STEPPROF_BUILD:-build}
bin=$B/bin/trainer
lib=$(realpath "$B/lib/libstepprof.so" 2>/dev/null) # STEPPROF_BUILD relative or absolute
py=/usr/bin/python3
if [ ! -x "$bin" ] || [ ! -f "$lib" ] || [ ! -x "$py" ]; then
	echo "BENCH trace_bytes_per_event: skipped (trainer, libstepprof.so or python3 missing)"
	exit 0
fi
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
STEPPROF_DIR=$dir/trace LD_PRELOAD=$lib "$bin" --scenario input-bound --iters 60 --data-dir "$dir/data" >/dev/null 2>&1
disk=$(du -s --block-size=1 "$dir/trace" | cut -f1)
# Slots per record kind, as the reader sees them (dump prints one line per record).
"$B/bin/stepprof" info --json "$dir/trace" >"$dir/info.json"
for f in "$dir"/trace/*.sptrace; do "$B/bin/stepprof" dump --json "$f"; done >"$dir/dump.jsonl"
"$py" - "$dir/info.json" "$dir/dump.jsonl" "$disk" <<'PY'
import json, sys
info = json.load(open(sys.argv[1]))
records = sum(f["records"] for f in info["files"])
# Multi-slot kinds of include/stepprof/kinds.def (payload > 16 bytes): every other kind is one slot.
two = {"copy", "memset", "alloc", "free", "alloc_failed"}
slots = 0
for line in open(sys.argv[2]):
    k = json.loads(line)["kind"]
    slots += 2 if k in two else 1
disk = int(sys.argv[3])
rb = 32.0 * slots / records if records else 0
db = disk / records if records else 0
print(f"BENCH trace_bytes_per_event: {rb:.1f} bytes (budget 32) {'ok' if rb <= 32 else 'OVER'}")
print(f"  ({records} records, {slots} slots; on disk {disk} bytes = {db:.1f} bytes per record incl. headers, strings and partly filled chunks; Chrome JSON ~120)")
PY
