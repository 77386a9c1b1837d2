#!/usr/bin/env python3
"""PyTorch's times for the models of bench/bench_models.cpp, and solder's ratio to them.

Times ms per inference forward (eval mode, torch.no_grad(), random weights) of torchvision's
alexnet, resnet18, resnet50, mobilenet_v2 at batch 1 and 8 (224x224), vit_b_16 at batch 8, and
Hugging Face's BertModel with bert-base's configuration at batch 8, 128 tokens (when transformers
is installed), in three modes:
  eager          the model as it is
  default        torch.compile(model)
  max-autotune   torch.compile(model, mode="max-autotune")
with TORCHINDUCTOR_FREEZING=1 (weights folded as constants, as inference deployments do) and the
same thread count for every mode (torch.set_num_threads and OMP_NUM_THREADS).

Every (model, batch, mode) runs in a fresh subprocess: a compiled model is never recompiled for
a second batch size (that would make its kernels dynamic), and a compile that runs past
--timeout is stopped and reported as skipped. The first call (the compile) is timed apart; then
two warm-up calls, then at least --min-runs calls and --min-time seconds; the median is
reported. Inductor caches compiled graphs on disk (/tmp/torchinductor_<user>): a second run of
this script compiles faster, its forward times are the same.

With --solder-json (the JSON of bench_models: --benchmark_out=FILE), solder's medians are
printed beside PyTorch's with the speed-up of solder's fused forward over each (> 1: solder is
faster). Also printed: the peak resident memory of one ResNet-50 batch-8 forward in PyTorch
eager (getrusage's ru_maxrss, in a fresh subprocess); bench_models --rss=fused gives solder's.

Run (from the repository root, with the project's venv):
  LD_LIBRARY_PATH=$(ls -d .venv-torch/lib/python3.11/site-packages/nvidia/*/lib | tr '\\n' ':') \\
  OMP_WAIT_POLICY=passive .venv-torch/bin/python bench/peers/torch_models.py --threads 2 \\
      --solder-json models.json [--models resnet18,resnet50] [--modes eager,default]
Each line also gives the GFLOP/s of a 1024^3 sgemm right after the timed calls: much below its
usual value, another process shared the cores and the line's time is suspect.
max-autotune compiles for a long time on 2 cores (it benchmarks candidate kernels); --timeout
bounds each compile (default 600 s).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

CNNS = ["alexnet", "resnet18", "resnet50", "mobilenet_v2"]
MODES = ["eager", "default", "max-autotune"]


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--models", default=",".join(CNNS + ["vit_b_16", "bert"]),
                   help="comma-separated: " + ", ".join(CNNS + ["vit_b_16", "bert"]))
    p.add_argument("--batches", default="1,8", help="batch sizes of the CNNs (vit_b_16 and bert: 8)")
    p.add_argument("--modes", default=",".join(MODES), help="comma-separated: " + ", ".join(MODES))
    p.add_argument("--min-runs", type=int, default=5)
    p.add_argument("--min-time", type=float, default=2.0, help="seconds of timed calls, at least")
    p.add_argument("--timeout", type=float, default=600, help="seconds for one subprocess (its compile)")
    p.add_argument("--solder-json", help="bench_models' --benchmark_out JSON")
    p.add_argument("--no-rss", action="store_true", help="skip the peak-memory measurement")
    p.add_argument("--json-out", help="write PyTorch's measurements here as JSON")
    p.add_argument("--load", help="print the table of an earlier --json-out instead of measuring")
    # internal: one measurement in this process
    p.add_argument("--child", help=argparse.SUPPRESS)
    p.add_argument("--rss-child", action="store_true", help=argparse.SUPPRESS)
    return p.parse_args()


# ---------------------------------------------------------------- in the subprocess


def build(model, batch):
    """The model (eval mode) and its inputs, as a tuple of positional arguments."""
    import torch
    torch.manual_seed(0)
    if model == "bert":
        from transformers import BertConfig, BertModel
        net = BertModel(BertConfig())  # bert-base-uncased's sizes, random weights
        ids = torch.randint(0, net.config.vocab_size, (batch, 128))
        inputs = (ids, torch.zeros_like(ids), torch.ones_like(ids))  # input_ids, token_type_ids, attention_mask
    else:
        import torchvision
        net = getattr(torchvision.models, model)()
        inputs = (torch.randn(batch, 3, 224, 224),)
    return net.eval(), inputs


def child(args):
    model, batch, mode = args.child.split(":")
    batch = int(batch)
    import torch
    torch.set_num_threads(args.threads)
    net, inputs = build(model, batch)
    fn = net if mode == "eager" else torch.compile(net, mode=None if mode == "default" else mode)
    with torch.no_grad():
        t0 = time.perf_counter()
        fn(*inputs)
        first = time.perf_counter() - t0
        for _ in range(2):
            fn(*inputs)
        times = []
        start = time.perf_counter()
        while len(times) < args.min_runs or time.perf_counter() - start < args.min_time:
            t0 = time.perf_counter()
            fn(*inputs)
            times.append(time.perf_counter() - t0)
    print(json.dumps({"model": model, "batch": batch, "mode": mode, "ms": 1e3 * statistics.median(times),
                      "first_s": first, "runs": len(times), "sgemm_gflops": sgemm_gflops()}))


def sgemm_gflops():
    """GFLOP/s of a [1024, 1024] float product, best of 5 batches of 10, right after the timed calls: a
    check that the machine gave this subprocess its cores (another process on them shows here)."""
    import torch
    a, b = torch.randn(1024, 1024), torch.randn(1024, 1024)
    best = float("inf")
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(10):
            torch.mm(a, b)
        best = min(best, (time.perf_counter() - t0) / 10)
    return 2 * 1024 ** 3 / best * 1e-9


def rss_child(args):
    import resource
    import torch
    torch.set_num_threads(args.threads)
    net, inputs = build("resnet50", 8)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    with torch.no_grad():
        net(*inputs)
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"before_mib": before, "peak_mib": after}))


# ---------------------------------------------------------------- the driver


def run_child(args, extra, timeout):
    env = dict(os.environ, TORCHINDUCTOR_FREEZING="1", OMP_NUM_THREADS=str(args.threads))
    cmd = [sys.executable, os.path.abspath(__file__), "--threads", str(args.threads), "--min-runs",
           str(args.min_runs), "--min-time", str(args.min_time)] + extra
    try:
        out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, f"skipped: over {timeout:.0f} s"
    lines = [l for l in out.stdout.splitlines() if l.startswith("{")]
    if out.returncode != 0 or not lines:
        tail = (out.stderr.strip().splitlines() or ["?"])[-1]
        return None, f"failed: {tail[:160]}"
    return json.loads(lines[-1]), None


def solder_times(path):
    """{(model, batch, 'fused'|'eager'): ms} from bench_models' JSON (the medians)."""
    with open(path) as f:
        doc = json.load(f)
    scale = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}
    runs = doc.get("benchmarks", [])
    medians = [b for b in runs if b.get("run_type") == "aggregate" and b.get("aggregate_name") == "median"]
    times = {}
    for b in medians or [b for b in runs if b.get("run_type", "iteration") == "iteration"]:
        name = b.get("run_name", b["name"]).split("/")[0]  # "BM_resnet50_b8_fused/repeats:5/real_time"
        if not name.startswith("BM_") or name == "BM_fma_peak":
            continue
        stem, how = name[3:].rsplit("_", 1)
        model, batch = stem.rsplit("_b", 1)
        times[(model, int(batch), how)] = b["real_time"] * scale[b.get("time_unit", "ns")]
    return times, doc.get("context", {})


