#!/usr/bin/env bash
# Fuzzes the safetensors parser and its JSON reader and writer (tests/fuzz/fuzz_safetensors.cpp)
# with libFuzzer under ASan + UBSan, built with Debian's clang in build-fuzz/, for
# SOLDER_FUZZ_SECONDS (default 60) seconds.
# It starts from build-fuzz/corpus/, a copy of the seeds in tests/fuzz/corpus/safetensors/ that
# keeps what earlier runs found. Exits non-zero on any crash, sanitizer report, leak or
# uncaught exception; the input that caused it is left in build-fuzz/ (crash-*, leak-*, ...).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
command -v clang++ >/dev/null 2>&1 || { echo "fuzz.sh: clang++ not found (scripts/install-deps.sh installs it)" >&2; exit 1; }

build=build-fuzz
mkdir -p "$build/corpus"
clang++ -std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
  -I include tests/fuzz/fuzz_safetensors.cpp -o "$build/fuzz_safetensors"
cp -n tests/fuzz/corpus/safetensors/* "$build/corpus/"
"$build/fuzz_safetensors" -max_total_time="${SOLDER_FUZZ_SECONDS:-60}" -print_final_stats=1 \
  -dict=tests/fuzz/safetensors.dict -artifact_prefix="$build/" "$build/corpus"
