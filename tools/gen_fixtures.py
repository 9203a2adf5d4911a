#!/usr/bin/python3
"""tools/gen_fixtures.py: PyTorch reference values for the busted specs (spec/fixtures/*.lua).

Regenerate (needs PyTorch; Debian's python3-torch is enough, so use /usr/bin/python3):

    /usr/bin/python3 tools/gen_fixtures.py            # writes spec/fixtures/*.lua
    /usr/bin/python3 tools/gen_fixtures.py --check    # fails if the committed files differ beyond
                                                      # rounding noise (tools/fixture_compare.py)

The output is committed: the specs never need PyTorch. Everything is seeded, so a rerun with the
same PyTorch version on the same machine gives identical files; on another machine the BLAS may
round the last bits of a product otherwise, which --check lets pass (tools/fixture_compare.py).

Each fixture file is Lua source returning a list of cases:

    { name = 'add/f32/broadcast',     -- unique within the file, used as the spec's test name
      op = 'add',                      -- key into the spec's table of runners
      inputs = { T1, T2, 2.5 },        -- tensors, or Lua numbers (integer or float subtype)
      t_inputs = { 1 },                -- inputs the op gets transposed (x:t(), non-contiguous)
      opts = { dim = 1 },              -- op options (what the runner passes on), may be absent
      outputs = { T, ... },            -- expected results, in the runner's order
      grad_out = T,                    -- upstream gradient for outputs[1] (differentiable cases)
      grads = { [1] = T, [2] = T },    -- expected gradients of the inputs that require grad
      rtol = 1e-5, atol = 1e-6 }       -- optional tolerance overrides

A tensor is { shape = {2, 3}, dtype = 'float32', values = { row-major flat values } }.
Floats are written so that they round-trip exactly (float32 values with the shortest float32
repr, checked; float64 with repr); inf and nan as 1/0, -1/0 and 0/0; bools as true/false.
Indices (dims, positions, class labels) are 0-based, as in the Lua API.

Large cases (above the CPU kernels' parallel threshold) keep the files small: their inputs are
{shape, dtype, fill = v} or {shape, dtype, pattern = {mul, mod, add, div}} (element i is
((i * mul) % mod + add) / div, see Pattern), and their expected outputs and gradients are
{shape, dtype, digest = {sum, abs_sum, weighted}} (see Digest), computed in float64.
spec/support/helpers.lua reads all of these forms.
"""
import argparse
import math
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fixture_compare import fixture_difference  # noqa: E402  (--check: same data, not bytes)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT_DIR = os.path.join(ROOT, 'spec', 'fixtures')

DTYPE_NAMES = {
    torch.float32: 'float32', torch.float64: 'float64', torch.float16: 'float16',
    torch.bfloat16: 'bfloat16', torch.int64: 'int64', torch.int32: 'int32',
    torch.uint8: 'uint8', torch.bool: 'bool', torch.int8: 'int8', torch.int16: 'int16',
}
DTYPES = {v: k for k, v in DTYPE_NAMES.items()}
F32, F64, I64 = torch.float32, torch.float64, torch.int64

# ---------------------------------------------------------------------------------------------
# Lua writer


def lua_float(v, dtype):
    if math.isnan(v):
        return '0/0'
    if math.isinf(v):
        return '1/0' if v > 0 else '-1/0'
    if dtype in (torch.float32, torch.float16, torch.bfloat16):
        s = repr(np.float32(v))  # shortest string that reads back as the same float32
        if float(np.float32(float(s))) != v:
            s = repr(float(v))
    else:
        s = repr(float(v))
    if 'e' not in s and '.' not in s and 'n' not in s:
        s += '.0'  # keep Lua's float subtype
    return s


class Tensor:
    """Marks a torch tensor for the writer."""

    def __init__(self, t):
        self.t = t.detach().cpu()


class Fill(Tensor):
    """A tensor of one repeated value, written as {shape, dtype, fill = v} to keep files small."""

    def __init__(self, t):
        super().__init__(t)
        flat = t.reshape(-1)
        assert bool((flat == flat[0]).all())


class Pattern(Tensor):
    """A large input given by a formula instead of its values: element i (0-based, row-major) is
    ((i * mul) % mod + add) / div, computed in float64 (integers exact, one correctly rounded
    division) and then converted to the dtype, so Lua rebuilds exactly the same tensor. Written
    as {shape, dtype, pattern = {mul, mod, add, div}}; div is 1 for integer dtypes."""

    def __init__(self, shape, dtype=F32, mul=7919, mod=1001, add=-500, div=250):
        n = int(np.prod(shape))
        i = torch.arange(n, dtype=torch.int64)
        v = (i * mul) % mod + add
        if dtype.is_floating_point:
            v = v.double() / div
        else:
            assert div == 1  # integers as they are; bool: nonzero is true
        super().__init__(v.to(dtype).reshape(shape))
        self.args = (mul, mod, add, div)


class Digest(Tensor):
    """An expected large result, written as three float64 sums instead of its values:
    {shape, dtype, digest = {sum, abs_sum, weighted}}, weighted = sum of v_i * ((i % 7) - 3)
    (i 0-based, row-major) so a value in the wrong place changes it. values: the tensor to sum
    (PyTorch's result computed in float64 from the same inputs; t gives shape and dtype)."""

    def __init__(self, t, values):
        super().__init__(t)
        assert tuple(values.shape) == tuple(t.shape)
        self.v = values.detach()

    def digest(self):
        v = self.v.reshape(-1).double()
        w = (torch.arange(v.numel()) % 7 - 3).double()
        return (float(v.sum()), float(v.abs().sum()), float((v * w).sum()))


def lua_value(v, indent=''):
    if isinstance(v, Pattern):
        t = v.t
        return "{shape = {%s}, dtype = '%s', pattern = {%d, %d, %d, %d}}" % (
            ', '.join(str(s) for s in t.shape), DTYPE_NAMES[t.dtype], *v.args)
    if isinstance(v, Digest):
        t = v.t
        return "{shape = {%s}, dtype = '%s', digest = {%s}}" % (
            ', '.join(str(s) for s in t.shape), DTYPE_NAMES[t.dtype],
            ', '.join(lua_float(x, torch.float64) for x in v.digest()))
    if isinstance(v, Fill):
        t = v.t
        return "{shape = {%s}, dtype = '%s', fill = %s}" % (
            ', '.join(str(s) for s in t.shape), DTYPE_NAMES[t.dtype],
            lua_float(float(t.reshape(-1)[0]), t.dtype))
    if isinstance(v, Tensor):
        t = v.t
        flat = t.reshape(-1)
        if t.dtype == torch.bool:
            vals = ['true' if b else 'false' for b in flat.tolist()]
        elif t.dtype.is_floating_point:
            vals = [lua_float(x, t.dtype) for x in flat.double().tolist()]
        else:
            vals = [str(int(x)) for x in flat.tolist()]
        shape = ', '.join(str(s) for s in t.shape)
        return "{shape = {%s}, dtype = '%s', values = {%s}}" % (
            shape, DTYPE_NAMES[t.dtype], ', '.join(vals))
    if isinstance(v, torch.Tensor):
        return lua_value(Tensor(v), indent)
    if isinstance(v, bool):
        return 'true' if v else 'false'
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return lua_float(v, torch.float64)
    if isinstance(v, str):
        return "'%s'" % v.replace('\\', '\\\\').replace("'", "\\'")
    if v is None:
        return 'nil'
    if isinstance(v, (list, tuple)):
        return '{' + ', '.join(lua_value(x, indent) for x in v) + '}'
    if isinstance(v, dict):
        parts = []
        for k, x in v.items():
            if isinstance(k, int):
                key = '[%d]' % k
            else:
                key = k
            parts.append('%s = %s' % (key, lua_value(x, indent)))
        return '{' + ', '.join(parts) + '}'
    raise TypeError('cannot write %r' % (v,))


def write_fixture(name, cases, header):
    names = set()
    lines = ['-- spec/fixtures/%s.lua: %s' % (name, header),
             '-- Generated by tools/gen_fixtures.py with torch %s; do not edit by hand.'
             % torch.__version__,
             'return {']
    order = ['name', 'op', 'inputs', 't_inputs', 'opts', 'outputs', 'grad_out', 'grads', 'rtol',
             'atol', 'note']
    for c in cases:
        assert c['name'] not in names, 'duplicate case ' + c['name']
        names.add(c['name'])
        fields = []
        for k in order:
            if k in c and c[k] is not None:
                fields.append('    %s = %s,' % (k, lua_value(c[k])))
        for k in c:
            assert k in order, k
        lines.append('  {')
        lines.extend(fields)
        lines.append('  },')
    lines.append('}')
    return name, '\n'.join(lines) + '\n'


def fixture_main(doc, tool, render):
    """The command line of a generator of one fixture file: render() -> (name, text) is written to
    spec/fixtures/<name>.lua (or --out), or with --check compared with the file there (exit 1 when
    it differs beyond rounding noise: tools/fixture_compare.py). tool names the generator in the
    message."""
    ap = argparse.ArgumentParser(description=doc.split('\n')[0])
    ap.add_argument('--check', action='store_true', help='compare with the file on disk')
    ap.add_argument('--out', default=OUT_DIR)
    args = ap.parse_args()
    torch.set_num_threads(1)  # reproducible reductions
    name, text = render()
    path = os.path.join(args.out, name + '.lua')
    if args.check:
        old = open(path).read() if os.path.exists(path) else None
        diff = fixture_difference(old, text)
        if diff:
            print('stale fixture (rerun %s): %s (%s)' % (tool, path, diff))
            return 1
        return 0
    os.makedirs(args.out, exist_ok=True)
    with open(path, 'w') as f:
        f.write(text)
    print('%-50s %7d bytes' % (os.path.relpath(path, ROOT), len(text)))
    return 0


# ---------------------------------------------------------------------------------------------
# case builders

GEN = torch.Generator().manual_seed(20240601)


# Random values are drawn in float32 even for float64 tensors: exact in both dtypes and shorter
# to write; results and gradients of float64 cases are still computed in float64.
def rnd(*shape, dtype=F32, lo=-2.0, hi=2.0):
    return (torch.rand(shape, generator=GEN, dtype=torch.float64) * (hi - lo) + lo).float().to(dtype)


def rndn(*shape, dtype=F32, scale=1.0):
    return (torch.randn(shape, generator=GEN, dtype=torch.float64) * scale).float().to(dtype)


