#!/usr/bin/env bash
# Full check: install deps; build/ (Release: tests, examples, one benchmark, and their CUDA
# variants for sm_90 when nvcc is found) + every ctest entry;
# then build-asan/ (ASan+UBSan, tests only) + the unit tests (consume, compile_fail and header tests are
# not repeated there); then test_runtime under ThreadSanitizer (build-tsan/); then the
# safetensors fuzzer for SOLDER_FUZZ_SECONDS (default 60). The sanitizer stages run the same
# cases on smaller problems (SOLDER_TEST_SCALE=small, tests/test_scale.hpp). Each stage prints
# its wall time, its slowest translation units and its slowest tests; the run ends with a
# one-line summary (each stage's verdict and wall time); exits non-zero if anything failed.
#   scripts/test.sh --all   the release stage builds every benchmark, and the CUDA programs for
#                           sm_80 and sm_90 as the release preset does (scripts/gpu-check.sh
#                           builds both too)
#   SOLDER_JOBS=<n>   parallel build/test jobs (default: nproc)
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=$PWD
start=$SECONDS
all=0
if [ "${1:-}" = --all ]; then all=1; fi

scripts/install-deps.sh || { echo "test.sh: FAILED installing dependencies"; exit 1; }

# Outside the checkout, so a fresh clone on the same machine (CI) reuses earlier builds.
export CCACHE_DIR="${CCACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/solder-ccache}"
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$root}"  # paths relative to the checkout: hits across clones
# The ASan build has debug info, for which ccache also hashes the directory it runs in unless
# told not to: without this every clone rebuilds it (its objects may then name another clone's
# paths in their debug info).
export CCACHE_NOHASHDIR="${CCACHE_NOHASHDIR:-1}"
jobs="${SOLDER_JOBS:-$(nproc)}"
# nvcc from the CUDA Toolkit's usual place when it is not on the PATH; without it the CUDA
# targets are skipped (cmake/SolderCuda.cmake says so).
if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH="/usr/local/cuda/bin:$PATH"
fi

summary=()
failed=0

# configure <preset> <dir> [cmake args...]
configure() {
  if [ -f "$2/CMakeCache.txt" ] && ! grep -q '^CMAKE_GENERATOR:INTERNAL=Ninja$' "$2/CMakeCache.txt"; then
    rm -rf "$2/CMakeCache.txt" "$2/CMakeFiles"   # left by another generator
  fi
  cmake --preset "$1" "${@:3}"
}

