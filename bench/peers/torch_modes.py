#!/usr/bin/env python3
"""PyTorch's side of bench/bench_modes.cpp: an MLP of three 256-wide layers (ReLU between) at
batch 1, eager and under torch.compile (mode "default" and "reduce-overhead"), on the same
thread count; the first call and the steady state of each, in microseconds. Given the JSON of a
bench_modes run, it prints solder's ratios (issue targets: solder's reduce_overhead >= 5x
PyTorch eager and >= 7x torch.compile).

    OMP_WAIT_POLICY=passive build/bench/bench_modes --benchmark_filter=mlp \\
        --benchmark_format=json --benchmark_out=/tmp/modes.json
    LD_LIBRARY_PATH=$(ls -d .venv-torch/lib/python3.11/site-packages/nvidia/*/lib | tr '\\n' ':') \\
        .venv-torch/bin/python bench/peers/torch_modes.py --threads 2 --solder-json /tmp/modes.json
"""
import argparse
import json
import time

import torch


def mlp():
    torch.manual_seed(0)
    layers = []
    for i in range(3):
        layers += [torch.nn.Linear(256, 256)] + ([torch.nn.ReLU()] if i < 2 else [])
    return torch.nn.Sequential(*layers).eval()


def timed(f, x, seconds):
    """First call, then the median of batches of calls filling `seconds`, in microseconds."""
    start = time.perf_counter()
    f(x)
    first = (time.perf_counter() - start) * 1e6
    samples = []
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline or len(samples) < 5:
        start = time.perf_counter()
        for _ in range(100):
            f(x)
        samples.append((time.perf_counter() - start) / 100 * 1e6)
    samples.sort()
    return first, samples[len(samples) // 2]


def solder_steady(path):
    """bench_modes' median steady state of the MLP per mode, in microseconds."""
    with open(path) as f:
        runs = json.load(f)["benchmarks"]
    out = {}
    for r in runs:
        name = r["run_name"].split("/repeats")[0]  # BM_mlp_batch1/<mode>/<first|steady>, or /plain
        if r.get("aggregate_name") == "median" and name.startswith("BM_mlp_batch1/"):
            scale = {"ns": 1e-3, "us": 1.0, "ms": 1e3}[r["time_unit"]]
            out[name[len("BM_mlp_batch1/"):]] = r["real_time"] * scale
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--solder-json")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    x = torch.rand(1, 256)
    model = mlp()
    rows = {}
    with torch.no_grad():
        rows["eager"] = timed(model, x, args.seconds)
        for mode in ("default", "reduce-overhead"):
            torch._dynamo.reset()
            rows["torch.compile " + mode] = timed(torch.compile(mlp(), mode=mode), x, args.seconds)
    print(f"torch {torch.__version__}, {args.threads} threads, MLP 3 x 256 at batch 1 (microseconds)")
    print(f"{'':28} {'first call':>12} {'steady':>10}")
    for name, (first, steady) in rows.items():
        print(f"{name:28} {first:12.1f} {steady:10.2f}")
    if args.solder_json:
        solder = solder_steady(args.solder_json)
        for mode, us in sorted(solder.items()):
            if not mode.endswith("/steady") and mode != "plain":
                continue
            print(f"solder {mode:22} {'':12} {us:10.2f}")
            for name, (_, steady) in rows.items():
                print(f"  ratio solder {mode} / {name}: {steady / us:.2f}x")


if __name__ == "__main__":
    main()
