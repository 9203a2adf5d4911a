#!/usr/bin/python3
"""tools/gen_math_fixtures.py: PyTorch reference values for spec/tensor/math_spec.lua
(spec/fixtures/math.lua): the pointwise functions beyond + - * / (rounding, the rest
of libm, remainder/fmod/floor_divide, div's rounding modes, atan2, hypot, fmax/fmin, logaddexp,
xlogy, copysign, the bitwise and logical functions, isnan/isinf/isfinite, nan_to_num) and norm's
PyTorch signature: values and dtypes (float32, float64, int64, int32, bool) and, for the
differentiable ones, gradients in float32 and float64.

Regenerate (needs PyTorch; Debian's python3-torch is enough, so use /usr/bin/python3):

    /usr/bin/python3 tools/gen_math_fixtures.py          # writes spec/fixtures/math.lua
    /usr/bin/python3 tools/gen_math_fixtures.py --check  # fails if the file differs

The case format is gen_fixtures.py's. `op` is the ddplua name; `opts` carries the options the
spec passes on (decimals, rounding_mode, nan_to_num's values, norm's p/dim/keepdim).
"""
import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_fixtures import F32, F64, I64, fixture_main, fl, make_case, write_fixture  # noqa: E402

GEN = torch.Generator().manual_seed(20261203)


def rnd(*shape, dtype=F32, lo=-3.0, hi=3.0):
    # drawn in float32 (exact in both dtypes, short to write), computed in the case's dtype
    return (torch.rand(shape, generator=GEN, dtype=torch.float64) * (hi - lo) + lo).float().to(dtype)


def rint(lo, hi, *shape, dtype=I64):
    return torch.randint(lo, hi, shape, generator=GEN, dtype=dtype)


def nonzero_int(lo, hi, *shape, dtype=I64):
    x = rint(lo, hi, *shape, dtype=dtype)
    x[x == 0] = 1
    return x


# unary functions: name -> (torch function, input range (lo, hi)), differentiable in floats
UNARY = {
    'floor': (torch.floor, (-3, 3)), 'ceil': (torch.ceil, (-3, 3)),
    'trunc': (torch.trunc, (-3, 3)), 'frac': (torch.frac, (-3, 3)),
    'reciprocal': (torch.reciprocal, (0.3, 3)), 'exp2': (torch.exp2, (-3, 3)),
    'expm1': (torch.expm1, (-2, 2)), 'log2': (torch.log2, (0.1, 4)),
    'log10': (torch.log10, (0.1, 4)), 'log1p': (torch.log1p, (-0.9, 3)),
    'tan': (torch.tan, (-1.2, 1.2)), 'asin': (torch.asin, (-0.95, 0.95)),
    'acos': (torch.acos, (-0.95, 0.95)), 'atan': (torch.atan, (-3, 3)),
    'sinh': (torch.sinh, (-2, 2)), 'cosh': (torch.cosh, (-2, 2)),
    'asinh': (torch.asinh, (-3, 3)), 'acosh': (torch.acosh, (1.1, 4)),
    'atanh': (torch.atanh, (-0.9, 0.9)), 'erf': (torch.erf, (-2.5, 2.5)),
    'erfc': (torch.erfc, (-2.5, 2.5)), 'erfinv': (torch.erfinv, (-0.95, 0.95)),
    'square': (torch.square, (-3, 3)),
}
BINARY = {
    'remainder': torch.remainder, 'fmod': torch.fmod, 'atan2': torch.atan2,
    'hypot': torch.hypot, 'fmax': torch.fmax, 'fmin': torch.fmin,
    'logaddexp': torch.logaddexp, 'logaddexp2': torch.logaddexp2, 'xlogy': torch.xlogy,
    'copysign': torch.copysign,
}


def divisor(dt, shape):
    # away from 0 so the quotients (and remainder's kinks) are well inside float32's precision
    mag = rnd(*shape, dtype=torch.float64, lo=0.5, hi=2.5)
    sign = torch.randint(0, 2, shape, generator=GEN).double() * 2 - 1
    return (mag * sign).to(dt)


