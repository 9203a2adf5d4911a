"""bench/ddp_torch.py: the PyTorch worker of bench/ddp: the same measurement as bench/ddp.lua
with torch.nn.parallel.DistributedDataParallel on gloo (2 processes on this host, 1 thread each).

Same models as models/mlp.lua (784-256-256-10) and models/lenet.lua (conv32-conv64-fc128-fc10,
3x3 padding 1, 2x2 max pooling), Fashion-MNIST from Debian's dataset-fashion-mnist normalised
with mean 0.2860 / std 0.3530, per-rank batch 32, DistributedSampler (shuffle, set_epoch),
SGD momentum 0.9. Modes "ddp" and "nosync" (every forward/backward inside model.no_sync()), and
on request (modes=ddp,nosync,fp16,powersgd) "fp16" and "powersgd": a replica whose buckets go
through default_hooks.fp16_compress_hook or powerSGD_hook (PowerSGDState: rank 1, from the 2nd
step, error feedback and warm start, as ddplua's 'powersgd' defaults).
Per round: `steps` timed steps after `warmup`; a round's time is the longest of the ranks'.
Prints, from rank 0:
    RESULT engine=torch model=M mode=ddp sps=<median> rounds=<r1,...>
    STEP engine=torch model=M mode=ddp p10_us=X p50_us=Y
(the 10th percentile and the median of the timed steps' wall times, each rank's, then the slower
rank's, as bench/ddp.lua).

usage: python3 bench/ddp_torch.py model=mlp steps=200 warmup=20 rounds=5 batch=32
Several nodes (bench/multinode, each node in a namespace of tools/netns-cluster.sh): add
nnodes=K node_rank=R master=ADDR port=P; each node starts `world` (per node) processes, global
rank = node_rank * world + local, and RESULT/STEP come from global rank 0.
"""
import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import gzip
import socket
import statistics
import sys
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as powerSGD
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

DATA = os.environ.get("FASHION_MNIST_DIR", "/usr/share/datasets/fashion-mnist")


def read_idx(name):
    with gzip.open(os.path.join(DATA, name), "rb") as f:
        raw = f.read()
    ndim = raw[3]
    dims = [int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
    return np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def make_model(name):
    if name == "mlp":
        return nn.Sequential(nn.Flatten(), nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 256),
                             nn.ReLU(), nn.Linear(256, 10))
    return nn.Sequential(nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Flatten(), nn.Linear(64 * 7 * 7, 128), nn.ReLU(), nn.Linear(128, 10))


def worker(local, per_node, port, o):
    torch.set_num_threads(1)
    rank, world = o["node_rank"] * per_node + local, o["nnodes"] * per_node
    dist.init_process_group("gloo", init_method=f"tcp://{o['master']}:{port}", rank=rank,
                            world_size=world)
    x = torch.from_numpy(read_idx("train-images-idx3-ubyte.gz").copy()).float()
    x = ((x / 255 - 0.2860) / 0.3530).view(-1, 1, 28, 28)
    y = torch.from_numpy(read_idx("train-labels-idx1-ubyte.gz").astype(np.int64))
    ds = TensorDataset(x, y)
    sampler = DistributedSampler(ds, num_replicas=world, rank=rank, seed=0)
    loader = DataLoader(ds, batch_size=o["batch"], sampler=sampler, drop_last=True)
    modes = o["modes"].split(",")

    def replica(mode):
        torch.manual_seed(0)
        m = DDP(make_model(o["model"]))
        if mode == "fp16":
            m.register_comm_hook(None, default_hooks.fp16_compress_hook)
        elif mode == "powersgd":
            m.register_comm_hook(powerSGD.PowerSGDState(
                process_group=None, matrix_approximation_rank=1, start_powerSGD_iter=2,
                use_error_feedback=True, warm_start=True), powerSGD.powerSGD_hook)
        return m, torch.optim.SGD(m.parameters(), lr=0.02 if o["model"] == "cnn" else 0.05,
                                  momentum=0.9)

    model, opt = replica("ddp")
    replicas = {m: replica(m) for m in modes if m in ("fp16", "powersgd")}
    state = {"epoch": 0, "it": None}

    def next_batch():
        b = next(state["it"], None) if state["it"] else None
        if b is None:
            sampler.set_epoch(state["epoch"])
            state["epoch"] += 1
            state["it"] = iter(loader)
            b = next(state["it"])
        return b

    def step(mode):
        xb, yb = next_batch()
        m, op = replicas.get(mode, (model, opt))
        op.zero_grad()
        if mode != "nosync":
            F.cross_entropy(m(xb), yb).backward()
        else:
            with m.no_sync():
                F.cross_entropy(m(xb), yb).backward()
        op.step()

    for mode in modes:
        for _ in range(o["warmup"]):
            step(mode)
    results = {m: [] for m in modes}
    step_times = {m: [] for m in modes}  # seconds, every timed step of this rank
    for _ in range(o["rounds"]):
        for mode in modes:
            dist.barrier()
            t0 = time.perf_counter()
            for _ in range(o["steps"]):
                s0 = time.perf_counter()
                step(mode)
                step_times[mode].append(time.perf_counter() - s0)
            t = torch.tensor([time.perf_counter() - t0], dtype=torch.float64)
            dist.all_reduce(t, op=dist.ReduceOp.MAX)
            results[mode].append(world * o["batch"] * o["steps"] / t.item())
    pct = {}
    for mode in modes:
        s = sorted(step_times[mode])
        t = torch.tensor([s[max(0, len(s) // 10 - 1)], s[(len(s) + 1) // 2 - 1]],
                         dtype=torch.float64)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        pct[mode] = t.tolist()
    if rank == 0:
        for mode in modes:
            r = results[mode]
            print(f"RESULT engine=torch model={o['model']} mode={mode} "
                  f"sps={statistics.median(r):.0f} rounds={','.join(f'{v:.0f}' for v in r)}",
                  flush=True)
            print(f"STEP engine=torch model={o['model']} mode={mode} "
                  f"p10_us={1e6 * pct[mode][0]:.0f} p50_us={1e6 * pct[mode][1]:.0f}", flush=True)
    # PyTorch 1.13's gloo teardown hangs now and then on this machine (a rank stuck in
    # destroy_process_group or at interpreter exit, seen in about half of the runs of one day):
    # the figures are out, so both ranks meet once more and leave without it.
    dist.barrier()
    os._exit(0)


def main():
    o = {"model": "mlp", "steps": 200, "warmup": 20, "rounds": 5, "batch": 32, "world": 2,
         "nnodes": 1, "node_rank": 0, "master": "127.0.0.1", "port": 0, "modes": "ddp,nosync"}
    for a in sys.argv[1:]:
        k, v = a.split("=", 1)
        o[k] = v if k in ("model", "master", "modes") else int(v)
    port = o["port"]
    if not port:
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()
    mp.spawn(worker, args=(o["world"], port, o), nprocs=o["world"], join=True)


if __name__ == "__main__":
    main()
