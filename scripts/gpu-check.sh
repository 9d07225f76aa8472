#!/bin/bash
# scripts/gpu-check.sh - the one-command check of stepprof on a machine with an
# NVIDIA GPU (docs/gpu-check.md). Runs in the
# repository root; everything it keeps goes to $OUT (default ./gpu-check-out).
#
#   scripts/gpu-check.sh            on a GPU machine: build, check, measure
#   scripts/gpu-check.sh --dry-run  without a GPU: the nvcc compile, then the same
#                                   steps on the simulated GPU (build/simgpu) and
#                                   the PyTorch loop on the CPU
#   scripts/gpu-check.sh --pack     build libstepprof.so and stepprof into .gpucheck/
#                                   for a GPU machine that cannot build them
#
# Steps (each prints "== step"; the first broken one stops the script with
# "gpu-check: FAILED at <step>: <why>"):
#   1. prerequisites   2. build stepprof   3. build tests/gpu/gpucheck.cu (nvcc:
#   -cudart shared and static)   4. each gpucheck variant without and with the
#   preload: same output, then compare.py cuda (counts, kernel and copy GPU
#   times against the program's own events)   5. per-call overhead (a loop of
#   small calls, best of 3, without/with the preload); 5b. a launch's host cost,
#   bare and under each kernel timing policy, off, auto, 8, all (tests/gpu/evcost.cu)
#   6. tests/gpu/torch_loop.py pinned and pageable: bare, under LD_PRELOAD, under
#   `stepprof run`; compare.py torch   6c. a launch-bound PyTorch model
#   (tests/gpu/launch_bound.py): step time bare, auto, all, interleaved runs, and
#   the breakdown under auto against all   7. summary.txt + summary.json in $OUT.
# A check that disagrees (a count, a time) is a "FAIL" line, not a stop: one GPU
# run must bring back every figure; the exit status is then 1.
#
# Files in $OUT: summary.txt,
# summary.json, log.txt (every command's output), traces.tar.gz (the analyses).
set -u -o pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT" || exit 2
MODE=gpu
case "${1:-}" in
--dry-run) MODE=dry ;;
--pack) MODE=pack ;;
"") ;;
-h | --help)
	sed -n '2,/^set -u/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'
	exit 0
	;;
*)
	echo "usage: scripts/gpu-check.sh [--dry-run|--pack]" >&2
	exit 2
	;;
esac

CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
NVCC=${NVCC:-$CUDA_HOME/bin/nvcc}
PY=${PYTHON:-python3}
JOBS=$(nproc 2>/dev/null || echo 2)
[ "$MODE" = dry ] && JOBS=2

# ---------------------------------------------------------------- --pack
if [ "$MODE" = pack ]; then
	make -j"$JOBS" build/lib/libstepprof.so build/bin/stepprof build/tests/bin/iogen build/tests/bin/markgen || exit 1
	rm -rf .gpucheck && mkdir -p .gpucheck/lib || exit 1
	cp build/lib/libstepprof.so build/bin/stepprof build/tests/bin/iogen build/tests/bin/markgen .gpucheck/ || exit 1
	grep -qx '/.gpucheck/' .git/info/exclude 2>/dev/null || echo '/.gpucheck/' >>.git/info/exclude
	echo "packed: $(ls .gpucheck .gpucheck/lib | tr '\n' ' ')"
	echo "copy .gpucheck/ with the working tree to the GPU machine; the script uses it when that machine cannot build"
	exit 0
fi

if [ -z "${OUT:-}" ]; then
	OUT=$ROOT/gpu-check-out
	[ -d .git/info ] && ! grep -qx '/gpu-check-out/' .git/info/exclude 2>/dev/null && echo '/gpu-check-out/' >>.git/info/exclude
fi
mkdir -p "$OUT" || exit 2
rm -f "$OUT"/summary.txt "$OUT"/summary.json "$OUT"/log.txt "$OUT"/traces.tar.gz
WORK=$(mktemp -d /tmp/gpu-check.XXXXXX) || exit 2
LOG=$OUT/log.txt
SUM=$OUT/summary.txt
STEP=start
FAILS=0
T0=$(date +%s)
trap 'rm -rf "$WORK"' EXIT