def gen_unary(cases):
    for name, (fn, (lo, hi)) in UNARY.items():
        for dt in (F32, F64):
            x = rnd(3, 4, dtype=dt, lo=lo, hi=hi)
            cases.append(make_case('%s/%s' % (name, fl(dt)), name, [x], fn, diff=(0,)))
    # integer inputs: rounding keeps the dtype, the rest computes in float32
    for name in ('floor', 'ceil', 'trunc', 'reciprocal', 'exp2', 'log2', 'atan', 'erf', 'square',
                 'sinh'):
        x = nonzero_int(-5, 6, 7)
        cases.append(make_case('%s/i64' % name, name, [x], UNARY[name][0]))
    x = rint(-100, 100, 5, dtype=torch.int32)
    cases.append(make_case('floor/i32', 'floor', [x], torch.floor))
    # special values: inf, nan, signed zeros, halves (round half to even), erfinv's ends
    special = torch.tensor([0.5, 1.5, 2.5, -0.5, -2.5, 0.0, -0.0, math.inf, -math.inf, math.nan,
                            1e-30, 7.123456])
    for name in ('floor', 'ceil', 'trunc', 'frac', 'round'):
        fn = torch.round if name == 'round' else UNARY[name][0]
        cases.append(make_case('%s/special' % name, name, [special], fn))
    cases.append(make_case('erfinv/special', 'erfinv',
                           [torch.tensor([-1.0, 1.0, 0.0, 0.999, -0.999999, 1.5, math.nan])],
                           torch.erfinv))
    cases.append(make_case('erfinv/f64/tail', 'erfinv',
                           [torch.tensor([1 - 1e-7, -1 + 1e-5, 1e-8, 0.3], dtype=F64)],
                           torch.erfinv))
    for dt in (F32, F64):
        x = rnd(3, 4, dtype=dt, lo=-50, hi=50)
        cases.append(make_case('round/%s' % fl(dt), 'round', [x], torch.round, diff=(0,)))
        for d in (2, -1):
            cases.append(make_case('round/%s/decimals%d' % (fl(dt), d), 'round', [x],
                                   lambda t, d=d: torch.round(t, decimals=d), diff=(0,),
                                   opts={'decimals': d}))
    cases.append(make_case('round/i64', 'round', [rint(-9, 9, 5)], torch.round))
    # isnan / isinf / isfinite / nan_to_num
    for name, fn in (('isnan', torch.isnan), ('isinf', torch.isinf),
                     ('isfinite', torch.isfinite)):
        cases.append(make_case('%s/f32' % name, name, [special], fn))
        cases.append(make_case('%s/i64' % name, name, [rint(-3, 3, 4)], fn))
    for dt in (F32, F64):
        x = torch.tensor([1.0, math.nan, math.inf, -math.inf, -2.5], dtype=dt)
        cases.append(make_case('nan_to_num/%s' % fl(dt), 'nan_to_num', [x], torch.nan_to_num,
                               diff=(0,)))
        cases.append(make_case('nan_to_num/%s/values' % fl(dt), 'nan_to_num', [x],
                               lambda t: torch.nan_to_num(t, nan=7.0, posinf=100.0, neginf=-9.0),
                               diff=(0,), opts={'nan': 7.0, 'posinf': 100.0, 'neginf': -9.0}))


