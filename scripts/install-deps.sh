#!/usr/bin/env bash
# Install solder's build dependencies (Debian/Ubuntu, apt). Idempotent: asks apt only for the
# packages that are missing, runs `apt-get update` at most once, and does nothing when all are
# present. Uses sudo when not root.
set -euo pipefail

packages=(
  g++ cmake ninja-build ccache
  catch2            # Catch2 v2: catch2/catch.hpp, CMake package Catch2
  libboost-dev      # Boost.Hana (header-only)
  libbenchmark-dev  # Google Benchmark
  libeigen3-dev     # benchmark peer
  libopenblas-dev   # benchmark peer
  libdnnl-dev       # benchmark peer (oneDNN)
  clang             # scripts/fuzz.sh (libFuzzer)
)
command -v pkg-config >/dev/null 2>&1 || packages+=(pkg-config)   # to find OpenBLAS

if ! command -v dpkg-query >/dev/null 2>&1 || ! command -v apt-get >/dev/null 2>&1; then
  echo "install-deps: no dpkg/apt here; install these (or their equivalents) yourself: ${packages[*]}" >&2
  exit 0
fi

sudo=()
if [ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null 2>&1; then sudo=(sudo); fi
updated=0

# install <packages...>: those of them not installed yet, with one `apt-get update` at most.
install() {
  local missing=() p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  if [ "$(id -u)" -ne 0 ] && [ ${#sudo[@]} -eq 0 ]; then
    echo "install-deps: missing ${missing[*]}, and not root and no sudo" >&2; return 1
  fi
  echo "install-deps: installing ${missing[*]}"
  if [ "$updated" -eq 0 ]; then "${sudo[@]}" apt-get update -qq; updated=1; fi
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
}

install "${packages[@]}"
# libFuzzer's runtime, only recommended by clang and named after its version (14 on Debian 12):
# asked for once clang is there to say which.
clang_major=$(clang++ --version 2>/dev/null | sed -n 's/.*clang version \([0-9][0-9]*\).*/\1/p' | head -n1)
[ -z "$clang_major" ] || install "libclang-rt-${clang_major}-dev"
echo "install-deps: all dependencies present"
