#!/usr/bin/python3
"""tools/gen_dtype_fixtures.py: PyTorch reference values for the int8/int16 dtypes and for the
16-bit inputs of the CPU nn ops (spec/tensor/int_dtypes_spec.lua, spec/nn/half_nn_spec.lua).

Regenerate (needs PyTorch; Debian's python3-torch is enough, so use /usr/bin/python3):

    /usr/bin/python3 tools/gen_dtype_fixtures.py          # writes the two files below
    /usr/bin/python3 tools/gen_dtype_fixtures.py --check  # fails if the committed files differ

Writes spec/fixtures/int_dtypes.lua (arithmetic with wraparound, mixed-dtype promotion,
comparisons, reductions and conversions of int8/int16 tensors) and spec/fixtures/half_nn.lua
(layer_norm, batch_norm, group_norm, the pools, log_softmax, nll_loss and cross_entropy on
bfloat16 and float16 inputs, forward and backward). The case format is tools/gen_fixtures.py's
(this script uses its writer and case builder).

bfloat16 cases are PyTorch 1.13's own CPU bfloat16 kernels. PyTorch 1.13 has no CPU float16
kernels for these ops ("not implemented for 'Half'"), so float16 cases are the float32
computation on the float16 inputs, rounded to float16 (what ddplua's CPU kernels do for both
16-bit dtypes), with gradients through the same casts.
"""
import argparse
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_fixtures as G  # noqa: E402  (the writer, case builder and seeded generator)

ROOT = G.ROOT
OUT_DIR = G.OUT_DIR
I8, I16, U8 = torch.int8, torch.int16, torch.uint8
BF16, F16 = torch.bfloat16, torch.float16


def ints(lo, hi, *shape, dtype):
    return torch.randint(lo, hi, shape, generator=G.GEN, dtype=torch.int64).to(dtype)


# ---------------------------------------------------------------------------------------------
# int8 / int16