def gen_binary(cases):
    for name, fn in BINARY.items():
        for dt in (F32, F64):
            a = rnd(3, 4, dtype=dt)
            b = divisor(dt, (3, 4)) if name in ('remainder', 'fmod') else rnd(3, 4, dtype=dt)
            if name == 'xlogy':
                b = rnd(3, 4, dtype=dt, lo=0.2, hi=3)
            diff = (0, 1)
            cases.append(make_case('%s/%s' % (name, fl(dt)), name, [a, b], fn, diff=diff))
            # broadcasting, and a number on the right
            a2 = rnd(2, 3, 1, dtype=dt)
            b2 = divisor(dt, (4,)) if name in ('remainder', 'fmod') else rnd(4, dtype=dt, lo=0.2)
            cases.append(make_case('%s/%s/broadcast' % (name, fl(dt)), name, [a2, b2], fn,
                                   diff=(0, 1)))
        # (a 0-dim tensor for PyTorch, which takes no number in some of these: same promotion)
        cases.append(make_case('%s/f32/number' % name, name, [rnd(5), 1.5],
                               lambda a, b, fn=fn: fn(a, torch.tensor(b)), diff=(0,)))
    # NaN handling of fmax/fmin and xlogy, infinities of logaddexp, zeros of xlogy/copysign
    nan, inf = math.nan, math.inf
    a = torch.tensor([nan, 1.0, nan, -inf, inf, 0.0, -0.0, 2.0])
    b = torch.tensor([2.0, nan, nan, -inf, inf, -1.0, 3.0, 0.0])
    for name in ('fmax', 'fmin', 'logaddexp', 'logaddexp2', 'atan2', 'hypot'):
        cases.append(make_case('%s/special' % name, name, [a, b], BINARY[name]))
    # (the fixture writes NaN as 0/0, whose sign bit is the platform's: copysign reads it, so
    # no NaN on its right)
    cases.append(make_case('copysign/special', 'copysign', [a, b.nan_to_num(nan=-4.0)],
                           torch.copysign))
    cases.append(make_case('xlogy/special', 'xlogy',
                           [torch.tensor([0.0, 0.0, 1.0, 2.0, 0.0]),
                            torch.tensor([0.0, nan, 0.0, inf, 2.0])], torch.xlogy))
    # integer remainder / fmod / floor_divide: Python's sign rules, every sign combination
    ia = torch.tensor([7, -7, 7, -7, 0, 5, -1, 123456789012])
    ib = torch.tensor([3, 3, -3, -3, 4, 5, 2, -1000])
    for name, fn in (('remainder', torch.remainder), ('fmod', torch.fmod),
                     ('floor_divide', torch.floor_divide), ('fmax', torch.fmax),
                     ('fmin', torch.fmin)):
        cases.append(make_case('%s/i64' % name, name, [ia, ib], fn))
        cases.append(make_case('%s/i32' % name, name,
                               [ia[:7].to(torch.int32), ib[:7].to(torch.int32)], fn))
    cases.append(make_case('remainder/i64/number', 'remainder', [ia, 4], torch.remainder))
    cases.append(make_case('remainder/number_tensor', 'remainder', [5, torch.tensor([3, -3])],
                           torch.remainder))
    cases.append(make_case('remainder/i64_f32', 'remainder', [ia[:5], torch.tensor(2.5)],
                           torch.remainder))
    for dt in (F32, F64):
        fa = torch.tensor([7.0, -7.0, 7.5, -7.5, 0.0, -0.0, 1.0, -1.0], dtype=dt)
        fb = torch.tensor([2.0, 2.0, -2.0, -2.0, 3.0, 3.0, 0.0, 0.0], dtype=dt)
        for name, fn in (('remainder', torch.remainder), ('fmod', torch.fmod),
                         ('floor_divide', torch.floor_divide)):
            cases.append(make_case('%s/%s/signs' % (name, fl(dt)), name, [fa, fb], fn))
        x = rnd(4, 5, dtype=dt, lo=-20, hi=20)
        y = divisor(dt, (4, 5))
        cases.append(make_case('floor_divide/%s' % fl(dt), 'floor_divide', [x, y],
                               torch.floor_divide))
    # div with a rounding mode: values, integer dtypes kept, zero gradients
    for mode in ('floor', 'trunc'):
        for dt in (F32, F64):
            x = rnd(3, 4, dtype=dt, lo=-9, hi=9)
            y = divisor(dt, (3, 4))
            cases.append(make_case('div/%s/%s' % (mode, fl(dt)), 'div', [x, y],
                                   lambda a, b, m=mode: torch.div(a, b, rounding_mode=m),
                                   diff=(0, 1), opts={'rounding_mode': mode}))
        cases.append(make_case('div/%s/i64' % mode, 'div', [ia, ib],
                               lambda a, b, m=mode: torch.div(a, b, rounding_mode=m),
                               opts={'rounding_mode': mode}))
        cases.append(make_case('div/%s/i64_number' % mode, 'div', [ia, 2],
                               lambda a, b, m=mode: torch.div(a, b, rounding_mode=m),
                               opts={'rounding_mode': mode}))
    # bitwise and shifts on int64, int32, uint8 and bool; logical on mixed dtypes
    for dt in (I64, torch.int32, torch.uint8):
        lo = 0 if dt == torch.uint8 else -50
        a, b = rint(lo, 100, 6, dtype=dt), rint(lo, 100, 6, dtype=dt)
        for name, fn in (('bitwise_and', torch.bitwise_and), ('bitwise_or', torch.bitwise_or),
                         ('bitwise_xor', torch.bitwise_xor)):
            cases.append(make_case('%s/%s' % (name, str(dt)[6:]), name, [a, b], fn))
        cases.append(make_case('bitwise_not/%s' % str(dt)[6:], 'bitwise_not', [a],
                               torch.bitwise_not))
        s = rint(0, 7, 6, dtype=dt)
        cases.append(make_case('bitwise_left_shift/%s' % str(dt)[6:], 'bitwise_left_shift',
                               [a, s], lambda x, y: x << y))
        cases.append(make_case('bitwise_right_shift/%s' % str(dt)[6:], 'bitwise_right_shift',
                               [a, s], lambda x, y: x >> y))
    ba = torch.tensor([True, True, False, False])
    bb = torch.tensor([True, False, True, False])
    for name, fn in (('bitwise_and', torch.bitwise_and), ('bitwise_or', torch.bitwise_or),
                     ('bitwise_xor', torch.bitwise_xor), ('logical_and', torch.logical_and),
                     ('logical_or', torch.logical_or), ('logical_xor', torch.logical_xor)):
        cases.append(make_case('%s/bool' % name, name, [ba, bb], fn))
    cases.append(make_case('bitwise_not/bool', 'bitwise_not', [ba], torch.bitwise_not))
    fa = torch.tensor([0.0, 1.5, -2.0, 0.0, math.nan])
    fb = torch.tensor([3, 0, 2, 0, 0])
    for name, fn in (('logical_and', torch.logical_and), ('logical_or', torch.logical_or),
                     ('logical_xor', torch.logical_xor)):
        cases.append(make_case('%s/mixed' % name, name, [fa, fb], fn))
    cases.append(make_case('logical_not/f32', 'logical_not', [fa], torch.logical_not))


