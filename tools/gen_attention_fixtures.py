#!/usr/bin/python3
"""tools/gen_attention_fixtures.py: PyTorch reference values for spec/nn/attention_spec.lua
(spec/fixtures/attention.lua): scaled dot-product attention on 4-D (B,H,L,E) inputs, the shapes
the fused ATTENTION kernels take, in float32 and float64, causal or not, L != S, E != Ev, a
custom scale, non-contiguous inputs and keys and queries spanning several of the CPU kernel's
tiles.

Regenerate (needs PyTorch; Debian's python3-torch is enough, so use /usr/bin/python3):

    /usr/bin/python3 tools/gen_attention_fixtures.py          # writes spec/fixtures/attention.lua
    /usr/bin/python3 tools/gen_attention_fixtures.py --check  # fails if the file differs

The case format is gen_fixtures.py's (whose writer and sdpa reference this reuses).
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_fixtures import F32, F64, fixture_main, fl, make_case, sdpa_ref, write_fixture  # noqa: E402

GEN = torch.Generator().manual_seed(20261129)


def rnd(*shape, dtype=F32):
    # drawn in float32 (exact in both dtypes, short to write), computed in the case's dtype
    return (torch.rand(shape, generator=GEN, dtype=torch.float64) * 4 - 2).float().to(dtype)


def gen():
    cases = []
    # (name, B, H, L, S, E, Ev)
    shapes = [('l5_s5', 2, 2, 5, 5, 4, 4), ('l7_s4_ev3', 1, 2, 7, 4, 6, 3),
              ('l3_s9', 2, 1, 3, 9, 4, 5)]
    for dt in (F32, F64):
        for name, B, H, L, S, E, Ev in shapes:
            for causal in (False, True):
                q, k, v = rnd(B, H, L, E, dtype=dt), rnd(B, H, S, E, dtype=dt), \
                    rnd(B, H, S, Ev, dtype=dt)
                cases.append(make_case(
                    'attention/%s/%s%s' % (fl(dt), name, '/causal' if causal else ''), 'sdpa',
                    [q, k, v], lambda q, k, v, c=causal: sdpa_ref(q, k, v, is_causal=c),
                    diff=[0, 1, 2], opts={'is_causal': causal} if causal else None))
    # keys over several 64-key blocks of the CPU kernel's online softmax
    q, k, v = rnd(1, 1, 3, 4, dtype=F64), rnd(1, 1, 140, 4, dtype=F64), rnd(1, 1, 140, 2, dtype=F64)
    for causal in (False, True):
        cases.append(make_case(
            'attention/f64/l3_s140%s' % ('/causal' if causal else ''), 'sdpa', [q, k, v],
            lambda q, k, v, c=causal: sdpa_ref(q, k, v, is_causal=c), diff=[0, 1, 2],
            opts={'is_causal': causal} if causal else None))
    # custom scale
    q, k, v = rnd(1, 2, 4, 3), rnd(1, 2, 6, 3), rnd(1, 2, 6, 2)
    cases.append(make_case('attention/f32/scale', 'sdpa', [q, k, v],
                           lambda q, k, v: sdpa_ref(q, k, v, scale=0.3), diff=[0, 1, 2],
                           opts={'scale': 0.3}))
    # (B,L,H,E) stored, seen as (B,H,L,E) through a transpose: the op gets non-contiguous inputs
    q, k, v = rnd(2, 4, 3, 5), rnd(2, 6, 3, 5), rnd(2, 6, 3, 4)
    cases.append(make_case('attention/f32/transposed/causal', 'sdpa_bhle', [q, k, v],
                           lambda q, k, v: sdpa_ref(q.transpose(1, 2), k.transpose(1, 2),
                                                    v.transpose(1, 2), is_causal=True),
                           diff=[0, 1, 2], opts={'is_causal': True}))
    # the CPU flash kernel's tiles (float64: 256 keys per forward tile, 64 queries per block,
    # 64 keys and 128 queries per backward tile): two forward key tiles with an online-softmax
    # rescale, and causal over several tiles, neither size a multiple of a block
    q, k, v = rnd(1, 1, 70, 3, dtype=F64), rnd(1, 1, 300, 3, dtype=F64), rnd(1, 1, 300, 2, dtype=F64)
    cases.append(make_case('attention/f64/l70_s300', 'sdpa', [q, k, v],
                           lambda q, k, v: sdpa_ref(q, k, v), diff=[0, 1, 2]))
    q, k, v = rnd(1, 1, 300, 2, dtype=F64), rnd(1, 1, 300, 2, dtype=F64), rnd(1, 1, 300, 2, dtype=F64)
    cases.append(make_case('attention/f64/l300_s300/causal', 'sdpa', [q, k, v],
                           lambda q, k, v: sdpa_ref(q, k, v, is_causal=True), diff=[0, 1, 2],
                           opts={'is_causal': True}))
    name, text = write_fixture('attention', cases,
                               'F.scaled_dot_product_attention on 4-D inputs (the fused path)')
    return name, text.replace('tools/gen_fixtures.py', 'tools/gen_attention_fixtures.py', 1)


if __name__ == '__main__':
    sys.exit(fixture_main(__doc__, 'tools/gen_attention_fixtures.py', gen))
