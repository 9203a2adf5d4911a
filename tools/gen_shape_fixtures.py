#!/usr/bin/python3
"""tools/gen_shape_fixtures.py: PyTorch reference values for spec/tensor/shape_spec.lua: repeat,
tile, repeat_interleave, flip, fliplr, flipud, roll, rot90, movedim, unflatten, tensor_split,
tril, triu, tril_indices, triu_indices, diag, diagonal, diag_embed, trace, broadcast_to,
broadcast_tensors, block_diag, cartesian_prod, meshgrid, F.pad and F.one_hot.

Regenerate (needs PyTorch 1.13; Debian's python3-torch is enough, so use /usr/bin/python3):

    /usr/bin/python3 tools/gen_shape_fixtures.py            # writes spec/fixtures/shape.lua
    /usr/bin/python3 tools/gen_shape_fixtures.py --check    # fails if the committed file differs

Cases use tools/gen_fixtures.py's format; a case's non-tensor arguments are in its opts (the
spec's runner for the op passes them positionally or as options). Gradients are those of the
first output for a random upstream gradient. Empty inputs are cases of the spec itself (the
fixture reader builds no empty tensors).
"""
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_fixtures import F32, F64, I64, fixture_main, make_case, rint, rnd, write_fixture  # noqa: E402

I32, U8, BOOL, F16, BF16 = torch.int32, torch.uint8, torch.bool, torch.float16, torch.bfloat16


def t(values, dtype=F32):
    return torch.tensor(values, dtype=dtype)


def typed(dtype, *shape):
    """Values of every dtype: small integers (bool: their parity), exact in each."""
    v = rint(-5, 6, *shape)
    if dtype == BOOL:
        return v % 2 == 0
    if dtype == U8:
        return (v + 5).to(U8)
    return v.to(dtype)


DT_NAMES = {F32: 'f32', F64: 'f64', I64: 'i64', I32: 'i32', U8: 'u8', BOOL: 'bool', F16: 'f16',
            BF16: 'bf16'}
ALL = (F32, F64, F16, BF16, I64, I32, U8, BOOL)


