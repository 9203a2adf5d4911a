#!/usr/bin/python3
"""tools/gen_nn_modes_fixtures.py: PyTorch reference values for spec/nn/pool_ceil_spec.lua and
spec/nn/conv_padding_mode_spec.lua: max_pool2d/avg_pool2d with ceil_mode (output sizes where the
last window is kept and where PyTorch's rule drops it, with padding), avg_pool2d's
count_include_pad and divisor_override, and nn.Conv2d/nn.Conv1d's padding_mode.

Regenerate (needs PyTorch; Debian's python3-torch is enough, so use /usr/bin/python3):

    /usr/bin/python3 tools/gen_nn_modes_fixtures.py            # writes spec/fixtures/nn_modes.lua
    /usr/bin/python3 tools/gen_nn_modes_fixtures.py --check    # fails if the committed file differs

Cases use tools/gen_fixtures.py's format; max_pool2d inputs have distinct values (no ties, so
the argmax and the gradient are unique).
"""
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_fixtures import F32, F64, fixture_main, make_case, rnd, write_fixture  # noqa: E402


def distinct(*shape, dtype=F32, seed=0):
    n = 1
    for s in shape:
        n *= s
    p = torch.randperm(n, generator=torch.Generator().manual_seed(n * 13 + seed))
    return ((p.double() - n / 2) / 8).to(dtype).reshape(shape)


def pool_cases():
    cases = []
    # (H, W, kernel, stride, padding): 5x5 k2 s2 keeps a last window past the edge (3 not 2);
    # 6x6 k3 s2 p1 ceil: the extra window would start in the right padding and is dropped;
    # 7x5 k3 s3: kept in both; 2x2 tiling with odd sizes exercises the CPU's 2x2 fast path guard
    geoms = [(5, 5, 2, 2, 0), (6, 6, 3, 2, 1), (7, 5, 3, 3, 0), (7, 9, 2, 2, 0), (4, 6, (3, 2),
             (2, 3), (1, 1)), (9, 8, 3, 2, 1)]
    for gi, (H, W, k, s, p) in enumerate(geoms):
        for dt, dn in ((F32, 'f32'), (F64, 'f64'))[:2 if gi in (1, 5) else 1]:
            x = distinct(1, 2, H, W, dtype=dt, seed=gi)
            opts = {'stride': s, 'padding': p, 'ceil_mode': True}
            ks = k if isinstance(k, int) else list(k)
            o = dict(opts, stride=s if isinstance(s, int) else list(s),
                     padding=p if isinstance(p, int) else list(p))
            cases.append(make_case('max_pool2d/ceil/%d/%s' % (gi, dn), 'max_pool2d', [x, ks],
                                   lambda a, k_, k=k, s=s, p=p: F.max_pool2d(a, k, s, p,
                                                                            ceil_mode=True),
                                   diff=(0,), opts=o))
            for cip in (True, False):
                oo = dict(o, count_include_pad=cip)
                cases.append(make_case('avg_pool2d/ceil/%d/%s/cip%d' % (gi, dn, cip), 'avg_pool2d',
                                       [x, ks],
                                       lambda a, k_, k=k, s=s, p=p, cip=cip: F.avg_pool2d(
                                           a, k, s, p, ceil_mode=True, count_include_pad=cip),
                                       diff=(0,), opts=oo))
    x = rnd(1, 2, 7, 6)
    for div in (5, 2):
        for ceil in (False, True):
            cases.append(make_case('avg_pool2d/divisor%d/ceil%d' % (div, ceil), 'avg_pool2d',
                                   [x, 3],
                                   lambda a, k_, div=div, ceil=ceil: F.avg_pool2d(
                                       a, 3, 2, 1, ceil_mode=ceil, divisor_override=div),
                                   diff=(0,), opts={'stride': 2, 'padding': 1, 'ceil_mode': ceil,
                                                    'divisor_override': div}))
    cases.append(make_case('max_pool2d/ceil/unbatched', 'max_pool2d', [distinct(3, 5, 7), 2],
                           lambda a, k_: F.max_pool2d(a, 2, ceil_mode=True), diff=(0,),
                           opts={'ceil_mode': True}))
    # smaller than the kernel: one clipped window with ceil_mode (PyTorch: floor mode refuses)
    cases.append(make_case('max_pool2d/ceil/1x3', 'max_pool2d', [distinct(1, 2, 1, 3), 2],
                           lambda a, k_: F.max_pool2d(a, 2, ceil_mode=True), diff=(0,),
                           opts={'ceil_mode': True}))
    cases.append(make_case('avg_pool2d/ceil/1x3', 'avg_pool2d', [distinct(1, 2, 1, 3), 2],
                           lambda a, k_: F.avg_pool2d(a, 2, ceil_mode=True), diff=(0,),
                           opts={'ceil_mode': True}))
    cases.append(make_case('max_pool2d/floor/5x5', 'max_pool2d', [distinct(1, 2, 5, 5), 2],
                           lambda a, k_: F.max_pool2d(a, 2), diff=(0,)))
    return cases


