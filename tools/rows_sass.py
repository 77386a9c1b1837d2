#!/usr/bin/env python3
"""Sizes the machine code (SASS) of the fused softmax and layer-norm row kernels of
examples/cuda_chain.cu, without a GPU: the instructions of each kernel and of each of its vector
loops (a fold of a reduction, or the writes of a row), per pass of 4 vector steps where the
loop is unrolled that far; and of the variant for rows of a static length (1024), whose vector
steps are all unrolled (no vector loop).

    python3 tools/rows_sass.py [--arch 90] [--include include]

Compiles and disassembles as tools/chain_sass.py does. The counts are static: a write loop
counts the branch that recomputes a value past its record's end, which a row whose record holds
all of it never takes (softmax over [4096, 1024]), and neither count says how often a loop runs.
They are for comparing two versions of the kernels, not for timing them.
"""
import argparse
import re

from chain_sass import ROOT, example_sass, kernels

ROWS = {"softmax": ("3Exp", "10RecordEval"), "layer_norm": ("5Rsqrt",)}


def vector_loops(code):
    """The innermost loops with a 16-byte load or store: (head, end, instructions)."""
    back = []
    for a, op in code:
        m = re.search(r"BRA (0x[0-9a-f]+)", op)
        if m and int(m.group(1), 16) <= a:
            back.append((int(m.group(1), 16), a))
    for head, end in back:
        if any(head <= h and e <= end and (h, e) != (head, end) for h, e in back):
            continue
        body = [op for a, op in code if head <= a <= end]
        if any(re.search(r"(LDG\.E|LDS|STG\.E|STS)\.128", op) for op in body):
            yield head, end, body


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--arch", default="90")
    ap.add_argument("--include", default=str(ROOT / "include"))
    args = ap.parse_args()
    found = set()
    for name, code in kernels(example_sass(args.arch, args.include)):
        # The fused kernel: a map at the root (a run-time split gives each reduction its own).
        m = re.search(r"12lines_kernelI\w+?Li\d+ELi(\d+)E(NS0_7MapEval)?", name)
        if not m or not m.group(2):
            continue
        row = next((r for r, marks in ROWS.items() if all(k in name for k in marks)), None)
        length = int(m.group(1))
        if row is None or (row, length) in found:
            continue
        found.add((row, length))
        if length:
            print(f"sm_{args.arch} {row}, rows of {length} (static): {len(code)} instructions, "
                  f"{len(list(vector_loops(code)))} vector loops")
            continue
        print(f"sm_{args.arch} {row}: {len(code)} instructions")
        for head, end, body in vector_loops(code):
            loads = sum(bool(re.search(r"(LDG\.E|LDS)\.128", op)) for op in body)
            stores = sum(bool(re.search(r"(STG\.E|STS)\.128", op)) for op in body)
            kind = "writes" if any("STG.E" in op for op in body) else "fold"
            print(f"  {kind:6} loop {head:#06x}-{end:#06x}: {len(body)} instructions, "
                  f"{loads} vector loads, {stores} vector stores")
    missing = {(r, n) for r in ROWS for n in (0, 1024)} - found
    if missing:
        raise SystemExit("rows_sass.py: no fused kernel for " +
                         ", ".join(f"{r} (rows of {n or 'any length'})" for r, n in sorted(missing)))

if __name__ == "__main__":
    main()
