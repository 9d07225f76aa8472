#!/usr/bin/env bash
# update-readme.sh - regenerate the README's STEPPROF_* table from preload/config.def.
set -eu
cd "$(dirname "$0")/.."
table=$(scripts/config-table.sh)
awk -v table="$table" '
	/<!-- config-table:begin -->/ { print; print table; skip = 1; next }
	/<!-- config-table:end -->/ { skip = 0 }
	!skip { print }
' README.md > README.md.tmp && mv README.md.tmp README.md