# begin_stage <title>: prints the stage's banner and starts its clock.
# end_stage: appends the stage's wall time to its summary entry (the last one added).
stage_start=$SECONDS
stage_title=""
begin_stage() { stage_title=$1; echo "=== test.sh: $1 ==="; stage_start=$SECONDS; }
end_stage() {
  local took=$((SECONDS - stage_start))
  echo "=== test.sh: $stage_title: ${took}s ==="
  summary[${#summary[@]}-1]+=" (${took}s)"
}

# slowest_units <dir>: the five translation units of <dir> that took longest when last compiled
# (.ninja_log: start and end in ms, the last entry of an output its latest build; a ccache hit
# counts as what it took).
slowest_units() {
  [ -f "$1/.ninja_log" ] || return 0
  echo "test.sh: slowest translation units of $1/:"
  awk -F'\t' '!/^#/ && $4 ~ /\.o$/ { t[$4] = ($2 - $1) / 1000 }
               END { for (o in t) printf "%8.1f s  %s\n", t[o], o }' "$1/.ninja_log" |
    sed 's|CMakeFiles/[^/]*\.dir/||; s|\.o$||' | sort -rn | head -n 5
}

# build <dir> [targets...]: builds, then prints its slowest translation units.
build() {
  local dir=$1; shift
  cmake --build "$dir" -j "$jobs" ${1:+--target "$@"}
  local rc=$?
  slowest_units "$dir"
  return "$rc"
}

# run_ctest <name> <dir> <ctest args...>: appends "<name>: <ctest's verdict>" to the summary
run_ctest() {
  local name=$1 dir=$2; shift 2
  local log="$dir/ctest.log"
  ctest --test-dir "$dir" --output-on-failure -j "$jobs" "$@" 2>&1 | tee "$log"
  local rc=${PIPESTATUS[0]}
  local verdict
  echo "test.sh: slowest tests of $dir/:"
  awk '/Test +#[0-9]+: / { for (i = 1; i < NF; i++) if ($(i + 1) == "sec") printf "%8.1f s  %s\n", $i, $4 }' "$log" |
    sort -rn | head -n 5
  verdict=$(grep -E 'tests passed|No tests were found' "$log" | tail -n 1)
  [ -n "$verdict" ] || verdict="ctest exited $rc"
  if [ "$rc" -ne 0 ]; then failed=1; verdict="FAILED ($verdict)"; fi
  summary+=("$name: $verdict")
}

# --- 1. Release: everything but the benchmarks (one builds, as a check of their harness) -----
# The CUDA programs for one architecture, sm_90: the one whose kernels have spilled where sm_80's
# did not (docs/cuda.md), and whose machine code is the same from compute_90 as from the
# compute_80 PTX of the default build. scripts/gpu-check.sh and --all build sm_80 and sm_90.
if [ "$all" -eq 1 ]; then
  release_args=(-U CMAKE_CUDA_ARCHITECTURES -DSOLDER_BENCH_IN_ALL=ON)
else
  release_args=(-DCMAKE_CUDA_ARCHITECTURES=90 -DSOLDER_BENCH_IN_ALL=OFF)
fi
begin_stage "release (build/)"
if configure release build "${release_args[@]}" && build build; then
  run_ctest release build
else
  failed=1; summary+=("release: BUILD FAILED")
fi
end_stage

# --- 2. Sanitizers: unit tests only -----------------------------------------------------------
# The asan preset builds at -O0 -g1: under ASan + UBSan, g++ 12 takes ~3x longer at -O2 (and
# crashes at -O1), while the tests themselves run in seconds either way.
begin_stage "asan+ubsan (build-asan/)"
if configure asan build-asan && build build-asan; then
  run_ctest asan build-asan -LE '^(consume|compile_fail|headers)$'
else
  failed=1; summary+=("asan: BUILD FAILED")
fi
end_stage

# --- 3. ThreadSanitizer: the runtime's tests (compiled callables called from many threads) ----
begin_stage "tsan (build-tsan/)"
if configure tsan build-tsan && build build-tsan test_runtime; then
  TSAN_OPTIONS=halt_on_error=1 run_ctest tsan build-tsan -R '^test_runtime$'
else
  failed=1; summary+=("tsan: BUILD FAILED")
fi
end_stage

# --- 4. The safetensors parser under libFuzzer (clang, ASan + UBSan), a bounded run ----------
begin_stage "fuzz (build-fuzz/)"
mkdir -p build-fuzz
if SOLDER_FUZZ_SECONDS="${SOLDER_FUZZ_SECONDS:-60}" scripts/fuzz.sh >build-fuzz/fuzz.log 2>&1; then
  summary+=("fuzz: $(grep -o 'stat::number_of_executed_units: *[0-9]*' build-fuzz/fuzz.log | grep -o '[0-9]*$') runs, no crash")
else
  tail -n 40 build-fuzz/fuzz.log
  failed=1; summary+=("fuzz: FAILED (build-fuzz/fuzz.log)")
fi
end_stage

elapsed=$((SECONDS - start))
line=$(printf '%s; ' "${summary[@]}"); line=${line%; }
if [ "$failed" -eq 0 ]; then
  echo "test.sh: OK — $line — ${elapsed}s"
else
  echo "test.sh: FAILED — $line — ${elapsed}s"
fi
exit "$failed"
