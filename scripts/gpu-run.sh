#!/usr/bin/env bash
# Runs, on a machine with a GPU, what needs one, from programs already built, and ends with a
# short table: the CUDA test programs (test_cuda_*), the chain example and the GPU benchmarks.
#   scripts/gpu-run.sh <dir>   a build tree (gpu-check.sh's build-cuda/), or a bundle made by
#                              `scripts/gpu-check.sh --bundle` (the programs, and lib/ with the
#                              libraries a machine with the CUDA driver may lack)
#   SOLDER_GPU_SANITIZE=1      also run the test programs under compute-sanitizer (memcheck,
#                              racecheck, synccheck): several minutes more
# The log goes to <dir>/gpu-run.log. Exits non-zero if a test program failed or saw no GPU
# (skipped), or a sanitizer reported an error.
set -uo pipefail
dir=${1:?usage: gpu-run.sh <build tree or bundle>}
log="$dir/gpu-run.log"
[ -d "$dir/lib" ] && export LD_LIBRARY_PATH="$dir/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

# programs <name pattern>: their paths under dir (a build tree has them in subfolders), sorted
programs() { find "$dir" -maxdepth 3 -type f -name "$1" -perm -u+x | sort; }

: >"$log"
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee -a "$log"
failed=0
tests=$(programs 'test_cuda_*')
[ -n "$tests" ] || { echo "gpu-run.sh: no test_cuda_* program under $dir"; exit 1; }
for t in $tests; do
  "$t" 2>&1 | tee -a "$log"
  rc=${PIPESTATUS[0]}
  case $rc in
    0) verdict=passed ;;
    77) verdict="SKIPPED (no GPU seen)"; failed=1 ;;
    *) verdict="FAILED ($rc)"; failed=1 ;;
  esac
  echo "test $(basename "$t"): $verdict" | tee -a "$log"
done
if [ "${SOLDER_GPU_SANITIZE:-0}" = 1 ]; then
  sanitizer=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
  for tool in memcheck racecheck synccheck; do
    for t in $tests; do
      [ "$(basename "$t")" = test_cuda_host ] && continue  # no kernels
      "$sanitizer" --tool "$tool" --error-exitcode 9 "$t" 2>&1 | tail -n 2 | tee -a "$log"
      rc=${PIPESTATUS[0]}
      echo "sanitizer $tool $(basename "$t"): $([ "$rc" -eq 0 ] && echo clean || echo "FAILED ($rc)")" | tee -a "$log"
      [ "$rc" -eq 0 ] || failed=1
    done
  done
fi
for p in cuda_chain bench_cuda; do
  path=$(programs "$p" | head -n 1)
  if [ -n "$path" ]; then "$path" 2>&1 | tee -a "$log"; else echo "gpu-run.sh: no $p under $dir" | tee -a "$log"; fi
done

echo
echo "=== gpu-run summary ==="
grep -E '^(test|sanitizer) ' "$log"
grep -E '^(chain on|rows \[|statistics:)' "$log"
grep -E '^(ratio|fraction|check) ' "$log"
[ "$failed" -eq 0 ] && echo "gpu-run.sh: OK" || echo "gpu-run.sh: FAILED (tests)"
exit "$failed"
