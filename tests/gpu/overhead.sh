#!/bin/bash
# tests/gpu/overhead.sh - where libstepprof.so's time goes on a real GPU (a
# follow-up of scripts/gpu-check.sh; run on the device machine from the
# repository root with .gpucheck/ from `scripts/gpu-check.sh --pack`).
#  1. tests/gpu/evcost.cu: the host cost of the driver calls stepprof adds
#     (event record, event query, capture and context queries) beside a launch,
#     without the preload and under it (DISABLE=1, KERNEL_TIMING=off|8|all,
#     SITES=0), twice. `--ev`: this part only.
#  2. gpucheck's loop of small calls: bare, STEPPROF_DISABLE=1 (the wrappers
#     alone), STEPPROF_KERNEL_TIMING=off, default; best of 3 each.
#  3. tests/gpu/torch_loop.py pinned, 80 iterations: bare, DISABLE=1,
#     KERNEL_TIMING=off, IO=off, both off, default; the step median of each,
#     twice interleaved; the default run's trace comes back for offline study.
set -u -o pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT" || exit 2
OUT=${OUT:-$ROOT/gpu-overhead-out}
mkdir -p "$OUT"
W=$(mktemp -d)
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
NVCC=$CUDA_HOME/bin/nvcc
LIB=$ROOT/.gpucheck/libstepprof.so
SP=$ROOT/.gpucheck/stepprof
PENV=(LD_LIBRARY_PATH="$ROOT/.gpucheck/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}")
S=$OUT/overhead.txt
say() { echo "$*" | tee -a "$S"; }
ARCH="-gencode arch=compute_90,code=sm_90"
"$NVCC" -O2 $ARCH -cudart shared tests/gpu/evcost.cu -o "$W/evcost" -L"$CUDA_HOME/lib64/stubs" -lcuda >>"$OUT/log.txt" 2>&1 || say "evcost: nvcc failed"
"$NVCC" -O2 $ARCH -cudart shared -Xlinker -rpath -Xlinker "$CUDA_HOME/lib64" tests/gpu/gpucheck.cu -o "$W/gc" >>"$OUT/log.txt" 2>&1 || say "gpucheck: nvcc failed"
for r in 1 2; do
	say "evcost bare: $("$W/evcost" 20000)"
	for v in DISABLE=1 KERNEL_TIMING=off KERNEL_TIMING=8 KERNEL_TIMING=all SITES=0; do
		rm -rf "$W/tr_ev"
		say "evcost STEPPROF_$v: $(env "${PENV[@]}" LD_PRELOAD="$LIB" STEPPROF_DIR="$W/tr_ev" STEPPROF_$v "$W/evcost" 20000)"
	done
done
[ "${1:-}" = --ev ] && exit 0

now_ns() { date +%s%N; }
best() {
	local b=0 t t0
	for _ in 1 2 3; do
		t0=$(now_ns)
		env "$@" >/dev/null 2>>"$OUT/log.txt" || return 1
		t=$(($(now_ns) - t0))
		{ [ $b = 0 ] || [ $t -lt $b ]; } && b=$t
	done
	echo $b
}
IT=2000
tb=$(best "$W/gc" $IT 4096 5)
for v in "DISABLE=1" "KERNEL_TIMING=off" "KERNEL_TIMING=all"; do
	rm -rf "$W/tr_gc"
	tp=$(best "${PENV[@]}" LD_PRELOAD="$LIB" STEPPROF_DIR="$W/tr_gc" STEPPROF_$v "$W/gc" $IT 4096 5)
	say "gpucheck small calls, STEPPROF_$v: bare $((tb / 1000)) us, preload $((tp / 1000)) us, $(((tp - tb) / (IT * 9))) ns per call"
done

A=(tests/gpu/torch_loop.py --data "$W/data" --device cuda --pin 1 --iters 80 --files 5200 --workers 4)
python3 "${A[@]}" >/dev/null 2>>"$OUT/log.txt"
declare -A MED
for round in 1 2; do
	for v in bare DISABLE=1 KERNEL_TIMING=off IO=off "KERNEL_TIMING=off IO=off" default; do
		e=()
		case $v in
		bare) ;;
		default) e=("${PENV[@]}" LD_PRELOAD="$LIB" STEPPROF_DIR="$W/tr_default_$round") ;;
		*) e=("${PENV[@]}" LD_PRELOAD="$LIB" STEPPROF_DIR="$W/tr_x"); for x in $v; do e+=("STEPPROF_$x"); done ;;
		esac
		rm -rf "$W/tr_x"
		m=$(env "${e[@]}" PYTHONUNBUFFERED=1 timeout 120 python3 "${A[@]}" 2>>"$OUT/log.txt" |
			python3 -c 'import json,sys; print("%.3f" % json.loads(sys.stdin.read().strip().splitlines()[-1])["step_ms_median"])')
		MED[$v]="${MED[$v]:-} $m"
		say "torch pinned round $round $v: step median $m ms"
	done
done
"$SP" analyze "$W/tr_default_2" >"$OUT/default.analyze.txt" 2>&1
"$SP" info "$W/tr_default_2" >"$OUT/default.info.txt" 2>&1
(cd "$W" && tar czf "$OUT/trace_default.tar.gz" tr_default_2)
ls -la "$OUT" >>"$OUT/log.txt"
say "done"
