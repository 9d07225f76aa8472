#!/bin/sh
# same-outputs.sh - prove that a change to the analyzer leaves its outputs alone.
#
#   scripts/same-outputs.sh [--traces DIR] REV
#
# Builds the `stepprof` command of git revision REV in a temporary worktree,
# records every scenario trace of the synthetic trainer with the current
# build (once: DIR keeps them, default build/same-outputs/traces), then runs
# `analyze` (text), `analyze --json`, `analyze --html`, `export` and, when REV
# has it, `watch --once --json` (its clock readings left out) with both commands
# on every trace and compares the outputs byte for byte.
# Exit status: 0 all identical, 1 a difference (the first lines of the diff are
# printed), 2 usage or build error. STEPPROF_BUILD: the current build (default build).
set -eu
B=${STEPPROF_BUILD:-build}
traces=$B/same-outputs/traces
if [ "${1:-}" = --traces ]; then
	[ $# -ge 2 ] || { echo "usage: same-outputs.sh [--traces DIR] REV" >&2; exit 2; }
	traces=$2
	shift 2
fi
[ $# -eq 1 ] || { echo "usage: same-outputs.sh [--traces DIR] REV" >&2; exit 2; }
rev=$1
for f in "$B/bin/stepprof" "$B/tests/bin/trainer" "$B/lib/libstepprof.so"; do
	[ -e "$f" ] || { echo "same-outputs: $f is missing: run make first" >&2; exit 2; }
done
git rev-parse --verify -q "$rev^{commit}" >/dev/null || { echo "same-outputs: $rev: not a revision" >&2; exit 2; }

work=$(mktemp -d "${TMPDIR:-/tmp}/stepprof-same.XXXXXX")
trap 'git worktree remove --force "$work/src" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
git worktree add -q --detach "$work/src" "$rev" || exit 2
echo "same-outputs: building stepprof at $(git rev-parse --short "$rev")" >&2
make -s -C "$work/src" BUILD="$work/build" "$work/build/bin/stepprof" >"$work/build.log" 2>&1 ||
	{ tail -20 "$work/build.log" >&2; echo "same-outputs: build of $rev failed" >&2; exit 2; }
old=$work/build/bin/stepprof
new=$B/bin/stepprof

scenarios=$("$B/tests/bin/trainer" --list-scenarios | awk '/^[a-z]/ { print $1 }')
mkdir -p "$traces"
lib=$(cd "$B/lib" && pwd)/libstepprof.so
for s in $scenarios; do
	[ -d "$traces/$s" ] && continue
	echo "same-outputs: recording the $s scenario" >&2
	mkdir -p "$traces/$s.tmp"
	LD_PRELOAD=$lib STEPPROF_DIR=$traces/$s.tmp "$B/tests/bin/trainer" --scenario "$s" >/dev/null
	mv "$traces/$s.tmp" "$traces/$s"
done

forms="text json html export"
"$old" watch --help >/dev/null 2>&1 && forms="$forms watch"
status=0
n=0
for s in $scenarios; do
	for form in $forms; do
		for who in old new; do
			eval "cmd=\$$who"
			out=$work/$s.$form.$who
			case $form in
			text) "$cmd" analyze --all "$traces/$s" >"$out" 2>&1 || true ;;
			json) "$cmd" analyze --json "$traces/$s" >"$out" 2>&1 || true ;;
			html) "$cmd" analyze --html - "$traces/$s" >"$out" 2>&1 || true ;;
			export) "$cmd" export -o - "$traces/$s" >"$out" 2>&1 || true ;;
			watch) "$cmd" watch --once --json "$traces/$s" 2>&1 |
				sed -E 's/"(time_unix|time_mono_ns|tick_s)":[0-9.e+-]+/"\1":0/g; s/\([0-9]{2}:[0-9]{2}:[0-9]{2}\)/(T)/g' >"$out" || true ;;
			esac
		done
		n=$((n + 1))
		if ! cmp -s "$work/$s.$form.old" "$work/$s.$form.new"; then
			echo "same-outputs: $s $form: differs" >&2
			diff "$work/$s.$form.old" "$work/$s.$form.new" | head -10 >&2
			status=1
		fi
	done
done
[ $status -eq 0 ] && echo "same-outputs: $n outputs ($(echo $scenarios | wc -w) scenarios x $forms) identical to $(git rev-parse --short "$rev")'s"
exit $status