def repeat_cases():
    c = []
    for dt in ALL:
        c.append(make_case('repeat/%s' % DT_NAMES[dt], 'repeat', [typed(dt, 2, 3)],
                           lambda x: x.repeat(2, 1, 3), opts={'sizes': [2, 1, 3]}))
    c.append(make_case('repeat/grad', 'repeat', [rnd(2, 3, dtype=F64)],
                       lambda x: x.repeat(3, 2), diff=(0,), opts={'sizes': [3, 2]}))
    c.append(make_case('repeat/size1_dims', 'repeat', [rnd(1, 3, 1)],
                       lambda x: x.repeat(2, 2, 1, 4), diff=(0,), opts={'sizes': [2, 2, 1, 4]}))
    c.append(make_case('repeat/zero', 'repeat', [rnd(2, 3)], lambda x: x.repeat(0, 2),
                       opts={'sizes': [0, 2]}))
    c.append(make_case('repeat/transposed', 'repeat', [rnd(3, 4)], lambda x: x.repeat(2, 2),
                       diff=(0,), opts={'sizes': [2, 2]}, t_inputs=(0,)))
    c.append(make_case('repeat/0d', 'repeat', [t(2.5)], lambda x: x.repeat(3, 2),
                       opts={'sizes': [3, 2]}))
    # 5 repeated dims of size > 1: more than 8 dims expanded at once, so two passes
    c.append(make_case('repeat/many_dims', 'repeat', [rnd(2, 2, 2, 2, 2, dtype=F64)],
                       lambda x: x.repeat(2, 1, 2, 2, 2, 3), diff=(0,),
                       opts={'sizes': [2, 1, 2, 2, 2, 3]}))
    c.append(make_case('tile/short', 'tile', [rnd(2, 3)], lambda x: x.tile((2,)), diff=(0,),
                       opts={'dims': [2]}))
    c.append(make_case('tile/long', 'tile', [typed(I64, 3)], lambda x: x.tile((2, 2)),
                       opts={'dims': [2, 2]}))
    ri = 'repeat_interleave'
    for dt in (F32, I64, BOOL, F16):
        c.append(make_case('%s/int/%s' % (ri, DT_NAMES[dt]), ri, [typed(dt, 2, 3)],
                           lambda x: x.repeat_interleave(2), opts={'repeats': 2}))
    for dim in (0, 1, -1):
        c.append(make_case('%s/int/dim%d' % (ri, dim), ri, [rnd(2, 3, dtype=F64)],
                           lambda x, d=dim: x.repeat_interleave(3, dim=d), diff=(0,),
                           opts={'repeats': 3, 'dim': dim}))
    c.append(make_case('%s/tensor/dim0' % ri, ri, [rnd(3, 2, dtype=F64), t([2, 0, 3], I64)],
                       lambda x, r: x.repeat_interleave(r, dim=0), diff=(0,),
                       opts={'dim': 0}))
    c.append(make_case('%s/tensor/dim-1' % ri, ri, [typed(I32, 2, 3), t([1, 2, 1], I64)],
                       lambda x, r: x.repeat_interleave(r, dim=-1), opts={'dim': -1}))
    c.append(make_case('%s/tensor/flat' % ri, ri, [rnd(2, 2), t([1, 2, 0, 1], I64)],
                       lambda x, r: x.repeat_interleave(r), diff=(0,)))
    c.append(make_case('%s/tensor/one_count' % ri, ri, [rnd(2, 3), t([2], I64)],
                       lambda x, r: x.repeat_interleave(r, dim=1), opts={'dim': 1}))
    c.append(make_case('%s/tensor/output_size' % ri, ri, [rnd(2, 3), t([1, 2], I64)],
                       lambda x, r: x.repeat_interleave(r, dim=0, output_size=3),
                       opts={'dim': 0, 'output_size': 3}))
    c.append(make_case('%s/indices' % ri, 'repeat_interleave_indices', [t([1, 0, 3, 2], I64)],
                       lambda r: torch.repeat_interleave(r)))
    c.append(make_case('%s/indices/i32' % ri, 'repeat_interleave_indices', [t([2, 1], I32)],
                       lambda r: torch.repeat_interleave(r)))
    return c


