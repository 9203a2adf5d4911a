#!/usr/bin/python3
"""tools/gen_sort_fixtures.py: PyTorch reference values for spec/tensor/sort_spec.lua: sort, argsort,
kthvalue, unique, bincount, searchsorted, bucketize, histc.

Regenerate (needs PyTorch; Debian's python3-torch is enough, so use /usr/bin/python3):

    /usr/bin/python3 tools/gen_sort_fixtures.py            # writes spec/fixtures/sort.lua
    /usr/bin/python3 tools/gen_sort_fixtures.py --check    # fails if the committed file differs

Cases use tools/gen_fixtures.py's format. sort and argsort are PyTorch's stable=True (ddplua's
sort is always stable), so ties, -0.0 against 0.0 and NaNs (sorted as the largest value) have one
right order. kthvalue cases have no ties (PyTorch's index among equal values is unspecified).
unique and histc cases have no NaN (PyTorch 1.13's CPU kernels order them arbitrarily and count
them in the first bin: its CUDA kernels keep NaNs apart and skip them, as ddplua does). Empty inputs are
cases of the spec itself (the fixture reader builds no empty tensors).
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_fixtures import (F32, F64, I64, Pattern, fixture_main, make_case, rint, rnd,  # noqa: E402
                          write_fixture)

NAN, INF = float('nan'), float('inf')


def t(values, dtype=F32):
    return torch.tensor(values, dtype=dtype)


def perm_values(*shape, dtype=F32):
    """Distinct values in random order (no ties), exact in every float dtype."""
    n = 1
    for s in shape:
        n *= s
    p = torch.randperm(n, generator=torch.Generator().manual_seed(n * 31 + len(shape)))
    return ((p.double() - n / 2) / 4).to(dtype).reshape(shape)


def sort_cases():
    cases = []

    def sort_fn(dim=-1, descending=False):
        return lambda x: torch.sort(x, dim=dim, descending=descending, stable=True)

    special = t([1.0, NAN, -0.0, 2.0, 0.0, -INF, 1.0, NAN, INF, -0.0, -3.5, 1.0])
    for desc in (False, True):
        d = 'desc' if desc else 'asc'
        cases.append(make_case('sort/f32/special/' + d, 'sort', [special], sort_fn(-1, desc),
                               opts={'descending': desc}))
    ties = rint(0, 4, 5, 7).float()
    for dim in (0, 1, -1):
        for desc in (False, True):
            cases.append(make_case('sort/f32/ties/dim%d/%s' % (dim, 'desc' if desc else 'asc'),
                                   'sort', [ties], sort_fn(dim, desc),
                                   opts={'dim': dim, 'descending': desc}))
    # gradients scatter back by the indices (float64, distinct values and ties)
    for dt in (F32, F64):
        cases.append(make_case('sort/grad/%s' % {F32: 'f32', F64: 'f64'}[dt], 'sort',
                               [perm_values(4, 6, dtype=dt)], sort_fn(0, True), diff=(0,),
                               opts={'dim': 0, 'descending': True}))
    cases.append(make_case('sort/grad/f64/ties', 'sort', [rint(0, 3, 3, 8).double()],
                           sort_fn(-1, False), diff=(0,), opts={'dim': -1}))
    cases.append(make_case('sort/f32/3d/mid', 'sort', [rint(-3, 3, 3, 9, 4).float()],
                           sort_fn(1, False), opts={'dim': 1}))
    cases.append(make_case('sort/f32/transposed', 'sort', [rnd(6, 5)], sort_fn(-1, False),
                           t_inputs=(0,)))
    # every dtype: order-preserving keys of each width
    for name, x in [('i64', t([5, -2, 2**40, -(2**40), 0, 5, -2, 7], I64)),
                    ('i32', t([5, -2, 2**30, -(2**30), 0, 5, -2, 7], torch.int32)),
                    ('u8', t([5, 200, 0, 255, 5, 7, 0], torch.uint8)),
                    ('bool', t([True, False, True, False, False], torch.bool)),
                    ('f16', t([1.5, NAN, -0.0, 65504.0, 0.0, -INF, 1.5, -2.25], torch.float16)),
                    ('bf16', t([1.5, NAN, -0.0, 3e38, 0.0, -INF, 1.5, -2.25], torch.bfloat16)),
                    ('f64', t([1e300, NAN, -0.0, -1e-300, 0.0, -INF, 1e300, 2.5], F64))]:
        for desc in (False, True):
            cases.append(make_case('sort/%s/%s' % (name, 'desc' if desc else 'asc'), 'sort', [x],
                                   sort_fn(-1, desc), opts={'descending': desc}))
    cases.append(make_case('sort/0dim', 'sort', [t(2.5)], sort_fn(0, False), opts={'dim': 0}))
    # long slices, above the insertion-sort cutoff and the parallel grain; many ties
    big = Pattern((3, 40000), F32, mul=7919, mod=1001, add=-500, div=250)
    cases.append(make_case('sort/f32/large/ties', 'sort', [big], sort_fn(-1, False),
                           opts={'dim': -1}, large=True))
    bigi = Pattern((50000,), I64, mul=104729, mod=100003, add=-50000, div=1)
    cases.append(make_case('sort/i64/large/desc', 'sort', [bigi], sort_fn(-1, True),
                           opts={'descending': True}, large=True))
    # argsort: the indices alone
    cases.append(make_case('argsort/f32/ties/desc', 'argsort', [ties],
                           lambda x: torch.argsort(x, dim=0, descending=True, stable=True),
                           opts={'dim': 0, 'descending': True}))
    cases.append(make_case('argsort/f32/special', 'argsort', [special],
                           lambda x: torch.argsort(x, stable=True)))
    return cases


def kthvalue_cases():
    cases = []
    x = perm_values(5, 7)
    for k, dim, keep in [(1, -1, False), (7, 1, True), (3, 0, False), (5, 0, True)]:
        cases.append(make_case('kthvalue/f32/k%d/dim%d%s' % (k, dim, '/keepdim' if keep else ''),
                               'kthvalue', [x, k], lambda x, k, dim=dim, keep=keep:
                               torch.kthvalue(x, k, dim, keep), opts={'dim': dim, 'keepdim': keep}))
    cases.append(make_case('kthvalue/f64/grad', 'kthvalue', [perm_values(4, 6, dtype=F64), 2],
                           lambda x, k: torch.kthvalue(x, k, 0), diff=(0,), opts={'dim': 0}))
    cases.append(make_case('kthvalue/i64', 'kthvalue', [t([9, -4, 7, 0, 3], I64), 4],
                           lambda x, k: torch.kthvalue(x, k)))
    cases.append(make_case('kthvalue/f32/nan', 'kthvalue', [t([2.0, NAN, -1.0, 5.0]), 4],
                           lambda x, k: torch.kthvalue(x, k)))
    cases.append(make_case('kthvalue/0dim', 'kthvalue', [t(4.0), 1],
                           lambda x, k: torch.kthvalue(x, k, 0)))
    return cases


def unique_cases():
    cases = []
    xi = rint(-3, 4, 4, 6)
    xf = t([[2.5, -0.0, 1.0], [0.0, 2.5, -7.0]])

    def uq(**kw):
        return lambda x: torch.unique(x, sorted=True, **kw)
    for name, x in [('i64', xi), ('f32', xf), ('f64', xf.double()),
                    ('u8', t([3, 0, 3, 255, 0], torch.uint8)),
                    ('bool', t([True, False, True], torch.bool))]:
        cases.append(make_case('unique/%s' % name, 'unique', [x], uq()))
        cases.append(make_case('unique/%s/inverse_counts' % name, 'unique', [x],
                               uq(return_inverse=True, return_counts=True),
                               opts={'return_inverse': True, 'return_counts': True}))
    cases.append(make_case('unique/i64/inverse', 'unique', [xi], uq(return_inverse=True),
                           opts={'return_inverse': True}))
    cases.append(make_case('unique/i64/counts', 'unique', [xi], uq(return_counts=True),
                           opts={'return_counts': True}))
    cases.append(make_case('unique/0dim', 'unique', [t(3.0)],
                           uq(return_inverse=True, return_counts=True),
                           opts={'return_inverse': True, 'return_counts': True}))
    rows = t([[1, 2, 3], [0, 5, 1], [1, 2, 3], [0, 5, 0], [0, 5, 1]], I64)
    for dim in (0, 1, -2):
        cases.append(make_case('unique/dim%d' % dim, 'unique', [rows],
                               uq(return_inverse=True, return_counts=True, dim=dim),
                               opts={'return_inverse': True, 'return_counts': True, 'dim': dim}))
    cube = rint(0, 2, 3, 4, 2).float()
    cases.append(make_case('unique/dim1/3d', 'unique', [cube],
                           uq(return_inverse=True, return_counts=True, dim=1),
                           opts={'return_inverse': True, 'return_counts': True, 'dim': 1}))
    big = Pattern((70000,), I64, mul=7919, mod=1001, add=-500, div=1)
    cases.append(make_case('unique/i64/large', 'unique', [big],
                           uq(return_inverse=True, return_counts=True),
                           opts={'return_inverse': True, 'return_counts': True}, large=True))
    return cases


def count_cases():
    cases = []
    x = t([4, 1, 1, 0, 7, 4, 4], I64)
    cases.append(make_case('bincount/plain', 'bincount', [x], lambda x: torch.bincount(x)))
    cases.append(make_case('bincount/minlength', 'bincount', [x],
                           lambda x: torch.bincount(x, minlength=10), opts={'minlength': 10}))
    cases.append(make_case('bincount/i32', 'bincount', [x.int()], lambda x: torch.bincount(x)))
    for name, w in [('f32', rnd(7)), ('f64', rnd(7, dtype=F64)), ('i64', rint(-5, 5, 7)),
                    ('f16', rnd(7).half())]:
        cases.append(make_case('bincount/weights/' + name, 'bincount', [x, w],
                               lambda x, w: torch.bincount(x, w, 3), opts={'minlength': 3}))
    big = Pattern((60000,), I64, mul=7919, mod=997, add=0, div=1)
    cases.append(make_case('bincount/large', 'bincount', [big], lambda x: torch.bincount(x),
                           large=True))

    seq = t([1.0, 3.0, 3.0, 5.0, 7.0, 9.0])
    vals = t([[0.5, 3.0, 9.0, 10.0], [3.0, 5.0, 5.5, 1.0]])
    for right in (False, True):
        r = 'right' if right else 'left'
        cases.append(make_case('searchsorted/1d/' + r, 'searchsorted', [seq, vals],
                               lambda s, v, right=right: torch.searchsorted(s, v, right=right),
                               opts={'right': right}))
        cases.append(make_case('searchsorted/side/' + r, 'searchsorted', [seq, vals],
                               lambda s, v, r=r: torch.searchsorted(s, v, side=r),
                               opts={'side': r}))
    rows = t([[1, 3, 5, 7], [2, 4, 6, 8]], I64)
    rv = t([[3, 8, 0], [2, 9, 6]], I64)
    cases.append(make_case('searchsorted/rows/i64', 'searchsorted', [rows, rv],
                           lambda s, v: torch.searchsorted(s, v)))
    cases.append(make_case('searchsorted/rows/int32', 'searchsorted', [rows, rv],
                           lambda s, v: torch.searchsorted(s, v, right=True, out_int32=True),
                           opts={'right': True, 'out_int32': True}))
    cases.append(make_case('searchsorted/mixed_dtypes', 'searchsorted', [rows[0], t([2.5, 7.0])],
                           lambda s, v: torch.searchsorted(s, v)))
    cases.append(make_case('searchsorted/f64/nan', 'searchsorted',
                           [seq.double(), t([NAN, 3.0, -INF], F64)],
                           lambda s, v: torch.searchsorted(s, v)))
    bnd = t([1.0, 3.0, 5.0, 7.0])
    inp = t([[0.0, 1.0, 3.0], [4.0, 7.0, 8.0]])
    for right in (False, True):
        cases.append(make_case('bucketize/' + ('right' if right else 'left'), 'bucketize',
                               [inp, bnd],
                               lambda x, b, right=right: torch.bucketize(x, b, right=right),
                               opts={'right': right}))
    cases.append(make_case('bucketize/int32', 'bucketize', [inp.long(), bnd.long()],
                           lambda x, b: torch.bucketize(x, b, out_int32=True),
                           opts={'out_int32': True}))

    # no NaN: 1.13's CPU kernel counts NaN in the first bin (an undefined float-to-int
    # conversion), its CUDA kernel skips it, as ddplua does (sort_spec.lua checks that)
    h = t([0.0, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0, -1.0, 4.0, 1.0, 2.9999])
    cases.append(make_case('histc/range', 'histc', [h], lambda x: torch.histc(x, 4, 0, 3),
                           opts={'bins': 4, 'min': 0, 'max': 3}))
    cases.append(make_case('histc/default_range', 'histc', [h[:9]], lambda x: torch.histc(x, 5),
                           opts={'bins': 5}))
    cases.append(make_case('histc/f64', 'histc', [rnd(50, dtype=F64)],
                           lambda x: torch.histc(x, 7, -1.5, 1.5),
                           opts={'bins': 7, 'min': -1.5, 'max': 1.5}))
    cases.append(make_case('histc/one_value', 'histc', [t([2.0, 2.0])],
                           lambda x: torch.histc(x, 4), opts={'bins': 4}))
    cases.append(make_case('histc/defaults', 'histc', [rnd(300)], lambda x: torch.histc(x)))
    return cases


def render():
    cases = sort_cases() + kthvalue_cases() + unique_cases() + count_cases()
    return write_fixture('sort', cases, 'sort, argsort, kthvalue, unique, bincount, '
                         'searchsorted, bucketize, histc (tools/gen_sort_fixtures.py)')


if __name__ == '__main__':
    sys.exit(fixture_main(__doc__, 'tools/gen_sort_fixtures.py', render))
