#!/bin/sh
# demo.sh - `make demo`: profile a small input-bound training job and print
# stepprof's report. The first thing a new user sees, so it says what ran, on
# which GPU, where the trace is, and how to do the same with their own job.
#
#   1. find the build outputs and the GPU (simulated unless a real one works)
#   2. run the workload under LD_PRELOAD=libstepprof.so into a fresh trace directory
#   3. print `stepprof analyze` and, on the simulated GPU, the trainer's own
#      ground truth beside it
#
# Environment: STEPPROF_BUILD (default build), DEMO_DIR (default build/demo),
# DEMO_SIMULATED=1 to use the simulated GPU even when a real one is present.
set -eu

cd "$(dirname "$0")/.."
B=${STEPPROF_BUILD:-build}
LIB=$B/lib/libstepprof.so
STEPPROF=$B/bin/stepprof
TRAINER=$B/tests/bin/trainer
OUT=${DEMO_DIR:-$B/demo}

for f in "$LIB" "$STEPPROF" "$TRAINER"; do
	[ -e "$f" ] || { echo "demo: $f is missing: run make first" >&2; exit 1; }
done
LIB=$(cd "$(dirname "$LIB")" && pwd)/$(basename "$LIB")

# ---- 1. which GPU ----
# A real GPU: nvidia-smi answers and the driver library is found outside build/simgpu.
real_gpu=
if [ "${DEMO_SIMULATED:-0}" != 1 ] && command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
	drv=$( (ldconfig -p 2>/dev/null || true) | awk '/libcuda\.so\.1 /{print $NF; exit}')
	case "$drv" in
	"" | *simgpu*) ;;
	*) real_gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1) ;;
	esac
fi
use_torch=
if [ -n "$real_gpu" ]; then
	if /usr/bin/python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
		use_torch=1
	else
		echo "demo: a real GPU is present ($real_gpu), but PyTorch with CUDA is not (/usr/bin/python3):"
		echo "      the bundled trainer's kernels are host functions, so it runs on the simulated GPU."
		real_gpu=
	fi
fi

# ---- 2. run under the preload ----
mkdir -p "$OUT"
stamp=$(date +%Y%m%d-%H%M%S)-$$
TRACE=$OUT/stepprof-$stamp
TRUTH=$OUT/stepprof-$stamp.truth.json

if [ -n "$use_torch" ]; then
	DATA=$OUT/data-$stamp
	mkdir -p "$DATA"
	echo "stepprof demo: an input-bound PyTorch loop on the real GPU ($real_gpu)"
	echo "  4 DataLoader workers read 128 small files per batch; 24 iterations"
	echo "  run:   LD_PRELOAD=$LIB /usr/bin/python3 - $DATA   (the script is in scripts/demo.sh)"
	echo "  trace: $TRACE"
	LD_PRELOAD=$LIB STEPPROF_DIR=$TRACE /usr/bin/python3 - "$DATA" <<'PY'
import os, sys, time, torch
from torch.utils.data import DataLoader, Dataset
d = sys.argv[1]
for i in range(256):
    p = os.path.join(d, "f%05d.bin" % i)
    if not os.path.exists(p):
        with open(p, "wb") as f:
            f.write(bytes(range(256)) * 64)
class Files(Dataset):
    def __len__(self):
        return 24 * 128
    def __getitem__(self, i):
        with open(os.path.join(d, "f%05d.bin" % (i % 256)), "rb") as f:
            b = f.read()
        time.sleep(0.0008)  # decode and augment
        return torch.frombuffer(bytearray(b), dtype=torch.uint8).float()
w = torch.randn(16384, 4096, device="cuda")
for x in DataLoader(Files(), batch_size=128, num_workers=4, pin_memory=True):
    x = x.cuda(non_blocking=True)
    for _ in range(4):
        y = x @ w.t()
    y.sum().item()
PY
	rm -rf "$DATA"
else
	echo "stepprof demo: the input-bound scenario of the synthetic trainer, on the simulated GPU"
	echo "  24 iterations; 4 loader worker processes read 128 small files (16 KiB) per batch"
	echo "  and send it over a pipe, like a PyTorch DataLoader (docs/workloads.md)"
	echo "  run:   LD_PRELOAD=$LIB $TRAINER --scenario input-bound"
	echo "  trace: $TRACE"
	LD_PRELOAD=$LIB STEPPROF_DIR=$TRACE "$TRAINER" --scenario input-bound >"$TRUTH"
fi
nfiles=$(find "$TRACE" -maxdepth 1 -type f 2>/dev/null | wc -l)
size=$(du -sh "$TRACE" 2>/dev/null | cut -f1)
echo "         $nfiles trace files (one per process), ${size:-0} in all"
echo

# ---- 3. the report ----
echo "\$ $STEPPROF analyze $TRACE"
rc=0
"$STEPPROF" analyze "$TRACE" || rc=$?

if [ -s "$TRUTH" ]; then
	# What the trainer measured itself, to compare with the report above.
	frac=$(sed -n 's/.*"breakdown_fraction":{\([^}]*\)}.*/\1/p' "$TRUTH" |
		awk -F, '{for (i = 1; i <= NF; i++) { split($i, kv, ":"); gsub(/"/, "", kv[1]);
			printf "%s%s %.1f%%", (i > 1 ? ", " : ""), kv[1], 100 * kv[2] } }')
	echo
	echo "ground truth measured by the trainer itself: $frac"
	echo "  ($TRUTH)"
fi
# The hints name this run's directory, never a ./stepprof-* glob: that would take in
# every earlier run beside it, which analyze refuses to merge (docs/cli.md, "Runs").
run_id=$("$STEPPROF" info --json "$TRACE" 2>/dev/null | sed -n 's/.*"run_id": *"\([^"]*\)".*/\1/p' | head -n 1)
echo
echo "This run again: $STEPPROF analyze $TRACE${run_id:+   (run $run_id)}"
echo "Your own job:   $STEPPROF run -o my-trace -- python train.py   then   $STEPPROF analyze my-trace"
exit "$rc"
