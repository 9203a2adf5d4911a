#!/usr/bin/python3
"""tools/gen_median_fixtures.py: PyTorch reference values for spec/tensor/median_spec.lua: median,
nanmedian, quantile and nanquantile (values, indices, gradients).

Regenerate (needs PyTorch; Debian's python3-torch is enough, so use /usr/bin/python3):

    /usr/bin/python3 tools/gen_median_fixtures.py            # writes spec/fixtures/median.lua
    /usr/bin/python3 tools/gen_median_fixtures.py --check    # fails if the committed file differs

Cases use tools/gen_fixtures.py's format. Cases that check median's indices have distinct values
(PyTorch's index among equal values is unspecified); cases with ties check the values only
(op 'median_values'). A row with NaNs gives NaN and the index of its first NaN in both.
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_fixtures import F32, F64, I64, fixture_main, make_case, rint, rnd  # noqa: E402
from gen_fixtures import write_fixture  # noqa: E402

NAN = float('nan')


def t(values, dtype=F32):
    return torch.tensor(values, dtype=dtype)


def distinct(*shape, dtype=F32, seed=0):
    n = 1
    for s in shape:
        n *= s
    p = torch.randperm(n, generator=torch.Generator().manual_seed(n * 17 + seed))
    return ((p.double() - n / 2) / 8).to(dtype).reshape(shape)


def median_cases():
    cases = []
    x = distinct(4, 7)
    cases.append(make_case('median/all/f32', 'median', [x], lambda a: torch.median(a), diff=(0,)))
    cases.append(make_case('median/all/even', 'median', [distinct(6)], lambda a: torch.median(a),
                           diff=(0,)))
    for dim in (0, 1, -1):
        for keep in (False, True):
            cases.append(make_case('median/dim%d/keep%d' % (dim, keep), 'median', [x],
                                   lambda a, dim=dim, keep=keep: torch.median(a, dim, keep),
                                   diff=(0,), opts={'dim': dim, 'keepdim': keep}))
    cases.append(make_case('median/f64/3d', 'median', [distinct(3, 4, 5, dtype=F64)],
                           lambda a: torch.median(a, 1), diff=(0,), opts={'dim': 1}))
    cases.append(make_case('median/transposed', 'median', [distinct(5, 6, seed=3)],
                           lambda a: torch.median(a, 1), opts={'dim': 1}, t_inputs=(0,)))
    cases.append(make_case('median/i64', 'median', [t([[5, -2, 9, 7], [3, 3, 1, 8]], I64)[:, :3]],
                           lambda a: torch.median(a, 1)[0], opts={'dim': 1}))
    cases.append(make_case('median/i64/all', 'median_values', [t([5, -2, 9, 7, 1, 1], I64)],
                           lambda a: torch.median(a)))
    cases.append(make_case('median/0dim', 'median', [t(2.5)], lambda a: torch.median(a, 0),
                           opts={'dim': 0}))
    ties = rint(0, 4, 5, 8).float()
    cases.append(make_case('median/ties/values', 'median_values', [ties],
                           lambda a: torch.median(a, 1)[0], opts={'dim': 1}))
    nan = t([[1.0, NAN, 3.0, NAN, 0.5], [2.0, 1.0, -1.0, 4.0, 0.0], [NAN, NAN, NAN, NAN, NAN],
             [7.0, 6.0, 5.0, NAN, 4.0]])
    cases.append(make_case('median/nan/dim', 'median', [nan], lambda a: torch.median(a, 1),
                           diff=(0,), opts={'dim': 1}))
    cases.append(make_case('median/nan/all', 'median', [nan], lambda a: torch.median(a)))
    # an all-NaN row's nanmedian index is whatever PyTorch's nth_element leaves: values only
    some = nan[[0, 1, 3]]
    cases.append(make_case('nanmedian/nan/dim', 'nanmedian', [some],
                           lambda a: torch.nanmedian(a, 1), diff=(0,), opts={'dim': 1}))
    cases.append(make_case('nanmedian/all_nan_row', 'nanmedian_values', [nan],
                           lambda a: torch.nanmedian(a, 1)[0], opts={'dim': 1}))
    cases.append(make_case('nanmedian/nan/all', 'nanmedian', [nan], lambda a: torch.nanmedian(a),
                           diff=(0,)))
    cases.append(make_case('nanmedian/nonan', 'nanmedian', [x], lambda a: torch.nanmedian(a, 0),
                           diff=(0,), opts={'dim': 0}))
    cases.append(make_case('nanmedian/f64/keep', 'nanmedian', [some.double()],
                           lambda a: torch.nanmedian(a, -1, True), diff=(0,),
                           opts={'dim': -1, 'keepdim': True}))
    return cases


def quantile_cases():
    cases = []
    x = rnd(4, 9)
    q1 = t([0.0, 0.1, 0.25, 0.5, 0.9, 1.0])
    for interp in ('linear', 'lower', 'higher', 'midpoint', 'nearest'):
        cases.append(make_case('quantile/%s/all' % interp, 'quantile', [x, q1],
                               lambda a, q, i=interp: torch.quantile(a, q, interpolation=i),
                               diff=(0,), opts={'interpolation': interp}))
        cases.append(make_case('quantile/%s/dim1' % interp, 'quantile', [x, 0.3],
                               lambda a, q, i=interp: torch.quantile(a, q, 1, interpolation=i),
                               diff=(0,), opts={'dim': 1, 'interpolation': interp}))
    # nearest rounds half to even: ranks 0.5 and 2.5 of 4 values (q = 1/6, 5/6)
    cases.append(make_case('quantile/nearest/half', 'quantile', [t([1.0, 2.0, 3.0, 4.0]),
                                                                 t([1 / 6, 5 / 6, 0.5])],
                           lambda a, q: torch.quantile(a, q, interpolation='nearest'),
                           opts={'interpolation': 'nearest'}))
    cases.append(make_case('quantile/dim0/keep', 'quantile', [x, q1[:3]],
                           lambda a, q: torch.quantile(a, q, 0, True), diff=(0,),
                           opts={'dim': 0, 'keepdim': True}))
    cases.append(make_case('quantile/all/keep', 'quantile', [x, 0.75],
                           lambda a, q: torch.quantile(a, q, keepdim=True), diff=(0,),
                           opts={'keepdim': True}))
    cases.append(make_case('quantile/f64/3d', 'quantile', [rnd(3, 5, 4, dtype=F64),
                                                           t([0.2, 0.8], F64)],
                           lambda a, q: torch.quantile(a, q, -2), diff=(0,), opts={'dim': -2}))
    cases.append(make_case('quantile/q0dim', 'quantile', [x, t(0.4)],
                           lambda a, q: torch.quantile(a, q, 1), diff=(0,), opts={'dim': 1}))
    cases.append(make_case('quantile/transposed', 'quantile', [rnd(6, 5), 0.6],
                           lambda a, q: torch.quantile(a, q, 1), opts={'dim': 1}, t_inputs=(0,)))
    nan = t([[1.0, NAN, 3.0, 2.0, 0.5], [2.0, 1.0, -1.0, 4.0, 0.0], [NAN, NAN, NAN, NAN, NAN],
             [7.0, 6.0, 5.0, NAN, 4.0]])
    q2 = t([0.0, 0.3, 0.5, 1.0])
    for fn, name in ((torch.quantile, 'quantile'), (torch.nanquantile, 'nanquantile')):
        for interp in ('linear', 'lower', 'midpoint'):
            cases.append(make_case('%s/nan/%s' % (name, interp), name, [nan, q2],
                                   lambda a, q, fn=fn, i=interp: fn(a, q, 1, interpolation=i),
                                   opts={'dim': 1, 'interpolation': interp}))
    # gradients where no NaN reaches the selected values (PyTorch's lerp(NaN, ...) gradient)
    cases.append(make_case('nanquantile/grad', 'nanquantile', [nan[:2].double(), q2.double()],
                           lambda a, q: torch.nanquantile(a, q, 1), diff=(0,), opts={'dim': 1}))
    cases.append(make_case('nanquantile/all', 'nanquantile', [nan, 0.5],
                           lambda a, q: torch.nanquantile(a, q)))
    return cases


def render():
    return write_fixture('median', median_cases() + quantile_cases(),
                         'median, nanmedian, quantile, nanquantile '
                         '(tools/gen_median_fixtures.py)')


if __name__ == '__main__':
    sys.exit(fixture_main(__doc__, 'tools/gen_median_fixtures.py', render))
