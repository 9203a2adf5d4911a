#!/usr/bin/python3
"""tools/gen_ctc_fixtures.py: PyTorch reference values for spec/nn/ctc_spec.lua: F.ctc_loss
(values and gradients of the log-probabilities).

Regenerate (needs PyTorch; Debian's python3-torch is enough, so use /usr/bin/python3):

    /usr/bin/python3 tools/gen_ctc_fixtures.py            # writes spec/fixtures/ctc.lua
    /usr/bin/python3 tools/gen_ctc_fixtures.py --check    # fails if the committed file differs

Cases use tools/gen_fixtures.py's format: inputs are log_probs, targets, input_lengths and
target_lengths (int64 tensors; the spec also passes them as Lua lists). Cases cover several
batch sizes, repeated labels (which forbid the blank-skipping transition), a blank other than 0,
padded and concatenated targets, unbatched input, every reduction, and zero_infinity with
targets too long for their inputs (PyTorch's +inf loss, and 0 with zero_infinity). Gradients
are only recorded where every loss is finite or zero_infinity is set (PyTorch's gradient of an
infinite loss is NaN or garbage). Input length 0 is left out: PyTorch 1.13 reads uninitialised
memory there.
"""
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_fixtures import F32, F64, I64, fixture_main, make_case, write_fixture  # noqa: E402

GEN = torch.Generator().manual_seed(29)


def log_probs(T, N, C, dtype=F32):
    x = torch.randn((T, N, C), generator=GEN, dtype=F64).float().double()
    return x.log_softmax(2).to(dtype)


def ints(v):
    return torch.tensor(v, dtype=I64)


def ctc_fn(blank=0, reduction='mean', zero_infinity=False):
    return lambda lp, tg, il, tl: F.ctc_loss(lp, tg, il, tl, blank=blank, reduction=reduction,
                                             zero_infinity=zero_infinity)


def cases():
    out = []

    def add(name, ins, diff=True, **kw):
        opts = {k: v for k, v in kw.items()}
        out.append(make_case(name, 'ctc_loss', ins, ctc_fn(**kw), diff=(0,) if diff else (),
                             opts=opts or None))

    # one sample, no repeats
    add('ctc/n1', [log_probs(6, 1, 5), ints([[1, 2, 3]]), ints([6]), ints([3])])
    # batch of 4, padded targets with repeats (1 1 needs a blank between), varying lengths
    lp = log_probs(12, 4, 6)
    tg = ints([[1, 1, 2, 3], [2, 2, 2, 0], [5, 4, 3, 2], [3, 0, 0, 0]])
    il, tl = ints([12, 10, 12, 7]), ints([4, 3, 4, 1])
    for red in ('mean', 'sum', 'none'):
        add('ctc/batch4/%s' % red, [lp, tg, il, tl], reduction=red)
    add('ctc/batch4/f64', [lp.double(), tg, il, tl], reduction='sum')
    # the same targets concatenated
    cat = ints([1, 1, 2, 3, 2, 2, 2, 5, 4, 3, 2, 3])
    add('ctc/batch4/concat', [lp, cat, il, tl])
    # blank other than 0 (and a label 0 in the targets)
    add('ctc/blank3', [lp, ints([[1, 0, 2, 4], [0, 0, 5, 5], [4, 4, 4, 4], [2, 1, 0, 5]]), il,
                       ints([4, 2, 4, 3])], blank=3, reduction='sum')
    add('ctc/blank_last', [lp, tg, il, tl], blank=5, reduction='none')
    # empty targets
    add('ctc/empty_target', [log_probs(5, 2, 4), ints([[0, 0], [1, 2]]), ints([5, 4]),
                             ints([0, 2])], reduction='none')
    # target too long for the input: +inf; zero_infinity makes it 0 (and its gradient 0)
    lp2 = log_probs(4, 3, 5)
    tg2 = ints([[1, 2, 3, 4, 1], [1, 1, 1, 0, 0], [2, 3, 0, 0, 0]])
    il2, tl2 = ints([4, 4, 3]), ints([5, 3, 2])
    add('ctc/too_long/none', [lp2, tg2, il2, tl2], diff=False, reduction='none')
    for red in ('mean', 'sum', 'none'):
        add('ctc/too_long/zero_inf/%s' % red, [lp2, tg2, il2, tl2], reduction=red,
            zero_infinity=True)
    add('ctc/too_long/zero_inf/f64', [lp2.double(), tg2, il2, tl2], reduction='mean',
        zero_infinity=True)
    # unbatched (T, C) with a 1-D target
    add('ctc/unbatched', [log_probs(7, 1, 5)[:, 0], ints([2, 2, 4]), ints(7), ints(3)],
        reduction='none')
    add('ctc/unbatched/mean', [log_probs(7, 1, 5)[:, 0], ints([2, 2, 4]), ints(7), ints(3)])
    # a longer one: T 30, 5 samples, 12 classes
    T, N, C = 30, 5, 12
    lp3 = log_probs(T, N, C)
    tl3 = torch.randint(1, 11, (N,), generator=GEN, dtype=I64)
    il3 = torch.randint(24, T + 1, (N,), generator=GEN, dtype=I64)
    tg3 = torch.randint(1, C, (N, 10), generator=GEN, dtype=I64)
    add('ctc/long', [lp3, tg3, il3, tl3], reduction='sum')
    return out


def render():
    return write_fixture('ctc', cases(), 'F.ctc_loss (tools/gen_ctc_fixtures.py)')


if __name__ == '__main__':
    sys.exit(fixture_main(__doc__, 'tools/gen_ctc_fixtures.py', render))
