"""bench/gpt_torch.py: the PyTorch worker of bench/gpt (GPT training step time).

  /usr/bin/python3 bench/gpt_torch.py --threads T [--steps 20] [--warmup 5] [--batch 4]
      [--seq 256] [--seed 0]

Prints one JSON line: step_ms, forward_ms, backward_ms, optimizer_ms (medians over the steps after
`warmup`), faults_per_step (minor page faults of the process per timed step, /proc/self/stat),
for the workload of bench/gpt.lua's ddplua worker: models/gpt.lua written anew in PyTorch eager
(GPT-2 layout, pre-LayerNorm blocks, exact GELU, tied output head, the same initialisation) with
4 layers, n_embd 256, 4 heads, vocab 8192; attention written out (q k^T / sqrt(hs), causal mask,
softmax, @ v), since torch 1.13 has no fused attention; AdamW (lr 3e-4, weight_decay 0.1), as
users run it (the default single-tensor loop on the CPU). One step: forward with the loss |
zero_grad, backward | optimizer step and loss.item().

Threads: torch.set_num_threads(T) and openblas_set_num_threads(T) through ctypes (Debian's torch
runs its GEMMs in OpenBLAS); the caller sets OMP_NUM_THREADS / OPENBLAS_NUM_THREADS /
OMP_WAIT_POLICY / GLIBC_TUNABLES in the environment.
"""
import argparse
import json
import math
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

from torch_threads import set_threads

VOCAB, LAYERS, EMBD, HEADS = 8192, 4, 256, 4
LR, WEIGHT_DECAY = 3e-4, 0.1


class CausalSelfAttention(nn.Module):
    def __init__(self, C, nh, T):
        super().__init__()
        self.c_attn = nn.Linear(C, 3 * C)
        self.c_proj = nn.Linear(C, C)
        self.n_head = nh
        self.register_buffer("mask", torch.tril(torch.ones(T, T, dtype=torch.bool)))

    def forward(self, x):  # (B, T, C) -> (B, T, C)
        B, T, C = x.shape
        nh = self.n_head
        q, k, v = self.c_attn(x).split(C, dim=2)
        q, k, v = (t.view(B, T, nh, C // nh).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(C // nh))
        att = att.masked_fill(~self.mask[:T, :T], float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.c_proj(y)


class Block(nn.Module):
    def __init__(self, C, nh, T):
        super().__init__()
        self.ln_1 = nn.LayerNorm(C)
        self.attn = CausalSelfAttention(C, nh, T)
        self.ln_2 = nn.LayerNorm(C)
        self.mlp = nn.Sequential(nn.Linear(C, 4 * C), nn.GELU(), nn.Linear(4 * C, C))

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, V, T, L, nh, C):
        super().__init__()
        self.wte = nn.Embedding(V, C)
        self.wpe = nn.Embedding(T, C)
        self.h = nn.ModuleList([Block(C, nh, T) for _ in range(L)])
        self.ln_f = nn.LayerNorm(C)
        resid_std = 0.02 / math.sqrt(2 * L)  # models/gpt.lua's initialisation
        with torch.no_grad():
            for name, p in self.named_parameters():
                if name.endswith("bias"):
                    p.zero_()
                elif ".ln_" in name or name.startswith("ln_f"):
                    p.fill_(1)
                elif name.endswith("c_proj.weight") or name.endswith("mlp.2.weight"):
                    p.normal_(0, resid_std)
                else:
                    p.normal_(0, 0.02)

    def forward(self, idx, targets):
        B, T = idx.shape
        pos = torch.arange(T, dtype=torch.long)
        x = self.wte(idx) + self.wpe(pos)
        for block in self.h:
            x = block(x)
        logits = F.linear(self.ln_f(x), self.wte.weight)  # tied head
        return logits, F.cross_entropy(logits.view(B * T, -1), targets.reshape(B * T))


def minor_faults():
    """This process's minor page faults so far (field 10 of /proc/self/stat)."""
    with open("/proc/self/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[7])


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--seq", type=int, default=256)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    a = p.parse_args()
    if a.steps <= a.warmup:
        p.error("--steps must exceed --warmup")

    set_threads(a.threads)
    torch.manual_seed(a.seed)
    model = GPT(VOCAB, a.seq, LAYERS, HEADS, EMBD)
    opt = torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=WEIGHT_DECAY)
    batches = []
    for _ in range(4):
        ids = torch.randint(VOCAB, (a.batch, a.seq + 1))
        batches.append((ids[:, :-1].contiguous(), ids[:, 1:].contiguous()))

    fwd, bwd, upd, total = [], [], [], []
    faults0 = None
    for step in range(a.steps):
        if step == a.warmup:
            faults0 = minor_faults()
        idx, targets = batches[step % len(batches)]
        t0 = time.perf_counter()
        if a.dtype == "float32":
            _, loss = model(idx, targets)
        else:  # forward and loss under autocast, float32 master weights
            with torch.autocast("cpu", dtype=getattr(torch, a.dtype)):
                _, loss = model(idx, targets)
        t1 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        t2 = time.perf_counter()
        opt.step()
        final = loss.item()
        t3 = time.perf_counter()
        if step >= a.warmup:
            fwd.append((t1 - t0) * 1e3)
            bwd.append((t2 - t1) * 1e3)
            upd.append((t3 - t2) * 1e3)
            total.append((t3 - t0) * 1e3)
    timed = a.steps - a.warmup
    print(json.dumps({
        "engine": "torch", "threads": a.threads, "steps": a.steps, "warmup": a.warmup,
        "batch": a.batch, "seq": a.seq, "step_ms": statistics.median(total),
        "forward_ms": statistics.median(fwd), "backward_ms": statistics.median(bwd),
        "optimizer_ms": statistics.median(upd),
        "faults_per_step": (minor_faults() - faults0) / timed, "final_loss": final}))


if __name__ == "__main__":
    main()
