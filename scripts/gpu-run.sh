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

# A library the loader does not find (cuDNN, on a machine that has it only in Python's
# nvidia-* wheels, as PyTorch's): the wheel's folder that holds it.
for lib in $(programs 'test_cuda_*' | xargs -r ldd 2>/dev/null | sed -n 's/^\s*\(lib[A-Za-z_]*\)\.so.* => not found/\1/p' | sort -u); do
  wheel=$(python3 -c 'import nvidia, os; print(*[os.path.join(p, d, "lib") for p in nvidia.__path__ for d in os.listdir(p)], sep="\n")' 2>/dev/null |
          while read -r d; do ls "$d/$lib".so* >/dev/null 2>&1 && echo "$d"; done | head -n 1)
  if [ -n "$wheel" ]; then export LD_LIBRARY_PATH="$wheel:${LD_LIBRARY_PATH:-}"; else echo "gpu-run.sh: $lib not found"; fi
done

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
