#!/usr/bin/env bash
# Install solder's build dependencies (Debian/Ubuntu, apt). Idempotent: asks apt only for the
# packages that are missing, runs `apt-get update` at most once, and does nothing when all are
# present. Uses sudo when not root.
set -euo pipefail

packages=(
  g++ cmake ninja-build ccache
  catch2            # Catch2 v2: catch2/catch.hpp, CMake package Catch2
  libboost-dev      # Boost.Hana (header-only)
  nlohmann-json3-dev  # nlohmann/json: safetensors headers (header-only)
  libbenchmark-dev  # Google Benchmark
  libeigen3-dev     # benchmark peer
  libopenblas-dev   # benchmark peer
  libdnnl-dev       # benchmark peer (oneDNN)
  clang             # scripts/fuzz.sh (libFuzzer)
)
command -v pkg-config >/dev/null 2>&1 || packages+=(pkg-config)   # to find OpenBLAS
# libFuzzer's runtime, only recommended by clang and named after its version (clang-14: Debian 12).
clang_major=$(apt-cache depends clang 2>/dev/null | sed -n 's/^ *Depends: clang-\([0-9][0-9]*\)$/\1/p' | head -n1 || true)
[ -z "$clang_major" ] || packages+=("libclang-rt-${clang_major}-dev")

if ! command -v dpkg-query >/dev/null 2>&1 || ! command -v apt-get >/dev/null 2>&1; then
  echo "install-deps: no dpkg/apt here; install these (or their equivalents) yourself: ${packages[*]}" >&2
  exit 0
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all dependencies present"
  exit 0
fi

sudo=()
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then sudo=(sudo); else
    echo "install-deps: missing ${missing[*]}, and not root and no sudo" >&2; exit 1
  fi
fi

echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -qq
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive \
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