def flip_cases():
    c = []
    for dt in ALL:
        c.append(make_case('flip/%s' % DT_NAMES[dt], 'flip', [typed(dt, 2, 3, 4)],
                           lambda x: x.flip(0, 2), opts={'dims': [0, 2]}))
    c.append(make_case('flip/grad/neg', 'flip', [rnd(3, 4, dtype=F64)], lambda x: x.flip(-1),
                       diff=(0,), opts={'dims': [-1]}))
    c.append(make_case('flip/transposed', 'flip', [rnd(3, 4)], lambda x: x.flip(0, 1),
                       diff=(0,), opts={'dims': [0, 1]}, t_inputs=(0,)))
    c.append(make_case('flip/size1', 'flip', [rnd(1, 4, 1)], lambda x: x.flip(0, 2),
                       opts={'dims': [0, 2]}))
    c.append(make_case('fliplr', 'fliplr', [rnd(3, 4, 2, dtype=F64)], lambda x: x.fliplr(),
                       diff=(0,)))
    c.append(make_case('flipud', 'flipud', [typed(I64, 3, 2)], lambda x: x.flipud()))
    c.append(make_case('flipud/1d', 'flipud', [rnd(5)], lambda x: x.flipud(), diff=(0,)))
    for dt in (F32, I64, BOOL, BF16):
        c.append(make_case('roll/%s' % DT_NAMES[dt], 'roll', [typed(dt, 3, 4)],
                           lambda x: x.roll((1, -3), (0, 1)),
                           opts={'shifts': [1, -3], 'dims': [0, 1]}))
    c.append(make_case('roll/flat', 'roll', [rnd(3, 4, dtype=F64)], lambda x: x.roll(5),
                       diff=(0,), opts={'shifts': 5}))
    c.append(make_case('roll/flat/neg', 'roll', [rnd(2, 3)], lambda x: x.roll(-7),
                       opts={'shifts': -7}))
    c.append(make_case('roll/neg_dim/big', 'roll', [rnd(2, 5, dtype=F64)],
                       lambda x: x.roll(13, -1), diff=(0,), opts={'shifts': 13, 'dims': -1}))
    c.append(make_case('roll/whole_turn', 'roll', [rnd(2, 3)], lambda x: x.roll(3, 1),
                       opts={'shifts': 3, 'dims': 1}))
    c.append(make_case('roll/same_dim_twice', 'roll', [rnd(4, 3)],
                       lambda x: x.roll((1, 2), (0, 0)), opts={'shifts': [1, 2], 'dims': [0, 0]}))
    c.append(make_case('roll/transposed', 'roll', [rnd(3, 4)], lambda x: x.roll(1, 0),
                       diff=(0,), opts={'shifts': 1, 'dims': 0}, t_inputs=(0,)))
    for k in (0, 1, 2, 3, -1, 5, -6):
        c.append(make_case('rot90/k%d' % k, 'rot90', [rnd(2, 3, dtype=F64)],
                           lambda x, k=k: x.rot90(k), diff=(0,), opts={'k': k}))
    c.append(make_case('rot90/dims', 'rot90', [typed(I64, 2, 3, 4)],
                       lambda x: x.rot90(1, (2, 0)), opts={'k': 1, 'dims': [2, 0]}))
    c.append(make_case('rot90/neg_dims', 'rot90', [rnd(2, 3, 4)],
                       lambda x: x.rot90(3, (-1, -2)), diff=(0,), opts={'k': 3, 'dims': [-1, -2]}))
    return c


def dims_cases():
    c = []
    c.append(make_case('movedim/int', 'movedim', [rnd(2, 3, 4, dtype=F64)],
                       lambda x: x.movedim(0, -1), diff=(0,), opts={'source': 0, 'destination': -1}))
    c.append(make_case('movedim/list', 'movedim', [typed(I64, 2, 3, 4, 5)],
                       lambda x: x.movedim((0, 3), (2, 0)),
                       opts={'source': [0, 3], 'destination': [2, 0]}))
    c.append(make_case('moveaxis', 'moveaxis', [rnd(2, 3, 4)],
                       lambda x: torch.moveaxis(x, (1, 2), (0, 1)),
                       opts={'source': [1, 2], 'destination': [0, 1]}))
    c.append(make_case('unflatten/mid', 'unflatten', [rnd(2, 12, 3, dtype=F64)],
                       lambda x: x.unflatten(1, (3, -1, 2)), diff=(0,),
                       opts={'dim': 1, 'sizes': [3, -1, 2]}))
    c.append(make_case('unflatten/neg', 'unflatten', [typed(BOOL, 2, 6)],
                       lambda x: x.unflatten(-1, (2, 3)), opts={'dim': -1, 'sizes': [2, 3]}))
    c.append(make_case('unflatten/one', 'unflatten', [rnd(4)], lambda x: x.unflatten(0, (4,)),
                       opts={'dim': 0, 'sizes': [4]}))
    ts = 'tensor_split'
    for n in (1, 3, 5, 9):
        c.append(make_case('%s/sections%d' % (ts, n), ts, [rnd(7, 2, dtype=F64)],
                           lambda x, n=n: x.tensor_split(n), diff=(0,), opts={'sections': n}))
    c.append(make_case('%s/sections/dim' % ts, ts, [typed(I64, 2, 5)],
                       lambda x: x.tensor_split(2, dim=-1), opts={'sections': 2, 'dim': -1}))
    for name, idx in [('indices', [1, 4]), ('unsorted', [4, 1, 6]), ('beyond', [2, 10]),
                      ('negative', [-2, -1]), ('one', [3])]:
        c.append(make_case('%s/%s' % (ts, name), ts, [rnd(2, 6)],
                           lambda x, i=idx: x.tensor_split(i, dim=1), diff=(0,),
                           opts={'indices': idx, 'dim': 1}))
    c.append(make_case('%s/tensor_indices' % ts, ts, [rnd(5), t([1, 3], I64)],
                       lambda x, i: x.tensor_split(i)))
    c.append(make_case('%s/tensor_sections' % ts, ts, [rnd(5), t(2, I64)],
                       lambda x, i: x.tensor_split(i)))
    return c


