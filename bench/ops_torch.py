"""bench/ops_torch.py: the PyTorch worker of bench/ops (the same rows as the ddplua worker).

Started by bench/ops once per thread count, as
    OMP_NUM_THREADS=T OPENBLAS_NUM_THREADS=T [OMP_WAIT_POLICY=passive] \
        /usr/bin/python3 bench/ops_torch.py --threads T --min-time S --reps R --tiny-calls N
it speaks the row protocol of bench/ops.lua's header: prints "ROWS <names>", then answers each
stdin line "<name> <calls>" with "RESULT <name> <value> <unit> <calls>" (calls 0: a warm-up call
and a calibration to loops of about S seconds first) until the end of its input.

Threads: torch.set_num_threads(T) sizes torch's OpenMP pool (elementwise ops); Debian's torch
runs matmuls in OpenBLAS, which has its own pool, so openblas_set_num_threads(T) is also called
through ctypes (see shared/reference/torch/RESULTS.md, note 1).
Bandwidth is bytes read + bytes written per second (GB = 1e9); sgemm is 2*M*N*K flops per call.
"""
import argparse
import gc
import statistics
import sys
import time

import torch
import torch.nn.functional as F

from torch_threads import set_threads

N_ELEM = 16 << 20  # 16M float32 = 64 MiB per tensor


def time_per_call(body, calls, min_time, reps):
    """(seconds per call, calls): the median over reps loops of calls calls; with calls 0 a
    warm-up call and a calibration to loops of about min_time seconds first."""
    if calls <= 0:
        body()
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
    return statistics.median(per_call), calls


# the inputs of each group of rows (the same in bench/ops.lua)
def g_gemm():
    return {"big": (torch.randn(1024, 1024), torch.randn(1024, 1024)),
            "small": (torch.randn(64, 784), torch.randn(784, 256))}


def g_bf16():
    return {"a": torch.randn(1024, 1024).bfloat16(), "b": torch.randn(1024, 1024).bfloat16()}


def g_elementwise():
    return {"a": torch.randn(N_ELEM), "b": torch.randn(N_ELEM), "x": torch.randn(N_ELEM),
            "dst": torch.empty(N_ELEM)}


def g_scan():  # any runs on zeros and all on ones, so both read every element
    return {"v": torch.randn(N_ELEM), "m": torch.randn(4096, 4096),
            "zeros": torch.zeros(N_ELEM), "ones": torch.ones(N_ELEM)}


def g_sort():
    return {"v": torch.randn(1 << 20), "m": torch.randn(1024, 1024),
            "u": torch.randint(0, 100000, (1 << 20,))}


def g_select():
    t = {"v": torch.randn(1 << 20), "m": torch.randn(1024, 1024), "m4": torch.randn(4096, 1024),
         "big": torch.randn(N_ELEM), "q3": torch.tensor([0.25, 0.5, 0.75]),
         "u": torch.randint(0, 1000, (1 << 20,)), "z": torch.zeros(1000),
         "gi": torch.randint(0, 1024, (1024, 1024)), "bounds": torch.linspace(-3, 3, 1000)}
    t["mask"] = t["v"].gt(0)
    return t


