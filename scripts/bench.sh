#!/usr/bin/env bash
# bench.sh - `make bench`: the budgets of docs/architecture.md ("Budgets"), each measured as a ratio
# against a baseline taken in the same run (these machines are noisy).
# Runs every scripts/bench.d/*.sh in order; each prints its own lines
#   BENCH <name>: <value> <unit> (budget <budget>) <ok|OVER>
# and a table is printed at the end.
set -u
cd "$(dirname "$0")/.."
export STEPPROF_BUILD=${STEPPROF_BUILD:-build}
out=$(mktemp)
for b in scripts/bench.d/*.sh; do
	[ -e "$b" ] || continue
	echo "== $(basename "$b" .sh)"
	bash "$b" 2>&1 | tee -a "$out"
done
echo
echo "== summary"
grep '^BENCH ' "$out" || echo "(no benchmark produced a figure)"
rm -f "$out"