def tri_cases():
    c = []
    for op in ('tril', 'triu'):
        for k in (0, 1, -1, 2, -3, 10, -10):
            c.append(make_case('%s/k%d' % (op, k), op, [rnd(3, 4, dtype=F64)],
                               lambda x, k=k, op=op: getattr(x, op)(k), diff=(0,),
                               opts={'diagonal': k}))
        for dt in ALL:
            c.append(make_case('%s/%s/batched' % (op, DT_NAMES[dt]), op, [typed(dt, 2, 4, 3)],
                               lambda x, op=op: getattr(x, op)(-1), opts={'diagonal': -1}))
        c.append(make_case('%s/nan_off_triangle' % op, op,
                           [t([[1.0, float('nan')], [float('inf'), 2.0]])],
                           lambda x, op=op: getattr(x, op)()))
        c.append(make_case('%s/transposed' % op, op, [rnd(3, 5)],
                           lambda x, op=op: getattr(x, op)(1), diff=(0,), opts={'diagonal': 1},
                           t_inputs=(0,)))
        for (r, cc, off) in [(3, 4, 0), (4, 3, -1), (3, 3, 1), (1, 5, 2), (5, 2, -4), (3, 3, 7),
                             (3, 3, -7), (0, 3, 0)]:
            c.append(make_case('%s_indices/%dx%d/%d' % (op, r, cc, off), op + '_indices', [],
                               lambda r=r, cc=cc, off=off, op=op:
                               getattr(torch, op + '_indices')(r, cc, off),
                               opts={'row': r, 'col': cc, 'offset': off}))
        c.append(make_case('%s_indices/i32' % op, op + '_indices', [],
                           lambda op=op: getattr(torch, op + '_indices')(3, 2, dtype=I32),
                           opts={'row': 3, 'col': 2, 'offset': 0, 'dtype': 'int32'}))
    return c


