#!/usr/bin/python3
"""tools/gen_scatter_fixtures.py: PyTorch reference values for spec/tensor/scatter_spec.lua and
spec/tensor/advanced_index_spec.lua: scatter, scatter_add, scatter_reduce, index_add,
index_copy, index_fill, masked_select, masked_scatter, nonzero, argwhere, take, take_along_dim,
advanced indexing (x[...]) and index_put.

Regenerate (needs PyTorch; Debian's python3-torch is enough, so use /usr/bin/python3):

    /usr/bin/python3 tools/gen_scatter_fixtures.py            # writes spec/fixtures/scatter.lua
    /usr/bin/python3 tools/gen_scatter_fixtures.py --check    # fails if the committed file differs

Cases use tools/gen_fixtures.py's format. A plain scatter (and index_copy, non-accumulating
index_put) with duplicate targets keeps an unspecified one of them in PyTorch, so those cases
have distinct targets; the reductions (scatter_add, scatter_reduce, index_add, accumulate) have
duplicates. Advanced-indexing cases ('index', 'index_put') list their entries in opts: n entries
after x, those at the positions in `slices` (1-based) full slices ':', the others the next
inputs in order.
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_fixtures import (F32, F64, I64, fixture_main, make_case, rint, rnd,  # noqa: E402
                          write_fixture)


def t(values, dtype=F32):
    return torch.tensor(values, dtype=dtype)


def perm_index(rows, cols, size, seed):
    """An index (rows, cols) for scatter along dim 0 with distinct targets in each column."""
    g = torch.Generator().manual_seed(seed)
    return torch.stack([torch.randperm(size, generator=g)[:rows] for _ in range(cols)], 1)


def scatter_cases():
    cases = []
    idx = perm_index(3, 5, 4, 1)
    for dt, name in ((F32, 'f32'), (F64, 'f64')):
        cases.append(make_case('scatter/%s/dim0' % name, 'scatter',
                               [rnd(4, 5, dtype=dt), idx, rnd(3, 5, dtype=dt)],
                               lambda x, i, s: torch.scatter(x, 0, i, s), diff=(0, 2),
                               opts={'dim': 0}))
    idx1 = perm_index(4, 2, 6, 2).t().contiguous()  # (2, 4) distinct along dim 1
    cases.append(make_case('scatter/f64/dim-1', 'scatter',
                           [rnd(3, 6, dtype=F64), idx1, rnd(2, 5, dtype=F64)],
                           lambda x, i, s: torch.scatter(x, -1, i, s), diff=(0,),
                           opts={'dim': -1},
                           note='src larger than index (PyTorch refuses src\'s gradient then)'))
    cases.append(make_case('scatter/i64/value', 'scatter_value', [rint(-9, 9, 4, 5), idx],
                           lambda x, i: torch.scatter(x, 0, i, 7), opts={'dim': 0, 'value': 7}))
    cases.append(make_case('scatter/f64/value/grad', 'scatter_value',
                           [rnd(4, 5, dtype=F64), idx],
                           lambda x, i: torch.scatter(x, 0, i, -1.5), diff=(0,),
                           opts={'dim': 0, 'value': -1.5}))
    dup = rint(0, 3, 4, 5)
    for red in ('add', 'multiply'):
        cases.append(make_case('scatter/f32/reduce_%s' % red, 'scatter',
                               [rnd(3, 5), dup, rnd(4, 5)],
                               lambda x, i, s, red=red: torch.scatter(x, 0, i, s, reduce=red),
                               opts={'dim': 0, 'reduce': red}))
    for dt, name in ((F32, 'f32'), (F64, 'f64'), (I64, 'i64')):
        x = rnd(3, 5, dtype=dt) if dt != I64 else rint(-9, 9, 3, 5)
        s = rnd(4, 5, dtype=dt) if dt != I64 else rint(-9, 9, 4, 5)
        diff = (0, 2) if dt == F64 else ()
        cases.append(make_case('scatter_add/%s/dup' % name, 'scatter_add', [x, dup, s],
                               lambda x, i, s: torch.scatter_add(x, 0, i, s), diff=diff,
                               opts={'dim': 0}))
    cases.append(make_case('scatter_add/f64/dim1/3d', 'scatter_add',
                           [rnd(2, 4, 3, dtype=F64), rint(0, 4, 2, 6, 3), rnd(2, 6, 3, dtype=F64)],
                           lambda x, i, s: torch.scatter_add(x, 1, i, s), diff=(0, 2),
                           opts={'dim': 1}))
    # scatter_reduce: every reduction, with and without self, duplicates; ties for amax/amin
    # (src values from a small set) and zeros for prod (one single zero, one double zero)
    x = rint(-3, 4, 3, 5).double()
    src = rint(-3, 4, 6, 5).double()
    sidx = rint(0, 3, 6, 5)
    for red in ('sum', 'prod', 'mean', 'amax', 'amin'):
        for inc in (True, False):
            diff = (0, 2) if red != 'prod' else ()
            cases.append(make_case('scatter_reduce/f64/%s/%s' % (red, 'self' if inc else 'noself'),
                                   'scatter_reduce', [x, sidx, src],
                                   lambda x, i, s, red=red, inc=inc:
                                   torch.scatter_reduce(x, 0, i, s, red, include_self=inc),
                                   diff=diff, opts={'dim': 0, 'reduce': red,
                                                    'include_self': inc}))
    # prod's gradient: distinct non-zero values, then a single zero per target
    px = rnd(3, 4, dtype=F64, lo=0.5, hi=1.5)
    ps = rnd(5, 4, dtype=F64, lo=0.5, hi=1.5)
    pidx = rint(0, 3, 5, 4)
    pz = ps.clone()
    pz[0, 0] = 0.0
    pz[2, 3] = 0.0
    pxz = px.clone()
    pxz[1, 1] = 0.0
    for tag, a, b in (('plain', px, ps), ('zeros', pxz, pz)):
        for inc in (True, False):
            cases.append(make_case('scatter_reduce/f64/prod/grad/%s/%s' %
                                   (tag, 'self' if inc else 'noself'), 'scatter_reduce',
                                   [a, pidx, b],
                                   lambda x, i, s, inc=inc:
                                   torch.scatter_reduce(x, 0, i, s, 'prod', include_self=inc),
                                   diff=(0, 2), opts={'dim': 0, 'reduce': 'prod',
                                                      'include_self': inc}))
    for red in ('mean', 'amax', 'amin', 'sum', 'prod'):
        cases.append(make_case('scatter_reduce/i64/%s' % red, 'scatter_reduce',
                               [rint(-9, 9, 3, 5), sidx, rint(-9, 9, 6, 5)],
                               lambda x, i, s, red=red: torch.scatter_reduce(x, 0, i, s, red),
                               opts={'dim': 0, 'reduce': red}))
    cases.append(make_case('scatter_reduce/f32/amax/dim1', 'scatter_reduce',
                           [rnd(4, 3), rint(0, 3, 4, 6), rnd(4, 6)],
                           lambda x, i, s: torch.scatter_reduce(x, 1, i, s, 'amax',
                                                                include_self=False),
                           opts={'dim': 1, 'reduce': 'amax', 'include_self': False}))
    return cases


def index_cases():
    cases = []
    ia = t([1, 0, 1, 3, 1], I64)
    for dt, name in ((F32, 'f32'), (F64, 'f64')):
        cases.append(make_case('index_add/%s/dim0/dup' % name, 'index_add',
                               [rnd(4, 3, dtype=dt), ia, rnd(5, 3, dtype=dt)],
                               lambda x, i, s: torch.index_add(x, 0, i, s), diff=(0, 2),
                               opts={'dim': 0}))
    cases.append(make_case('index_add/f64/dim-1/alpha', 'index_add',
                           [rnd(2, 4, dtype=F64), ia, rnd(2, 5, dtype=F64)],
                           lambda x, i, s: torch.index_add(x, -1, i, s, alpha=2.5), diff=(0, 2),
                           opts={'dim': -1, 'alpha': 2.5}))
    cases.append(make_case('index_add/i64/int32_index', 'index_add',
                           [rint(-5, 5, 4, 2), ia.int(), rint(-5, 5, 5, 2)],
                           lambda x, i, s: torch.index_add(x, 0, i, s, alpha=3),
                           opts={'dim': 0, 'alpha': 3}))
    ic = t([3, 0, 2], I64)
    cases.append(make_case('index_copy/f64/dim1', 'index_copy',
                           [rnd(2, 4, 3, dtype=F64), ic, rnd(2, 3, 3, dtype=F64)],
                           lambda x, i, s: torch.index_copy(x, 1, i, s), diff=(0, 2),
                           opts={'dim': 1}))
    cases.append(make_case('index_copy/i64/dim0', 'index_copy',
                           [rint(-5, 5, 4, 2), ic, rint(-5, 5, 3, 2)],
                           lambda x, i, s: torch.index_copy(x, 0, i, s), opts={'dim': 0}))
    cases.append(make_case('index_fill/f64/negative', 'index_fill',
                           [rnd(3, 4, dtype=F64), t([-1, 0, -1], I64)],
                           lambda x, i: torch.index_fill(x, 1, i, 2.5), diff=(0,),
                           opts={'dim': 1, 'value': 2.5}))
    cases.append(make_case('index_fill/bool', 'index_fill',
                           [t([[True, False], [False, False], [True, True]], torch.bool),
                            t([1], I64)],
                           lambda x, i: torch.index_fill(x, 0, i, True),
                           opts={'dim': 0, 'value': True}))
    return cases


def mask_cases():
    cases = []
    m = rnd(3, 4) > 0
    cases.append(make_case('masked_select/f64/same', 'masked_select', [rnd(3, 4, dtype=F64), m],
                           lambda x, m: torch.masked_select(x, m), diff=(0,)))
    cases.append(make_case('masked_select/f64/broadcast', 'masked_select',
                           [rnd(4, dtype=F64), rnd(3, 1) > 0],
                           lambda x, m: torch.masked_select(x, m), diff=(0,)))
    cases.append(make_case('masked_select/i32/mask_row', 'masked_select',
                           [rint(-9, 9, 3, 4).int(), t([True, False, False, True], torch.bool)],
                           lambda x, m: torch.masked_select(x, m)))
    cases.append(make_case('masked_scatter/f64', 'masked_scatter',
                           [rnd(3, 4, dtype=F64), m, rnd(14, dtype=F64)],
                           lambda x, m, s: torch.masked_scatter(x, m, s), diff=(0, 2)))
    cases.append(make_case('masked_scatter/f64/broadcast', 'masked_scatter',
                           [rnd(3, 4, dtype=F64), t([True, False, True, True], torch.bool),
                            rnd(2, 9, dtype=F64)],
                           lambda x, m, s: torch.masked_scatter(x, m, s), diff=(0, 2)))
    nz = rint(-1, 2, 3, 4, 2)
    for name, x in (('i64/3d', nz), ('f32/2d', rnd(4, 5) * (rnd(4, 5) > 0)),
                    ('bool/1d', t([False, True, True, False, True], torch.bool))):
        cases.append(make_case('nonzero/%s' % name, 'nonzero', [x], torch.nonzero))
        cases.append(make_case('nonzero_tuple/%s' % name, 'nonzero_tuple', [x],
                               lambda x: torch.nonzero(x, as_tuple=True)))
    cases.append(make_case('argwhere/i64/3d', 'argwhere', [nz], torch.argwhere))
    cases.append(make_case('where1/i64/3d', 'where1', [nz], torch.where))
    x = rnd(3, 4, dtype=F64)
    cases.append(make_case('take/f64/negative', 'take', [x, t([[-1, 0], [11, -12], [5, 5]], I64)],
                           torch.take, diff=(0,)))
    cases.append(make_case('take/f64/transposed', 'take', [x, t([1, 4, -3], I64)], torch.take,
                           diff=(0,), t_inputs=(0,)))
    cases.append(make_case('take_along_dim/f64/dim1', 'take_along_dim',
                           [x, torch.argsort(x, 1)], lambda x, i: torch.take_along_dim(x, i, 1),
                           diff=(0,), opts={'dim': 1}))
    cases.append(make_case('take_along_dim/f64/broadcast', 'take_along_dim',
                           [rnd(3, 1, 4, dtype=F64), rint(0, 4, 1, 2, 2)],
                           lambda x, i: torch.take_along_dim(x, i, -1), diff=(0,),
                           opts={'dim': -1}))
    cases.append(make_case('take_along_dim/f64/flat', 'take_along_dim',
                           [x, t([11, 0, 3], I64)], lambda x, i: torch.take_along_dim(x, i),
                           diff=(0,)))
    return cases


def entries(args, slices):
    """The index entries of an advanced-indexing case: args in order, slice(None) at slices."""
    out, it = [], iter(args)
    n = len(args) + len(slices)
    for p in range(1, n + 1):
        out.append(slice(None) if p in slices else next(it))
    return tuple(out)


def adv_cases():
    cases = []

    def index_case(name, x, args, slices=(), diff=True):
        n = len(args) + len(slices)
        cases.append(make_case('index/' + name, 'index', [x] + list(args),
                               lambda x, *a: x[entries(a, slices)], diff=(0,) if diff else (),
                               opts={'n': n, 'slices': list(slices)}))

    x = rnd(4, 5, 3, dtype=F64)
    index_case('one/dup_negative', x, [t([0, -1, 2, 0], I64)])
    index_case('one/2d_index', x, [t([[1, 2], [3, -4]], I64)])
    index_case('adjacent/middle', x, [t([0, 4, -1], I64), t([2, 0, 1], I64)], slices=(1,))
    index_case('adjacent/broadcast', x, [t([[0], [3]], I64), t([1, 2, 4], I64)])
    index_case('separated/first', x, [t([0, 3], I64), t([2, 1], I64)], slices=(2,))
    index_case('mask/2d', x, [rnd(4, 5) > 0])
    index_case('mask/after_slice', x, [rnd(5) > 0], slices=(1,))
    index_case('mask_and_index', x, [t([True, False, True, True], torch.bool),
                                     t([4, 0, 1], I64)])
    index_case('last_dim', x, [t([2, 0, 0], I64)], slices=(1, 2))

    def put_case(name, x, args, values, acc, slices=(), diff=True):
        n = len(args) + len(slices)

        def fn(x, *a):
            *ix, v = a
            # the aten op takes None for a full slice (Tensor.index_put does not)
            ents = [None if isinstance(e, slice) else e for e in entries(ix, slices)]
            return torch.ops.aten.index_put(x, ents, v if torch.is_tensor(v) else
                                            torch.tensor(v, dtype=x.dtype), acc)
        d = () if not diff else ((0, n + 1 - len(slices)) if torch.is_tensor(values) else (0,))
        cases.append(make_case('index_put/' + name, 'index_put', [x] + list(args) + [values], fn,
                               diff=d, opts={'n': n, 'slices': list(slices),
                                             'accumulate': acc}))

    y = rnd(4, 5, dtype=F64)
    put_case('acc/dup', y, [t([0, 2, 0, 3], I64), t([1, 1, 1, -1], I64)],
             rnd(4, dtype=F64), True)
    put_case('copy/distinct', y, [t([0, 2, 3], I64), t([1, 1, -1], I64)], rnd(3, dtype=F64),
             False)
    put_case('acc/rows_broadcast', y, [t([1, 1, 3], I64)], rnd(5, dtype=F64), True)
    put_case('mask/number', y, [rnd(4, 5) > 0], 0.0, False)
    put_case('mask/rows', y, [t([True, False, True, False], torch.bool)], rnd(2, 5, dtype=F64),
             False)
    z = rnd(3, 4, 2, dtype=F64)
    put_case('separated', z, [t([0, 2], I64), t([1, 0], I64)], rnd(2, 4, dtype=F64), False,
             slices=(2,))
    put_case('middle/acc', z, [t([3, 3, 0], I64)], rnd(3, 3, 1, dtype=F64), True, slices=(1,))
    put_case('i64/acc', rint(-9, 9, 5), [t([0, 0, 4], I64)], t([1, 2, 3], I64), True,
             diff=False)
    return cases


def render():
    cases = scatter_cases() + index_cases() + mask_cases() + adv_cases()
    return write_fixture('scatter', cases, 'scatter, scatter_add, scatter_reduce, index_add/'
                         'copy/fill, masks, nonzero, take, advanced indexing, index_put '
                         '(tools/gen_scatter_fixtures.py)')


if __name__ == '__main__':
    sys.exit(fixture_main(__doc__, 'tools/gen_scatter_fixtures.py', render))
