#!/usr/bin/env bash
# Build and run the fusion demo: scripts/demo.sh [fusion_demo arguments...]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=$PWD

scripts/install-deps.sh

# Outside the checkout, so a fresh clone on the same machine (CI) reuses earlier builds.
export CCACHE_DIR="${CCACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/solder-ccache}"
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$root}"  # paths relative to the checkout: hits across clones
jobs="${SOLDER_JOBS:-$(nproc)}"

# build/ must be a Ninja tree (the presets' generator); drop a cache left by another generator.
if [ -f build/CMakeCache.txt ] && ! grep -q '^CMAKE_GENERATOR:INTERNAL=Ninja$' build/CMakeCache.txt; then
  rm -rf build/CMakeCache.txt build/CMakeFiles
fi

cmake --preset release >/dev/null
cmake --build build --target fusion_demo -j "$jobs"
exec build/examples/fusion_demo "$@"