def gen_compose(cases):
    for dt in (F32, F64):
        a, b = rnd(3, 4, dtype=dt), rnd(3, 4, dtype=dt)
        w = rnd(3, 4, dtype=dt, lo=0, hi=1)
        cases.append(make_case('lerp/%s' % fl(dt), 'lerp', [a, b, w], torch.lerp,
                               diff=(0, 1, 2)))
        cases.append(make_case('lerp/%s/number' % fl(dt), 'lerp', [a, b, 0.25], torch.lerp,
                               diff=(0, 1)))
        c = rnd(4, dtype=dt, lo=0.5, hi=2)
        for name, fn in (('addcmul', torch.addcmul), ('addcdiv', torch.addcdiv)):
            cases.append(make_case('%s/%s' % (name, fl(dt)), name, [a, b, c], fn,
                                   diff=(0, 1, 2)))
            cases.append(make_case('%s/%s/value' % (name, fl(dt)), name, [a, b, c],
                                   lambda x, y, z, fn=fn: fn(x, y, z, value=-0.5),
                                   diff=(0, 1, 2), opts={'value': -0.5}))
        lo, hi = rnd(3, 1, dtype=dt, lo=-2, hi=0), rnd(4, dtype=dt, lo=0, hi=2)
        x = rnd(3, 4, dtype=dt)
        cases.append(make_case('clamp_tensor/%s' % fl(dt), 'clamp_tensor', [x, lo, hi],
                               torch.clamp, diff=(0, 1, 2)))
        cases.append(make_case('clamp_tensor/%s/min_only' % fl(dt), 'clamp_tensor', [x, lo],
                               lambda t, m: torch.clamp(t, min=m), diff=(0, 1)))
    # min > max gives max; NaN in x stays NaN
    x = torch.tensor([math.nan, 1.0, -5.0, 5.0])
    cases.append(make_case('clamp_tensor/special', 'clamp_tensor',
                           [x, torch.tensor([0.0, 3.0, -1.0, 0.0]), torch.tensor([1.0, 2.0, 1.0, 1.0])],
                           torch.clamp))