GB, NBYTES = 1e9, 4 * N_ELEM
# (name, group, body(inputs), unit, amount): the value is amount / seconds per call for GB/s
# and GFLOP/s, ms per call when unit is None; torch's default sort (not stable=True: the faster)
ROWS = [
    ("sgemm_1024x1024x1024", g_gemm, lambda t: torch.matmul(*t["big"]), "GFLOP/s", 2 * 1024**3 / 1e9),
    ("sgemm_64x784x256", g_gemm, lambda t: torch.matmul(*t["small"]), "GFLOP/s",
     2 * 64 * 784 * 256 / 1e9),
    ("matmul_bf16_1024", g_bf16, lambda t: torch.matmul(t["a"], t["b"]), "GFLOP/s", 2 * 1024**3 / 1e9),
    ("add", g_elementwise, lambda t: t["a"] + t["b"], "GB/s", 3 * NBYTES / GB),
    ("add_", g_elementwise, lambda t: t["x"].add_(t["b"]), "GB/s", 3 * NBYTES / GB),
    ("gelu", g_elementwise, lambda t: F.gelu(t["a"]), "GB/s", 2 * NBYTES / GB),  # exact (erf)
    ("clone", g_elementwise, lambda t: t["a"].clone(), "GB/s", 2 * NBYTES / GB),
    ("copy_", g_elementwise, lambda t: t["dst"].copy_(t["a"]), "GB/s", 2 * NBYTES / GB),
    ("cumsum", g_scan, lambda t: t["v"].cumsum(0), "GB/s", 2 * NBYTES / GB),
    ("cumsum_rows", g_scan, lambda t: t["m"].cumsum(1), "GB/s", 2 * NBYTES / GB),
    ("cumsum_cols", g_scan, lambda t: t["m"].cumsum(0), "GB/s", 2 * NBYTES / GB),
    ("any", g_scan, lambda t: t["zeros"].any(), "GB/s", NBYTES / GB),
    ("all", g_scan, lambda t: t["ones"].all(), "GB/s", NBYTES / GB),
    ("amax_rows", g_scan, lambda t: t["m"].amax(1), "GB/s", NBYTES / GB),
    ("sort_1m", g_sort, lambda t: t["v"].sort(), None, 0),
    ("sort_rows", g_sort, lambda t: t["m"].sort(), None, 0),
    ("argsort_1m", g_sort, lambda t: t["v"].argsort(), None, 0),
    ("unique_1m", g_sort, lambda t: t["u"].unique(), None, 0),
    ("unique_1m_inv", g_sort, lambda t: t["u"].unique(return_inverse=True, return_counts=True),
     None, 0),
]
SELECT = (
    ("median_1m", lambda t: t["v"].median()),
    ("median_rows", lambda t: t["m"].median(-1)),
    ("quantile_rows", lambda t: torch.quantile(t["m"], 0.5, dim=-1)),
    ("quantile3_rows", lambda t: torch.quantile(t["m"], t["q3"], dim=-1)),
    ("kthvalue_rows", lambda t: t["m"].kthvalue(256, -1)),
    ("topk_rows", lambda t: t["m"].topk(10, -1)),
    ("topk_rows_small", lambda t: t["m"].topk(10, -1, largest=False)),
    ("cumprod_1m", lambda t: t["v"].cumprod(0)),
    ("cummax_1m", lambda t: t["v"].cummax(0)),
    ("logsumexp_rows", lambda t: t["m"].logsumexp(1)),
    ("std_rows", lambda t: t["m"].std(1)),  # correction 1
    ("var_cols", lambda t: t["m"].var(0)),
    ("norm2_rows", lambda t: t["m"].norm(2, 1)),
    ("norm1_rows", lambda t: t["m"].norm(1, 1)),
    ("prod_cols", lambda t: t["m4"].prod(0)),
    ("sum_cols", lambda t: t["m4"].sum(0)),
    ("max_rows", lambda t: t["m4"].max(1)),
    ("count_nonzero", lambda t: torch.count_nonzero(t["m4"])),
    ("aminmax", lambda t: torch.aminmax(t["m4"])),
    ("nansum", lambda t: torch.nansum(t["m4"])),
    ("bincount_1m", lambda t: t["u"].bincount()),
    ("histc_1m", lambda t: torch.histc(t["v"], bins=100, min=-3, max=3)),
    ("searchsorted_1m", lambda t: torch.searchsorted(t["bounds"], t["v"])),
    ("scatter_add_1m", lambda t: t["z"].scatter_add(0, t["u"], t["v"])),
    ("index_add_1m", lambda t: t["z"].index_add(0, t["u"], t["v"])),
    ("gather_rows", lambda t: t["m"].gather(1, t["gi"])),
    ("masked_select_1m", lambda t: t["v"].masked_select(t["mask"])),
    ("nonzero_1m", lambda t: t["mask"].nonzero()),
    ("remainder_16m", lambda t: t["big"] % 1.5),
    ("fmod_16m", lambda t: t["big"].fmod(1.5)),
    ("roll_rows", lambda t: t["m4"].roll(7, 0)),
    ("roll_cols", lambda t: t["m4"].roll(7, 1)),
    ("repeat_interleave_1m", lambda t: t["v"].repeat_interleave(2)),
)
ROWS += [(name, g_select, f, None, 0) for name, f in SELECT]


def tiny_add(n):
    """us per 1-element add: a loop of n calls minus an empty loop of n."""
    t1, t2 = torch.ones(1), torch.ones(1)
    t = time.perf_counter()
    for _ in range(n):
        t1 + t2
    t_op = time.perf_counter() - t
    t = time.perf_counter()
    for _ in range(n):
        pass
    return (t_op - (time.perf_counter() - t)) / n * 1e6


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--min-time", type=float, default=0.1)
    ap.add_argument("--reps", type=int, default=1)
    ap.add_argument("--tiny-calls", type=int, default=1000000)
    args = ap.parse_args()

    blas = set_threads(args.threads)
    print(f"INFO torch {torch.__version__}, threads {torch.get_num_threads()}, "
          f"openblas threads {blas}", flush=True)
    rows = {r[0]: r for r in ROWS}
    print("ROWS " + " ".join([r[0] for r in ROWS] + ["tiny_add"]), flush=True)

    group, inputs = None, None
    for line in iter(sys.stdin.readline, ""):
        parts = line.split()
        if len(parts) != 2:
            continue
        name, calls = parts[0], int(parts[1])
        try:
            if name == "tiny_add":
                value, unit, calls = tiny_add(args.tiny_calls), "us", args.tiny_calls
            else:
                _, g, f, unit, amount = rows[name]
                if g is not group:
                    group, inputs = None, None
                    gc.collect()
                    torch.manual_seed(0)
                    inputs, group = g(), g
                s, calls = time_per_call(lambda: f(inputs), calls, args.min_time, args.reps)
                value, unit = (amount / s, unit) if unit else (s * 1e3, "ms")
            print(f"RESULT {name} {value:.6g} {unit} {calls}", flush=True)
        except Exception as e:  # reported to the driver, which notes it and goes on
            msg = str(e).replace("\n", " ")
            print(f"ERROR {name} {type(e).__name__}: {msg}", flush=True)


if __name__ == "__main__":
    main()
