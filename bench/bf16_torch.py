"""bench/bf16_torch.py: the PyTorch worker of bench/bf16: the same measurements as the ddplua
worker in bench/bf16.lua, one JSON line.

  python3 bench/bf16_torch.py --threads T --dtype float32|bfloat16 [--n 1024] [--reps 5]

matmul_gflops: (n,n) @ (n,n) in dtype, best of reps (2n^3 flops). mlp_ms: the MLP block
x (1024,768) -> Linear(768,3072) -> GELU -> Linear(3072,768) + x, forward and backward of the
sum, float32 weights; under torch.autocast('cpu', dtype=bfloat16) for bfloat16; median of reps
after 2 warm-up steps.
"""
import argparse
import json
import statistics
import time

import torch


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    p.add_argument("--n", type=int, default=1024)
    p.add_argument("--reps", type=int, default=5)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    dt = getattr(torch, a.dtype)

    x, y = torch.randn(a.n, a.n).to(dt), torch.randn(a.n, a.n).to(dt)
    for _ in range(2):
        x @ y
    best = float("inf")
    for _ in range(a.reps):
        t = time.perf_counter()
        x @ y
        best = min(best, time.perf_counter() - t)
    gflops = 2 * a.n ** 3 / best / 1e9

    fc1, fc2 = torch.nn.Linear(768, 3072), torch.nn.Linear(3072, 768)
    inp = torch.randn(1024, 768)

    def step():
        if a.dtype == "float32":
            out = inp + fc2(torch.nn.functional.gelu(fc1(inp)))
        else:
            with torch.autocast("cpu", dtype=dt):
                out = inp + fc2(torch.nn.functional.gelu(fc1(inp)))
        out.float().sum().backward()
        for q in (fc1.weight, fc1.bias, fc2.weight, fc2.bias):
            q.grad = None

    for _ in range(2):
        step()
    times = []
    for _ in range(a.reps):
        t = time.perf_counter()
        step()
        times.append((time.perf_counter() - t) * 1e3)
    print(json.dumps({"engine": "torch", "threads": a.threads, "dtype": a.dtype,
                      "matmul_gflops": gflops, "mlp_ms": statistics.median(times)}))


if __name__ == "__main__":
    main()
