"""bench/allreduce_torch.py: torch.distributed (gloo) allreduce timing, the PyTorch half of
bench/allreduce.  Starts WORLD processes itself and prints, from rank 0, one line per size:
    RESULT torch <MiB> <median ms> <min ms> <max ms>
Method: per size, WARMUP allreduces (sum, in place), then ITERS timed ones, each after a
barrier; an op's time is the longest of the ranks' times (an allreduce with MAX of the list).

  /usr/bin/python3 bench/allreduce_torch.py [--world 2] [--sizes 1,4,25,100] [--iters 10]
                                            [--warmup 3]
"""
import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import socket
import statistics
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def rank_main(rank, world, port, sizes, warmup, iters):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.set_num_threads(1)
    for mib in sizes:
        x = torch.ones((mib << 20) // 4, dtype=torch.float32)
        for _ in range(warmup):
            x.fill_(1.0)
            dist.all_reduce(x)
        assert x[0].item() == world and x[-1].item() == world
        ts = []
        for _ in range(iters):
            dist.barrier()
            t0 = time.perf_counter()
            dist.all_reduce(x)
            ts.append(time.perf_counter() - t0)
        tt = torch.tensor(ts, dtype=torch.float64)
        dist.all_reduce(tt, op=dist.ReduceOp.MAX)
        if rank == 0:
            v = tt.tolist()
            print("RESULT torch %d %.6f %.6f %.6f" % (mib, statistics.median(v) * 1e3,
                                                      min(v) * 1e3, max(v) * 1e3), flush=True)
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--world", type=int, default=2)
    p.add_argument("--sizes", default="1,4,25,100")
    p.add_argument("--iters", type=int, default=10)
    p.add_argument("--warmup", type=int, default=3)
    a = p.parse_args()
    with socket.socket() as s:  # a free port for the rendezvous
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    sizes = [int(x) for x in a.sizes.split(",")]
    mp.spawn(rank_main, args=(a.world, port, sizes, a.warmup, a.iters), nprocs=a.world)


if __name__ == "__main__":
    main()