say() { echo "$*" | tee -a "$SUM"; }
step() {
	STEP=$1
	echo "== $STEP ($(($(date +%s) - T0)) s)" | tee -a "$LOG"
}
# Keep the log small enough to copy back from a remote machine: its last 8 MiB.
cap_log() {
	if [ "$(stat -c %s "$LOG" 2>/dev/null || echo 0)" -gt $((8 << 20)) ]; then
		tail -c $((8 << 20)) "$LOG" >"$LOG.tmp" && mv "$LOG.tmp" "$LOG"
	fi
}
# What the analyses and program outputs of the steps so far were (the traces stay behind).
pack_out() {
	(cd "$WORK" && tar czf "$OUT/traces.tar.gz" --exclude=./data --exclude='./tr_*' --exclude=./gc_shared \
		--exclude=./gc_static --exclude=./sim_shared --exclude=./sim_static . 2>/dev/null)
}
die() {
	cap_log
	pack_out
	say "gpu-check: FAILED at $STEP: $*"
	[ -s "$LOG" ] && {
		echo "--- last lines of log.txt:"
		tail -n 25 "$LOG"
	}
	exit 1
}
# A step that broke after the builds: said, counted, and the script goes on with
# the next one, so that one run still brings back every other figure.
soft_fail() {
	say "gpu-check: FAILED at $STEP: $*"
	FAILS=$((FAILS + 1))
}
# run LIMIT CMD...: its output into the log; non-zero exit and timeouts are the caller's to judge.
run() {
	local lim=$1
	shift
	echo "\$ $*" >>"$LOG"
	timeout -k 5 "$lim" "$@" >>"$LOG" 2>&1
}
now_ns() { date +%s%N; }

say "gpu-check $MODE  $(date -u +%FT%TZ)  $(uname -n)  git $(git rev-parse --short HEAD 2>/dev/null || echo '?')"

# ----------------------------------------------------- 1. prerequisites
step prerequisites
for t in cc make "$PY" timeout tar; do
	command -v "$t" >/dev/null || die "'$t' is not installed"
done
[ -f "$CUDA_HOME/include/cuda.h" ] || die "no $CUDA_HOME/include/cuda.h (set CUDA_HOME)"
HAVE_NVCC=0
[ -x "$NVCC" ] && HAVE_NVCC=1
if [ "$MODE" = gpu ]; then
	[ "$HAVE_NVCC" = 1 ] || die "no nvcc at $NVCC (set NVCC or CUDA_HOME)"
	case ":${LD_LIBRARY_PATH:-}:" in *simgpu*) die "LD_LIBRARY_PATH names the simulated GPU: $LD_LIBRARY_PATH" ;; esac
	command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader >>"$SUM" 2>&1
	"$PY" -c 'import torch,sys; sys.exit(0 if torch.cuda.is_available() else 1)' >>"$LOG" 2>&1 ||
		die "PyTorch sees no GPU ($PY: $("$PY" -c 'import torch; print(torch.__version__)' 2>&1 | tail -1))"
else
	# A venv's python3 may come first on PATH: Debian's python3-torch is /usr/bin/python3's.
	[ -z "${PYTHON:-}" ] && ! "$PY" -c 'import torch' >/dev/null 2>&1 && [ -x /usr/bin/python3 ] && PY=/usr/bin/python3
	"$PY" -c 'import torch' >/dev/null 2>&1 || die "$PY cannot import torch (the dry run's loop runs on the CPU)"
fi

# ---------------------------------------------------- 2. build stepprof
step "build stepprof"
SPLIB=$ROOT/build/lib/libstepprof.so
SP=$ROOT/build/bin/stepprof
TARGETS="build/lib/libstepprof.so build/bin/stepprof"
# NVIDIA's runtime's own requests, watched above the door (tests/workloads/cuda/real.mk).
[ -f "$CUDA_HOME/lib64/libcudart.so.13" ] && TARGETS="$TARGETS build/tests/bin/real_cudart build/tests/bin/real_spy.so"
TARGETS="$TARGETS build/tests/bin/iogen build/tests/bin/markgen"
[ "$MODE" = dry ] && TARGETS="$TARGETS build/simgpu/libcuda.so.1 build/simgpu/libcudart.so.12 build/simgpu/libcudart_static.a"
PRELOAD_ENV=()
# -k: the other programs (real_cudart, iogen) are built even where
# libstepprof.so cannot be.
run 300 make -k -j"$JOBS" $TARGETS
if ! [ -f build/lib/libstepprof.so ] || ! [ -x build/bin/stepprof ]; then
	# The GPU machine may be unable to build it: use what --pack prepared.
	[ -x .gpucheck/stepprof ] && [ -f .gpucheck/libstepprof.so ] && [ "$MODE" = gpu ] ||
		die "make $TARGETS failed (see log.txt; run scripts/gpu-check.sh --pack on a machine that can build it and copy .gpucheck/ here)"
	SPLIB=$ROOT/.gpucheck/libstepprof.so
	SP=$ROOT/.gpucheck/stepprof
	say "note: make failed, using the prebuilt .gpucheck/ (from --pack)"
