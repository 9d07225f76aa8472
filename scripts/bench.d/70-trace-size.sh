#!/usr/bin/env bash
# 70-trace-size.sh - trace size per raw event (docs/architecture.md, "Budgets": <= 32 bytes), on a
# realistic mix: the simulated trainer's input-bound scenario (launches, copies,
# syncs, gpu spans, allocations, file I/O in 4 loader workers) under the preload.
#
# Two figures: the record slots themselves (`record_slots` x 32 bytes per record,
# from `stepprof info --json`: copies and allocations take two slots, two GPU
# spans share one), and the bytes the files really occupy on disk (du: chunk
# headers, interned strings, summaries, the partly filled last chunk of each
# thread) per record.
#
# The budget's figure is taken with every launch timed (STEPPROF_KERNEL_TIMING=all,
# the mix the budget was set on: a GPU span per launch, two to a slot). Under the
# default, auto, most launches have no GPU span of their own: the trace holds fewer
# records, and fewer of the half-slot ones, so its bytes per record rise a little
# while its bytes fall; both are printed, informative.
set -u
B=${STEPPROF_BUILD:-build}
bin=$B/tests/bin/trainer
lib=$(realpath "$B/lib/libstepprof.so" 2>/dev/null) # STEPPROF_BUILD relative or absolute
py=/usr/bin/python3
if [ ! -x "$bin" ] || [ ! -f "$lib" ] || [ ! -x "$py" ]; then
	echo "BENCH trace_bytes_per_event: skipped (trainer, libstepprof.so or python3 missing)"
	exit 0
fi
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
# $1 scenario, $2 BENCH name, $3 budget ("32" or "n/a"), $4 kernel timing policy
measure() {
	rm -rf "$dir/trace"
	STEPPROF_DIR=$dir/trace STEPPROF_KERNEL_TIMING=${4:-all} LD_PRELOAD=$lib "$bin" --scenario "$1" --iters 60 \
		--data-dir "$dir/data" >/dev/null 2>&1
	local disk
	disk=$(du -s --block-size=1 "$dir/trace" | cut -f1)
	"$B/bin/stepprof" info --json "$dir/trace" >"$dir/info.json"
	"$py" - "$dir/info.json" "$disk" "$2" "$3" "$1 (kernel timing ${4:-all})" <<'PY'
import json, sys
info = json.load(open(sys.argv[1]))
records = sum(f["records"] for f in info["files"])
slots = sum(f["record_slots"] for f in info["files"])
disk, name, budget, scen = int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
rb = 32.0 * slots / records if records else 0
db = disk / records if records else 0
ok = "ok" if budget == "n/a" or rb <= float(budget) else "OVER"
print(f"BENCH {name}: {rb:.2f} bytes (budget {budget}{', ' + scen + ' scenario' if budget == 'n/a' else ''}) {ok}")
print(f"  ({scen}: {records} records, {slots} slots; on disk {disk} bytes = {db:.1f} bytes per record incl. headers, strings and partly filled chunks; Chrome JSON ~120)")
PY
}
measure input-bound trace_bytes_per_event 32 all
measure input-bound trace_bytes_per_event_auto n/a auto
# Informative: a mix of launches, copies and their GPU spans (two to a slot).
measure compute-bound trace_bytes_per_event_compute_bound n/a all
measure compute-bound trace_bytes_per_event_compute_bound_auto n/a auto