def diag_cases():
    c = []
    for k in (0, 1, -2, 4):
        c.append(make_case('diag/vec/k%d' % k, 'diag', [rnd(3, dtype=F64)],
                           lambda x, k=k: x.diag(k), diff=(0,), opts={'diagonal': k}))
    for k in (0, 2, -1, -2):
        c.append(make_case('diag/mat/k%d' % k, 'diag', [rnd(3, 4, dtype=F64)],
                           lambda x, k=k: x.diag(k), diff=(0,), opts={'diagonal': k}))
    for dt in (I64, BOOL, U8):  # PyTorch 1.13's CPU diag has no float16
        c.append(make_case('diag/%s' % DT_NAMES[dt], 'diag', [typed(dt, 3)],
                           lambda x: x.diag(1), opts={'diagonal': 1}))
    for (k, d1, d2) in [(0, 0, 1), (1, 0, 1), (-1, 1, 0), (0, -1, 0), (2, 2, 0), (-2, 1, 2)]:
        c.append(make_case('diagonal/%d/%d/%d' % (k, d1, d2), 'diagonal',
                           [rnd(3, 4, 5, dtype=F64)],
                           lambda x, k=k, d1=d1, d2=d2: x.diagonal(k, d1, d2), diff=(0,),
                           opts={'offset': k, 'dim1': d1, 'dim2': d2}))
    c.append(make_case('diagonal/int', 'diagonal', [typed(I32, 4, 4)], lambda x: x.diagonal()))
    c.append(make_case('diagonal/transposed', 'diagonal', [rnd(4, 3)],
                       lambda x: x.diagonal(1), diff=(0,), opts={'offset': 1}, t_inputs=(0,)))
    for (k, d1, d2) in [(0, -2, -1), (1, 0, 2), (-2, 2, 0), (1, -1, 1)]:
        c.append(make_case('diag_embed/%d/%d/%d' % (k, d1, d2), 'diag_embed',
                           [rnd(2, 3, dtype=F64)],
                           lambda x, k=k, d1=d1, d2=d2: torch.diag_embed(x, k, d1, d2),
                           diff=(0,), opts={'offset': k, 'dim1': d1, 'dim2': d2}))
    c.append(make_case('diag_embed/bool', 'diag_embed', [typed(BOOL, 3)],
                       lambda x: torch.diag_embed(x)))
    for dt in (F64, F32, I64, I32, U8):  # no float16/bfloat16 trace in PyTorch 1.13's CPU
        c.append(make_case('trace/%s' % DT_NAMES[dt], 'trace', [typed(dt, 3, 4)],
                           lambda x: x.trace(), diff=(0,) if dt == F64 else ()))
    return c


def broadcast_cases():
    c = []
    c.append(make_case('broadcast_to', 'broadcast_to', [rnd(3, 1, dtype=F64)],
                       lambda x: x.broadcast_to((2, 3, 4)), diff=(0,), opts={'sizes': [2, 3, 4]}))
    c.append(make_case('broadcast_to/keep', 'broadcast_to', [typed(I64, 3)],
                       lambda x: x.broadcast_to((2, -1)), opts={'sizes': [2, -1]}))
    c.append(make_case('broadcast_tensors', 'broadcast_tensors',
                       [rnd(3, 1, dtype=F64), rnd(4, dtype=F64), t(2.0, F64)],
                       lambda a, b, s: torch.broadcast_tensors(a, b, s), diff=(0,)))
    c.append(make_case('broadcast_tensors/mixed', 'broadcast_tensors',
                       [typed(I64, 2, 1, 3), typed(BOOL, 4, 1)],
                       lambda a, b: torch.broadcast_tensors(a, b)))
    c.append(make_case('block_diag', 'block_diag',
                       [rnd(2, 3, dtype=F64), rnd(1, dtype=F64), t(4.0, F64), rnd(2, 2, dtype=F64)],
                       lambda *xs: torch.block_diag(*xs), diff=(0, 3)))
    c.append(make_case('block_diag/promote', 'block_diag',
                       [t(1, I64), typed(I32, 2), rnd(2, 2)], lambda *xs: torch.block_diag(*xs)))
    c.append(make_case('block_diag/one', 'block_diag', [typed(BOOL, 2, 2)],
                       lambda x: torch.block_diag(x)))
    c.append(make_case('cartesian_prod', 'cartesian_prod',
                       [rnd(2, dtype=F64), rnd(3, dtype=F64), rnd(2, dtype=F64)],
                       lambda *xs: torch.cartesian_prod(*xs), diff=(0, 1)))
    c.append(make_case('cartesian_prod/int', 'cartesian_prod', [typed(I64, 3), typed(I64, 2)],
                       lambda *xs: torch.cartesian_prod(*xs)))
    c.append(make_case('cartesian_prod/one', 'cartesian_prod', [typed(I64, 3)],
                       lambda *xs: torch.cartesian_prod(*xs)))
    for ix in ('ij', 'xy'):
        c.append(make_case('meshgrid/%s' % ix, 'meshgrid',
                           [rnd(2, dtype=F64), rnd(3, dtype=F64), rnd(4, dtype=F64)],
                           lambda *xs, ix=ix: torch.meshgrid(*xs, indexing=ix), diff=(0,),
                           opts={'indexing': ix}))
        c.append(make_case('meshgrid/%s/two' % ix, 'meshgrid', [typed(I64, 2), typed(I64, 3)],
                           lambda *xs, ix=ix: torch.meshgrid(*xs, indexing=ix),
                           opts={'indexing': ix}))
        c.append(make_case('meshgrid/%s/one' % ix, 'meshgrid', [rnd(3)],
                           lambda *xs, ix=ix: torch.meshgrid(*xs, indexing=ix),
                           opts={'indexing': ix}))
    c.append(make_case('meshgrid/scalar', 'meshgrid', [t(2.0), rnd(3)],
                       lambda *xs: torch.meshgrid(*xs, indexing='ij')))
    return c