def gen_int():
    cases = []
    mk = G.make_case
    a8 = torch.tensor([127, -128, 100, -100, 5, 0], dtype=I8)
    b8 = torch.tensor([1, -1, 100, -100, -7, 3], dtype=I8)
    a16 = torch.tensor([32767, -32768, 20000, -20000, 300, 0], dtype=I16)
    b16 = torch.tensor([1, -1, 20000, -20000, -7, 3], dtype=I16)
    u8 = torch.tensor([255, 0, 200, 1, 7, 128], dtype=U8)
    f32 = torch.tensor([0.5, -1.25, 2.0, 3.75, -8.5, 100.0])
    # wraparound within the dtype, as PyTorch (two's complement)
    for op, fn in (('add', torch.add), ('sub', torch.sub), ('mul', torch.mul)):
        cases.append(mk('%s/int8/wrap' % op, op, [a8, b8], fn))
        cases.append(mk('%s/int16/wrap' % op, op, [a16, b16], fn))
        # promotion: int8 with uint8 widens to int16, int8 with int16 to int16, int with float
        cases.append(mk('%s/int8_uint8' % op, op, [a8, u8], fn))
        cases.append(mk('%s/int8_int16' % op, op, [a8, a16], fn))
        cases.append(mk('%s/uint8_int16' % op, op, [u8, b16], fn))
        cases.append(mk('%s/int16_float32' % op, op, [a16, f32], fn))
        cases.append(mk('%s/int8_int32' % op, op, [b8, torch.arange(6, dtype=torch.int32)], fn))
        # a Lua integer does not widen the tensor: 127 + 1 is -128 in int8
        cases.append(mk('%s/int8_number' % op, op, [a8, 1], fn))
        cases.append(mk('%s/int16_number' % op, op, [a16, 3], fn))
        cases.append(mk('%s/int8_float_number' % op, op, [a8, 0.5], fn))
    cases.append(mk('div/int8', 'div', [a8, b8], torch.div))
    cases.append(mk('div/int16_number', 'div', [a16, 4], torch.div))
    cases.append(mk('neg/int8', 'neg', [a8], torch.neg))  # -(-128) wraps to -128
    cases.append(mk('neg/int16', 'neg', [a16], torch.neg))
    cases.append(mk('abs/int8', 'abs', [a8], torch.abs))
    cases.append(mk('abs/int16', 'abs', [a16], torch.abs))
    cases.append(mk('maximum/int8_int16', 'maximum', [a8, b16], torch.maximum))
    cases.append(mk('minimum/int8_uint8', 'minimum', [b8, u8], torch.minimum))
    for op, fn in (('eq', torch.eq), ('lt', torch.lt), ('ge', torch.ge)):
        cases.append(mk('%s/int8_int16' % op, op, [a8, b16], fn))
        cases.append(mk('%s/int8_uint8' % op, op, [b8, u8], fn))
        cases.append(mk('%s/int16_number' % op, op, [a16, 300], fn))
    # reductions: sum and prod of small integers give int64; max/min keep the dtype
    m8 = ints(-128, 128, 3, 5, dtype=I8)
    m16 = ints(-32768, 32768, 3, 5, dtype=I16)
    for tag, m in (('int8', m8), ('int16', m16)):
        cases.append(mk('sum/%s/all' % tag, 'sum', [m], torch.sum))
        cases.append(mk('sum/%s/dim1' % tag, 'sum', [m], lambda x: x.sum(1), opts={'dim': 1}))
        cases.append(mk('prod/%s/dim0' % tag, 'prod', [m], lambda x: x.prod(0), opts={'dim': 0}))
        cases.append(mk('max/%s/all' % tag, 'max', [m], torch.max))
        cases.append(mk('min/%s/dim1' % tag, 'min', [m], lambda x: x.min(1).values,
                        opts={'dim': 1}))
        cases.append(mk('argmax/%s/dim1' % tag, 'argmax', [m], lambda x: x.argmax(1),
                        opts={'dim': 1}))
    # conversions to and from every dtype (floats in range: an out-of-range float to a small
    # integer is undefined in C++ and so in PyTorch; integers narrow modulo 2^bits)
    sources = {
        'float32': torch.tensor([1.5, -2.75, 127.9, -128.5, 0.0, 99.0]),
        'float64': torch.tensor([1.5, -2.75, 127.9, -128.5, 0.0, 99.0], dtype=torch.float64),
        'float16': torch.tensor([1.5, -2.75, 127.5, -128.0, 0.0, 99.0], dtype=F16),
        'bfloat16': torch.tensor([1.5, -2.75, 127.0, -128.0, 0.0, 99.0], dtype=BF16),
        'int64': torch.tensor([70000, -70000, 200, -200, 65535, 127]),
        'int32': torch.tensor([70000, -70000, 200, -200, 65535, 127], dtype=torch.int32),
        'uint8': u8,
        'bool': torch.tensor([True, False, True, True, False, False]),
        'int8': a8,
        'int16': a16,
    }
    for sname, src in sources.items():
        for tname, tdt in (('int8', I8), ('int16', I16)):
            if sname != tname:
                cases.append(mk('to/%s_%s' % (sname, tname), 'to', [src],
                                lambda x, tdt=tdt: x.to(tdt), opts={'dtype': tname}))
    for sname, src in (('int8', a8), ('int16', a16)):
        for tdt, tname in G.DTYPE_NAMES.items():
            if tname not in ('int8', 'int16'):
                cases.append(mk('to/%s_%s' % (sname, tname), 'to', [src],
                                lambda x, tdt=tdt: x.to(tdt), opts={'dtype': tname}))
    return G.write_fixture('int_dtypes', cases, 'PyTorch values for int8 and int16 tensors.')


# ---------------------------------------------------------------------------------------------
# 16-bit inputs of the nn ops

def through_float32(fn, dt):
    """fn computed in float32 on 16-bit inputs, each floating output rounded back to dt."""
    def run(*xs):
        ys = fn(*[x.float() if isinstance(x, torch.Tensor) and x.dtype == dt else x
                  for x in xs])
        ys = ys if isinstance(ys, tuple) else (ys,)
        return tuple(y.to(dt) if y.dtype.is_floating_point else y for y in ys)
    return run


def bf16_excess(pt, ref):
    """None when PyTorch's bfloat16 case pt agrees with the float32-computed ref within the
    specs' bfloat16 tolerance (rtol = atol = 1e-2, spec/support/helpers.lua), else the largest
    difference."""
    pairs = list(zip(pt['outputs'], ref['outputs']))
    pairs += [(pt['grads'][k], ref['grads'][k]) for k in (pt.get('grads') or {})]
    worst, ok = 0.0, True
    for a, b in pairs:
        a, b = a.t.double(), b.t.double()
        d = (a - b).abs()
        worst = max(worst, float(d.max()) if d.numel() else 0.0)
        ok = ok and bool((d <= 1e-2 + 1e-2 * b.abs()).all())
    return None if ok else worst


