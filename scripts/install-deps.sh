#!/usr/bin/env bash
# install-deps.sh - install the Debian packages stepprof needs to build and test.
#
# As root: installs whatever is missing (apt-get update first, once). Otherwise:
# prints the exact apt-get line to run. Also checks for the CUDA headers
# (CUDA_HOME or /usr/local/cuda): stepprof compiles against them but never links
# CUDA, so only the headers are needed.
set -u

# Build: compiler, BPF toolchain, libraries. Test: Criterion; strace, time
# (/usr/bin/time) and valgrind for the benchmarks that the suite runs in short;
# PyTorch for the real input-pipeline test; Prometheus (promtool, prometheus)
# and node_exporter, which the tests of `stepprof watch`'s metrics start
# themselves (test-only dependencies; their packaged services are not used);
# zsh, whose completion of stepprof a test runs (bash's is tested with bash);
# man-db, whose `man -l` a test renders every generated man page with;
# chromium, which lays the HTML report out, headless, in a test.
PKGS="gcc make pkg-config clang llvm libbpf-dev bpftool libelf-dev zlib1g-dev
libcriterion-dev strace time valgrind python3 python3-torch python3-numpy
prometheus prometheus-node-exporter zsh man-db chromium"

missing=""
for p in $PKGS; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done

if [ -n "$missing" ]; then
	if [ "$(id -u)" = 0 ]; then
		echo "stepprof: installing:$missing"
		export DEBIAN_FRONTEND=noninteractive
		apt-get update -q >/dev/null || { echo "stepprof: apt-get update failed" >&2; exit 1; }
		# shellcheck disable=SC2086
		apt-get install -y -q --no-install-recommends $missing >/dev/null ||
			{ echo "stepprof: apt-get install failed for:$missing" >&2; exit 1; }
	else
		echo "stepprof: missing packages; run as root:" >&2
		echo "  apt-get install -y$missing" >&2
		exit 1
	fi
fi

cuda="${CUDA_HOME:-/usr/local/cuda}"
if [ ! -f "$cuda/include/cuda.h" ] || [ ! -f "$cuda/include/cuda_runtime_api.h" ]; then
	echo "stepprof: no CUDA headers in $cuda/include." >&2
	echo "  Install the CUDA toolkit (headers suffice: cuda-cudart-dev, cuda-nvtx), or set CUDA_HOME." >&2
	exit 1
fi
exit 0