def pad_cases():
    c = []
    x3 = rnd(2, 3, 5, dtype=F64)
    x4 = rnd(1, 2, 4, 5, dtype=F64)
    x5 = rnd(1, 2, 3, 4, 3, dtype=F64)
    specs = [('reflect', x3, [2, 1]), ('reflect', x4, [1, 3, 2, 0]), ('reflect', x3, [-1, 2]),
             ('reflect', x4[0], [1, 1, 2, 3]), ('reflect', x5, [1, 2, 0, 1, 2, 1]),
             ('replicate', x3, [3, 1]), ('replicate', x4, [2, 0, 1, 4]),
             ('replicate', x5, [1, 0, 2, 1, 0, 3]), ('replicate', x3, [-2, 3]),
             ('circular', x3, [2, 5]), ('circular', x4, [1, 2, 3, 4]),
             ('circular', x5, [1, 1, 2, 0, 3, 1]), ('circular', x3, [-1, 2]),
             ('circular', x3, [2, -3]), ('constant', x3, [1, 2, 0, 1, 2, 2]),
             ('constant', x4, [-1, 2, 1, -2])]
    for i, (mode, x, p) in enumerate(specs):
        c.append(make_case('pad/%s/%d' % (mode, i), 'pad', [x],
                           lambda x, m=mode, p=p: F.pad(x, p, mode=m), diff=(0,),
                           opts={'pad': p, 'mode': mode}))
    c.append(make_case('pad/constant/value', 'pad', [typed(I64, 2, 3)],
                       lambda x: F.pad(x, [1, 2], value=7), opts={'pad': [1, 2], 'value': 7}))
    c.append(make_case('pad/constant/bool', 'pad', [typed(BOOL, 2, 3)],
                       lambda x: F.pad(x, [0, 1, 1, 0], value=1),
                       opts={'pad': [0, 1, 1, 0], 'value': 1}))
    c.append(make_case('pad/circular/int', 'pad', [typed(I64, 1, 2, 4)],
                       lambda x: F.pad(x, [1, 2], mode='circular'),
                       opts={'pad': [1, 2], 'mode': 'circular'}))
    c.append(make_case('one_hot', 'one_hot', [t([[0, 3], [2, 1]], I64)],
                       lambda x: F.one_hot(x, 5), opts={'num_classes': 5}))
    c.append(make_case('one_hot/infer', 'one_hot', [t([1, 0, 4], I64)],
                       lambda x: F.one_hot(x)))
    c.append(make_case('one_hot/0d', 'one_hot', [t(2, I64)], lambda x: F.one_hot(x, 3),
                       opts={'num_classes': 3}))
    return c


def render():
    cases = (repeat_cases() + flip_cases() + dims_cases() + tri_cases() + diag_cases() +
             broadcast_cases() + pad_cases())
    return write_fixture('shape', cases, 'shape functions, F.pad and F.one_hot '
                         '(tools/gen_shape_fixtures.py)')


if __name__ == '__main__':
    sys.exit(fixture_main(__doc__, 'tools/gen_shape_fixtures.py', render))
