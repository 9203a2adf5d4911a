#!/usr/bin/python3
"""bench/lstm_torch.py: PyTorch's nn.LSTM forward+backward time on the CPU, the twin of
bench/lstm.lua (same arguments, same output line with 'torch' for 'ddplua'). With --dtype
bfloat16 the forward runs under torch.autocast('cpu'); PyTorch 1.13 keeps LSTM in float32
there (its CPU list has no RNN; PyTorch 2 adds mkldnn_rnn_layer)."""
import argparse
import time

import torch

ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
for k, v in dict(seq=64, batch=32, input=32, hidden=128, layers=1, iters=20, threads=1).items():
    ap.add_argument('--' + k, type=int, default=v)
ap.add_argument('--dtype', choices=['float32', 'bfloat16'], default='float32')
o = ap.parse_args()
torch.set_num_threads(o.threads)
torch.manual_seed(0)
m = torch.nn.LSTM(o.input, o.hidden, num_layers=o.layers)
x = torch.randn(o.seq, o.batch, o.input, requires_grad=True)


def step():
    m.zero_grad(set_to_none=True)
    x.grad = None
    with torch.autocast('cpu', dtype=torch.bfloat16, enabled=o.dtype != 'float32'):
        out, _ = m(x)
    out.float().sum().backward()


for _ in range(3):
    step()
times = []
for _ in range(o.iters):
    t0 = time.perf_counter()
    step()
    times.append((time.perf_counter() - t0) * 1e3)
times.sort()
n = len(times)
med = times[n // 2] if n % 2 else 0.5 * (times[n // 2 - 1] + times[n // 2])
print('torch lstm fwd+bwd median_ms %.3f' % med)
