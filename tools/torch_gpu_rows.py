#!/usr/bin/env python3
"""PyTorch's own softmax and layer norm on a GPU, as fractions of a device copy of the same
bytes: what bench_cuda's row targets look like for torch's kernels on the same machine.

    python3 tools/torch_gpu_rows.py      # needs PyTorch with CUDA and a GPU

Each time is the best of 5 batches of 50 calls, timed with CUDA events, as bench_cuda does.
"""
import torch


def best_us(f, batches=5, calls=50):
    f()
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(batches):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(calls):
            f()
        stop.record()
        stop.synchronize()
        best = min(best, start.elapsed_time(stop) / calls * 1000)
    return best


def main():
    print(torch.cuda.get_device_name(), "torch", torch.__version__)
    for rows in (4096, 16384):
        m = torch.randn(rows, 1024, device="cuda")
        out = torch.empty_like(m)
        gamma, beta = torch.rand(1024, device="cuda"), torch.rand(1024, device="cuda")
        copy = best_us(lambda: out.copy_(m))
        soft = best_us(lambda: torch.softmax(m, 1))
        norm = best_us(lambda: torch.nn.functional.layer_norm(m, (1024,), gamma, beta))
        print(f"[{rows}, 1024]: copy {copy:.2f} us, softmax {soft:.2f} us "
              f"({copy / soft:.3f} of the copy), layer_norm {norm:.2f} us ({copy / norm:.3f})")


if __name__ == "__main__":
    main()
