#!/bin/sh
# tests/fuzz/run.sh - run each libFuzzer target for SECONDS and print one line
# per target: executions, rate, coverage (libFuzzer's cov/ft), corpus size and
# verdict. Called by `make fuzz` (tests/fuzz/module.mk).
#
#   run.sh DIR SECONDS TARGET...
#
# Every target starts from the generated seeds, its own corpus of earlier runs
# and the regression corpus tests/fuzz/regress/ (committed: damaged headers and
# files cut short that once misled a verb; add a reproducer there when a target
# finds one).
#
# Exit status: 0 when no target crashed, timed out or leaked; 1 otherwise (the
# reproducer is DIR/artifacts/<target>-crash-*, the log DIR/<target>.log).
set -u
dir=$1 secs=$2
shift 2
mkdir -p "$dir/corpus/seeds" "$dir/artifacts"
"$dir/gen_corpus" "$dir/corpus/seeds" || exit 1
fail=0
for t in "$@"; do
	mkdir -p "$dir/corpus/$t"
	log="$dir/$t.log"
	start=$(date +%s)
	# -close_fd_mask=2: the analyzer's own one-line errors for bad inputs go to the
	# target's stderr and would flood the log; sanitizer reports still come through.
	"$dir/$t" -max_len=262144 -timeout=10 -rss_limit_mb=2048 -max_total_time="$secs" \
		-close_fd_mask=2 -print_final_stats=1 -artifact_prefix="$dir/artifacts/$t-" \
		"$dir/corpus/$t" "$dir/corpus/seeds" "$(dirname "$0")/regress" >"$log" 2>&1
	rc=$?
	took=$(($(date +%s) - start))
	runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
	rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
	last=$(grep -E '^#[0-9]+.*cov:' "$log" | tail -1)
	cov=$(echo "$last" | sed -n 's/.*cov: \([0-9]*\).*/\1/p')
	ft=$(echo "$last" | sed -n 's/.*ft: \([0-9]*\).*/\1/p')
	corp=$(echo "$last" | sed -n 's/.*corp: \([0-9]*\/[0-9a-zA-Z]*\).*/\1/p')
	if [ "$rc" -eq 0 ]; then
		verdict=ok
	else
		verdict="FAIL (exit $rc; see $log and $dir/artifacts/)"
		fail=1
	fi
	echo "FUZZ $t: ${runs:-?} runs in ${took}s, ${rate:-?} exec/s, cov ${cov:-?} ft ${ft:-?}, corpus ${corp:-?}: $verdict"
done
exit $fail
