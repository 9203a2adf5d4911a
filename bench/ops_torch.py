"""bench/ops_torch.py: the PyTorch worker of bench/ops (same workloads as the ddplua worker).

Run by bench/ops, once per round, as
    OMP_NUM_THREADS=T OPENBLAS_NUM_THREADS=T [OMP_WAIT_POLICY=passive] \
        /usr/bin/python3 bench/ops_torch.py --threads T --min-time S --reps R --tiny-calls N
and prints one "RESULT <metric> <value> <unit>" line per workload (parsed by bench/ops.lua).

Threads: torch.set_num_threads(T) sizes torch's OpenMP pool (elementwise ops); Debian's torch
runs matmuls in OpenBLAS, which has its own pool, so openblas_set_num_threads(T) is also called
through ctypes (see shared/reference/torch/RESULTS.md, note 1).
Bandwidth is bytes read + bytes written per second (GB = 1e9); sgemm is 2*M*N*K flops per call.
"""
import argparse
import re
import statistics
import time

import torch
import torch.nn.functional as F

from torch_threads import set_threads

N_ELEM = 16 << 20  # 16M float32 = 64 MiB per tensor


def time_per_call(body, min_time, reps):
    """Median over reps loops (each calibrated to ~min_time s) of seconds per call."""
    body()  # warm-up
    calls = 1
    while True:
        t = time.perf_counter()
        for _ in range(calls):
            body()
        dt = time.perf_counter() - t
        if dt >= min_time / 4 or calls >= 1 << 24:
            if dt > 0:
                calls = int(calls * min_time / dt) + 1
            break
        calls *= 2
    per_call = []
    for _ in range(reps):
        t = time.perf_counter()
        for _ in range(calls):
            body()
        per_call.append((time.perf_counter() - t) / calls)
    return statistics.median(per_call)


def result(name, value, unit):
    print(f"RESULT {name} {value:.4f} {unit}", flush=True)


