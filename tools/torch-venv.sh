#!/usr/bin/env bash
# Creates .venv-torch/ with PyTorch from PyPI, for tools/make_fixtures.py, and prints how to run
# it. PyPI's Linux wheel of torch is built for CUDA; it imports on a machine without a GPU once
# its CUDA libraries are installed, and the script points the loader at them.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
python3 -m venv .venv-torch
.venv-torch/bin/pip install -q torch
sp=$(.venv-torch/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
libs=$(ls -d "$sp"/nvidia/*/lib 2>/dev/null | tr '\n' ':')
echo "run: LD_LIBRARY_PATH=${libs} .venv-torch/bin/python tools/make_fixtures.py"
