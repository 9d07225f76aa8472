#!/usr/bin/env bash
# config-table.sh - print the README's table of STEPPROF_* variables from
# preload/config.def, the one list that libstepprof.so, `stepprof run` and the
# eBPF collector parse (SP_CONFIG(NAME, type, "default", min, max, "words",
# readers, "help"): the quoted columns are the 2nd, 4th and 6th fields).
set -eu
cd "$(dirname "$0")/.."
echo "| variable | default | meaning |"
echo "|---|---|---|"
awk -F'"' '/^SP_CONFIG\(/ {
	name = $1; sub(/^SP_CONFIG\(/, "", name); sub(/,.*/, "", name)
	dflt = ($2 == "") ? "(unset)" : "`" $2 "`"
	help = $6; gsub(/\|/, "\\|", help)
	printf "| `STEPPROF_%s` | %s | %s |\n", name, dflt, help
}' preload/config.def
