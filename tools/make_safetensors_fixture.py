#!/usr/bin/env python3
"""PyTorch <-> solder interop for safetensors files (include/solder/io/safetensors.hpp), both
directions, with the values defined once here (and mirrored in tests/test_safetensors.cpp).

Run with PyTorch and safetensors in .venv-torch (tools/torch-venv.sh, then
`.venv-torch/bin/pip install safetensors`):
    LD_LIBRARY_PATH=$(ls -d .venv-torch/lib/python3.11/site-packages/nvidia/*/lib | tr '\\n' ':') \\
        .venv-torch/bin/python tools/make_safetensors_fixture.py [--check FILE]

Without arguments: writes tests/fixtures/safetensors/torch_written.safetensors with
safetensors.torch.save_file (metadata {"format": "pt"}) and reads it back. The file is
committed; test_safetensors checks every value in it exactly. CPU only, no downloads.

--check FILE: PyTorch reads a file solder wrote. test_safetensors reads torch_written, saves
the same tensors in reverse order with metadata {"format": "pt", "writer": "solder"} to
<build>/tests/safetensors_test/solder_written.safetensors; this mode loads that file with
safetensors.torch.load_file and safe_open and asserts the metadata, every dtype, shape and
value equal those below, e.g. after `ctest -R test_safetensors` in build-dev:
    ... tools/make_safetensors_fixture.py --check build-dev/tests/safetensors_test/solder_written.safetensors

Tensors (key: dtype, shape, values in row-major order):
  float32   f32  [2, 3]        -1, -0.5, 0, 0.5, 1, 1.5
  float64   f64  [3, 2]        i / 3 for i = 0..5
  float16   f16  [2, 3]        1, -2, 0.5, 65504 (largest), 2^-24 (smallest subnormal), -0.0
  bfloat16  bf16 [2, 3]        1, -2.5, 3.140625, 2^100, -2^-100, 0
  int64     i64  [6]           -2^40, -1, 0, 1, 2^40, 2^62
  int32     i32  [3, 2]        -2^31, -7, 0, 7, 2^31 - 1, 123456
  int16     i16  [2, 3]        -32768, -1, 0, 1, 32767, 1000
  int8      i8   [2, 3]        -128, -1, 0, 1, 127, 42
  uint8     u8   [2, 3]        0, 1, 127, 128, 254, 255
  bool      bool [2, 3]        true, false, false, true, true, false
  scalar    f32  []            3.5
  empty     f32  [0, 4]
  rank4     f32  [1, 2, 3, 4]  0..23
"""
import argparse
import pathlib
import sys

import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file

OUT = pathlib.Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "safetensors"


def expected():
    t = torch.tensor
    return {
        "float32": t([[-1, -0.5, 0], [0.5, 1, 1.5]], dtype=torch.float32),
        "float64": torch.arange(6, dtype=torch.float64).reshape(3, 2) / 3,
        "float16": t([[1, -2, 0.5], [65504, 2.0**-24, -0.0]], dtype=torch.float16),
        "bfloat16": t([[1, -2.5, 3.140625], [2.0**100, -(2.0**-100), 0]], dtype=torch.bfloat16),
        "int64": t([-(2**40), -1, 0, 1, 2**40, 2**62], dtype=torch.int64),
        "int32": t([[-(2**31), -7], [0, 7], [2**31 - 1, 123456]], dtype=torch.int32),
        "int16": t([[-32768, -1, 0], [1, 32767, 1000]], dtype=torch.int16),
        "int8": t([[-128, -1, 0], [1, 127, 42]], dtype=torch.int8),
        "uint8": t([[0, 1, 127], [128, 254, 255]], dtype=torch.uint8),
        "bool": t([[True, False, False], [True, True, False]]),
        "scalar": t(3.5, dtype=torch.float32),
        "empty": torch.zeros(0, 4, dtype=torch.float32),
        "rank4": torch.arange(24, dtype=torch.float32).reshape(1, 2, 3, 4),
    }


def check(path, metadata):
    """Asserts that `path` holds exactly expected()'s tensors and the given metadata."""
    got = load_file(path)
    with safe_open(path, framework="pt") as f:
        assert f.metadata() == metadata, f"metadata {f.metadata()} != {metadata}"
    want = expected()
    assert sorted(got) == sorted(want), f"keys {sorted(got)} != {sorted(want)}"
    for key, w in want.items():
        g = got[key]
        assert g.dtype == w.dtype and g.shape == w.shape, f"{key}: {g.dtype} {tuple(g.shape)}"
        # Bit-exact (-0.0 included): compare the raw bytes.
        assert g.flatten().view(torch.uint8).equal(w.flatten().view(torch.uint8)), f"{key}: {g} != {w}"
    print(f"{path}: {len(want)} tensors and metadata as expected")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", metavar="FILE", help="check a file solder wrote")
    args = parser.parse_args()
    if args.check:
        check(args.check, {"format": "pt", "writer": "solder"})
        return 0
    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / "torch_written.safetensors"
    save_file(expected(), path, metadata={"format": "pt"})
    check(path, {"format": "pt"})
    return 0


if __name__ == "__main__":
    sys.exit(main())