def conv_cases():
    cases = []
    g = torch.Generator().manual_seed(7)
    for mode in ('zeros', 'reflect', 'replicate', 'circular'):
        for (k, p, s, d) in ((3, 1, 1, 1), (3, 2, 2, 1), ((3, 2), (1, 2), 1, 1), (3, 'same', 1, 2),
                             (3, 'valid', 1, 1)):
            x = rnd(1, 3, 6, 7, dtype=F64)
            kk = (k, k) if isinstance(k, int) else k
            w = (torch.rand((4, 3) + kk, generator=g, dtype=F64) - 0.5).float().double()
            b = (torch.rand(4, generator=g, dtype=F64) - 0.5).float().double()

            def fn(a, w_, b_, k=k, p=p, s=s, d=d, mode=mode):
                m = torch.nn.Conv2d(3, 4, k, stride=s, padding=p, dilation=d, padding_mode=mode,
                                    dtype=F64)
                return m._conv_forward(a, w_, b_)  # the module's forward with these leaves
            name = 'conv2d/%s/k%s_p%s_s%s_d%s' % (mode, k if isinstance(k, int) else 'x'.join(
                map(str, k)), p if not isinstance(p, tuple) else 'x'.join(map(str, p)), s, d)
            cases.append(make_case(name, 'conv2d_module', [x, w, b], fn, diff=(0, 1, 2),
                                   opts={'kernel_size': k if isinstance(k, int) else list(k),
                                         'padding': p if not isinstance(p, tuple) else list(p),
                                         'stride': s, 'dilation': d, 'padding_mode': mode}))
    for mode in ('reflect', 'circular'):
        x = rnd(2, 3, 9, dtype=F64)
        w = (torch.rand((2, 3, 3), generator=g, dtype=F64) - 0.5).float().double()
        b = (torch.rand(2, generator=g, dtype=F64) - 0.5).float().double()

        def fn1(a, w_, b_, mode=mode):
            m = torch.nn.Conv1d(3, 2, 3, padding=2, padding_mode=mode, dtype=F64)
            return m._conv_forward(a, w_, b_)
        cases.append(make_case('conv1d/%s' % mode, 'conv1d_module', [x, w, b], fn1,
                               diff=(0, 1, 2), opts={'kernel_size': 3, 'padding': 2,
                                                     'padding_mode': mode}))
    return cases


def render():
    return write_fixture('nn_modes', pool_cases() + conv_cases(),
                         'pooling ceil_mode and divisor_override, convolution padding_mode '
                         '(tools/gen_nn_modes_fixtures.py)')


if __name__ == '__main__':
    sys.exit(fixture_main(__doc__, 'tools/gen_nn_modes_fixtures.py', render))
