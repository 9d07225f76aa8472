#!/usr/bin/env bash
# sanitize.sh - the whole test suite under the sanitizers (`make sanitize`):
#
#   build-san/   everything built with UndefinedBehaviorSanitizer: the preload,
#                the analyzer, the workloads, the test binary. The e2e tests
#                link programs of their own against the simulated GPU's static
#                runtime with a plain `cc`, so that archive is the plain build's.
#   build-asan/  AddressSanitizer + UBSan on the analyzer (`stepprof`) and on
#                the test binary, which links the analyzer library and the
#                preload's core for the unit tests. The preload library, the
#                simulated GPU and the workloads are the plain build's: ASan's
#                runtime must be the first library of a process, which a
#                library injected with LD_PRELOAD into someone else's program
#                cannot be.
#
# Any sanitizer report aborts the process that made it, so it shows as a
# failing test. Leaks: reported for `stepprof`, not for the test binary's own
# helpers (tests/lib returns malloc'd strings that tests keep to the end) nor
# for the simulated GPU's objects that unit tests create in-process.
#
#   scripts/sanitize.sh [CRITERION-FILTER]    e.g. 'io/*'
#
# Not part of `make test`; CI runs it (.ci/run). It builds the tree twice more and runs the
# suite twice (about 12 minutes on 2 cores). Prints each run's Synthesis line;
# exits 1 when either has a failure.
set -u
cd "$(dirname "$0")/.."
filter=${1:-}
jobs=${JOBS:-$(nproc 2>/dev/null || echo 2)}
cc=${CC:-cc}
flags="-fno-sanitize-recover=undefined -fno-omit-frame-pointer"
args=(--jobs 1 --timeout 600)
[ -n "$filter" ] && args+=(--filter "$filter")
export CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
# SAN_LOG_DIR: every sanitizer report, of any process of the suite, also goes to a
# file there (<dir>/report.<pid>), so a report in a program a test runs is seen
# even when the test does not print that program's stderr (.ci/run uses it).
logto=${SAN_LOG_DIR:+:log_path=$SAN_LOG_DIR/report}
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1$logto

# The plain build the two borrow from.
make -s -j"$jobs" build-all || exit 1

build() { # dir, sanitizers
	echo "sanitize: building $1 with -fsanitize=$2"
	mkdir -p "$1"
	make -s -j"$jobs" BUILD="$1" CC="$cc -fsanitize=$2 $flags" build-all "$1/tests/stepprof-tests" >"$1/build.log" 2>&1 ||
		{ tail -20 "$1/build.log"; exit 1; }
}

suite() { # dir, label
	local out
	out=$(STEPPROF_BUILD="$1" "$1/tests/stepprof-tests" "${args[@]}" 2>&1)
	printf '%s\n' "$out" >"$1/tests.log"
	printf '%s\n' "$out" | grep -E '^\[FAIL\]|runtime error|ERROR: (Address|Leak)Sanitizer' | head -20
	printf 'sanitize %s: %s\n' "$2" "$(printf '%s\n' "$out" | grep 'Synthesis:' | tail -1)"
	printf '%s\n' "$out" | grep -q 'Synthesis:.*Failing: 0 | Crashing: 0'
}

fail=0
build build-san undefined
cp build/simgpu/libcudart_static.a build-san/simgpu/libcudart_static.a
suite build-san "undefined (log: build-san/tests.log)" || fail=1

build build-asan address,undefined
cp build/lib/libstepprof.so build-asan/lib/libstepprof.so
cp -a build/simgpu/. build-asan/simgpu/
for f in build/bin/* build/tests/bin/*; do
	d=build-asan/${f#build/}
	mkdir -p "$(dirname "$d")"
	[ "$(basename "$f")" = stepprof ] || cp -a "$f" "$d"
done
supp=$(mktemp)
# the test helpers' strings, and the simulated GPU's objects that unit tests load in-process and never destroy
printf 'leak:criterion_internal_test_main\nleak:libcuda.so\nleak:libcudart.so\n' >"$supp"
# verify_asan_link_order=0: a test runs `stepprof run` with LD_PRELOAD=libm.so.6 set, to see it kept
ASAN_OPTIONS=detect_leaks=1:verify_asan_link_order=0$logto LSAN_OPTIONS="suppressions=$supp:print_suppressions=0" \
	suite build-asan "address,undefined (log: build-asan/tests.log)" || fail=1
rm -f "$supp"
exit $fail
