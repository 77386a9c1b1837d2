#!/usr/bin/env bash
# Everything that needs a GPU, in one command, on a machine with one (and nvcc):
# builds the CUDA targets in build-cuda/ (Release, sm_80 + sm_90 unless SOLDER_CUDA_ARCHS says
# otherwise, e.g. SOLDER_CUDA_ARCHS=native), runs the CUDA tests (labels gpu and cuda), the chain
# example and the GPU benchmarks, and ends with a short table.
#   SOLDER_JOBS=<n>        parallel build jobs (default: nproc)
#   SOLDER_NO_INSTALL=1    do not install dependencies (an offline machine that has them, or
#                          finds them through CMAKE_PREFIX_PATH)
#   SOLDER_GPU_SANITIZE=1  also run the gpu tests under compute-sanitizer (memcheck, racecheck,
#                          synccheck): several minutes more
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
jobs="${SOLDER_JOBS:-$(nproc)}"
archs="${SOLDER_CUDA_ARCHS:-80;90}"
if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH="/usr/local/cuda/bin:$PATH"
fi
log=build-cuda/gpu-check.log

if [ "${SOLDER_NO_INSTALL:-0}" != 1 ]; then
  scripts/install-deps.sh || echo "gpu-check.sh: warning: installing dependencies failed; trying with what is there"
fi
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader

cmake -S . -B build-cuda -G Ninja -DCMAKE_BUILD_TYPE=Release -DSOLDER_ENABLE_CUDA=ON \
  "-DCMAKE_CUDA_ARCHITECTURES=$archs" || { echo "gpu-check.sh: FAILED configuring"; exit 1; }
targets=$(ninja -C build-cuda -t targets all | sed -n 's/^\(test_cuda_[a-z]*\|cuda_chain\|bench_cuda\): .*/\1/p' | sort -u)
[ -n "$targets" ] || { echo "gpu-check.sh: FAILED: CMake found no nvcc (no CUDA targets)"; exit 1; }
cmake --build build-cuda -j "$jobs" --target $targets || { echo "gpu-check.sh: FAILED building"; exit 1; }

mkdir -p build-cuda && : > "$log"
ctest --test-dir build-cuda -L '^(gpu|cuda)$' --output-on-failure -j 1 2>&1 | tee -a "$log"
tests_rc=${PIPESTATUS[0]}
if [ "${SOLDER_GPU_SANITIZE:-0}" = 1 ]; then
  sanitizer=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
  for tool in memcheck racecheck synccheck; do
    for t in build-cuda/tests/cuda/test_cuda_{elementwise,reduce,tensor}; do
      "$sanitizer" --tool "$tool" --error-exitcode 9 "$t" 2>&1 | tail -n 2 | tee -a "$log"
      rc=${PIPESTATUS[0]}
      echo "sanitizer $tool $(basename "$t"): $([ "$rc" -eq 0 ] && echo clean || echo "FAILED ($rc)")" | tee -a "$log"
      [ "$rc" -eq 0 ] || tests_rc=1
    done
  done
fi
build-cuda/examples/cuda_chain 2>&1 | tee -a "$log"
build-cuda/bench/bench_cuda 2>&1 | tee -a "$log"

echo
echo "=== gpu-check summary ==="
grep -E 'tests passed|tests failed' "$log" | tail -n 1
grep -E '^(chain on|rows \[|statistics:)' "$log"
grep -E '^(ratio|fraction|check|sanitizer) ' "$log"
[ "$tests_rc" -eq 0 ] && echo "gpu-check.sh: OK" || echo "gpu-check.sh: FAILED (tests)"
exit "$tests_rc"
