"""bench/train_torch.py: the PyTorch worker of bench/train (training samples/s).

  /usr/bin/python3 bench/train_torch.py --model mlp|cnn --threads T [--steps 400] [--warmup 20]
      [--batch 64] [--seed 0] [--dtype float32|bfloat16]

Prints one JSON line: samples_per_s, step_ms_median, ... for the same workload as bench/train.lua's
ddplua worker and as shared/reference/torch/RESULTS.md defines it: the whole training split in
memory as one normalised float32 tensor, a fresh torch.randperm per epoch, batches gathered with
index_select, forward, cross_entropy, zero_grad, backward, SGD step (momentum 0.9, lr 0.05 mlp /
0.02 cnn) and loss.item(); samples/s over the steps after the first `warmup`. With --dtype
bfloat16, forward and loss run under torch.autocast('cpu', dtype=torch.bfloat16).

Threads: torch.set_num_threads(T) sizes ATen's OpenMP pool only; Debian's torch runs its GEMMs in
OpenBLAS, whose own pool is sized with openblas_set_num_threads(T) through ctypes. The caller sets
OMP_NUM_THREADS / OPENBLAS_NUM_THREADS / OMP_WAIT_POLICY in the environment.
"""
import argparse
import gzip
import json
import os
import statistics
import struct
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from torch_threads import set_threads

MEAN, STD = 0.2860, 0.3530
LR = {"mlp": 0.05, "cnn": 0.02}


def read_idx(path):
    """An IDX file (gzip or plain) as a numpy uint8 array of its declared shape."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        raw = f.read()
    ndim = raw[3]
    dims = struct.unpack(">" + "I" * ndim, raw[4:4 + 4 * ndim])
    return np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def load_train():
    d = os.environ.get("FASHION_MNIST_DIR", "/usr/share/datasets/fashion-mnist")
    x = read_idx(os.path.join(d, "train-images-idx3-ubyte.gz")).astype(np.float32)
    y = read_idx(os.path.join(d, "train-labels-idx1-ubyte.gz")).astype(np.int64)
    x = (x / np.float32(255.0) - np.float32(MEAN)) / np.float32(STD)
    return torch.from_numpy(x.reshape(-1, 1, 28, 28)), torch.from_numpy(y)


def model_for(name):
    if name == "mlp":  # models/mlp.lua
        return nn.Sequential(nn.Flatten(), nn.Linear(784, 256), nn.ReLU(),
                             nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10))
    return nn.Sequential(  # models/lenet.lua
        nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(3136, 128), nn.ReLU(), nn.Linear(128, 10))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", choices=["mlp", "cnn"], required=True)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--steps", type=int, default=400)
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--dtype", choices=["float32", "bfloat16"], default="float32")
    a = p.parse_args()

    set_threads(a.threads)
    torch.manual_seed(a.seed)
    x, y = load_train()
    model = model_for(a.model)
    opt = torch.optim.SGD(model.parameters(), lr=LR[a.model], momentum=0.9)

    n, ends, sizes, step = x.shape[0], [], [], 0
    while step < a.steps:
        perm = torch.randperm(n)
        for first in range(0, n, a.batch):
            if step >= a.steps:
                break
            idx = perm[first:first + a.batch]
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=a.dtype != "float32"):
                loss = F.cross_entropy(model(x.index_select(0, idx)), y.index_select(0, idx))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            loss.item()
            ends.append(time.perf_counter())
            sizes.append(idx.numel())
            step += 1
    w = a.warmup
    timed = ends[-1] - ends[w - 1]
    step_ms = [(e - s) * 1e3 for s, e in zip(ends[w - 1:-1], ends[w:])]
    print(json.dumps({
        "engine": "torch", "model": a.model, "threads": a.threads, "steps": a.steps,
        "warmup": w, "batch": a.batch, "samples_per_s": sum(sizes[w:]) / timed,
        "step_ms_median": statistics.median(step_ms), "final_loss": loss.item(),
        "wait_policy": os.environ.get("OMP_WAIT_POLICY", ""), "dtype": a.dtype}))


if __name__ == "__main__":
    main()