def gen_compare_create(cases):
    nan, inf = math.nan, math.inf
    a = torch.tensor([1.0, 1.0 + 1e-6, 1.0 + 1e-3, inf, -inf, nan, 0.0, 1e-9])
    b = torch.tensor([1.0, 1.0, 1.0, inf, inf, nan, 1e-9, 0.0])
    cases.append(make_case('isclose/f32', 'isclose', [a, b], torch.isclose))
    cases.append(make_case('isclose/f32/tolerances', 'isclose', [a, b],
                           lambda x, y: torch.isclose(x, y, rtol=1e-2, atol=1e-3, equal_nan=True),
                           opts={'rtol': 1e-2, 'atol': 1e-3, 'equal_nan': True}))
    cases.append(make_case('isclose/f64/broadcast', 'isclose',
                           [rnd(3, 1, dtype=F64), rnd(4, dtype=F64)],
                           lambda x, y: torch.isclose(x, y, atol=1.0), opts={'atol': 1.0}))
    cases.append(make_case('isclose/i64', 'isclose', [torch.tensor([1, 2, 3]),
                                                      torch.tensor([1, 3, 3])], torch.isclose))
    for dt, tag in ((F32, 'f32'), (F64, 'f64'), (I64, 'i64')):
        for start, end, steps in ((0.0, 1.0, 5), (-3.5, 10.25, 7), (2.0, -2.0, 6), (1.0, 1.0, 1),
                                  (0.0, 10.0, 4), (0.0, 1.0, 0)):
            cases.append(make_case('linspace/%s/%g_%g_%d' % (tag, start, end, steps), 'linspace',
                                   [start, end, steps],
                                   lambda s, e, n, dt=dt: torch.linspace(s, e, n, dtype=dt),
                                   opts={'dtype': tag}))
        cases.append(make_case('logspace/%s' % tag, 'logspace', [0.0, 3.0, 4],
                               lambda s, e, n, dt=dt: torch.logspace(s, e, n, dtype=dt),
                               opts={'dtype': tag}))
    cases.append(make_case('logspace/f64/base2', 'logspace', [-2.0, 5.0, 8],
                           lambda s, e, n: torch.logspace(s, e, n, base=2.0, dtype=F64),
                           opts={'dtype': 'f64', 'base': 2.0}))


def gen_norm(cases):
    # PyTorch's positional signature: norm(p, dim, keepdim)
    for dt in (F32, F64):
        x = rnd(3, 4, dtype=dt)
        for p in (1, 2, 3, math.inf):
            cases.append(make_case('norm/%s/p%s' % (fl(dt), p), 'norm', [x],
                                   lambda t, p=p: t.norm(p), diff=(0,), opts={'p': p}))
            cases.append(make_case('norm/%s/p%s/dim1' % (fl(dt), p), 'norm', [x],
                                   lambda t, p=p: t.norm(p, 1), diff=(0,),
                                   opts={'p': p, 'dim': 1}))
        cases.append(make_case('norm/%s/p1/dim0/keepdim' % fl(dt), 'norm', [x],
                               lambda t: t.norm(1, 0, True), diff=(0,),
                               opts={'p': 1, 'dim': 0, 'keepdim': True}))


def gen_div_(cases):
    """div_ with a rounding mode (drawn after every other case, so no other value moved): the
    in-place form of div's rounded modes, on a clone so the gradients (zero) reach the leaves;
    integer tensors stay integer, with a tensor or a number divisor."""
    ia = torch.tensor([7, -7, 7, -7, 0, 9], dtype=I64)
    ib = torch.tensor([2, 2, -2, -2, 5, -4], dtype=I64)
    for mode in ('floor', 'trunc'):
        x = rnd(3, 4, dtype=F32, lo=-9, hi=9)
        y = divisor(F32, (4,))  # broadcast over the rows
        cases.append(make_case('div_/%s/f32' % mode, 'div_', [x, y],
                               lambda a, b, m=mode: a.clone().div_(b, rounding_mode=m),
                               diff=(0, 1), opts={'rounding_mode': mode}))
        cases.append(make_case('div_/%s/i64' % mode, 'div_', [ia, ib],
                               lambda a, b, m=mode: a.clone().div_(b, rounding_mode=m),
                               opts={'rounding_mode': mode}))
        cases.append(make_case('div_/%s/i64_number' % mode, 'div_', [ia, -3],
                               lambda a, b, m=mode: a.clone().div_(b, rounding_mode=m),
                               opts={'rounding_mode': mode}))
    cases.append(make_case('div_/none/f64', 'div_', [rnd(5, dtype=F64), divisor(F64, (5,))],
                           lambda a, b: a.clone().div_(b), diff=(0, 1)))


def gen():
    cases = []
    gen_unary(cases)
    gen_binary(cases)
    gen_compose(cases)
    gen_compare_create(cases)
    gen_norm(cases)
    gen_div_(cases)
    return write_fixture('math', cases, 'the pointwise functions and norm '
                         '(tools/gen_math_fixtures.py)')


if __name__ == '__main__':
    sys.exit(fixture_main(__doc__, 'tools/gen_math_fixtures.py', gen))
