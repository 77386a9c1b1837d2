#!/usr/bin/env bash
# Everything that needs a GPU, in one command.
#   scripts/gpu-check.sh                 on a machine with a GPU, nvcc and solder's build
#                                        dependencies (or network access to install them):
#                                        builds the CUDA targets in build-cuda/ (Release), runs
#                                        the ptxas checks, then scripts/gpu-run.sh: the CUDA test
#                                        programs, the chain example and the GPU benchmarks,
#                                        and a short table.
#   scripts/gpu-check.sh --bundle [dir]  on any machine with nvcc (no GPU needed), for a GPU
#                                        machine that has the CUDA driver but not the build
#                                        dependencies (Catch2, Google Benchmark): builds the same
#                                        programs in build-gpu/ and copies them to <dir>
#                                        (default gpu-bundle/, ignored by git), with the shared
#                                        libraries they link that such a machine may lack
#                                        (Google Benchmark's, the CUDA runtime they were built
#                                        with). On the GPU machine: scripts/gpu-run.sh <dir>.
#   SOLDER_CUDA_ARCHS=<list>  CMAKE_CUDA_ARCHITECTURES (default: the project's, sm_80 and sm_90
#                             from one PTX; with --bundle 90-real, machine code for H100 and
#                             H200 alone, which travels in less than half the bytes), e.g. native
#   SOLDER_JOBS=<n>           parallel build jobs (default: nproc)
#   SOLDER_NO_INSTALL=1       do not install dependencies (an offline machine that has them, or
#                             finds them through CMAKE_PREFIX_PATH)
#   SOLDER_GPU_SANITIZE=1     also run the test programs under compute-sanitizer (gpu-run.sh)
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bundle=""
if [ "${1:-}" = --bundle ]; then bundle=${2:-gpu-bundle}; fi
build=$([ -n "$bundle" ] && echo build-gpu || echo build-cuda)
archs="${SOLDER_CUDA_ARCHS:-$([ -n "$bundle" ] && echo 90-real)}"
jobs="${SOLDER_JOBS:-$(nproc)}"
if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH="/usr/local/cuda/bin:$PATH"
fi
export CCACHE_DIR="${CCACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/solder-ccache}"
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$PWD}"

if [ "${SOLDER_NO_INSTALL:-0}" != 1 ]; then
  scripts/install-deps.sh || echo "gpu-check.sh: warning: installing dependencies failed; trying with what is there"
fi

cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSOLDER_ENABLE_CUDA=ON \
  ${archs:+"-DCMAKE_CUDA_ARCHITECTURES=$archs"} || { echo "gpu-check.sh: FAILED configuring"; exit 1; }
targets=$(ninja -C "$build" -t targets all | sed -n 's/^\(test_cuda_[a-z]*\|cuda_chain\|bench_cuda\): .*/\1/p' | sort -u)
[ -n "$targets" ] || { echo "gpu-check.sh: FAILED: CMake found no nvcc (no CUDA targets)"; exit 1; }
cmake --build "$build" -j "$jobs" --target $targets || { echo "gpu-check.sh: FAILED building"; exit 1; }

if [ -n "$bundle" ]; then
  rm -rf "$bundle" && mkdir -p "$bundle/lib"
  for t in $targets; do  # without their symbols: half the size
    strip -o "$bundle/$t" "$(find "$build" -type f -name "$t" -perm -u+x | head -n 1)"
  done
  # The libraries, as the loader finds them here, under the names the programs link.
  (cd "$bundle" && ldd $targets) | sed -n 's/^\s*\(lib\(benchmark\|cudart\)[^ ]*\) => \(\S*\).*/\1 \3/p' | sort -u |
    while read -r name path; do cp -L "$path" "$bundle/lib/$name"; done
  echo "gpu-check.sh: $bundle/ holds $(echo $targets | wc -w) programs for ${archs:-sm_80 and sm_90} and" \
       "$(ls "$bundle/lib" | tr '\n' ' ')($(du -sh "$bundle" | cut -f1)); on the GPU machine:" \
       "scripts/gpu-run.sh $bundle"
  exit 0
fi

# The ptxas checks (they run in CI too, and need no GPU), then what needs one.
ctest --test-dir "$build" -R '^cuda_kernels' --output-on-failure
checks=$?
scripts/gpu-run.sh "$build"
ran=$?
echo "ptxas checks (cuda_kernels): $([ "$checks" -eq 0 ] && echo passed || echo FAILED)"
if [ "$checks" -eq 0 ] && [ "$ran" -eq 0 ]; then echo "gpu-check.sh: OK"; else echo "gpu-check.sh: FAILED"; exit 1; fi