def selector(only):
    """The workload filter of bench/ops --only: comma-separated patterns, each matching a
    whole name (Lua patterns there; the ones in use, names and '.*', mean the same here)."""
    pats = [re.compile(p + "$") for p in re.split(r"[,\s]+", only or "") if p]
    return lambda name: not pats or any(p.match(name) for p in pats)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--min-time", type=float, default=0.2)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--tiny-calls", type=int, default=1000000)
    ap.add_argument("--only", default="")
    args = ap.parse_args()
    wanted = selector(args.only)

    blas = set_threads(args.threads)
    print(f"INFO torch {torch.__version__}, threads {torch.get_num_threads()}, "
          f"openblas threads {blas}", flush=True)
    torch.manual_seed(0)
    mt, reps = args.min_time, args.reps

    for m, k, n in ((1024, 1024, 1024), (64, 784, 256)):
        if not wanted(f"sgemm_{m}x{k}x{n}"):
            continue
        a, b = torch.randn(m, k), torch.randn(k, n)
        s = time_per_call(lambda: torch.matmul(a, b), mt, reps)
        result(f"sgemm_{m}x{k}x{n}", 2.0 * m * n * k / s / 1e9, "GFLOP/s")

    a, b = torch.randn(N_ELEM), torch.randn(N_ELEM)
    x, dst = torch.randn(N_ELEM), torch.empty(N_ELEM)
    nbytes = 4 * N_ELEM
    cases = (
        ("add", lambda: a + b, 3),          # reads a, b; writes a new tensor
        ("add_", lambda: x.add_(b), 3),     # reads x, b; writes x
        ("gelu", lambda: F.gelu(a), 2),     # exact (erf) GELU, PyTorch's default
        ("clone", lambda: a.clone(), 2),
        ("copy_", lambda: dst.copy_(a), 2),
    )
    for name, body, passes in cases:
        if not wanted(name):
            continue
        s = time_per_call(body, mt, reps)
        result(name, passes * nbytes / s / 1e9, "GB/s")

    # ---- scans and reductions (same workloads as bench/ops.lua), GB/s read + written
    v, m = torch.randn(N_ELEM), torch.randn(4096, 4096)
    zeros, ones = torch.zeros(N_ELEM), torch.ones(N_ELEM)  # any/all read every element
    scans = (
        ("cumsum", lambda: v.cumsum(0), 2),
        ("cumsum_rows", lambda: m.cumsum(1), 2),
        ("cumsum_cols", lambda: m.cumsum(0), 2),
        ("any", lambda: zeros.any(), 1),
        ("all", lambda: ones.all(), 1),
        ("amax_rows", lambda: m.amax(1), 1),
    )
    for name, body, passes in scans:
        if not wanted(name):
            continue
        s = time_per_call(body, mt, reps)
        result(name, passes * nbytes / s / 1e9, "GB/s")
    del v, m, zeros, ones

    # ---- sorting and unique (same workloads as bench/ops.lua), ms per call; torch's
    # default sort (not stable=True: the faster of its two)
    v, m = torch.randn(1 << 20), torch.randn(1024, 1024)
    u = torch.randint(0, 100000, (1 << 20,))
    sorts = (
        ("sort_1m", lambda: v.sort()),
        ("sort_rows", lambda: m.sort()),
        ("argsort_1m", lambda: v.argsort()),
        ("unique_1m", lambda: u.unique()),
        ("unique_1m_inv", lambda: u.unique(return_inverse=True, return_counts=True)),
    )
    for name, body in sorts:
        if not wanted(name):
            continue
        result(name, time_per_call(body, mt, reps) * 1e3, "ms")
    del v, m, u

    # ---- the reductions, selections and index ops of issue 29 (same workloads as
    # bench/ops.lua), ms per call
    v, m, m4 = torch.randn(1 << 20), torch.randn(1024, 1024), torch.randn(4096, 1024)
    big = torch.randn(N_ELEM)
    q3 = torch.tensor([0.25, 0.5, 0.75])
    u, z = torch.randint(0, 1000, (1 << 20,)), torch.zeros(1000)
    gi = torch.randint(0, 1024, (1024, 1024))
    mask = v.gt(0)
    bounds = torch.linspace(-3, 3, 1000)
    cases = (
        ("median_1m", lambda: v.median()),
        ("median_rows", lambda: m.median(-1)),
        ("quantile_rows", lambda: torch.quantile(m, 0.5, dim=-1)),
        ("quantile3_rows", lambda: torch.quantile(m, q3, dim=-1)),
        ("kthvalue_rows", lambda: m.kthvalue(256, -1)),
        ("topk_rows", lambda: m.topk(10, -1)),
        ("topk_rows_small", lambda: m.topk(10, -1, largest=False)),
        ("cumprod_1m", lambda: v.cumprod(0)),
        ("cummax_1m", lambda: v.cummax(0)),
        ("logsumexp_rows", lambda: m.logsumexp(1)),
        ("std_rows", lambda: m.std(1)),  # correction 1
        ("var_cols", lambda: m.var(0)),
        ("norm2_rows", lambda: m.norm(2, 1)),
        ("norm1_rows", lambda: m.norm(1, 1)),
        ("prod_cols", lambda: m4.prod(0)),
        ("sum_cols", lambda: m4.sum(0)),
        ("max_rows", lambda: m4.max(1)),
        ("count_nonzero", lambda: torch.count_nonzero(m4)),
        ("aminmax", lambda: torch.aminmax(m4)),
        ("nansum", lambda: torch.nansum(m4)),
        ("bincount_1m", lambda: u.bincount()),
        ("histc_1m", lambda: torch.histc(v, bins=100, min=-3, max=3)),
        ("searchsorted_1m", lambda: torch.searchsorted(bounds, v)),
        ("scatter_add_1m", lambda: z.scatter_add(0, u, v)),
        ("index_add_1m", lambda: z.index_add(0, u, v)),
        ("gather_rows", lambda: m.gather(1, gi)),
        ("masked_select_1m", lambda: v.masked_select(mask)),
        ("nonzero_1m", lambda: mask.nonzero()),
        ("remainder_16m", lambda: big % 1.5),
        ("fmod_16m", lambda: big.fmod(1.5)),
        ("roll_rows", lambda: m4.roll(7, 0)),
        ("roll_cols", lambda: m4.roll(7, 1)),
        ("repeat_interleave_1m", lambda: v.repeat_interleave(2)),
    )
    for name, body in cases:
        if not wanted(name):
            continue
        result(name, time_per_call(body, mt, reps) * 1e3, "ms")
    del v, m, m4, big, u, z, gi, mask, bounds

    # tiny op: 1-element add, loop of N calls minus an empty loop of N
    if not wanted("tiny_add"):
        return
    t1, t2 = torch.ones(1), torch.ones(1)
    n = args.tiny_calls
    t = time.perf_counter()
    for _ in range(n):
        t1 + t2
    t_op = time.perf_counter() - t
    t = time.perf_counter()
    for _ in range(n):
        pass
    t_empty = time.perf_counter() - t
    result("tiny_add", (t_op - t_empty) / n * 1e6, "us")


if __name__ == "__main__":
    main()