fi
case "$(ldd "$SPLIB")" in *"not found"*) MISSING=1 ;; *) MISSING=0 ;; esac
if [ $MISSING = 1 ]; then
	[ -d "$ROOT/.gpucheck/lib" ] || die "libstepprof.so misses libraries: $(ldd "$SPLIB" | grep 'not found' | tr -s ' \t' ' ')"
	PRELOAD_ENV=("LD_LIBRARY_PATH=$ROOT/.gpucheck/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}")
	say "note: libstepprof.so's libraries from .gpucheck/lib"
fi
"$SP" --version >>"$LOG" 2>&1 || die "$SP does not run"

# -------------------------------------------- 3. build the CUDA program
step "build gpucheck"
SRC=tests/gpu/gpucheck.cu
VARIANTS=()
if [ "$HAVE_NVCC" = 1 ]; then
	ARCH="-gencode arch=compute_90,code=sm_90 -gencode arch=compute_90,code=compute_90"
	run 300 "$NVCC" -O2 $ARCH -cudart shared -Xlinker -rpath -Xlinker "$CUDA_HOME/lib64" "$SRC" -o "$WORK/gc_shared" ||
		die "nvcc -cudart shared $SRC"
	run 300 "$NVCC" -O2 $ARCH "$SRC" -o "$WORK/gc_static" || die "nvcc (static cudart) $SRC"
	case "$(ldd "$WORK/gc_shared")" in *libcudart.so.13*) ;; *) die "gc_shared is not linked to libcudart.so.13" ;; esac
	case "$(ldd "$WORK/gc_static")" in *libcudart*) die "gc_static links a shared libcudart" ;; esac
	say "nvcc: $("$NVCC" --version | tail -1)  -> gc_shared (libcudart.so.13), gc_static (libcudart_static.a)"
	[ "$MODE" = gpu ] && VARIANTS=(gc_shared gc_static)
else
	say "note: no nvcc at $NVCC: the nvcc compile is skipped"
fi
SIMENV=()
if [ "$MODE" = dry ]; then
	SIM=$ROOT/build/simgpu
	run 120 cc -std=gnu11 -O2 -Wall -Wextra -Werror -x c -I"$CUDA_HOME/include" "$SRC" -x none -o "$WORK/sim_shared" \
		-L"$SIM" -l:libcudart.so.12 -Wl,-rpath,"$SIM" -ldl -lpthread || die "cc $SRC (simulated runtime)"
	run 120 cc -std=gnu11 -O2 -Wall -Wextra -Werror -x c -I"$CUDA_HOME/include" "$SRC" -x none -o "$WORK/sim_static" \
		"$SIM/libcudart_static.a" -ldl -lpthread -lrt || die "cc $SRC (simulated static runtime)"
	SIMENV=("LD_LIBRARY_PATH=$SIM")
	# The simulated GPU's streams are host threads: on a shared machine a
	# preemption between two event records shows as GPU time. The dry run
	# checks the plumbing; the precision on the simulated GPU is make test's.
	export GPUCHECK_SLACK_MS=1.0
	VARIANTS=(sim_shared sim_static)
fi