def gen_half_nn():
    cases = []

    def add(name, op, inputs, fn, diff, opts=None):
        for dt, tag in ((BF16, 'bf16'), (F16, 'f16')):
            ins = [x.to(dt) if isinstance(x, torch.Tensor) and x.dtype.is_floating_point else x
                   for x in inputs]
            full = '%s/%s/%s' % (op, tag, name)
            state = G.GEN.get_state()  # both references draw the same upstream gradient
            ref = G.make_case(full, op, ins, through_float32(fn, dt), diff=diff, opts=opts)
            if dt == BF16:
                G.GEN.set_state(state)
                pt = G.make_case(full, op, ins, fn, diff=diff, opts=opts)
                err = bf16_excess(pt, ref)
                if err is None:
                    ref = pt
                else:
                    ref['note'] = ("PyTorch 1.13's bfloat16 kernel differs from the float32 "
                                   'computation rounded to bfloat16 by up to %.4g here (it '
                                   'rounds intermediate sums to bfloat16); the reference is the '
                                   'float32 computation' % err)
            cases.append(ref)

    x4 = G.rnd(2, 3, 4, 6) * 2 + 0.5
    add('last_dim', 'layer_norm', [x4, G.rnd(6, lo=0.5, hi=1.5), G.rnd(6)],
        lambda x, w, b: F.layer_norm(x, [6], w, b), diff=[0, 1, 2],
        opts={'normalized_shape': [6]})
    add('no_affine', 'layer_norm', [G.rnd(5, 8)], lambda x: F.layer_norm(x, [8]), diff=[0],
        opts={'normalized_shape': [8]})
    rm, rv = G.rnd(3, lo=-0.5, hi=0.5), G.rnd(3, lo=0.5, hi=1.5)
    w, b = G.rnd(3, lo=0.5, hi=1.5), G.rnd(3)

    def bn_train(x, rm, rv, w, b):
        rm, rv = rm.clone(), rv.clone()
        return F.batch_norm(x, rm, rv, w, b, training=True, momentum=0.1, eps=1e-5), rm, rv
    add('train', 'batch_norm', [x4, rm, rv, w, b], bn_train, diff=[0, 3, 4],
        opts={'training': True, 'momentum': 0.1, 'eps': 1e-5})
    add('eval', 'batch_norm', [x4, rm, rv, w, b],
        lambda x, rm, rv, w, b: (F.batch_norm(x, rm, rv, w, b, training=False), rm, rv),
        diff=[0, 3, 4], opts={'training': False})
    add('groups3', 'group_norm', [G.rnd(2, 6, 3, 3) * 2, G.rnd(6, lo=0.5, hi=1.5), G.rnd(6)],
        lambda x, w, b: F.group_norm(x, 3, w, b), diff=[0, 1, 2], opts={'num_groups': 3})
    xp = G.rndn(2, 3, 6, 6)
    add('k2', 'max_pool2d', [xp, 2], lambda x, k: F.max_pool2d(x, k), diff=[0])
    add('k3s2p1', 'max_pool2d', [xp, 3], lambda x, k: F.max_pool2d(x, k, 2, 1), diff=[0],
        opts={'stride': 2, 'padding': 1})
    add('k2', 'avg_pool2d', [xp, 2], lambda x, k: F.avg_pool2d(x, k), diff=[0])
    add('k3s2p1', 'avg_pool2d', [xp, 3], lambda x, k: F.avg_pool2d(x, k, 2, 1), diff=[0],
        opts={'stride': 2, 'padding': 1})
    add('out4', 'adaptive_avg_pool2d', [xp, 4], lambda x, o: F.adaptive_avg_pool2d(x, o),
        diff=[0])
    logits = G.rnd(5, 4, lo=-3, hi=3)
    target = torch.tensor([0, 3, 1, 1, 2])
    add('dim1', 'log_softmax', [logits], lambda x: F.log_softmax(x, 1), diff=[0],
        opts={'dim': 1})
    for red in ('mean', 'sum', 'none'):
        add(red, 'cross_entropy', [logits, target],
            lambda x, t, red=red: F.cross_entropy(x, t, reduction=red), diff=[0],
            opts={'reduction': red})
        add(red, 'nll_loss', [F.log_softmax(logits, 1), target],
            lambda x, t, red=red: F.nll_loss(x, t, reduction=red), diff=[0],
            opts={'reduction': red})
    return G.write_fixture('half_nn', cases,
                           'PyTorch values for the nn ops on bfloat16 and float16 inputs.')


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--check', action='store_true', help='compare with the files on disk')
    args = ap.parse_args()
    torch.set_num_threads(1)
    files = [(name, text.replace('Generated by tools/gen_fixtures.py',
                                 'Generated by tools/gen_dtype_fixtures.py'))
             for name, text in (gen_int(), gen_half_nn())]
    return G.write_files(files, OUT_DIR, args.check, 'tools/gen_dtype_fixtures.py')

if __name__ == '__main__':
    sys.exit(main())