def main():
    args = parse_args()
    if args.child:
        return child(args)
    if args.rss_child:
        return rss_child(args)

    import torch
    models = [m for m in args.models.split(",") if m]
    modes = [m for m in args.modes.split(",") if m]
    for m in modes:
        if m not in MODES:
            sys.exit(f"unknown mode {m}; modes: {', '.join(MODES)}")
    if "bert" in models:
        try:
            import transformers  # noqa: F401
        except ImportError:
            print("transformers is not installed: bert left out")
            models.remove("bert")
    cases = []
    for m in models:
        batches = [int(b) for b in args.batches.split(",")] if m in CNNS else [8]
        cases += [(m, b) for b in batches]

    isa = torch.backends.cpu.get_cpu_capability()
    results, rss = {}, None
    if args.load:
        with open(args.load) as f:
            saved = json.load(f)
        args.threads, isa, rss = saved["threads"], saved["isa"], saved.get("rss")
        for r in saved["results"]:
            results[(r["model"], r["batch"], r["mode"])] = r
        cases = list(dict.fromkeys((r["model"], r["batch"]) for r in saved["results"]))
        modes = [m for m in MODES if any(r["mode"] == m for r in saved["results"])]
        print(f"measured earlier: torch {saved['torch']}, {args.threads} threads, CPU capability {isa}")
    else:
        print(f"torch {torch.__version__}, {args.threads} threads, CPU capability {isa}, "
              f"OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY', '(unset)')}, TORCHINDUCTOR_FREEZING=1")
    for m, b in cases if not args.load else []:
        for mode in modes:
            t0 = time.perf_counter()
            r, why = run_child(args, ["--child", f"{m}:{b}:{mode}"], args.timeout)
            results[(m, b, mode)] = r
            took = time.perf_counter() - t0
            if r:
                r["load_average"] = os.getloadavg()[0]
                print(f"  {m:13s} b{b:<2d} {mode:13s} {r['ms']:9.2f} ms  (first call {r['first_s']:.1f} s, "
                      f"{r['runs']} runs, {took:.0f} s in all; sgemm {r['sgemm_gflops']:.0f} GFLOP/s after)", flush=True)
            else:
                print(f"  {m:13s} b{b:<2d} {mode:13s} {why}", flush=True)
    if not args.load and not args.no_rss:
        rss, why = run_child(args, ["--rss-child"], args.timeout)
        if not rss:
            print(f"peak RSS: {why}")
    if args.json_out and not args.load:
        with open(args.json_out, "w") as f:
            json.dump({"threads": args.threads, "isa": isa, "torch": torch.__version__, "rss": rss,
                       "results": [r for r in results.values() if r]}, f, indent=1)

    solder, context = ({}, {})
    if args.solder_json:
        solder, context = solder_times(args.solder_json)

    heads = [f"torch {m}" for m in modes]
    print(f"\nms per forward ({args.threads} threads, CPU capability {isa}; medians)")
    cols = ["model", "batch"] + heads + (["solder fused", "solder eager"] + [f"fused vs {m}" for m in modes]
                                         if solder else [])
    print("| " + " | ".join(cols) + " |")
    print("|" + "---|" * len(cols))
    for m, b in cases:
        row = [m, str(b)]
        t = {mode: (results.get((m, b, mode)) or {}).get("ms") for mode in modes}
        row += [f"{t[mode]:.2f}" if t[mode] else "-" for mode in modes]
        if solder:
            f, e = solder.get((m, b, "fused")), solder.get((m, b, "eager"))
            row += [f"{f:.2f}" if f else "-", f"{e:.2f}" if e else "-"]
            row += [f"{t[mode] / f:.2f}x" if f and t[mode] else "-" for mode in modes]
        print("| " + " | ".join(row) + " |")
    if solder:
        print("fused vs X: X's time / solder fused's time (> 1: solder is faster). solder's run: "
              f"{context.get('num_cpus', '?')} CPUs, {context.get('date', '?')}")

    if rss:
        print(f"\npeak RSS, PyTorch eager ResNet-50 forward [8, 3, 224, 224]: {rss['peak_mib']:.1f} MiB "
              f"({rss['before_mib']:.1f} MiB with torch, the model and the input, before the forward)")


if __name__ == "__main__":
    main()
