#!/usr/bin/env python3
"""PyTorch's side of bench/bench_training.cpp: the same perceptron (784 -> 256 -> 256 -> 10, gelu,
cross-entropy, batch 256) and AdamW step, eager and under torch.compile (the model and the loss
compiled, and the optimizer's step), on the same thread count; the median time of a step in
milliseconds. Given the JSON of a bench_training run, it prints solder's ratios (issue targets:
a step >= 1.3x PyTorch eager and >= 1.1x torch.compile).

    OMP_WAIT_POLICY=passive build/bench/bench_training --benchmark_format=json \\
        --benchmark_out=/tmp/training.json
    LD_LIBRARY_PATH=$(ls -d .venv-torch/lib/python3.11/site-packages/nvidia/*/lib | tr '\\n' ':') \\
        .venv-torch/bin/python bench/peers/torch_training.py --threads 2 --solder-json /tmp/training.json
"""
import argparse
import json
import time

import torch
import torch.nn.functional as F


def setup():
    torch.manual_seed(0)
    x = torch.randn(256, 784)
    labels = torch.randint(0, 10, (256,))
    model = torch.nn.Sequential(torch.nn.Linear(784, 256), torch.nn.GELU(), torch.nn.Linear(256, 256),
                                torch.nn.GELU(), torch.nn.Linear(256, 10))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    return x, labels, model, opt


def median_ms(step, seconds):
    for _ in range(5):
        step()
    samples = []
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline or len(samples) < 5:
        start = time.perf_counter()
        for _ in range(10):
            step()
        samples.append((time.perf_counter() - start) / 10 * 1e3)
    samples.sort()
    return samples[len(samples) // 2]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seconds", type=float, default=3)
    ap.add_argument("--solder-json")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    results = {}
    for name, compiled in (("eager", False), ("compile", True)):
        x, labels, model, opt = setup()
        forward = torch.compile(lambda: F.cross_entropy(model(x), labels)) if compiled else (
            lambda: F.cross_entropy(model(x), labels))
        opt_step = torch.compile(opt.step) if compiled else opt.step

        def step():
            opt.zero_grad(set_to_none=True)
            forward().backward()
            opt_step()
        results[name] = median_ms(step, a.seconds)
        print(f"torch {name}: {results[name]:.3f} ms a step")
    if a.solder_json:
        runs = json.load(open(a.solder_json))["benchmarks"]
        ours = [r for r in runs if r["name"].startswith("mlp_step") and r.get("aggregate_name") == "median"]
        if ours:
            ms = ours[0]["real_time"] * {"ms": 1, "us": 1e-3, "ns": 1e-6}[ours[0]["time_unit"]]
            print(f"solder: {ms:.3f} ms a step; {results['eager'] / ms:.2f}x torch eager (target 1.3), "
                  f"{results['compile'] / ms:.2f}x torch.compile (target 1.1)")


if __name__ == "__main__":
    main()