def away(*shape, dtype=F32, lo=0.2, hi=2.0):
    """Values with |v| in [lo, hi], random signs: away from kinks at 0."""
    mag = rnd(*shape, dtype=torch.float64, lo=lo, hi=hi)
    sign = torch.randint(0, 2, shape, generator=GEN).double() * 2 - 1
    return (mag * sign).float().to(dtype)


def rint(lo, hi, *shape):
    return torch.randint(lo, hi, shape, generator=GEN, dtype=I64)


def make_case(name, op, inputs, fn, diff=(), opts=None, rtol=None, atol=None, note=None,
              large=False, t_inputs=()):
    """Runs fn(*inputs) in PyTorch; diff lists the positions (0-based here) of the inputs whose
    gradients are recorded for a random upstream gradient of the first output. large: outputs
    and gradients are written as digests and the upstream gradient as a pattern (for sizes
    above the kernels' parallel threshold, without megabytes of values)."""
    ins = []
    for i, x in enumerate(inputs):
        if isinstance(x, (Fill, Pattern)):
            x = x.t
        if isinstance(x, torch.Tensor):
            x = x.detach().clone()
            if i in diff:
                x.requires_grad_(True)
        ins.append(x)
    def run(ins):
        # t_inputs: positions (0-based) of 2-D inputs that the op sees transposed
        ins = [x.t() if i in t_inputs else x for i, x in enumerate(ins)]
        outs = fn(*ins)
        return tuple(outs) if isinstance(outs, (tuple, list)) else (outs,)
    outs = run(ins)
    if large:
        # the digests are of results computed in float64 from the same inputs: a float32 sum of
        # 10^5 values is itself off by more than the tolerance when terms cancel
        ins64 = [x.detach().double().requires_grad_(x.requires_grad)
                 if isinstance(x, torch.Tensor) and x.dtype.is_floating_point else x for x in ins]
        outs64 = run(ins64)
    case = {'name': name, 'op': op,
            'inputs': [Tensor(x) if isinstance(x, torch.Tensor) else x for x in inputs],
            'opts': opts,
            'outputs': [Digest(o, o64) for o, o64 in zip(outs, outs64)] if large
            else [Tensor(o) for o in outs],
            'rtol': rtol, 'atol': atol, 'note': note,
            't_inputs': [i + 1 for i in t_inputs] or None}
    if diff:
        first = outs[0]
        if large:
            g = Pattern(tuple(first.shape), first.dtype, mul=31, mod=17, add=-8, div=16)
            case['grad_out'] = g
            grads = torch.autograd.grad(first, [ins[i] for i in diff], g.t, allow_unused=True)
            grads64 = torch.autograd.grad(outs64[0], [ins64[i] for i in diff], g.t.double(),
                                          allow_unused=True)
        else:
            g = rndn(*first.shape, dtype=first.dtype)
            case['grad_out'] = Tensor(g)
            grads = torch.autograd.grad(first, [ins[i] for i in diff], g, allow_unused=True)
        gd = {}
        for k, (i, gi) in enumerate(zip(diff, grads)):
            if gi is None:
                gi = torch.zeros_like(ins[i])
            if large:
                g64 = grads64[k] if grads64[k] is not None else gi.double()
                gd[i + 1] = Digest(gi, g64)
            else:
                gd[i + 1] = Tensor(gi)  # Lua positions are 1-based
        case['grads'] = gd
    return case


def fl(dtype):
    return {F32: 'f32', F64: 'f64'}[dtype]


LOWP = {torch.float16: 'f16', torch.bfloat16: 'bf16'}


def lowp_cases(name, op, inputs, fn, opts=None):
    """float16 and bfloat16 versions of a case (forward only): inputs rounded to the dtype, the
    result computed in float32 (as PyTorch's CPU kernels do for these dtypes, and where it has no
    kernel for them) and rounded back."""
    out = []
    for dt, tag in LOWP.items():
        ins = [x.to(dt) if isinstance(x, torch.Tensor) and x.dtype.is_floating_point else x
               for x in inputs]

        def run(*xs, dt=dt):
            ys = fn(*[x.float() if isinstance(x, torch.Tensor) and x.dtype.is_floating_point
                      else x for x in xs])
            return ys.to(dt)
        out.append(make_case('%s/%s/%s' % (op, tag, name), op, ins, run, opts=opts))
    return out


def next_prime(n):
    def is_prime(k):
        return k > 1 and all(k % d for d in range(2, int(k ** 0.5) + 1))
    while not is_prime(n):
        n += 1
    return n


