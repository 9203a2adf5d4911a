"""bench/gpu/gpu_torch.py: the PyTorch eager worker of bench/gpu/run.

  python3 bench/gpu/gpu_torch.py [--only gpt,cnn,matmul] [--batch 8] [--seq 1024] [--layers 12]
      [--gpt-reps 10] [--cnn-reps 10] [--cnn-inner 20] [--mm-reps 10] [--warmup 3]
      [--max-time 30] [--seed 0]

Prints one `RESULT key=value ...` line per measurement, the same workloads and timing as
bench/gpu/gpu.lua's ddplua worker (see its header): GPT-2 small written like models/gpt.lua
(pre-LayerNorm blocks, F.scaled_dot_product_attention with is_causal, 4x GELU MLP, tied head) under
torch.autocast('cuda', torch.bfloat16) with AdamW; the cnn of models/lenet.lua with SGD; and
torch.matmul TFLOP/s (cuBLAS). Eager mode: no torch.compile, default TF32 settings (off for matmul).
"""
import argparse
import math
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, C, nh):
        super().__init__()
        self.nh = nh
        self.ln_1 = nn.LayerNorm(C)
        self.c_attn = nn.Linear(C, 3 * C)
        self.attn_proj = nn.Linear(C, C)
        self.ln_2 = nn.LayerNorm(C)
        self.c_fc = nn.Linear(C, 4 * C)
        self.gelu = nn.GELU()
        self.mlp_proj = nn.Linear(4 * C, C)

    def attn(self, x):
        B, T, C = x.shape
        q, k, v = self.c_attn(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.nh, C // self.nh).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.attn_proj(y.transpose(1, 2).contiguous().view(B, T, C))

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp_proj(self.gelu(self.c_fc(self.ln_2(x))))


class GPT(nn.Module):
    """models/gpt.lua in torch: GPT-2 layout, tied head, GPT-2 initialisation."""

    def __init__(self, V, T, L, nh, C):
        super().__init__()
        self.wte = nn.Embedding(V, C)
        self.wpe = nn.Embedding(T, C)
        self.h = nn.ModuleList(Block(C, nh) for _ in range(L))
        self.ln_f = nn.LayerNorm(C)
        resid_std = 0.02 / math.sqrt(2 * L)
        for name, p in self.named_parameters():
            if name.endswith("bias"):
                nn.init.zeros_(p)
            elif ".ln_" in name or name.startswith("ln_f"):
                nn.init.ones_(p)
            elif name.endswith("proj.weight"):
                nn.init.normal_(p, 0, resid_std)
            else:
                nn.init.normal_(p, 0, 0.02)

    def forward(self, idx, targets):
        B, T = idx.shape
        pos = torch.arange(T, device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for block in self.h:
            x = block(x)
        logits = F.linear(self.ln_f(x), self.wte.weight)
        return logits, F.cross_entropy(logits.view(B * T, -1), targets.reshape(B * T))


def lenet():
    return nn.Sequential(  # models/lenet.lua
        nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(3136, 128), nn.ReLU(), nn.Linear(128, 10))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", default="gpt,cnn,matmul")
    for name, default in (("batch", 8), ("seq", 1024), ("layers", 12), ("gpt-reps", 10),
                          ("cnn-reps", 10), ("cnn-inner", 20), ("mm-reps", 10), ("warmup", 3),
                          ("seed", 0)):
        ap.add_argument("--" + name, type=int, default=default)
    ap.add_argument("--max-time", type=float, default=30.0)
    ap.add_argument("--mm-sizes", default="4096,8192")
    ap.add_argument("--device", default="cuda")  # cpu: a smoke test of this file without a GPU
    o = ap.parse_args()
    only = set(o.only.split(","))
    dev = o.device
    on_cuda = dev.startswith("cuda")
    if on_cuda and not torch.cuda.is_available():
        print("RESULT engine=torch bench=none error=no CUDA device", flush=True)
        return
    torch.manual_seed(o.seed)
    sync = torch.cuda.synchronize if on_cuda else (lambda: None)

    def measure(fn, warmup, reps, inner):
        for _ in range(warmup):
            fn()
        sync()
        per, t_start = [], time.perf_counter()
        for r in range(reps):
            t0 = time.perf_counter()
            for _ in range(inner):
                fn()
            sync()
            per.append((time.perf_counter() - t0) / inner)
            if r >= 1 and time.perf_counter() - t_start > o.max_time:
                break
        return statistics.median(per), len(per)

    def report(fields, err=None):
        parts = ["RESULT", "engine=torch"]
        for k in sorted(fields):
            v = fields[k]
            parts.append(f"{k}={v:.6g}" if isinstance(v, float) else f"{k}={v}")
        if err is not None:
            parts.append("error=" + " ".join(str(err).split()))
        print(" ".join(parts), flush=True)

    def run(fields, fn):
        try:
            fn()
        except Exception as e:  # one failing workload must not hide the others
            report(fields, f"{type(e).__name__}: {e}")
        if on_cuda:
            torch.cuda.empty_cache()

    def gpt():
        B, T, V = o.batch, o.seq, 50304
        model = GPT(V, T, o.layers, 12, 768).to(dev)
        opt = torch.optim.AdamW(model.parameters(), lr=6e-4, betas=(0.9, 0.95), weight_decay=0.1)
        x = torch.randint(0, V, (B, T), device=dev)
        y = torch.randint(0, V, (B, T), device=dev)
        state = {}

        def step():
            with torch.autocast("cuda", dtype=torch.bfloat16, enabled=on_cuda):
                _, loss = model(x, y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            state["loss"] = loss

        t, n = measure(step, o.warmup, o.gpt_reps, 1)
        report({"bench": "gpt", "ms": t * 1e3, "tokens_per_s": B * T / t, "reps": n, "batch": B,
                "seq": T, "layers": o.layers, "loss": state["loss"].item(),
                "max_mem_gib": torch.cuda.max_memory_allocated() / 2**30 if on_cuda else 0.0})

    def cnn():
        B = 256
        model = lenet().to(dev)
        opt = torch.optim.SGD(model.parameters(), lr=0.02, momentum=0.9)
        x = torch.randn(B, 1, 28, 28, device=dev)
        y = torch.randint(0, 10, (B,), device=dev)
        state = {}

        def step():
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            state["loss"] = loss

        t, n = measure(step, 10, o.cnn_reps, o.cnn_inner)
        report({"bench": "cnn", "ms": t * 1e3, "samples_per_s": B / t, "reps": n, "batch": B,
                "loss": state["loss"].item()})

    def matmul(dtype, n):
        a = torch.randn(n, n, device=dev).to(dtype)
        b = torch.randn(n, n, device=dev).to(dtype)
        inner = 10 if n == 4096 else 3
        t, reps = measure(lambda: torch.matmul(a, b), 2, o.mm_reps, inner)
        report({"bench": "matmul", "dtype": str(dtype).replace("torch.", ""), "n": n,
                "ms": t * 1e3, "tflops": 2 * n**3 / t / 1e12, "reps": reps})

    if "gpt" in only:
        run({"bench": "gpt"}, gpt)
    if "cnn" in only:
        run({"bench": "cnn"}, cnn)
    if "matmul" in only:
        for dtype in (torch.bfloat16, torch.float32):
            for n in (int(v) for v in o.mm_sizes.split(",")):
                name = str(dtype).replace("torch.", "")
                run({"bench": "matmul", "dtype": name, "n": n}, lambda: matmul(dtype, n))


if __name__ == "__main__":
    main()