# ----------------------------------------- 4. gpucheck, counts and times
ITERS=20
BYTES=$((8 << 20))
SPIN_US=2000
declare -A FIG EV
for v in "${VARIANTS[@]}"; do
	step "gpucheck $v"
	exe=$WORK/$v
	env "${SIMENV[@]}" "$exe" $ITERS $BYTES $SPIN_US >"$WORK/$v.bare" 2>>"$LOG" || die "$v failed without the preload (exit $?)"
	# every launch timed: compare.py checks each kernel's GPU time against the program's own events
	env "${SIMENV[@]}" "${PRELOAD_ENV[@]}" LD_PRELOAD="$SPLIB" STEPPROF_DIR="$WORK/tr_$v" STEPPROF_KERNEL_TIMING=all \
		"$exe" $ITERS $BYTES $SPIN_US >"$WORK/$v.pre" 2>>"$LOG" || die "$v failed under the preload (exit $?)"
	cat "$WORK/$v.pre" >>"$LOG"
	[ "$(head -1 "$WORK/$v.bare")" = "$(head -1 "$WORK/$v.pre")" ] ||
		die "$v prints '$(head -1 "$WORK/$v.pre")' under the preload, '$(head -1 "$WORK/$v.bare")' without"
	n=$(find "$WORK/tr_$v" -name '*.sptrace' 2>/dev/null | wc -l)
	[ "$n" = 1 ] || die "$v: $n trace files in $WORK/tr_$v (1 expected)"
	"$SP" dump --json "$WORK/tr_$v"/*.sptrace >"$WORK/$v.dump" 2>>"$LOG" || die "stepprof dump of $v"
	"$SP" info "$WORK/tr_$v" >"$WORK/$v.info" 2>>"$LOG" || die "stepprof info of $v"
	"$SP" analyze --json "$WORK/tr_$v" >"$WORK/$v.analyze.json" 2>>"$LOG" || die "stepprof analyze of $v"
	"$PY" tests/gpu/compare.py cuda "$WORK/$v.pre" "$WORK/$v.dump" "$v" >"$WORK/$v.cmp"
	rc=$?
	cat "$WORK/$v.cmp" >>"$LOG"
	[ $rc -ge 2 ] && die "compare.py cuda $v: unreadable input (see log.txt)"
	grep -E '^CHECK .* FAIL$|^APIS ' "$WORK/$v.cmp" | tee -a "$SUM"
	[ $rc = 1 ] && FAILS=$((FAILS + 1))
	say "$v: $(grep -c ' ok$' "$WORK/$v.cmp") checks ok, $(grep -c ' FAIL$' "$WORK/$v.cmp") failed; $(grep '^FIGURES' "$WORK/$v.cmp" | cut -d' ' -f3-)"
	FIG[$v]=$(grep '^FIGURES' "$WORK/$v.cmp" | cut -d' ' -f3-)
done

# ------------------------- 4b. the real runtime's cuGetProcAddress requests
# build/tests/bin/real_cudart (libcudart.so.13) with build/tests/bin/real_spy.so preloaded
# first: what the runtime received for each request, without and with stepprof.
# On the simulated driver this is the real_cudart/* test; here it is the GPU's driver.
if [ -x build/tests/bin/real_cudart ] && [ -f build/tests/bin/real_spy.so ]; then
	step "real runtime door"
	for k in bare pre; do
		pl=$ROOT/build/tests/bin/real_spy.so
		[ $k = pre ] && pl=$pl:$SPLIB
		# PRELOAD_ENV: libstepprof.so's own libraries when it is the packed one.
		env "${SIMENV[@]}" "${PRELOAD_ENV[@]}" LD_PRELOAD="$pl" REAL_SPY_NEXT="$SPLIB" REAL_SPY_LOG="$WORK/door.$k.log" \
			STEPPROF_DIR="$WORK/tr_door" build/tests/bin/real_cudart >"$WORK/door.$k.out" 2>>"$LOG" ||
			{ soft_fail "build/tests/bin/real_cudart failed ($k, exit $?)"; break; }
	done
	if ! cmp -s "$WORK/door.bare.out" "$WORK/door.pre.out"; then
		soft_fail "real_cudart's output differs under the preload"
	elif ! nm -D --defined-only "$SPLIB" >"$WORK/door.nm" 2>>"$LOG"; then
		soft_fail "nm -D $SPLIB"
	else
		"$PY" tests/gpu/compare.py door "$WORK/door.bare.log" "$WORK/door.pre.log" "$WORK/door.nm" door >"$WORK/door.cmp"
		rc=$?
		cat "$WORK/door.cmp" >>"$LOG"
		[ $rc -ge 2 ] && soft_fail "compare.py door: unreadable input (see log.txt)"
		[ $rc = 1 ] && FAILS=$((FAILS + 1))
	fi
	grep -E '^CHECK|^MISSED|^WRONG' "$WORK/door.cmp" | head -20 | tee -a "$SUM" >/dev/null
	# real_cudart's cudaMemcpyBatchAsync: recorded as the driver's batch it calls
	# (one H2D group), when the runtime accepted it (real_cudart's "failures 0").
	if grep -q '^call cuMemcpyBatchAsync_v2 copy 0$' "$WORK/door.pre.out"; then
		nb=0
		for f in "$WORK"/tr_door/*.sptrace; do
			[ -f "$f" ] || continue
			n=$(build/bin/stepprof dump --json "$f" 2>>"$LOG" | grep -c '"api":"cuMemcpyBatchAsync_v2"')
			nb=$((nb + n))
		done
		if [ "$nb" = 1 ]; then r=ok; else r=FAIL; FAILS=$((FAILS + 1)); fi
		echo "CHECK door batch: cudaMemcpyBatchAsync recorded as cuMemcpyBatchAsync_v2 $nb time(s), want 1 $r" |
			tee -a "$SUM"
	fi
	say "real runtime door: $(grep '^FIGURES' "$WORK/door.cmp" | cut -d' ' -f3-); real_cudart: $(grep -E '^(failures|data)' "$WORK/door.pre.out" | tr '\n' ' ')"
	FIG[door]=$(grep '^FIGURES' "$WORK/door.cmp" | cut -d' ' -f3-)
fi

# -------------------------------------------------- 5. per-call overhead
# Small calls (4 KiB copies, 5 us kernels): 9 recorded calls per iteration; the
# best of 3 wall times without and with the preload (kernel timing: the default, auto).
if [ ${#VARIANTS[@]} -gt 0 ]; then
	v=${VARIANTS[0]}
	step "per-call overhead ($v)"
	OV_IT=2000
	best() {
		local b=0 t
		for _ in 1 2 3; do
			local t0
			t0=$(now_ns)
			env "$@" >/dev/null 2>>"$LOG" || return 1
			t=$(($(now_ns) - t0))
			{ [ $b = 0 ] || [ $t -lt $b ]; } && b=$t
		done
		echo $b
	}
	if ! tb=$(best "${SIMENV[@]}" "$WORK/$v" $OV_IT 4096 5); then
		soft_fail "$v (overhead loop) failed"
	elif ! tp=$(best "${SIMENV[@]}" "${PRELOAD_ENV[@]}" LD_PRELOAD="$SPLIB" STEPPROF_DIR="$WORK/tr_ov" "$WORK/$v" $OV_IT 4096 5); then
		soft_fail "$v (overhead loop) failed under the preload"
	else
		OVERHEAD_NS=$(((tp - tb) / (OV_IT * 9)))
		say "per-call overhead ($v, $OV_IT iterations x 9 calls, best of 3): bare $((tb / 1000000)) ms, preload $((tp / 1000000)) ms, $OVERHEAD_NS ns per call"
	fi
fi

# ------------------------------------- 5b. what a timed launch costs
# tests/gpu/evcost.cu: tight loops of 20,000 calls, best of 5 rounds, bare and
# under the preload with kernel timing off and all, twice: the host cost of a
# launch and of the driver calls timing adds (the loop of 5. mixes copies and
# syncs, and moved 1.9-4.7 us a call from one run to the next on the H200).
if [ "$MODE" = gpu ]; then
	step "launch cost (evcost)"
	if run 120 "$NVCC" -O2 $ARCH -cudart shared tests/gpu/evcost.cu -o "$WORK/evcost" -L"$CUDA_HOME/lib64/stubs" -lcuda; then
		for r in 1 2; do
			for v in bare off auto 8 all; do
				e=()
				[ $v != bare ] && e=("${PRELOAD_ENV[@]}" LD_PRELOAD="$SPLIB" STEPPROF_DIR="$WORK/tr_ev" STEPPROF_KERNEL_TIMING=$v)
				rm -rf "$WORK/tr_ev"
				j=$(env "${e[@]}" "$WORK/evcost" 20000 2>>"$LOG") || { soft_fail "evcost ($v) failed"; continue; }
				echo "evcost $v round $r: $j" >>"$LOG"
				EV[$v]="${EV[$v]:-} $(echo "$j" | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["launch_ns"])')"
			done
		done
		say "launch cost (ns, two rounds): bare${EV[bare]:-}, timing off${EV[off]:-}, auto${EV[auto]:-}, 8${EV[8]:-}, all${EV[all]:-}"
		FIG[launch_ns]=$("$PY" -c 'import json,sys; print(json.dumps({k: [float(x) for x in v.split()] for k, v in zip(("bare","off","auto","8","all"), sys.argv[1:])}))' "${EV[bare]:-}" "${EV[off]:-}" "${EV[auto]:-}" "${EV[8]:-}" "${EV[all]:-}")
		# budget (docs/cuda-capture.md): auto adds at most 0.4 us a launch to bare; the lower of the two rounds each
		"$PY" -c 'import sys
lo = lambda v: min(float(x) for x in v.split()) if v.split() else float("nan")
b, a, o, f = (lo(v) for v in sys.argv[1:])
print("launch cost added to bare: off %.0f ns, auto %.0f ns (budget 400: %s), all %.0f ns; auto adds %.3f of what all adds over off" % (o - b, a - b, "ok" if a - b <= 400 else "OVER", f - b, (a - o) / (f - o) if f > o else float("nan")))' \
			"${EV[bare]:-}" "${EV[auto]:-}" "${EV[off]:-}" "${EV[all]:-}" | tee -a "$SUM"
	else
		soft_fail "nvcc tests/gpu/evcost.cu"
	fi
fi

# ------------------------------------------------------ 6. PyTorch loop
if [ "$MODE" = gpu ]; then
	T_DEV=cuda T_ITERS=30 T_FILES=2000 PINS="1 0"
else
	T_DEV=cpu T_ITERS=10 T_FILES=700 PINS="0"
fi
DATA=$WORK/data
TORCH_FIGS=()
for pin in $PINS; do
	lbl=torch_$([ "$pin" = 1 ] && echo pinned || echo pageable)
	targs=(tests/gpu/torch_loop.py --data "$DATA" --device $T_DEV --pin "$pin" --iters $T_ITERS --files $T_FILES --workers 4)
	step "$lbl bare"
	run 240 "$PY" "${targs[@]}" || die "torch_loop.py failed without the preload"
	# The second bare run is the one timed (the first made the files and warmed the caches).
	env PYTHONUNBUFFERED=1 timeout 240 "$PY" "${targs[@]}" >"$WORK/$lbl.bare" 2>>"$LOG" || die "torch_loop.py failed without the preload"
	step "$lbl under LD_PRELOAD"
	KINDS=""
	if ! env "${PRELOAD_ENV[@]}" LD_PRELOAD="$SPLIB" STEPPROF_DIR="$WORK/tr_$lbl" timeout 240 "$PY" "${targs[@]}" \
		>"$WORK/$lbl.pre" 2>>"$LOG"; then
		soft_fail "torch_loop.py failed under LD_PRELOAD (exit $?)"
	elif ! [ -d "$WORK/tr_$lbl" ]; then
		soft_fail "no trace written under LD_PRELOAD=$SPLIB (not preloaded? see log.txt)"
	else
		KINDS="pre"
	fi
	step "$lbl under stepprof run"
	if env "${PRELOAD_ENV[@]}" STEPPROF_LIB="$SPLIB" timeout 300 "$SP" run --no-bpf -o "$WORK/tr_${lbl}_run" -- \
		"$PY" "${targs[@]}" >"$WORK/$lbl.run" 2>>"$LOG"; then
		KINDS="$KINDS run"
	else
		soft_fail "stepprof run torch_loop.py failed (exit $?)"
	fi
	for k in $KINDS; do
		d=$WORK/tr_$lbl$([ $k = run ] && echo _run)
		if ! "$SP" analyze --json "$d" >"$WORK/$lbl.$k.analyze.json" 2>>"$LOG"; then
			soft_fail "stepprof analyze --json $d"
			continue
		fi
		"$SP" analyze "$d" >"$WORK/$lbl.$k.analyze.txt" 2>>"$LOG" || soft_fail "stepprof analyze $d"
		truth=$WORK/$lbl.$k
		[ $k = run ] && { grep '^{' "$WORK/$lbl.run" | grep '"iters"' | tail -1 >"$WORK/$lbl.run.truth"; truth=$WORK/$lbl.run.truth; }
		"$PY" tests/gpu/compare.py torch "$truth" "$WORK/$lbl.$k.analyze.json" "$lbl.$k" >"$WORK/$lbl.$k.cmp"
		rc=$?
		cat "$WORK/$lbl.$k.cmp" >>"$LOG"
		[ $rc -ge 2 ] && { soft_fail "compare.py torch $lbl.$k: unreadable input (see log.txt)"; continue; }
		[ $rc = 1 ] && FAILS=$((FAILS + 1))
		grep -E '^CHECK .* FAIL$' "$WORK/$lbl.$k.cmp" | tee -a "$SUM"
		FIG[$lbl.$k]=$(grep '^FIGURES' "$WORK/$lbl.$k.cmp" | cut -d' ' -f3-)
	done
	# Kernel names: launches named by the driver (cuFuncGetName, cuKernelGetName)
	# or dladdr, against "kernel@0x..." (a figure, not a check).
	if [ -d "$WORK/tr_$lbl" ]; then
		for f in "$WORK/tr_$lbl"/*.sptrace; do "$SP" dump --json "$f" 2>>"$LOG"; done |
			"$PY" -c 'import json,sys
n=u=0; names={}
for l in sys.stdin:
    r=json.loads(l)
    if r.get("kind")!="launch": continue
    n+=1; nm=r.get("name","")
    if nm.startswith("kernel@"): u+=1
    names[nm]=names.get(nm,0)+1
top=sorted(names.items(), key=lambda x:-x[1])[:5]
print("kernel names: %d of %d launches named; most launched: %s" % (n-u, n, ", ".join("%s (%d)" % (k[:60], v) for k, v in top)))' | tee -a "$SUM"
	fi
	case " $KINDS " in *" pre "*) ;; *) continue ;; esac
	sb=$("$PY" -c 'import json,sys; print("%.2f" % json.load(open(sys.argv[1]))["step_ms_median"])' "$WORK/$lbl.bare")
	sp=$("$PY" -c 'import json,sys; print("%.2f" % json.load(open(sys.argv[1]))["step_ms_median"])' "$WORK/$lbl.pre")
	say "$lbl: step median bare $sb ms, LD_PRELOAD $sp ms (x$("$PY" -c "print('%.3f' % ($sp / $sb))"))"
	say "$lbl: $(echo "${FIG[$lbl.pre]}" | "$PY" -c 'import json,sys; f=json.load(sys.stdin); print("iterations %d (%s) of %d, files %d/%d, bottleneck %s, breakdown %s, findings %s" % (f["iterations"], f["iteration_source"], f["iters_program"], f["files_opened"], f["files_program"], f["bottleneck"], {k: round(v, 3) for k, v in (f["breakdown_fraction"] or {}).items()}, f["findings"]))')"
	FIG[$lbl.step_ms_bare]=$sb
	FIG[$lbl.step_ms_preload]=$sp
done

# ------------------------------- 6c. a launch-bound model: auto vs all
# tests/gpu/launch_bound.py: hundreds of small kernels a step. Runs interleaved
# bare, auto, all (LB_RUNS of each, LB_STEPS steps each): the median step time of
# each run, then the median and spread of those per policy, and the ratios to bare
# (budget: auto within 1.05x); the breakdown of the last auto and all runs side by
# side (the same model: auto's modelled GPU time against all's measured).
if [ "$MODE" = gpu ]; then
	LB_RUNS=5 LB_ARGS=(--device cuda --steps 300)
else
	LB_RUNS=1 LB_ARGS=(--device cpu --steps 30 --warmup 5 --layers 4)
fi
step "launch-bound model (bare, auto, all; $LB_RUNS runs each)"
declare -A LB=()
for r in $(seq 1 $LB_RUNS); do
	for v in bare auto all; do
		e=()
		[ $v != bare ] && { rm -rf "$WORK/tr_lb_$v"; e=("${PRELOAD_ENV[@]}" LD_PRELOAD="$SPLIB" STEPPROF_DIR="$WORK/tr_lb_$v" STEPPROF_KERNEL_TIMING=$v); }
		j=$(env "${e[@]}" timeout 240 "$PY" tests/gpu/launch_bound.py "${LB_ARGS[@]}" 2>>"$LOG" | grep '^{' | tail -1)
		[ -n "$j" ] || { soft_fail "launch_bound.py ($v, run $r) failed"; continue; }
		echo "launch_bound $v run $r: $j" >>"$LOG"
		LB[$v]="${LB[$v]:-} $(echo "$j" | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["step_ms_median"])')"
	done
done
if [ -n "${LB[bare]:-}" ] && [ -n "${LB[auto]:-}" ] && [ -n "${LB[all]:-}" ]; then
	FIG[launch_bound_step_ms]=$("$PY" -c 'import json,sys; print(json.dumps({k: [float(x) for x in v.split()] for k, v in zip(("bare","auto","all"), sys.argv[1:])}))' "${LB[bare]}" "${LB[auto]}" "${LB[all]}")
	"$PY" -c 'import statistics, sys
v = {k: [float(x) for x in a.split()] for k, a in zip(("bare", "auto", "all"), sys.argv[1:])}
m = {k: statistics.median(x) for k, x in v.items()}
print("launch-bound model, step ms (median of %d runs, [min-max]): bare %.3f [%.3f-%.3f], auto %.3f [%.3f-%.3f], all %.3f [%.3f-%.3f]" % (
    len(v["bare"]), m["bare"], min(v["bare"]), max(v["bare"]), m["auto"], min(v["auto"]), max(v["auto"]), m["all"], min(v["all"]), max(v["all"])))
print("launch-bound model: auto %.3fx bare (budget 1.05: %s), all %.3fx bare" % (m["auto"] / m["bare"], "ok" if m["auto"] / m["bare"] <= 1.05 else "OVER", m["all"] / m["bare"]))' \
		"${LB[bare]}" "${LB[auto]}" "${LB[all]}" | tee -a "$SUM"
fi
for v in auto all; do
	[ -d "$WORK/tr_lb_$v" ] || continue
	"$SP" analyze --json "$WORK/tr_lb_$v" >"$WORK/lb_$v.analyze.json" 2>>"$LOG" || { echo "launch-bound $v: no analysis (see log.txt)" | tee -a "$SUM"; continue; }
	"$PY" -c 'import json, sys
d = json.load(open(sys.argv[1]))["summary"]
bd = d.get("breakdown_fraction") or {}
print("launch-bound model under %s: %d iterations, breakdown %s, GPU time modelled %.3f" % (sys.argv[2], d.get("iterations", 0), {k: round(v, 3) for k, v in bd.items()}, d.get("gpu_modelled_share", 0)))' \
		"$WORK/lb_$v.analyze.json" "$v" | tee -a "$SUM"
done

# ------------------------------------- 6b. two budgets on this machine
# Informative, when time is left: the stepprof_mark and small-file-loop
# budgets of docs/architecture.md ("Budgets") measured by make bench's own scripts on this
# machine's kernel (the build VM's figures are make bench's).
if [ "$MODE" = gpu ] && [ $(($(date +%s) - T0)) -lt 330 ]; then
	step "bench (mark, small-file loop)"
	BB=$WORK/bench-build
	mkdir -p "$BB/tests/bin" "$BB/lib"
	ln -s "$SPLIB" "$BB/lib/libstepprof.so"
	for p in iogen markgen; do
		if [ -x build/tests/bin/$p ]; then ln -s "$ROOT/build/tests/bin/$p" "$BB/tests/bin/$p"
		elif [ -x .gpucheck/$p ]; then ln -s "$ROOT/.gpucheck/$p" "$BB/tests/bin/$p"; fi
	done
	say "kernel $(uname -r), $(nproc) CPUs"
	env "${PRELOAD_ENV[@]}" STEPPROF_BUILD="$BB" MARK_BENCH_CALLS=1000000 timeout 40 scripts/bench.d/10-mark.sh 2>>"$LOG" |
		grep '^BENCH' | tee -a "$SUM"
	env "${PRELOAD_ENV[@]}" STEPPROF_BUILD="$BB" IO_BENCH_ROUNDS=3 timeout 90 scripts/bench.d/30-io.sh 2>>"$LOG" |
		grep '^BENCH' | tee -a "$SUM"
fi

# ----------------------------------------------------------- 7. summary
step summary
{
	echo "{"
	echo "  \"mode\": \"$MODE\", \"failed_checks\": $FAILS, \"seconds\": $(($(date +%s) - T0)),"
	[ -n "${OVERHEAD_NS:-}" ] && echo "  \"overhead_ns_per_call\": $OVERHEAD_NS,"
	first=1
	for k in "${!FIG[@]}"; do
		[ -n "${FIG[$k]}" ] || continue
		[ $first = 1 ] || echo ","
		first=0
		printf '  "%s": %s' "$k" "${FIG[$k]}"
	done
	echo
	echo "}"
} >"$OUT/summary.json"
"$PY" -m json.tool "$OUT/summary.json" >/dev/null 2>&1 || say "note: summary.json is not valid JSON"
pack_out
cap_log
say "gpu-check $MODE: $FAILS check group(s) failed, $(($(date +%s) - T0)) s; files in $OUT"
[ $FAILS = 0 ]
