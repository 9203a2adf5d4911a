#!/usr/bin/python3
"""tools/gen_scan_fixtures.py: PyTorch reference values for the scans and reductions
(spec/tensor/scan_spec.lua): cumsum, cumprod, cummax, cummin, any, all, count_nonzero, amax,
amin, aminmax, nansum, nanmean.

Regenerate (needs PyTorch; Debian's python3-torch is enough, so use /usr/bin/python3):

    /usr/bin/python3 tools/gen_scan_fixtures.py            # writes spec/fixtures/scan.lua
    /usr/bin/python3 tools/gen_scan_fixtures.py --check    # fails if the committed file differs

Cases use tools/gen_fixtures.py's format (make_case; read by spec/support/helpers.lua). opts
hold what the spec's runner passes on: dim (an integer or a list), keepdim, dtype. Inputs hold
ties and NaN where the op has a rule for them (cummax's last index, amax's shared gradient,
nansum's skipped NaN), zeros for cumprod's gradient, and float64 gradient cases for every
differentiable op. Large cases (above the CPU kernels' parallel grain) check the threaded paths
through digests. aminmax has no derivative in torch 1.13; its gradients are amin's and amax's,
so its cases check values only, and the spec checks its gradient against amin's.
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_fixtures import (F32, F64, I64, Pattern, fixture_main, make_case, rint,  # noqa: E402
                          rnd, write_fixture)

NAN = float('nan')


def fl(dt):
    return {F32: 'f32', F64: 'f64'}[dt]


def ties(dt=F32):
    """(3, 5) values from a small set, so rows and columns have ties."""
    return (rint(-2, 3, 3, 5).to(dt) / 2).to(dt)


def with_nan(dt=F32):
    x = rnd(3, 5, dtype=dt)
    x[0, 1] = NAN
    x[0, 3] = NAN
    x[2, 4] = NAN
    return x


def gen_scans():
    cases = []
    for dt in (F32, F64):
        x = rnd(2, 3, 4, dtype=dt)
        dims = (0, 1, 2, -1) if dt == F32 else (1, -1)
        for d in dims:
            cases.append(make_case('cumsum/%s/dim%d' % (fl(dt), d), 'cumsum', [x],
                                   lambda x, d=d: torch.cumsum(x, d), diff=[0], opts={'dim': d}))
    # integers and bools accumulate in int64; dtype= converts the input first
    cases.append(make_case('cumsum/i64', 'cumsum', [rint(-5, 5, 3, 4)],
                           lambda x: torch.cumsum(x, 1), opts={'dim': 1}))
    cases.append(make_case('cumsum/i32_to_i64', 'cumsum', [rint(-5, 5, 3, 4).int()],
                           lambda x: torch.cumsum(x, 0), opts={'dim': 0}))
    cases.append(make_case('cumsum/bool', 'cumsum', [rint(0, 2, 7).bool()],
                           lambda x: torch.cumsum(x, 0), opts={'dim': 0}))
    cases.append(make_case('cumsum/f32_dtype_f64', 'cumsum', [rnd(2, 5)],
                           lambda x: torch.cumsum(x, 1, dtype=F64), diff=[0],
                           opts={'dim': 1, 'dtype': 'float64'}))
    cases.append(make_case('cumsum/i64_dtype_f32', 'cumsum', [rint(-5, 5, 6)],
                           lambda x: torch.cumsum(x, 0, dtype=F32),
                           opts={'dim': 0, 'dtype': 'float32'}))
    cases.append(make_case('cumsum/scalar', 'cumsum', [torch.tensor(2.5)],
                           lambda x: torch.cumsum(x, 0), diff=[0], opts={'dim': 0}))
    cases.append(make_case('cumsum/f32/transposed', 'cumsum', [rnd(4, 3)],
                           lambda x: torch.cumsum(x, 1), diff=[0], opts={'dim': 1},
                           t_inputs=(0,)))
    cases.append(make_case('cumsum/f16', 'cumsum', [rnd(3, 6).half()],
                           lambda x: torch.cumsum(x.float(), 1).half(), opts={'dim': 1}))
    # above the parallel grain: rows (dim -1), columns (dim 0), float64 gradient
    for d in (0, 1):
        cases.append(make_case('cumsum/f32/large_dim%d' % d, 'cumsum', [Pattern((300, 200))],
                               lambda x, d=d: torch.cumsum(x, d), diff=[0], opts={'dim': d},
                               large=True))

    # cumprod: away from 0, then with one and with two zeros in a slice (PyTorch's formula)
    for dt in (F32, F64):
        x = rnd(2, 5, dtype=dt, lo=0.5, hi=1.5)
        x[0, 3] *= -1
        for d in (0, 1):
            cases.append(make_case('cumprod/%s/dim%d' % (fl(dt), d), 'cumprod', [x],
                                   lambda x, d=d: torch.cumprod(x, d), diff=[0],
                                   opts={'dim': d}))
        z = rnd(3, 6, dtype=dt, lo=0.5, hi=1.5)
        z[0, 2] = 0       # one zero in the middle
        z[1, 0] = 0       # a zero first ...
        z[1, 4] = 0       # ... and a second one
        z[2, 5] = 0       # a zero last
        cases.append(make_case('cumprod/%s/zeros' % fl(dt), 'cumprod', [z],
                               lambda x: torch.cumprod(x, 1), diff=[0], opts={'dim': 1}))
    cases.append(make_case('cumprod/i32_to_i64', 'cumprod', [rint(-3, 4, 2, 5).int()],
                           lambda x: torch.cumprod(x, 1), opts={'dim': 1}))
    cases.append(make_case('cumprod/f32/large', 'cumprod',
                           [Pattern((200, 300), mul=7919, mod=1001, add=4500, div=5000)],
                           lambda x: torch.cumprod(x, 1), opts={'dim': 1}, large=True))

    # cummax/cummin: ties (last index), NaN (sticks; the index of the latest NaN)
    for op, fn in (('cummax', torch.cummax), ('cummin', torch.cummin)):
        for d in (0, 1, -1):
            cases.append(make_case('%s/f32/ties_dim%d' % (op, d), op, [ties()],
                                   lambda x, d=d, fn=fn: tuple(fn(x, d)), diff=[0],
                                   opts={'dim': d}))
        cases.append(make_case('%s/f64/grad' % op, op, [ties(F64)],
                               lambda x, fn=fn: tuple(fn(x, 1)), diff=[0], opts={'dim': 1}))
        x = torch.tensor([[1.0, NAN, 3.0, NAN, 0.5, 7.0], [2.0, 2.0, -1.0, -1.0, 5.0, 5.0]])
        cases.append(make_case('%s/f32/nan' % op, op, [x], lambda x, fn=fn: tuple(fn(x, 1)),
                               opts={'dim': 1}))
        cases.append(make_case('%s/i64' % op, op, [rint(-3, 3, 4, 5)],
                               lambda x, fn=fn: tuple(fn(x, 0)), opts={'dim': 0}))
        cases.append(make_case('%s/bool' % op, op, [rint(0, 2, 8).bool()],
                               lambda x, fn=fn: tuple(fn(x, 0)), opts={'dim': 0}))
        cases.append(make_case('%s/scalar' % op, op, [torch.tensor(1.5)],
                               lambda x, fn=fn: tuple(fn(x, 0)), diff=[0], opts={'dim': 0}))
        cases.append(make_case('%s/f32/transposed' % op, op, [ties()],
                               lambda x, fn=fn: tuple(fn(x, 0)), diff=[0], opts={'dim': 0},
                               t_inputs=(0,)))
        cases.append(make_case('%s/i64/large' % op, op,
                               [Pattern((300, 200), I64, mul=7919, mod=1001, add=-500, div=1)],
                               lambda x, fn=fn: tuple(fn(x, 1)), opts={'dim': 1}, large=True))
    return cases


def gen_reductions():
    cases = []
    zeros_in = rnd(3, 4)
    zeros_in[0, :] = 0
    zeros_in[1, 2] = 0
    zeros_in[2, 1] = NAN  # NaN is not zero: true
    logic = {'any': torch.any, 'all': torch.all}
    for op, fn in logic.items():
        cases.append(make_case('%s/f32/all' % op, op, [zeros_in], lambda x, fn=fn: fn(x)))
        for d, keep in ((0, False), (1, True), (-1, False)):
            cases.append(make_case('%s/f32/dim%d%s' % (op, d, '_keepdim' if keep else ''), op,
                                   [zeros_in], lambda x, fn=fn, d=d, keep=keep: fn(x, d, keep),
                                   opts={'dim': d, 'keepdim': keep}))
        cases.append(make_case('%s/i64/dim1' % op, op, [rint(0, 3, 4, 3)],
                               lambda x, fn=fn: fn(x, 1), opts={'dim': 1}))
        cases.append(make_case('%s/bool/dim0' % op, op, [rint(0, 2, 4, 3).bool()],
                               lambda x, fn=fn: fn(x, 0), opts={'dim': 0}))
        cases.append(make_case('%s/u8' % op, op, [rint(0, 3, 5).to(torch.uint8)],
                               lambda x, fn=fn: fn(x)))
        cases.append(make_case('%s/f32/large' % op, op, [Pattern((400, 300))],
                               lambda x, fn=fn: fn(x, 1), opts={'dim': 1}, large=True))
    cases.append(make_case('count_nonzero/f32/all', 'count_nonzero', [zeros_in],
                           lambda x: torch.count_nonzero(x)))
    cases.append(make_case('count_nonzero/f32/dim1', 'count_nonzero', [zeros_in],
                           lambda x: torch.count_nonzero(x, 1), opts={'dim': 1}))
    x3 = rint(0, 2, 2, 3, 4)
    cases.append(make_case('count_nonzero/i64/dims02', 'count_nonzero', [x3],
                           lambda x: torch.count_nonzero(x, (0, 2)), opts={'dim': [0, 2]}))

    for op, fn in (('amax', torch.amax), ('amin', torch.amin)):
        for dt in (F32, F64):
            x = (rint(-2, 3, 2, 3, 4).to(dt) / 2).to(dt)  # ties: the gradient is shared
            cases.append(make_case('%s/%s/all' % (op, fl(dt)), op, [x],
                                   lambda x, fn=fn: fn(x), diff=[0]))
            for dims, keep in ((1, False), ([0, 2], True), (-1, True), ([-1, 0], False)):
                tag = '_'.join(str(d) for d in (dims if isinstance(dims, list) else [dims]))
                cases.append(make_case('%s/%s/dims%s%s' % (op, fl(dt), tag,
                                                          '_keepdim' if keep else ''),
                                       op, [x],
                                       lambda x, fn=fn, dims=dims, keep=keep: fn(x, dims, keep),
                                       diff=[0], opts={'dim': dims, 'keepdim': keep}))
        cases.append(make_case('%s/f32/nan' % op, op, [with_nan()], lambda x, fn=fn: fn(x, 1),
                               opts={'dim': 1}))
        cases.append(make_case('%s/i64' % op, op, [rint(-9, 9, 3, 4)], lambda x, fn=fn: fn(x, 0),
                               opts={'dim': 0}))
        cases.append(make_case('%s/bool' % op, op, [rint(0, 2, 3, 4).bool()],
                               lambda x, fn=fn: fn(x, 1), opts={'dim': 1}))
        cases.append(make_case('%s/f32/large' % op, op, [Pattern((300, 200))],
                               lambda x, fn=fn: fn(x, 0), diff=[0], opts={'dim': 0}, large=True))

    x = rnd(3, 4)
    cases.append(make_case('aminmax/f32/all', 'aminmax', [x], lambda x: tuple(torch.aminmax(x))))
    cases.append(make_case('aminmax/f32/dim1_keepdim', 'aminmax', [x],
                           lambda x: tuple(torch.aminmax(x, dim=1, keepdim=True)),
                           opts={'dim': 1, 'keepdim': True}))
    cases.append(make_case('aminmax/i64/dim0', 'aminmax', [rint(-9, 9, 3, 4)],
                           lambda x: tuple(torch.aminmax(x, dim=0)), opts={'dim': 0}))

    for dt in (F32, F64):
        x = with_nan(dt)
        for op, fn in (('nansum', torch.nansum), ('nanmean', torch.nanmean)):
            cases.append(make_case('%s/%s/all' % (op, fl(dt)), op, [x], lambda x, fn=fn: fn(x),
                                   diff=[0]))
            for d, keep in ((0, False), (1, True)):
                cases.append(make_case('%s/%s/dim%d%s' % (op, fl(dt), d,
                                                         '_keepdim' if keep else ''),
                                       op, [x], lambda x, fn=fn, d=d, keep=keep: fn(x, d, keep),
                                       diff=[0], opts={'dim': d, 'keepdim': keep}))
    allnan = torch.full((2, 3), NAN)
    allnan[1, 1] = 4.0
    cases.append(make_case('nanmean/f32/all_nan_row', 'nanmean', [allnan],
                           lambda x: torch.nanmean(x, 1), opts={'dim': 1}))
    cases.append(make_case('nansum/i64', 'nansum', [rint(-5, 5, 3, 4)],
                           lambda x: torch.nansum(x, 1), opts={'dim': 1}))
    return cases


def gen_double_backward():
    """Second derivatives of cummax/cummin (drawn after every other case, so no other value
    moved): op '<op>_backward' is the first derivative as a function of (x, grad), recorded
    (create_graph); its gradient with respect to grad is the double backward (a gather of the
    incoming gradient: cummaxmin_backward is a scatter_add). Ties: the last index wins."""
    cases = []
    for op, fn in (('cummax', torch.cummax), ('cummin', torch.cummin)):
        for d in (1, 0):
            def first(x, g, fn=fn, d=d):
                x = x.detach().requires_grad_()
                return torch.autograd.grad(fn(x, d)[0], x, g, create_graph=True)[0]
            cases.append(make_case('%s_backward/f64/dim%d' % (op, d), op + '_backward',
                                   [ties(F64), rnd(3, 5, dtype=F64)], first, diff=[1],
                                   opts={'dim': d}))
    return cases


def render():
    return write_fixture('scan', gen_scans() + gen_reductions() + gen_double_backward(),
                         'scans and reductions (tools/gen_scan_fixtures.py)')


if __name__ == '__main__':
    sys.exit(fixture_main(__doc__, 'tools/gen_scan_fixtures.py', render))
