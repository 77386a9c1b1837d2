#!/usr/bin/env python3
"""Counts the machine instructions (SASS) that the fused element-wise chain of
examples/cuda_chain.cu runs per element on a GPU, without one: the chain is compute-bound on an
H100 (docs/benchmarks.md), so this count is what a change to its maths moves.

    python3 tools/chain_sass.py [--arch 90] [--include include]

Compiles the example's device code with nvcc (with the flags of the build's CUDA targets),
disassembles it with cuobjdump (not in /usr/local/cuda/bin here: `pip install
nvidia-cuda-cuobjdump` in a virtual environment, or set CUOBJDUMP) and reads the kernel's vector
loops, one per vector walk (x read once per use, and once in all where the walk shares it): the
block from a 16-byte store back to the loop's head, 4 elements per pass. An instruction skipped
on the fast path (a division's call to its slow path) is not counted.
"""
import argparse
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent


def cuobjdump():
    if os.environ.get("CUOBJDUMP"):
        return os.environ["CUOBJDUMP"]
    found = shutil.which("cuobjdump")
    if found:
        return found
    for site in pathlib.Path(sys.prefix).glob("lib/python3*/site-packages/nvidia/*/bin/cuobjdump"):
        return str(site)
    sys.exit("chain_sass.py: no cuobjdump (pip install nvidia-cuda-cuobjdump, or set CUOBJDUMP)")


def example_sass(arch, include):
    """The SASS of examples/cuda_chain.cu's device code for sm_<arch>, as one text."""
    with tempfile.TemporaryDirectory() as tmp:
        cubin = pathlib.Path(tmp) / "chain.cubin"
        subprocess.run(["nvcc", "-std=c++20", "--expt-relaxed-constexpr", "-fmad=false", "-O2",
                        f"-I{include}", "-Xcompiler=-fopenmp", "-cubin", "-gencode",
                        f"arch=compute_{arch},code=sm_{arch}",
                        str(ROOT / "examples" / "cuda_chain.cu"), "-o", str(cubin)], check=True)
        return subprocess.run([cuobjdump(), "-sass", str(cubin)], check=True,
                              capture_output=True, text=True).stdout


def kernels(sass):
    """Each kernel of a SASS listing: (mangled name, [(address, instruction)])."""
    for body in re.split(r"\n\s*Function : ", sass)[1:]:
        yield (body.split("\n", 1)[0],
               [(int(a, 16), op.strip())
                for a, op in re.findall(r"/\*([0-9a-f]{4,})\*/\s+(.*?);", body)])


def chain_kernel(sass):
    for name, code in kernels(sass):
        if "elementwise_kernel" in name and "4Tanh" in name and "7Sigmoid" in name:
            return code
    sys.exit("chain_sass.py: the fused chain's kernel is not in the cubin")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--arch", default="90")
    ap.add_argument("--include", default=str(ROOT / "include"))
    args = ap.parse_args()
    sass = example_sass(args.arch, args.include)
    code = chain_kernel(sass)
    stores = [a for a, op in code if "STG.E.128" in op]
    if not stores:
        sys.exit("chain_sass.py: the chain's kernel has no 16-byte store (no vector loop)")
    for store in stores:
        back, branch = next((a, op) for a, op in code if a > store and "BRA" in op)
        head = int(re.search(r"BRA (0x[0-9a-f]+)", branch).group(1), 16)
        loop = [op for a, op in code if head <= a <= back]
        # A forward predicated branch over a CALL jumps over the slow path on the fast one.
        skipped = 0
        for i, op in enumerate(loop):
            jump = re.match(r"@!?P\d BRA (0x[0-9a-f]+)", op)
            if jump and any("CALL" in later for later in loop[i + 1:i + 4]):
                start = head + 16 * i
                skipped += (int(jump.group(1), 16) - start) // 16 - 1
        run = len(loop) - skipped
        loads = sum("LDG.E.128" in op for op in loop)
        print(f"sm_{args.arch}: a vector loop of the chain ({loads} loads of x) runs {run} "
              f"instructions per 4 elements ({run / 4:.2f} per element; {len(loop)} in the loop, "
              f"{skipped} on slow paths)")


if __name__ == "__main__":
    main()