def distinct_pattern(shape, dtype=F32, scale=4.0):
    """A pattern whose values are all different (mul is a unit mod a prime > numel): no ties
    for max, min, topk and max pooling. Values lie in about [-scale/2, scale/2]."""
    n = int(np.prod(shape))
    p = next_prime(n + 1)
    return Pattern(shape, dtype, mul=7919, mod=p, add=-(p // 2), div=int(p / scale))


# Sizes for the large cases: above the CPU kernels' parallel threshold (32768 elements), so the
# specs (run with OMP_NUM_THREADS=2) exercise the multi-threaded paths.
BIG = (300, 257)


# ---------------------------------------------------------------------------------------------
# pointwise

def gen_pointwise():
    cases = []
    unary = {
        'neg': (torch.neg, lambda s, d: rnd(*s, dtype=d)),
        'exp': (torch.exp, lambda s, d: rnd(*s, dtype=d, lo=-3, hi=3)),
        'log': (torch.log, lambda s, d: rnd(*s, dtype=d, lo=0.1, hi=4)),
        'sqrt': (torch.sqrt, lambda s, d: rnd(*s, dtype=d, lo=0.1, hi=4)),
        'rsqrt': (torch.rsqrt, lambda s, d: rnd(*s, dtype=d, lo=0.1, hi=4)),
        'abs': (torch.abs, lambda s, d: away(*s, dtype=d)),
        'sin': (torch.sin, lambda s, d: rnd(*s, dtype=d, lo=-4, hi=4)),
        'cos': (torch.cos, lambda s, d: rnd(*s, dtype=d, lo=-4, hi=4)),
        'tanh': (torch.tanh, lambda s, d: rnd(*s, dtype=d, lo=-3, hi=3)),
        'sigmoid': (torch.sigmoid, lambda s, d: rnd(*s, dtype=d, lo=-5, hi=5)),
        'relu': (torch.relu, lambda s, d: away(*s, dtype=d)),
        'gelu': (lambda x: F.gelu(x), lambda s, d: rnd(*s, dtype=d, lo=-4, hi=4)),
        'silu': (F.silu, lambda s, d: rnd(*s, dtype=d, lo=-5, hi=5)),
    }
    for op, (fn, gen) in unary.items():
        for dt in (F32, F64):
            cases.append(make_case('%s/%s' % (op, fl(dt)), op, [gen((3, 4), dt)], fn, diff=[0]))
        # a non-contiguous input: the runner transposes it first
        x = gen((4, 3), F32)
        cases.append(make_case('%s/f32/transposed' % op, op, [x], lambda x, fn=fn: fn(x.t()),
                               diff=[0], opts={'transpose': True}))
    # special values (forward only)
    inf, nan = float('inf'), float('nan')
    special = torch.tensor([0.0, -0.0, 1.0, -1.0, inf, -inf, nan, 100.0, -100.0, 1e-30])
    for op in ('neg', 'exp', 'log', 'sqrt', 'rsqrt', 'abs', 'tanh', 'sigmoid', 'relu', 'gelu',
               'silu'):
        cases.append(make_case('%s/f32/special' % op, op, [special], unary[op][0]))
    # gelu with the tanh approximation
    for dt in (F32, F64):
        cases.append(make_case('gelu_tanh/%s' % fl(dt), 'gelu', [rnd(3, 4, dtype=dt, lo=-4, hi=4)],
                               lambda x: F.gelu(x, approximate='tanh'), diff=[0],
                               opts={'approximate': 'tanh'}))

    # clamp: both bounds, min only, max only (values away from the bounds)
    def clamp_input(dt):
        x = rnd(3, 5, dtype=torch.float64, lo=-2, hi=2)
        x = torch.where((x.abs() - 0.5).abs() < 0.05, x + 0.2, x)
        return x.to(dt)
    for dt in (F32, F64):
        cases.append(make_case('clamp/%s/both' % fl(dt), 'clamp', [clamp_input(dt)],
                               lambda x: torch.clamp(x, -0.5, 0.5), diff=[0],
                               opts={'min': -0.5, 'max': 0.5}))
    cases.append(make_case('clamp/f32/min_only', 'clamp', [clamp_input(F32)],
                           lambda x: torch.clamp(x, min=-0.5), diff=[0], opts={'min': -0.5}))
    cases.append(make_case('clamp/f32/max_only', 'clamp', [clamp_input(F32)],
                           lambda x: torch.clamp(x, max=0.5), diff=[0], opts={'max': 0.5}))
    cases.append(make_case('clamp/int64', 'clamp', [rint(-10, 10, 2, 6)],
                           lambda x: torch.clamp(x, -3, 4), opts={'min': -3, 'max': 4}))

    # binary arithmetic, written with Python's operators so a number may be on either side
    binary = {
        'add': lambda a, b: a + b, 'sub': lambda a, b: a - b, 'mul': lambda a, b: a * b,
        'div': lambda a, b: a / b, 'pow': lambda a, b: a ** b,
    }

    def operand(op, shape, dt):
        if op == 'pow':
            return rnd(*shape, dtype=dt, lo=0.5, hi=2.0)
        if op == 'div':
            return away(*shape, dtype=dt, lo=0.5, hi=2.0)
        return rnd(*shape, dtype=dt)

    def exponent(op, shape, dt):
        if op == 'pow':
            return rnd(*shape, dtype=dt, lo=-2.0, hi=2.0)
        return operand(op, shape, dt)

    for op, fn in binary.items():
        for dt in (F32, F64):
            cases.append(make_case('%s/%s/same_shape' % (op, fl(dt)), op,
                                   [operand(op, (3, 4), dt), exponent(op, (3, 4), dt)], fn,
                                   diff=[0, 1]))
        # broadcasting on both sides: (2,3,1) with (4,) and (3,1) with (1,4)
        cases.append(make_case('%s/f32/broadcast_3d_1d' % op, op,
                               [operand(op, (2, 3, 1), F32), exponent(op, (4,), F32)], fn,
                               diff=[0, 1]))
        cases.append(make_case('%s/f64/broadcast_both' % op, op,
                               [operand(op, (3, 1), F64), exponent(op, (1, 4), F64)], fn,
                               diff=[0, 1]))
        # a Lua number on the right and on the left (float32 stays float32)
        num = 2.5 if op != 'pow' else 1.5
        cases.append(make_case('%s/f32/number_right' % op, op, [operand(op, (2, 3), F32), num],
                               fn, diff=[0]))
        cases.append(make_case('%s/f32/number_left' % op, op, [num, exponent(op, (2, 3), F32)],
                               fn, diff=[1]))
        # a float32 tensor with a Lua integer stays float32
        cases.append(make_case('%s/f32/integer_right' % op, op, [operand(op, (2, 3), F32), 2],
                               fn, diff=[0]))
        # int64 with int64 (pow: small non-negative exponents); int64 / int64 is float32
        ib = rint(1, 6, 2, 3) if op != 'pow' else rint(0, 3, 2, 3)
        cases.append(make_case('%s/int64/int64' % op, op, [rint(1, 6, 2, 3), ib], fn))
        # int64 with a float tensor: the float dtype wins, gradient only for the float side
        cases.append(make_case('%s/int64/f32' % op, op,
                               [rint(1, 6, 2, 3), exponent(op, (2, 3), F32)], fn, diff=[1]))
        # int64 tensor with a Lua float: float32 (the default dtype)
        cases.append(make_case('%s/int64/float_number' % op, op, [rint(1, 6, 2, 3), 1.5], fn))
        # int64 tensor with a Lua integer stays int64 (but / gives float32)
        cases.append(make_case('%s/int64/integer_number' % op, op, [rint(1, 6, 2, 3), 3], fn))
        # float32 with float64: float64
        cases.append(make_case('%s/f32/f64' % op, op, [operand(op, (2, 3), F32),
                                                       exponent(op, (2, 3), F64)], fn, diff=[0, 1]))
        # a 0-dim float64 tensor does not widen a float32 tensor (same category)
        cases.append(make_case('%s/f32/f64_0dim' % op, op, [operand(op, (2, 3), F32),
                                                            exponent(op, (), F64)], fn,
                               diff=[0, 1]))
    # float16 and bfloat16 (computed through float32)
    cases += lowp_cases('same_shape', 'add', [rnd(3, 4), rnd(3, 4)], binary['add'])
    cases += lowp_cases('number_right', 'mul', [rnd(3, 4), 2.5], binary['mul'])
    cases += lowp_cases('basic', 'exp', [rnd(3, 4)], torch.exp)
    cases += lowp_cases('basic', 'tanh', [rnd(3, 4)], torch.tanh)
    # non-contiguous operands (transposed before the op)
    for op in ('add', 'mul', 'div', 'pow'):
        cases.append(make_case('%s/f32/transposed_operands' % op, op,
                               [operand(op, (4, 3), F32), exponent(op, (4, 3), F32)],
                               binary[op], diff=[0, 1], t_inputs=[0, 1]))
    cases.append(make_case('sub/f32/transposed_left_broadcast_right', 'sub',
                           [rnd(4, 3), rnd(4)], binary['sub'], diff=[0, 1], t_inputs=[0]))
    # int32 + int64 -> int64, uint8 * int64 -> int64, bool * float32 -> float32
    cases.append(make_case('add/int32/int64', 'add', [rint(0, 9, 2, 3).int(), rint(0, 9, 3)],
                           binary['add']))
    cases.append(make_case('mul/uint8/int64', 'mul', [rint(0, 9, 2, 3).to(torch.uint8),
                                                     rint(0, 9, 2, 3)], binary['mul']))
    cases.append(make_case('mul/bool/f32', 'mul', [rint(0, 2, 2, 3).bool(), rnd(2, 3)],
                           binary['mul'], diff=[1]))
    # division by zero and an exact integer division giving a float
    cases.append(make_case('div/f32/by_zero', 'div',
                           [torch.tensor([1.0, -1.0, 0.0, 2.0]), torch.tensor([0.0, 0.0, 0.0, -0.0])],
                           binary['div']))
    cases.append(make_case('div/int64/exact', 'div', [torch.tensor([7, -7, 6, 1]),
                                                      torch.tensor([2, 2, 3, 4])],
                           binary['div']))
    # pow with an integer-valued exponent of negative bases, and x^0.5
    cases.append(make_case('pow/f32/negative_base_int_exponent', 'pow', [away(2, 3), 3],
                           lambda x, *_: torch.pow(x, 3), diff=[0]))
    cases.append(make_case('pow/f64/sqrt_exponent', 'pow', [rnd(2, 3, dtype=F64, lo=0.2, hi=3),
                                                           0.5],
                           lambda x, *_: torch.pow(x, 0.5), diff=[0]))
    cases.append(make_case('pow/int64/negative_base', 'pow', [rint(-4, 5, 2, 3), 2],
                           lambda x, *_: torch.pow(x, 2)))

    # comparisons (bool results): ties included on purpose
    cmp = {'eq': torch.eq, 'ne': torch.ne, 'lt': torch.lt, 'le': torch.le, 'gt': torch.gt,
           'ge': torch.ge}
    for op, fn in cmp.items():
        a = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
        b = torch.tensor([[1.0, 3.0, 2.0], [4.0, 4.0, 7.0]])
        cases.append(make_case('%s/f32/same_shape' % op, op, [a, b], fn))
        cases.append(make_case('%s/f32/broadcast' % op, op,
                               [torch.tensor([[1.0], [2.0], [3.0]]), torch.tensor([2.0, 1.0, 3.0, 0.5])],
                               fn))
        cases.append(make_case('%s/f32/number' % op, op, [a, 4.0], lambda x, n, fn=fn: fn(x, n)))
        cases.append(make_case('%s/int64/f32' % op, op,
                               [torch.tensor([1, 2, 3, 4]), torch.tensor([1.0, 2.5, 2.0, 4.0])], fn))
        cases.append(make_case('%s/f32/nan' % op, op,
                               [torch.tensor([nan, 1.0, nan]), torch.tensor([nan, nan, 1.0])], fn))

    # where and masked_fill
    for dt in (F32, F64):
        cond = rint(0, 2, 3, 4).bool()
        cases.append(make_case('where/%s/same_shape' % fl(dt), 'where',
                               [cond, rnd(3, 4, dtype=dt), rnd(3, 4, dtype=dt)],
                               torch.where, diff=[1, 2]))
    cases.append(make_case('where/f32/broadcast', 'where',
                           [rint(0, 2, 3, 1).bool(), rnd(1, 4), rnd(3, 4)], torch.where,
                           diff=[1, 2]))
    cases.append(make_case('where/f32/transposed', 'where',
                           [rint(0, 2, 4, 3).bool(), rnd(4, 3), rnd(3, 4)], torch.where,
                           diff=[1, 2], t_inputs=[0, 1]))
    cases.append(make_case('where/f32/f64_promotes', 'where',
                           [rint(0, 2, 2, 3).bool(), rnd(2, 3), rnd(2, 3, dtype=F64)], torch.where,
                           diff=[1, 2]))
    for dt in (F32, F64):
        cases.append(make_case('masked_fill/%s/same_shape' % fl(dt), 'masked_fill',
                               [rnd(3, 4, dtype=dt), rint(0, 2, 3, 4).bool(), -7.5],
                               lambda x, m, *_: x.masked_fill(m, -7.5), diff=[0]))
    cases.append(make_case('masked_fill/f32/broadcast_mask', 'masked_fill',
                           [rnd(2, 3, 4), rint(0, 2, 3, 1).bool(), 0.0],
                           lambda x, m, *_: x.masked_fill(m, 0.0), diff=[0]))
    cases.append(make_case('masked_fill/f32/neg_inf', 'masked_fill',
                           [rnd(2, 3), torch.tensor([[True, False, True], [False, False, True]]),
                            -float('inf')],
                           lambda x, m, *_: x.masked_fill(m, -float('inf')), diff=[0]))
    cases.append(make_case('masked_fill/int64', 'masked_fill',
                           [rint(0, 9, 2, 3), torch.tensor([[True, False, True], [False, True, False]]), 5],
                           lambda x, m, *_: x.masked_fill(m, 5)))
    # large: parallel kernels (digests instead of values)
    for op in ('exp', 'tanh', 'sigmoid', 'gelu', 'silu', 'relu', 'abs'):
        cases.append(make_case('%s/f32/large' % op, op, [Pattern(BIG)], unary[op][0], diff=[0],
                               large=True))
    cases.append(make_case('log/f32/large', 'log', [Pattern(BIG, add=1)], torch.log, diff=[0],
                           large=True))
    cases.append(make_case('sqrt/f64/large', 'sqrt', [Pattern(BIG, F64, add=1)], torch.sqrt,
                           diff=[0], large=True))
    cases.append(make_case('exp/f32/large_transposed', 'exp', [Pattern(BIG[::-1])],
                           lambda x: torch.exp(x.t()), diff=[0], opts={'transpose': True},
                           large=True))
    cases.append(make_case('add/f32/large_broadcast', 'add',
                           [Pattern(BIG), Pattern(BIG[1:], mul=13, mod=97, add=-48, div=16)],
                           binary['add'], diff=[0, 1], large=True))
    cases.append(make_case('mul/f64/large_broadcast_column', 'mul',
                           [Pattern(BIG, F64), Pattern((BIG[0], 1), F64, mul=13, mod=97, add=-48,
                                                       div=16)],
                           binary['mul'], diff=[0, 1], large=True))
    cases.append(make_case('div/f32/large_number_left', 'div',
                           [1.5, Pattern(BIG, mul=7919, mod=1000, add=1, div=250)], binary['div'],
                           diff=[1], large=True))
    cases.append(make_case('pow/f32/large', 'pow', [Pattern(BIG, add=1), 1.5], binary['pow'],
                           diff=[0], large=True))
    cases.append(make_case('add/int64/large', 'add',
                           [Pattern(BIG, I64, div=1), Pattern(BIG, I64, mul=3, mod=11, add=0, div=1)],
                           binary['add'], large=True))
    cases.append(make_case('gt/f32/large_broadcast', 'gt',
                           [Pattern(BIG), Pattern(BIG[1:], mul=13, mod=97, add=-48, div=16)],
                           torch.gt, large=True))
    cases.append(make_case('where/f32/large', 'where',
                           [Pattern(BIG, torch.bool, mul=1, mod=3, add=-1, div=1), Pattern(BIG),
                            Pattern(BIG[1:], mul=5, mod=19, add=-9, div=4)],
                           torch.where, diff=[1, 2], large=True))
    cases.append(make_case('clamp/f32/large', 'clamp', [Pattern(BIG, add=-499)],
                           lambda x: torch.clamp(x, -1.0, 1.0), diff=[0],
                           opts={'min': -1.0, 'max': 1.0}, large=True))
    cases.append(make_case('masked_fill/f32/large', 'masked_fill',
                           [Pattern(BIG), Pattern(BIG[1:], torch.bool, mul=1, mod=2, add=0, div=1),
                            3.0],
                           lambda x, m, v: x.masked_fill(m, v), diff=[0], large=True))
    return write_fixture('pointwise', cases, 'PyTorch values for unary, binary, comparison, '
                         'clamp, where and masked_fill cases.')


# ---------------------------------------------------------------------------------------------
# reductions

def gen_reduce():
    cases = []
    red = {
        'sum': torch.sum, 'mean': torch.mean, 'prod': torch.prod, 'var': torch.var,
        'std': torch.std, 'norm': lambda x, *a, **k: torch.norm(x, 2, *a, **k),
        'logsumexp': torch.logsumexp,
    }
    for op, fn in red.items():
        for dt in (F32, F64):
            if op == 'prod':
                x = away(2, 3, 4, dtype=dt, lo=0.5, hi=1.5)
            else:
                x = rnd(2, 3, 4, dtype=dt)
            if op != 'logsumexp':  # logsumexp needs a dim in PyTorch
                cases.append(make_case('%s/%s/all' % (op, fl(dt)), op, [x], fn, diff=[0]))
            dims = ((0, False), (1, True), (2, False), (-1, True), (-2, False))
            if dt == F64:
                dims = ((1, True), (-1, False))
            for dim, keep in dims:
                cases.append(make_case('%s/%s/dim%d%s' % (op, fl(dt), dim,
                                                          '_keepdim' if keep else ''),
                                       op, [x], lambda x, fn=fn, dim=dim, keep=keep:
                                       fn(x, dim, keepdim=keep), diff=[0],
                                       opts={'dim': dim, 'keepdim': keep}))
    # norm with other orders p (PyTorch's argument order: p, dim, keepdim)
    for p in (1.0, 3.0):
        x = away(2, 3, 4, dtype=F64 if p == 3.0 else F32)
        cases.append(make_case('norm/p%g/all' % p, 'norm', [x], lambda x, p=p: torch.norm(x, p),
                               diff=[0], opts={'p': p}))
        cases.append(make_case('norm/p%g/dim1' % p, 'norm', [x],
                               lambda x, p=p: torch.norm(x, p, 1), diff=[0],
                               opts={'p': p, 'dim': 1, 'keepdim': False}))
    # a non-contiguous input (the runner transposes dims 0 and 2 first)
    x = rnd(4, 3, 2)
    for op in ('sum', 'mean', 'var', 'logsumexp'):
        cases.append(make_case('%s/f32/transposed_dim1' % op, op, [x],
                               lambda x, op=op: red[op](x.transpose(0, 2), 1, keepdim=False),
                               diff=[0], opts={'dim': 1, 'keepdim': False, 'transpose': True}))
    for op in ('max', 'min', 'prod', 'std', 'norm'):
        x = rnd(4, 3, lo=0.5, hi=1.5) if op == 'prod' else rnd(4, 3)
        cases.append(make_case('%s/f32/transposed_2d_dim1' % op, op, [x],
                               lambda x, op=op: ({'max': lambda x: tuple(torch.max(x, 1)),
                                                  'min': lambda x: tuple(torch.min(x, 1)),
                                                  'norm': lambda x: torch.norm(x, 2, 1)}
                                                 .get(op, lambda x: red[op](x, 1)))(x),
                               diff=[0], opts={'dim': 1, 'keepdim': False}, t_inputs=[0]))
    # float16 and bfloat16 (accumulated in float32)
    cases += lowp_cases('dim1', 'sum', [rnd(3, 50)], lambda x: torch.sum(x, 1),
                        opts={'dim': 1, 'keepdim': False})
    cases += lowp_cases('all', 'mean', [rnd(3, 50)], torch.mean)
    # prod with one zero has a well-defined gradient
    x = torch.tensor([[0.5, 0.0, 2.0], [1.5, -1.0, 3.0]])
    cases.append(make_case('prod/f32/one_zero_all', 'prod', [x], torch.prod, diff=[0]))
    cases.append(make_case('prod/f32/one_zero_dim1', 'prod', [x], lambda x: torch.prod(x, 1),
                           diff=[0], opts={'dim': 1, 'keepdim': False}))
    # logsumexp stays finite for large values
    x = torch.tensor([[1000.0, 1000.5, 999.0], [-1000.0, -999.0, -1001.0]])
    cases.append(make_case('logsumexp/f32/large', 'logsumexp', [x],
                           lambda x: torch.logsumexp(x, 1), diff=[0],
                           opts={'dim': 1, 'keepdim': False}))
    # integer inputs: sum of int64 is int64, sum of bool is int64, prod of int64 is int64
    cases.append(make_case('sum/int64/all', 'sum', [rint(-5, 5, 3, 4)], torch.sum))
    cases.append(make_case('sum/int64/dim1', 'sum', [rint(-5, 5, 3, 4)],
                           lambda x: torch.sum(x, 1), opts={'dim': 1, 'keepdim': False}))
    cases.append(make_case('sum/bool/all', 'sum', [rint(0, 2, 3, 4).bool()], torch.sum))
    cases.append(make_case('prod/int64/dim0', 'prod', [rint(1, 4, 3, 4)],
                           lambda x: torch.prod(x, 0), opts={'dim': 0, 'keepdim': False}))

    # max/min: no ties (distinct values from a permutation)
    def distinct(*shape, dt=F32):
        n = int(np.prod(shape))
        return ((torch.randperm(n, generator=GEN).double() - n / 2) / 4).reshape(shape).to(dt)
    for op, fn in (('max', torch.max), ('min', torch.min)):
        for dt in (F32, F64):
            x = distinct(2, 3, 4, dt=dt)
            cases.append(make_case('%s/%s/all' % (op, fl(dt)), op, [x], fn, diff=[0]))
            for dim, keep in ((0, False), (1, True), (-1, False)):
                cases.append(make_case('%s/%s/dim%d%s' % (op, fl(dt), dim,
                                                          '_keepdim' if keep else ''), op, [x],
                                       lambda x, fn=fn, dim=dim, keep=keep:
                                       tuple(fn(x, dim, keepdim=keep)), diff=[0],
                                       opts={'dim': dim, 'keepdim': keep}))
        # ties: the index is the first occurrence (forward only)
        x = torch.tensor([[3.0, 1.0, 3.0, 1.0], [2.0, 2.0, 0.0, 0.0]])
        cases.append(make_case('%s/f32/ties_dim1' % op, op, [x],
                               lambda x, fn=fn: tuple(fn(x, 1)),
                               opts={'dim': 1, 'keepdim': False}))
        cases.append(make_case('%s/int64/dim0' % op, op, [rint(-9, 9, 3, 4)],
                               lambda x, fn=fn: tuple(fn(x, 0)),
                               opts={'dim': 0, 'keepdim': False}))
        cases.append(make_case('%s/f32/nan_all' % op, op,
                               [torch.tensor([1.0, float('nan'), 3.0])], fn))
    for op, fn in (('argmax', torch.argmax), ('argmin', torch.argmin)):
        x = distinct(3, 4, 5)
        cases.append(make_case('%s/f32/all' % op, op, [x], fn))
        for dim, keep in ((0, False), (1, True), (-1, False)):
            cases.append(make_case('%s/f32/dim%d%s' % (op, dim, '_keepdim' if keep else ''), op,
                                   [x], lambda x, fn=fn, dim=dim, keep=keep:
                                   fn(x, dim, keepdim=keep), opts={'dim': dim, 'keepdim': keep}))
        x = torch.tensor([[3.0, 1.0, 3.0, 1.0], [2.0, 2.0, 0.0, 0.0]])
        cases.append(make_case('%s/f32/ties_dim1' % op, op, [x], lambda x, fn=fn: fn(x, 1),
                               opts={'dim': 1, 'keepdim': False}))
        cases.append(make_case('%s/int64/dim1' % op, op, [rint(-50, 50, 3, 5)],
                               lambda x, fn=fn: fn(x, 1), opts={'dim': 1, 'keepdim': False}))
    # a long sum: float32 accumulation must stay accurate (pairwise or wider accumulator)
    x = torch.full((100000,), 0.1, dtype=F32)
    cases.append(make_case('sum/f32/long', 'sum', [Fill(x)], torch.sum, rtol=1e-5))
    cases.append(make_case('mean/f32/long_dim1', 'mean', [Fill(torch.full((3, 50000), 0.1))],
                           lambda x: torch.mean(x, 1), opts={'dim': 1, 'keepdim': False}))
    # large: parallel reductions (digests instead of values)
    for op in ('sum', 'mean', 'var', 'std', 'norm', 'logsumexp', 'max', 'min', 'argmax',
               'argmin'):
        x = distinct_pattern(BIG)
        fn = {'sum': torch.sum, 'mean': torch.mean, 'var': torch.var, 'std': torch.std,
              'norm': lambda x, *a, **k: torch.norm(x, 2, *a, **k), 'logsumexp': torch.logsumexp,
              'max': torch.max, 'min': torch.min, 'argmax': torch.argmax,
              'argmin': torch.argmin}[op]
        diff = [] if op.startswith('arg') else [0]
        if op != 'logsumexp':
            cases.append(make_case('%s/f32/large_all' % op, op, [x], fn, diff=diff, large=True))
        for dim in (0, 1):
            cases.append(make_case('%s/f32/large_dim%d' % (op, dim), op, [x],
                                   lambda x, fn=fn, dim=dim: fn(x, dim),
                                   diff=diff, opts={'dim': dim, 'keepdim': False}, large=True))
    cases.append(make_case('sum/f64/large_dim0', 'sum', [Pattern(BIG, F64)],
                           lambda x: torch.sum(x, 0), diff=[0], opts={'dim': 0, 'keepdim': False},
                           large=True))
    cases.append(make_case('sum/int64/large', 'sum', [Pattern(BIG, I64, div=1)], torch.sum,
                           large=True))
    cases.append(make_case('mean/f32/large_transposed_dim1', 'mean', [Pattern((257, 4, 300))],
                           lambda x: torch.mean(x.transpose(0, 2), 1), diff=[0],
                           opts={'dim': 1, 'keepdim': False, 'transpose': True}, large=True))
    return write_fixture('reduce', cases, 'PyTorch values for reductions with and without dim.')


# ---------------------------------------------------------------------------------------------
# linear algebra

def gen_linalg():
    cases = []
    forms = [
        ('1d_1d', (4,), (4,)), ('2d_1d', (3, 4), (4,)), ('1d_2d', (4,), (4, 3)),
        ('2d_2d', (3, 4), (4, 5)), ('3d_2d', (2, 3, 4), (4, 5)), ('2d_3d', (3, 4), (2, 4, 5)),
        ('3d_1d', (2, 3, 4), (4,)), ('1d_3d', (4,), (2, 4, 5)), ('3d_3d', (2, 3, 4), (2, 4, 5)),
        ('broadcast_4d_3d', (2, 1, 3, 4), (5, 4, 2)), ('broadcast_batch1', (1, 3, 4), (3, 4, 2)),
    ]
    for tag, sa, sb in forms:
        for dt in (F32, F64):
            cases.append(make_case('matmul/%s/%s' % (fl(dt), tag), 'matmul',
                                   [rnd(*sa, dtype=dt), rnd(*sb, dtype=dt)], torch.matmul,
                                   diff=[0, 1]))
    # transposed (non-contiguous) operands: the runner applies :t() to the inputs marked
    a, b = rnd(4, 3), rnd(5, 4)
    cases.append(make_case('matmul/f32/transposed_both', 'matmul', [a, b],
                           lambda a, b: torch.matmul(a.t(), b.t()), diff=[0, 1],
                           opts={'transpose': [True, True]}))
    cases.append(make_case('matmul/int64/2d_2d', 'matmul', [rint(-3, 4, 2, 3), rint(-3, 4, 3, 2)],
                           torch.matmul))
    # a larger product that goes through the blocked GEMM path
    cases.append(make_case('matmul/f32/2d_2d_large', 'matmul', [rnd(13, 33), rnd(33, 9)],
                           torch.matmul, diff=[0, 1], rtol=1e-4, atol=1e-4))
    for dt in (F32, F64):
        cases.append(make_case('mm/%s' % fl(dt), 'mm', [rnd(3, 4, dtype=dt), rnd(4, 2, dtype=dt)],
                               torch.mm, diff=[0, 1]))
        cases.append(make_case('bmm/%s' % fl(dt), 'bmm',
                               [rnd(2, 3, 4, dtype=dt), rnd(2, 4, 5, dtype=dt)], torch.bmm,
                               diff=[0, 1]))
        cases.append(make_case('addmm/%s/default' % fl(dt), 'addmm',
                               [rnd(3, 2, dtype=dt), rnd(3, 4, dtype=dt), rnd(4, 2, dtype=dt)],
                               torch.addmm, diff=[0, 1, 2]))
    a, b = rnd(4, 3), rnd(2, 4)
    cases.append(make_case('mm/f32/transposed_both', 'mm', [a, b],
                           lambda a, b: torch.mm(a.t(), b.t()), diff=[0, 1],
                           opts={'transpose': [True, True]}))
    cases.append(make_case('addmm/f32/bias_broadcast', 'addmm', [rnd(2), rnd(3, 4), rnd(4, 2)],
                           torch.addmm, diff=[0, 1, 2]))
    cases.append(make_case('addmm/f64/beta_alpha', 'addmm',
                           [rnd(3, 2, dtype=F64), rnd(3, 4, dtype=F64), rnd(4, 2, dtype=F64)],
                           lambda c, a, b: torch.addmm(c, a, b, beta=0.5, alpha=-2.0),
                           diff=[0, 1, 2], opts={'beta': 0.5, 'alpha': -2.0}))
    # float16 and bfloat16 (accumulated in float32)
    cases += lowp_cases('2d_2d', 'matmul', [rnd(3, 16), rnd(16, 5)], torch.matmul)
    # large (digests instead of values)
    cases.append(make_case('matmul/f32/large_2d', 'matmul',
                           [Pattern((200, 300), div=5000), Pattern((300, 150), mul=31, div=5000)],
                           torch.matmul, diff=[0, 1], large=True, rtol=1e-4))
    cases.append(make_case('matmul/f32/large_batched_broadcast', 'matmul',
                           [Pattern((8, 64, 96), div=5000), Pattern((96, 80), mul=31, div=5000)],
                           torch.matmul, diff=[0, 1], large=True, rtol=1e-4))
    cases.append(make_case('bmm/f64/large', 'bmm',
                           [Pattern((4, 128, 96), F64, div=5000),
                            Pattern((4, 96, 128), F64, mul=31, div=5000)],
                           torch.bmm, diff=[0, 1], large=True))
    return write_fixture('linalg', cases, 'PyTorch values for matmul (every form), mm, bmm, addmm.')


# ---------------------------------------------------------------------------------------------
# joining and picking

def gen_index():
    cases = []
    for dt in (F32, F64):
        cases.append(make_case('cat/%s/dim0' % fl(dt), 'cat',
                               [rnd(2, 3, dtype=dt), rnd(1, 3, dtype=dt), rnd(3, 3, dtype=dt)],
                               lambda *xs: torch.cat(xs, 0), diff=[0, 1, 2], opts={'dim': 0}))
    cases.append(make_case('cat/f32/dim1', 'cat', [rnd(2, 1, 4), rnd(2, 3, 4)],
                           lambda *xs: torch.cat(xs, 1), diff=[0, 1], opts={'dim': 1}))
    cases.append(make_case('cat/f32/dim_neg1', 'cat', [rnd(2, 3, 2), rnd(2, 3, 1), rnd(2, 3, 3)],
                           lambda *xs: torch.cat(xs, -1), diff=[0, 1, 2], opts={'dim': -1}))
    cases.append(make_case('cat/int64/dim0', 'cat', [rint(0, 9, 2, 2), rint(0, 9, 1, 2)],
                           lambda *xs: torch.cat(xs, 0), opts={'dim': 0}))
    cases.append(make_case('cat/f32/single', 'cat', [rnd(2, 3)], lambda *xs: torch.cat(xs, 1),
                           diff=[0], opts={'dim': 1}))
    for dim in (0, 1, 2, -1):
        cases.append(make_case('stack/f32/dim%d' % dim, 'stack', [rnd(2, 3), rnd(2, 3), rnd(2, 3)],
                               lambda *xs, dim=dim: torch.stack(xs, dim), diff=[0, 1, 2],
                               opts={'dim': dim}))
    cases.append(make_case('stack/f64/dim0', 'stack', [rnd(3, dtype=F64), rnd(3, dtype=F64)],
                           lambda *xs: torch.stack(xs, 0), diff=[0, 1], opts={'dim': 0}))
    # index_select: repeated indices accumulate in the gradient
    for dt in (F32, F64):
        cases.append(make_case('index_select/%s/dim0_repeats' % fl(dt), 'index_select',
                               [rnd(4, 3, dtype=dt), torch.tensor([3, 0, 3, 1, 3])],
                               lambda x, i: x.index_select(0, i), diff=[0], opts={'dim': 0}))
    cases.append(make_case('index_select/f32/dim1', 'index_select',
                           [rnd(2, 5, 3), torch.tensor([4, 0, 2])],
                           lambda x, i: x.index_select(1, i), diff=[0], opts={'dim': 1}))
    cases.append(make_case('index_select/f32/dim_neg1', 'index_select',
                           [rnd(3, 4), torch.tensor([1, 1, 3])],
                           lambda x, i: x.index_select(-1, i), diff=[0], opts={'dim': -1}))
    cases.append(make_case('index_select/int64/dim0', 'index_select',
                           [rint(0, 100, 5, 2), torch.tensor([4, 2])],
                           lambda x, i: x.index_select(0, i), opts={'dim': 0}))
    # gather
    for dt in (F32, F64):
        cases.append(make_case('gather/%s/dim1' % fl(dt), 'gather',
                               [rnd(3, 4, dtype=dt), rint(0, 4, 3, 2)],
                               lambda x, i: x.gather(1, i), diff=[0], opts={'dim': 1}))
    cases.append(make_case('gather/f32/dim0_repeats', 'gather',
                           [rnd(3, 4), torch.tensor([[0, 2, 2, 1], [0, 0, 0, 0]])],
                           lambda x, i: x.gather(0, i), diff=[0], opts={'dim': 0}))
    cases.append(make_case('gather/f32/3d_dim_neg1', 'gather', [rnd(2, 3, 5), rint(0, 5, 2, 3, 2)],
                           lambda x, i: x.gather(-1, i), diff=[0], opts={'dim': -1}))
    cases.append(make_case('gather/f32/smaller_index', 'gather', [rnd(4, 5), rint(0, 4, 2, 3)],
                           lambda x, i: x.gather(0, i), diff=[0], opts={'dim': 0}))
    cases.append(make_case('cat/f32/transposed_dim0', 'cat', [rnd(3, 2), rnd(3, 1)],
                           lambda *xs: torch.cat(xs, 0), diff=[0, 1], opts={'dim': 0},
                           t_inputs=[0, 1]))
    cases.append(make_case('index_select/f32/transposed_dim1', 'index_select',
                           [rnd(5, 3), torch.tensor([4, 0, 4])],
                           lambda x, i: x.index_select(1, i), diff=[0], opts={'dim': 1},
                           t_inputs=[0]))
    cases.append(make_case('gather/f32/transposed_dim1', 'gather',
                           [rnd(4, 3), rint(0, 4, 3, 2)],
                           lambda x, i: x.gather(1, i), diff=[0], opts={'dim': 1}, t_inputs=[0]))
    # topk: distinct values
    def distinct(*shape, dt=F32):
        n = int(np.prod(shape))
        return ((torch.randperm(n, generator=GEN).double() - n / 2) / 4).reshape(shape).to(dt)
    x = distinct(3, 6)
    cases.append(make_case('topk/f32/default', 'topk', [x, 3], lambda x, *_: tuple(torch.topk(x, 3)),
                           diff=[0]))
    cases.append(make_case('topk/f32/smallest_dim0', 'topk', [x, 2],
                           lambda x, *_: tuple(torch.topk(x, 2, dim=0, largest=False)), diff=[0],
                           opts={'dim': 0, 'largest': False}))
    x64 = distinct(2, 3, 5, dt=F64)
    cases.append(make_case('topk/f64/dim1', 'topk', [x64, 2],
                           lambda x, *_: tuple(torch.topk(x, 2, dim=1)), diff=[0], opts={'dim': 1}))
    cases.append(make_case('topk/f32/k_equals_size', 'topk', [distinct(2, 4), 4],
                           lambda x, *_: tuple(torch.topk(x, 4)), diff=[0]))
    cases.append(make_case('topk/int64/default', 'topk',
                           [torch.tensor([[5, -3, 9, 0, 2], [7, 8, -1, 4, 3]]), 2],
                           lambda x, *_: tuple(torch.topk(x, 2))))
    # large (digests instead of values)
    cases.append(make_case('cat/f32/large_dim0', 'cat', [Pattern(BIG), Pattern((40, 257), mul=3)],
                           lambda *xs: torch.cat(xs, 0), diff=[0, 1], opts={'dim': 0},
                           large=True))
    cases.append(make_case('cat/f32/large_dim1', 'cat', [Pattern(BIG), Pattern((300, 40), mul=3)],
                           lambda *xs: torch.cat(xs, 1), diff=[0, 1], opts={'dim': 1},
                           large=True))
    cases.append(make_case('stack/f32/large_dim1', 'stack', [Pattern(BIG), Pattern(BIG, mul=3)],
                           lambda *xs: torch.stack(xs, 1), diff=[0, 1], opts={'dim': 1},
                           large=True))
    cases.append(make_case('index_select/f32/large_dim1', 'index_select',
                           [Pattern(BIG), Pattern((400,), I64, mul=7, mod=257, add=0, div=1)],
                           lambda x, i: x.index_select(1, i), diff=[0], opts={'dim': 1},
                           large=True))
    cases.append(make_case('index_select/f32/large_dim0', 'index_select',
                           [Pattern(BIG), Pattern((500,), I64, mul=7, mod=300, add=0, div=1)],
                           lambda x, i: x.index_select(0, i), diff=[0], opts={'dim': 0},
                           large=True))
    cases.append(make_case('gather/f32/large_dim0', 'gather',
                           [Pattern(BIG), Pattern(BIG, I64, mul=11, mod=300, add=0, div=1)],
                           lambda x, i: x.gather(0, i), diff=[0], opts={'dim': 0}, large=True))
    cases.append(make_case('topk/f32/large_dim1', 'topk', [distinct_pattern(BIG), 5],
                           lambda x, k: tuple(torch.topk(x, k, dim=1)), diff=[0],
                           opts={'dim': 1}, large=True))
    return write_fixture('index', cases, 'PyTorch values for cat, stack, index_select, gather, '
                         'topk.')


# ---------------------------------------------------------------------------------------------
# nn functional

def sdpa_ref(q, k, v, attn_mask=None, is_causal=False, scale=None):
    """torch.nn.functional.scaled_dot_product_attention of PyTorch 2.x (not in 1.13): bool masks
    keep where true, float masks are added, is_causal keeps the lower triangle aligned top-left."""
    L, S = q.shape[-2], k.shape[-2]
    sc = (1.0 / math.sqrt(q.shape[-1])) if scale is None else scale
    att = torch.matmul(q, k.transpose(-2, -1)) * sc
    if is_causal:
        keep = torch.ones(L, S, dtype=torch.bool).tril()
        att = att.masked_fill(~keep, float('-inf'))
    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            att = att.masked_fill(~attn_mask, float('-inf'))
        else:
            att = att + attn_mask
    return torch.matmul(torch.softmax(att, -1), v)


def gen_nn():
    cases = []
    # linear
    for dt in (F32, F64):
        cases.append(make_case('linear/%s/bias' % fl(dt), 'linear',
                               [rnd(4, 5, dtype=dt), rnd(3, 5, dtype=dt), rnd(3, dtype=dt)],
                               F.linear, diff=[0, 1, 2]))
    cases.append(make_case('linear/f32/no_bias', 'linear', [rnd(4, 5), rnd(3, 5)], F.linear,
                           diff=[0, 1]))
    cases.append(make_case('linear/f32/3d_input', 'linear', [rnd(2, 3, 5), rnd(4, 5), rnd(4)],
                           F.linear, diff=[0, 1, 2]))
    cases.append(make_case('linear/f32/1d_input', 'linear', [rnd(5), rnd(4, 5), rnd(4)],
                           F.linear, diff=[0, 1, 2]))
    # conv2d
    conv = [
        ('basic', (2, 2, 5, 5), (3, 2, 3, 3), True, {}),
        ('stride2', (1, 3, 7, 7), (2, 3, 3, 3), True, {'stride': 2}),
        ('padding1', (1, 2, 5, 5), (3, 2, 3, 3), True, {'padding': 1}),
        ('stride_padding_pairs', (1, 2, 7, 6), (3, 2, 3, 2), True,
         {'stride': [2, 1], 'padding': [1, 0]}),
        ('dilation2', (1, 2, 7, 7), (3, 2, 3, 3), True, {'dilation': 2, 'padding': 1}),
        ('groups2', (1, 4, 5, 5), (4, 2, 3, 3), True, {'groups': 2, 'padding': 1}),
        ('depthwise', (1, 3, 5, 5), (3, 1, 3, 3), False, {'groups': 3}),
        ('no_bias_1x1', (1, 3, 4, 4), (4, 3, 1, 1), False, {}),
        ('all', (1, 4, 8, 7), (4, 2, 3, 2), True,
         {'stride': [2, 3], 'padding': [2, 1], 'dilation': [2, 1], 'groups': 2}),
    ]
    for tag, sx, sw, bias, o in conv:
        for dt in ((F32, F64) if tag == 'all' else (F32,)):
            ins = [rnd(*sx, dtype=dt), rnd(*sw, dtype=dt) * 0.5]
            if bias:
                ins.append(rnd(sw[0], dtype=dt))
            kw = {k: (tuple(v) if isinstance(v, list) else v) for k, v in o.items()}
            cases.append(make_case('conv2d/%s/%s' % (fl(dt), tag), 'conv2d', ins,
                                   lambda x, w, b=None, kw=kw: F.conv2d(x, w, b, **kw),
                                   diff=[0, 1, 2] if bias else [0, 1], opts=o or None))
    # max_pool2d (distinct values: no ties)
    def distinct(*shape, dt=F32):
        n = int(np.prod(shape))
        return ((torch.randperm(n, generator=GEN).double() - n / 2) / 8).reshape(shape).to(dt)
    pools = [
        ('k2', (2, 2, 4, 4), 2, {}),
        ('k3_s2', (1, 2, 7, 7), 3, {'stride': 2}),
        ('k3_s1_p1', (1, 2, 5, 5), 3, {'stride': 1, 'padding': 1}),
        ('k_pair', (1, 1, 6, 5), [3, 2], {'stride': [2, 1]}),
    ]
    for tag, sx, k, o in pools:
        kt = tuple(k) if isinstance(k, list) else k
        kw = {kk: (tuple(v) if isinstance(v, list) else v) for kk, v in o.items()}
        for dt in ((F32, F64) if tag == 'k2' else (F32,)):
            cases.append(make_case('max_pool2d/%s/%s' % (fl(dt), tag), 'max_pool2d',
                                   [distinct(*sx, dt=dt), k],
                                   lambda x, _k, kt=kt, kw=kw: F.max_pool2d(x, kt, **kw), diff=[0],
                                   opts=o or None))
            cases.append(make_case('avg_pool2d/%s/%s' % (fl(dt), tag), 'avg_pool2d',
                                   [rnd(*sx, dtype=dt), k],
                                   lambda x, _k, kt=kt, kw=kw: F.avg_pool2d(x, kt, **kw), diff=[0],
                                   opts=o or None))
    cases.append(make_case('avg_pool2d/f32/k3_p1_exclude_pad', 'avg_pool2d', [rnd(1, 2, 5, 5), 3],
                           lambda x, *_: F.avg_pool2d(x, 3, stride=2, padding=1,
                                                  count_include_pad=False), diff=[0],
                           opts={'stride': 2, 'padding': 1, 'count_include_pad': False}))
    # adaptive_avg_pool2d: divisible and overlapping windows
    for tag, sx, out in (('to1', (2, 3, 4, 5), 1), ('to2x2', (1, 2, 4, 4), 2),
                         ('5x7_to3x2', (1, 2, 5, 7), [3, 2]), ('to_same', (1, 1, 3, 3), 3)):
        ot = tuple(out) if isinstance(out, list) else out
        cases.append(make_case('adaptive_avg_pool2d/f32/%s' % tag, 'adaptive_avg_pool2d',
                               [rnd(*sx), out], lambda x, _o, ot=ot: F.adaptive_avg_pool2d(x, ot),
                               diff=[0]))
    # batch_norm: training (outputs y, then the updated running stats), eval
    for dt in (F32, F64):
        for tag, sx in (('2d', (4, 3, 2, 2)), ('1d', (5, 3))):
            x = rnd(*sx, dtype=dt) * 2 + 0.5
            rm, rv = rnd(3, dtype=dt, lo=-0.5, hi=0.5), rnd(3, dtype=dt, lo=0.5, hi=1.5)
            w, b = rnd(3, dtype=dt, lo=0.5, hi=1.5), rnd(3, dtype=dt)

            def bn_train(x, rm, rv, w, b):
                rm, rv = rm.clone(), rv.clone()
                y = F.batch_norm(x, rm, rv, w, b, training=True, momentum=0.1, eps=1e-5)
                return y, rm, rv
            cases.append(make_case('batch_norm/%s/train_%s' % (fl(dt), tag), 'batch_norm',
                                   [x, rm, rv, w, b], bn_train, diff=[0, 3, 4],
                                   opts={'training': True, 'momentum': 0.1, 'eps': 1e-5}))
            cases.append(make_case('batch_norm/%s/eval_%s' % (fl(dt), tag), 'batch_norm',
                                   [x, rm, rv, w, b],
                                   lambda x, rm, rv, w, b: (F.batch_norm(x, rm, rv, w, b,
                                                                         training=False), rm, rv),
                                   diff=[0, 3, 4], opts={'training': False}))
    x = rnd(3, 2, 3)

    def bn_train_m(x, rm, rv):
        rm, rv = rm.clone(), rv.clone()
        return F.batch_norm(x, rm, rv, None, None, training=True, momentum=0.3, eps=1e-3), rm, rv
    cases.append(make_case('batch_norm/f32/train_no_affine_momentum', 'batch_norm',
                           [x, torch.zeros(2), torch.ones(2)], bn_train_m, diff=[0],
                           opts={'training': True, 'momentum': 0.3, 'eps': 1e-3}))
    # layer_norm
    for dt in (F32, F64):
        cases.append(make_case('layer_norm/%s/last_dim' % fl(dt), 'layer_norm',
                               [rnd(3, 5, dtype=dt) * 3 + 1, rnd(5, dtype=dt), rnd(5, dtype=dt)],
                               lambda x, w, b: F.layer_norm(x, [5], w, b), diff=[0, 1, 2],
                               opts={'normalized_shape': [5]}))
    cases.append(make_case('layer_norm/f32/last_two_dims', 'layer_norm',
                           [rnd(2, 3, 4), rnd(3, 4), rnd(3, 4)],
                           lambda x, w, b: F.layer_norm(x, [3, 4], w, b, eps=1e-3),
                           diff=[0, 1, 2], opts={'normalized_shape': [3, 4], 'eps': 1e-3}))
    cases.append(make_case('layer_norm/f32/no_affine', 'layer_norm', [rnd(4, 6)],
                           lambda x: F.layer_norm(x, [6]), diff=[0],
                           opts={'normalized_shape': [6]}))
    # embedding: repeated ids accumulate
    for dt in (F32, F64):
        cases.append(make_case('embedding/%s/2d_ids' % fl(dt), 'embedding',
                               [torch.tensor([[1, 3, 1], [0, 4, 1]]), rnd(5, 3, dtype=dt)],
                               F.embedding, diff=[1]))
    cases.append(make_case('embedding/f32/1d_ids', 'embedding', [torch.tensor([2, 2, 0]),
                                                                 rnd(4, 2)], F.embedding,
                           diff=[1]))
    # softmax / log_softmax
    for op, fn in (('softmax', F.softmax), ('log_softmax', F.log_softmax)):
        for dt in (F32, F64):
            x = rnd(2, 3, 4, dtype=dt, lo=-3, hi=3)
            for dim in (0, 1, -1):
                cases.append(make_case('%s/%s/dim%d' % (op, fl(dt), dim), op, [x],
                                       lambda x, fn=fn, dim=dim: fn(x, dim), diff=[0],
                                       opts={'dim': dim}))
        x = torch.tensor([[1000.0, 1001.0, 999.0], [-1000.0, -1e4, -999.0]])
        cases.append(make_case('%s/f32/large' % op, op, [x], lambda x, fn=fn: fn(x, 1), diff=[0],
                               opts={'dim': 1}))
        x = torch.tensor([[0.5, -float('inf'), 1.0], [-float('inf'), 2.0, -float('inf')]])
        cases.append(make_case('%s/f32/neg_inf' % op, op, [x], lambda x, fn=fn: fn(x, 1),
                               opts={'dim': 1}))
    # cross_entropy
    N, C = 5, 4
    for dt in (F32, F64):
        logits = rnd(N, C, dtype=dt, lo=-3, hi=3)
        target = torch.tensor([0, 3, 1, 1, 2])
        for red in ('mean', 'sum', 'none'):
            cases.append(make_case('cross_entropy/%s/%s' % (fl(dt), red), 'cross_entropy',
                                   [logits, target],
                                   lambda x, t, red=red: F.cross_entropy(x, t, reduction=red),
                                   diff=[0], opts={'reduction': red}))
    logits = rnd(N, C, lo=-3, hi=3)
    t_ign = torch.tensor([0, -100, 1, 3, -100])
    cases.append(make_case('cross_entropy/f32/ignore_default', 'cross_entropy', [logits, t_ign],
                           F.cross_entropy, diff=[0]))
    t1 = torch.tensor([0, 1, 1, 3, 2])
    for red in ('mean', 'none'):
        cases.append(make_case('cross_entropy/f32/ignore_index1_%s' % red, 'cross_entropy',
                               [logits, t1],
                               lambda x, t, red=red: F.cross_entropy(x, t, ignore_index=1,
                                                                     reduction=red),
                               diff=[0], opts={'ignore_index': 1, 'reduction': red}))
    for red in ('mean', 'sum', 'none'):
        cases.append(make_case('cross_entropy/f32/label_smoothing_%s' % red, 'cross_entropy',
                               [logits, t1],
                               lambda x, t, red=red: F.cross_entropy(x, t, label_smoothing=0.1,
                                                                     reduction=red),
                               diff=[0], opts={'label_smoothing': 0.1, 'reduction': red}))
    w = rnd(C, dtype=F32, lo=0.2, hi=2.0)
    for red in ('mean', 'sum', 'none'):
        cases.append(make_case('cross_entropy/f32/weight_%s' % red, 'cross_entropy',
                               [logits, t1, w],
                               lambda x, t, w, red=red: F.cross_entropy(x, t, weight=w,
                                                                        reduction=red),
                               diff=[0], opts={'reduction': red}))
    cases.append(make_case('cross_entropy/f32/weight_ignore_smoothing', 'cross_entropy',
                           [logits, t1, w],
                           lambda x, t, w: F.cross_entropy(x, t, weight=w, ignore_index=1,
                                                           label_smoothing=0.2),
                           diff=[0], opts={'ignore_index': 1, 'label_smoothing': 0.2}))
    cases.append(make_case('cross_entropy/f32/ignore_smoothing', 'cross_entropy', [logits, t1],
                           lambda x, t: F.cross_entropy(x, t, ignore_index=1,
                                                        label_smoothing=0.2),
                           diff=[0], opts={'ignore_index': 1, 'label_smoothing': 0.2}))
    # (N, C, d1, d2) logits with (N, d1, d2) targets
    x4 = rnd(2, 3, 2, 2, lo=-3, hi=3)
    t4 = rint(0, 3, 2, 2, 2)
    for red in ('mean', 'none'):
        cases.append(make_case('cross_entropy/f32/spatial_%s' % red, 'cross_entropy', [x4, t4],
                               lambda x, t, red=red: F.cross_entropy(x, t, reduction=red),
                               diff=[0], opts={'reduction': red}))
    x3 = rnd(2, 4, 3, dtype=F64, lo=-3, hi=3)
    t3 = torch.tensor([[0, 3, 2], [1, -100, 3]])
    cases.append(make_case('cross_entropy/f64/ncd_ignore_smoothing', 'cross_entropy', [x3, t3],
                           lambda x, t: F.cross_entropy(x, t, label_smoothing=0.1), diff=[0],
                           opts={'label_smoothing': 0.1}))
    # nll_loss
    lp = F.log_softmax(rnd(N, C, lo=-3, hi=3), 1).detach()
    for red in ('mean', 'sum', 'none'):
        cases.append(make_case('nll_loss/f32/%s' % red, 'nll_loss', [lp, t1],
                               lambda x, t, red=red: F.nll_loss(x, t, reduction=red), diff=[0],
                               opts={'reduction': red}))
    cases.append(make_case('nll_loss/f32/weight_ignore', 'nll_loss', [lp, t1, w],
                           lambda x, t, w: F.nll_loss(x, t, weight=w, ignore_index=3), diff=[0],
                           opts={'ignore_index': 3}))
    cases.append(make_case('nll_loss/f64/spatial', 'nll_loss',
                           [F.log_softmax(x3, 1).detach(), torch.tensor([[0, 3, 2], [1, 0, 3]])],
                           F.nll_loss, diff=[0]))
    # mse_loss
    for dt in (F32, F64):
        for red in ('mean', 'sum', 'none'):
            cases.append(make_case('mse_loss/%s/%s' % (fl(dt), red), 'mse_loss',
                                   [rnd(3, 4, dtype=dt), rnd(3, 4, dtype=dt)],
                                   lambda a, b, red=red: F.mse_loss(a, b, reduction=red),
                                   diff=[0, 1], opts={'reduction': red}))
    # gelu (exact), silu, relu through F
    for dt in (F32, F64):
        cases.append(make_case('gelu/%s' % fl(dt), 'gelu', [rnd(2, 5, dtype=dt, lo=-4, hi=4)],
                               F.gelu, diff=[0]))
        cases.append(make_case('silu/%s' % fl(dt), 'silu', [rnd(2, 5, dtype=dt, lo=-5, hi=5)],
                               F.silu, diff=[0]))
        cases.append(make_case('relu/%s' % fl(dt), 'relu', [away(2, 5, dtype=dt)], F.relu,
                               diff=[0]))
    # dropout: identities only (random values are checked statistically in the spec)
    x = rnd(3, 4)
    cases.append(make_case('dropout/f32/p0_training', 'dropout', [x, 0.0],
                           lambda x, *_: F.dropout(x, 0.0, True), diff=[0], opts={'training': True}))
    cases.append(make_case('dropout/f32/eval', 'dropout', [x, 0.5],
                           lambda x, *_: F.dropout(x, 0.5, False), diff=[0], opts={'training': False}))
    # scaled_dot_product_attention
    for dt in (F32, F64):
        q, k, v = rnd(2, 3, 4, dtype=dt), rnd(2, 4, 4, dtype=dt), rnd(2, 4, 3, dtype=dt)
        cases.append(make_case('sdpa/%s/basic' % fl(dt), 'sdpa', [q, k, v], sdpa_ref,
                               diff=[0, 1, 2]))
    q, k, v = rnd(1, 2, 4, 3), rnd(1, 2, 4, 3), rnd(1, 2, 4, 3)
    cases.append(make_case('sdpa/f32/causal', 'sdpa', [q, k, v],
                           lambda q, k, v: sdpa_ref(q, k, v, is_causal=True), diff=[0, 1, 2],
                           opts={'is_causal': True}))
    q, k, v = rnd(2, 3, 4), rnd(2, 5, 4), rnd(2, 5, 4)
    cases.append(make_case('sdpa/f32/causal_l3_s5', 'sdpa', [q, k, v],
                           lambda q, k, v: sdpa_ref(q, k, v, is_causal=True), diff=[0, 1, 2],
                           opts={'is_causal': True}))
    bmask = torch.tensor([[True, True, False, True, False], [True, False, True, True, True],
                          [False, True, True, False, True]])
    cases.append(make_case('sdpa/f32/bool_mask', 'sdpa', [q, k, v, bmask],
                           lambda q, k, v, m: sdpa_ref(q, k, v, attn_mask=m), diff=[0, 1, 2]))
    fmask = rnd(3, 5)
    cases.append(make_case('sdpa/f32/float_mask', 'sdpa', [q, k, v, fmask],
                           lambda q, k, v, m: sdpa_ref(q, k, v, attn_mask=m), diff=[0, 1, 2]))
    cases.append(make_case('sdpa/f32/scale', 'sdpa', [q, k, v],
                           lambda q, k, v: sdpa_ref(q, k, v, scale=0.3), diff=[0, 1, 2],
                           opts={'scale': 0.3}))
    # float16 and bfloat16 (computed in float32)
    cases += lowp_cases('dim1', 'softmax', [rnd(3, 6, lo=-3, hi=3)], lambda x: F.softmax(x, 1),
                        opts={'dim': 1})
    cases += lowp_cases('basic', 'linear', [rnd(3, 8), rnd(4, 8), rnd(4)], F.linear)
    # non-contiguous inputs (transposed before the op)
    cases.append(make_case('linear/f32/transposed_input_and_weight', 'linear',
                           [rnd(5, 4), rnd(5, 3), rnd(3)], F.linear, diff=[0, 1, 2],
                           t_inputs=[0, 1]))
    for op, fn in (('softmax', F.softmax), ('log_softmax', F.log_softmax)):
        cases.append(make_case('%s/f32/transposed_dim1' % op, op, [rnd(5, 3, lo=-3, hi=3)],
                               lambda x, fn=fn: fn(x, 1), diff=[0], opts={'dim': 1},
                               t_inputs=[0]))
    cases.append(make_case('layer_norm/f32/transposed', 'layer_norm',
                           [rnd(3, 5) * 2, rnd(3), rnd(3)],
                           lambda x, w, b: F.layer_norm(x, [3], w, b), diff=[0, 1, 2],
                           opts={'normalized_shape': [3]}, t_inputs=[0]))
    cases.append(make_case('cross_entropy/f32/transposed_logits', 'cross_entropy',
                           [rnd(4, 3, lo=-3, hi=3), torch.tensor([1, 0, 3])],
                           F.cross_entropy, diff=[0], t_inputs=[0]))
    cases.append(make_case('mse_loss/f32/transposed', 'mse_loss', [rnd(4, 3), rnd(3, 4)],
                           F.mse_loss, diff=[0, 1], opts={'reduction': 'mean'}, t_inputs=[0]))
    cases.append(make_case('embedding/f32/transposed_ids', 'embedding',
                           [torch.tensor([[0, 3], [2, 2], [1, 0]]), rnd(4, 2)], F.embedding,
                           diff=[1], t_inputs=[0]))
    # large: parallel kernels (digests instead of values)
    for op, fn in (('softmax', F.softmax), ('log_softmax', F.log_softmax)):
        for dim in (0, 1):
            cases.append(make_case('%s/f32/large_dim%d' % (op, dim), op, [Pattern(BIG)],
                                   lambda x, fn=fn, dim=dim: fn(x, dim), diff=[0],
                                   opts={'dim': dim}, large=True))
    cases.append(make_case('linear/f32/large', 'linear',
                           [Pattern((256, 300), div=2000), Pattern((200, 300), mul=31, div=2000),
                            Pattern((200,), mul=3, mod=17, add=-8, div=8)],
                           F.linear, diff=[0, 1, 2], large=True, rtol=1e-4))
    cases.append(make_case('conv2d/f32/large_padding1', 'conv2d',
                           [Pattern((4, 8, 34, 34), div=1000), Pattern((16, 8, 3, 3), mul=31,
                                                                       div=1000),
                            Pattern((16,), mul=3, mod=17, add=-8, div=8)],
                           lambda x, w, b: F.conv2d(x, w, b, padding=1), diff=[0, 1, 2],
                           opts={'padding': 1}, large=True, rtol=1e-4))
    cases.append(make_case('conv2d/f32/large_groups_stride', 'conv2d',
                           [Pattern((2, 8, 66, 66), div=1000), Pattern((8, 4, 3, 3), mul=31,
                                                                       div=1000)],
                           lambda x, w: F.conv2d(x, w, None, stride=2, groups=2),
                           diff=[0, 1], opts={'stride': 2, 'groups': 2}, large=True, rtol=1e-4))
    cases.append(make_case('max_pool2d/f32/large', 'max_pool2d',
                           [distinct_pattern((4, 16, 64, 64)), 2],
                           lambda x, k: F.max_pool2d(x, k), diff=[0], large=True))
    cases.append(make_case('avg_pool2d/f32/large', 'avg_pool2d', [Pattern((4, 16, 64, 64)), 3],
                           lambda x, k: F.avg_pool2d(x, k, stride=2, padding=1), diff=[0],
                           opts={'stride': 2, 'padding': 1}, large=True))
    cases.append(make_case('adaptive_avg_pool2d/f32/large', 'adaptive_avg_pool2d',
                           [Pattern((4, 16, 64, 64)), 7],
                           lambda x, o: F.adaptive_avg_pool2d(x, o), diff=[0], large=True))

    def bn_train_big(x, rm, rv, w, b):
        rm, rv = rm.clone(), rv.clone()
        return F.batch_norm(x, rm, rv, w, b, training=True, momentum=0.1, eps=1e-5), rm, rv
    cases.append(make_case('batch_norm/f32/large_train', 'batch_norm',
                           [Pattern((64, 32, 8, 8)), Pattern((32,), mul=3, mod=17, add=-8, div=16),
                            Pattern((32,), mul=5, mod=13, add=1, div=4),
                            Pattern((32,), mul=7, mod=11, add=1, div=4),
                            Pattern((32,), mul=3, mod=7, add=-3, div=2)],
                           bn_train_big, diff=[0, 3, 4],
                           opts={'training': True, 'momentum': 0.1, 'eps': 1e-5}, large=True))
    cases.append(make_case('layer_norm/f32/large', 'layer_norm',
                           [Pattern((512, 256)), Pattern((256,), mul=5, mod=13, add=1, div=4),
                            Pattern((256,), mul=3, mod=7, add=-3, div=2)],
                           lambda x, w, b: F.layer_norm(x, [256], w, b), diff=[0, 1, 2],
                           opts={'normalized_shape': [256]}, large=True))
    cases.append(make_case('cross_entropy/f32/large_smoothing', 'cross_entropy',
                           [Pattern((8192, 10)), Pattern((8192,), I64, mul=7, mod=10, add=0,
                                                         div=1)],
                           lambda x, t: F.cross_entropy(x, t, label_smoothing=0.1), diff=[0],
                           opts={'label_smoothing': 0.1}, large=True))
    cases.append(make_case('cross_entropy/f32/large_none', 'cross_entropy',
                           [Pattern((8192, 10)), Pattern((8192,), I64, mul=7, mod=10, add=0,
                                                         div=1)],
                           lambda x, t: F.cross_entropy(x, t, reduction='none'), diff=[0],
                           opts={'reduction': 'none'}, large=True))
    cases.append(make_case('embedding/f32/large', 'embedding',
                           [Pattern((40, 50), I64, mul=7919, mod=1000, add=0, div=1),
                            Pattern((1000, 64))],
                           F.embedding, diff=[1], large=True))
    cases.append(make_case('mse_loss/f32/large', 'mse_loss',
                           [Pattern(BIG), Pattern(BIG, mul=31)],
                           F.mse_loss, diff=[0, 1], opts={'reduction': 'mean'}, large=True))
    cases.append(make_case('sdpa/f32/large_causal', 'sdpa',
                           [Pattern((4, 128, 64), div=1000), Pattern((4, 128, 64), mul=31,
                                                                     div=1000),
                            Pattern((4, 128, 64), mul=17)],
                           lambda q, k, v: sdpa_ref(q, k, v, is_causal=True), diff=[0, 1, 2],
                           opts={'is_causal': True}, large=True, rtol=1e-4))
    return write_fixture('nn_functional', cases, 'PyTorch values for torch.nn.functional.')


# ---------------------------------------------------------------------------------------------
# dtype promotion table

def gen_promotion():
    names = ['float32', 'float64', 'float16', 'bfloat16', 'int64', 'int32', 'uint8', 'bool',
             'int8', 'int16']
    operands = [{'dtype': n} for n in names]
    operands += [{'dtype': 'float64', 'zero_dim': True}, {'dtype': 'int64', 'zero_dim': True},
                 {'number': 2}, {'number': 2.5}]
    ops = {'add': torch.add, 'sub': torch.sub, 'mul': torch.mul, 'div': torch.div}

    def make(o):
        if 'number' in o:
            return o['number']
        shape = () if o.get('zero_dim') else (2,)
        return torch.ones(shape, dtype=DTYPES[o['dtype']])
    cases = []
    for op, fn in ops.items():
        for a in operands:
            for b in operands:
                if 'number' in a and 'number' in b:
                    continue
                try:
                    r = fn(make(a), make(b))
                    result = DTYPE_NAMES[r.dtype]
                except RuntimeError:
                    result = 'error'
                cases.append({'op': op, 'a': a, 'b': b, 'result': result})
    lines = ['-- spec/fixtures/promotion.lua: result dtypes of binary ops in PyTorch; a, b are '
             'tensor operands ({dtype, zero_dim}) or Lua numbers ({number}); "error" means '
             'PyTorch refuses.',
             '-- Generated by tools/gen_fixtures.py with torch %s; do not edit by hand.'
             % torch.__version__, 'return {']
    for c in cases:
        lines.append('  {op = %s, a = %s, b = %s, result = %s},' % (
            lua_value(c['op']), lua_value(c['a']), lua_value(c['b']), lua_value(c['result'])))
    lines.append('}')
    return 'promotion', '\n'.join(lines) + '\n'


def write_files(files, out_dir, check, script):
    """Writes each (name, text) of files to out_dir/name.lua, or with check only compares them
    with the files there (the same data up to rounding noise: tools/fixture_compare.py); returns
    the exit status (1: stale files, listed with their first difference)."""
    os.makedirs(out_dir, exist_ok=True)
    stale = []
    for name, text in files:
        path = os.path.join(out_dir, name + '.lua')
        if check:
            old = open(path).read() if os.path.exists(path) else None
            diff = fixture_difference(old, text)
            if diff:
                stale.append('%s (%s)' % (path, diff))
        else:
            with open(path, 'w') as f:
                f.write(text)
            print('%-50s %7d bytes' % (os.path.relpath(path, ROOT), len(text)))
    if stale:
        print('stale fixtures (rerun %s):' % script, *stale, sep='\n  ')
        return 1
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--check', action='store_true', help='compare with the files on disk')
    ap.add_argument('--out', default=OUT_DIR)
    args = ap.parse_args()
    torch.set_num_threads(1)  # reproducible reductions
    files = [gen_pointwise(), gen_reduce(), gen_linalg(), gen_index(), gen_nn(), gen_promotion()]
    return write_files(files, args.out, args.check, 'tools/gen_fixtures.py')

if __name__ == '__main__':
    sys.exit(main())
