#!/bin/sh
# scenarios.sh - the synthetic trainer's scenarios (docs/workloads.md).
#
#   scripts/scenarios.sh                     list them with their expanded options
#   scripts/scenarios.sh NAME [OPTION...]    run one, ground truth JSON on stdout
#                                            (e.g. --markers nvtx --jitter 20)
#   scripts/scenarios.sh --profile NAME [OPTION...]
#                                            the same under LD_PRELOAD=libstepprof.so,
#                                            trace in $STEPPROF_DIR (default: a fresh
#                                            stepprof-* directory here, which git ignores),
#                                            ground truth in its truth.json, then the report
#
# The presets live in the trainer itself (trainer --list-scenarios), so this
# script, the tests and the docs cannot drift apart. STEPPROF_BUILD: default build.
set -eu
B=${STEPPROF_BUILD:-build}
T=$B/tests/bin/trainer
[ -x "$T" ] || { echo "scenarios: $T is missing: run make first" >&2; exit 1; }

if [ $# -eq 0 ]; then
	exec "$T" --list-scenarios
fi
if [ "$1" = --profile ]; then
	shift
	[ $# -ge 1 ] || { echo "usage: scenarios.sh --profile NAME [OPTION...]" >&2; exit 2; }
	dir=${STEPPROF_DIR:-stepprof-$1-$(date +%Y%m%d-%H%M%S)-$$}
	name=$1
	shift
	# NOTE: the ground truth goes inside the trace directory (readers take trace
	# files by their magic): beside it, as $dir.truth.json, it was a file that
	# .gitignore's /stepprof-*/ does not cover, left untracked in the repository.
	mkdir -p "$dir"
	LD_PRELOAD=$(cd "$B/lib" && pwd)/libstepprof.so STEPPROF_DIR=$dir "$T" --scenario "$name" "$@" >"$dir/truth.json"
	echo "trace: $dir   ground truth: $dir/truth.json" >&2
	exec "$B/bin/stepprof" analyze "$dir"
fi
name=$1
shift
exec "$T" --scenario "$name" "$@"
