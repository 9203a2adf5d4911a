#!/usr/bin/python3
"""tools/gen_overlap_fixtures.py: PyTorch's answers for spec/tensor/mem_overlap_spec.lua
(spec/fixtures/mem_overlap.lua): in-place writes whose operands share memory with the tensor
written, which PyTorch 1.13 refuses ("unsupported operation: some elements of the input tensor and
the written-to tensor refer to a single memory location", "more than one element of the
written-to tensor refers to a single memory location") or lets through (issue 29).

Regenerate (needs PyTorch; Debian's python3-torch is enough, so use /usr/bin/python3):

    /usr/bin/python3 tools/gen_overlap_fixtures.py            # writes spec/fixtures/mem_overlap.lua
    /usr/bin/python3 tools/gen_overlap_fixtures.py --check    # fails if the committed file differs

A case starts from base = arange(numel) in `shape` (dtype float32 unless `dtype`; with grad = true
it is leaf * 1 of a leaf that requires grad, so autograd records the write), takes the tensor
written as a chain of views of base (`target`), and calls `op` on it with `args`: {view = chain}
(a view of base), {index = list} (an int64 tensor), {gt = v} (the bool tensor base > v, a
mask of its own), {number = v} or {str = s}. A view chain is a
list of steps {'t'}, {'narrow', dim, start, length}, {'select', dim, i}, {'expand', sizes},
{'view', sizes}, {'transpose', d0, d1}, {'as_strided', sizes, strides, offset}. op 'setitem'
is x[args[1]] = args[2] with an index tensor or a mask; 'setslice' is x[a:b] = args[3] along dim
0; 'index_put_accumulate' is index_put_ with accumulate=True.

Recorded: `error`, the message's fixed part when PyTorch refuses, else `result`, the whole base
afterwards. Where one of the overlapping operands is not dense PyTorch does not decide and reads
values it may already have overwritten, in an order of its own: the engine reads such an operand
as if cloned, so those cases (`as_clone = true`) record PyTorch's result for the cloned operand.
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_fixtures import DTYPE_NAMES, fixture_main, lua_value  # noqa: E402

PARTIAL = ('unsupported operation: some elements of the input tensor and the written-to tensor '
           'refer to a single memory location')
INTERNAL = ('unsupported operation: more than one element of the written-to tensor refers to a '
            'single memory location')


def apply_view(x, chain):
    for step in chain:
        kind, rest = step[0], step[1:]
        if kind == 't':
            x = x.t()
        elif kind == 'narrow':
            x = x.narrow(*rest)
        elif kind == 'select':
            x = x.select(*rest)
        elif kind == 'expand':
            x = x.expand(*rest[0])
        elif kind == 'view':
            x = x.view(*rest[0])
        elif kind == 'transpose':
            x = x.transpose(*rest)
        elif kind == 'as_strided':
            x = x.as_strided(rest[0], rest[1], rest[2])
        else:
            raise ValueError(kind)
    return x


def make_arg(base, a, clone):
    if 'view' in a:
        v = apply_view(base, a['view'])
        return v.clone() if clone else v
    if 'index' in a:
        return torch.tensor(a['index'], dtype=torch.int64)
    if 'number' in a:
        return a['number']
    if 'gt' in a:
        return base.detach() > a['gt']
    return a['str']


def run(case, clone):
    """base after the write, or the RuntimeError PyTorch raised."""
    dtype = getattr(torch, case.get('dtype', 'float32'))
    n = 1
    for s in case['shape']:
        n *= s
    base = torch.arange(n).to(dtype).view(case['shape'])
    if case.get('grad'):
        base = base.requires_grad_() * 1
    x = apply_view(base, case['target'])
    args = [make_arg(base, a, clone) for a in case['args']]
    op = case['op']
    if op == 'setitem':
        x[args[0]] = args[1]
    elif op == 'setslice':
        x[args[0]:args[1]] = args[2]
    elif op == 'index_put_':
        x.index_put_((args[0],), args[1])
    elif op == 'index_put_accumulate':
        x.index_put_((args[0],), args[1], accumulate=True)
    else:
        getattr(x, op)(*args)
    return base.detach()


def V(*steps):
    return {'view': list(steps)}


def I(*values):
    return {'index': list(values)}


def N(v):
    return {'number': v}


def get_cases():
    t, CLONE = ('t',), {'as_clone': True}
    row0, col0 = ('select', 0, 0), ('narrow', 1, 0, 1)
    cases = [
        # refused: partial overlap of two dense tensors (TensorIterator's assert_no_partial_overlap)
        ('copy_ shifted forward', [10], [('narrow', 0, 1, 9)], 'copy_', [V(('narrow', 0, 0, 9))]),
        ('copy_ shifted backward', [9], [('narrow', 0, 0, 6)], 'copy_', [V(('narrow', 0, 3, 6))]),
        ('copy_ own transpose', [3, 3], [], 'copy_', [V(t)]),
        ('copy_ a row of itself broadcast', [3, 2], [], 'copy_', [V(('select', 0, 2))]),
        ('add_ own transpose', [3, 3], [], 'add_', [V(t)]),
        ('sub_ own transpose', [3, 3], [], 'sub_', [V(t)]),
        ('mul_ own transpose', [3, 3], [], 'mul_', [V(t)]),
        ('div_ own transpose', [3, 3], [], 'div_', [V(t)]),
        ('add_ its first row', [3, 3], [], 'add_', [V(row0)]),
        ('a row add_ the whole', [3, 3], [row0], 'add_', [V()]),
        ('add_ a 0-d element inside', [6], [('narrow', 0, 1, 2)], 'add_', [V(('select', 0, 2))]),
        ('add_ a reshaped transpose', [6], [('view', [2, 3])], 'add_',
         [V(('view', [3, 2]), t)]),
        ('add_ with autograd recording', [3, 3], [], 'add_', [V(t)]),
        ('masked_fill_ with a shifted mask of itself', [6], [('narrow', 0, 1, 5)], 'masked_fill_',
         [V(('narrow', 0, 0, 5)), N(False)], {'dtype': 'bool'}),
        ('setslice shifted', [10], [], 'setslice', [N(0), N(5), V(('narrow', 0, 1, 5))]),
        # refused: any overlap of an operand read at other positions (assert_no_overlap)
        ('index_add_ itself', [6], [], 'index_add_', [N(0), I(0, 1, 2, 3, 4, 5), V()]),
        ('index_add_ a slice of itself', [6], [], 'index_add_', [N(0), I(0, 1),
                                                                 V(('narrow', 0, 2, 2))]),
        ('index_copy_ itself', [6], [], 'index_copy_', [N(0), I(5, 4, 3, 2, 1, 0), V()]),
        ('scatter_ itself', [6], [], 'scatter_', [N(0), I(5, 4, 3, 2, 1, 0), V()]),
        ('scatter_add_ a slice of itself', [6], [], 'scatter_add_', [N(0), I(0, 1),
                                                                     V(('narrow', 0, 2, 2))]),
        ('scatter_reduce_ itself', [6], [], 'scatter_reduce_',
         [N(0), I(5, 4, 3, 2, 1, 0), V(), {'str': 'sum'}]),
        ('index_put_ itself', [6], [], 'index_put_', [I(5, 4, 3, 2, 1, 0), V()]),
        ('setitem a slice of itself', [6], [], 'setitem', [I(0, 1), V(('narrow', 0, 2, 2))]),
        ('index_put_ accumulate an element of itself under a mask', [4], [],
         'index_put_accumulate', [{'gt': 1.0}, V(('select', 0, 0))]),
        # refused: the tensor written is expanded (assert_no_internal_overlap)
        ('add_ into an expanded view', [3], [('expand', [2, 3])], 'add_', [N(1)]),
        ('copy_ into an expanded view', [3], [('expand', [2, 3])], 'copy_',
         [V(('view', [1, 3]))]),
        ('relu_ on an expanded view', [3], [('expand', [2, 3])], 'relu_', []),
        ('uniform_ on an expanded view', [3], [('expand', [2, 3])], 'uniform_', []),
        # allowed: the operand is the tensor itself, or the same elements in the same layout
        ('add_ itself', [3, 3], [], 'add_', [V()]),
        ('mul_ itself', [3, 3], [], 'mul_', [V()]),
        ('add_ itself through a view of the same layout', [3, 3], [], 'add_',
         [V(('view', [9]), ('view', [3, 3]))]),
        ('copy_ itself through a view', [2, 3], [], 'copy_', [V(('view', [6]), ('view', [2, 3]))]),
        ('add_ itself with autograd recording', [3, 3], [], 'add_', [V()]),
        ('a row add_ the same elements through another view', [3, 3], [row0], 'add_',
         [V(('view', [9]), ('narrow', 0, 0, 3))]),
        ('masked_fill_ with itself as the mask', [6], [], 'masked_fill_', [V(), N(False)],
         {'dtype': 'bool'}),
        # x[mask] = one value is PyTorch's masked_fill_: only the mask is checked
        ('setitem itself as the mask', [6], [], 'setitem', [V(), N(False)], {'dtype': 'bool'}),
        ('setitem an element of itself under a mask', [4], [], 'setitem',
         [{'gt': 1.0}, V(('select', 0, 0))]),
        # allowed: disjoint parts of one storage
        ('add_ the other half', [6], [('narrow', 0, 0, 3)], 'add_', [V(('narrow', 0, 3, 3))]),
        ('copy_ the other row', [2, 3], [row0], 'copy_', [V(('select', 0, 1))]),
        ('index_add_ from the other half', [6], [('narrow', 0, 0, 3)], 'index_add_',
         [N(0), I(2, 0), V(('narrow', 0, 3, 2))]),
        ('fill_ an expanded view', [3], [('expand', [2, 3])], 'fill_', [N(7.0)]),
        ('zero_ an expanded view', [3], [('expand', [2, 3])], 'zero_', []),
        # allowed, undecided (an operand is not dense); the engine reads it as if cloned
        ('add_ its first column', [3, 3], [], 'add_', [V(col0)], CLONE),
        ('strided halves', [2, 4], [('view', [8]), ('as_strided', [4], [2], 0)], 'add_',
         [V(('view', [8]), ('as_strided', [4], [2], 1))], CLONE),
        ('copy_ a column into a row', [3, 3], [row0], 'copy_', [V(('select', 1, 0))], CLONE),
    ]
    out = []
    for c in cases:
        name, shape, target, op, args = c[:5]
        extra = c[5] if len(c) > 5 else {}
        as_clone = extra.get('as_clone', False)
        case = {'name': name, 'shape': shape, 'target': target, 'op': op, 'args': args}
        if 'dtype' in extra:
            case['dtype'] = extra['dtype']
        if 'autograd' in name:
            case['grad'] = True
        if op in ('uniform_',):
            case['random'] = True  # only the refusal is compared
        try:
            r = run(case, as_clone)
            if as_clone:
                case['as_clone'] = True
            if not case.get('random'):
                case['result'] = r
        except RuntimeError as e:
            msg = str(e)
            fixed = PARTIAL if PARTIAL in msg else INTERNAL if INTERNAL in msg else None
            assert fixed, 'unexpected error in %s: %s' % (name, msg)
            case['error'] = fixed
        if as_clone:  # PyTorch itself let it through, reading in place
            run(case, False)
        out.append(case)
    return out


ORDER = ['name', 'shape', 'dtype', 'grad', 'target', 'op', 'args', 'random', 'as_clone', 'error',
         'result']


def render():
    lines = ['-- spec/fixtures/mem_overlap.lua: PyTorch\'s answer to in-place writes whose operands '
             'share memory with the tensor written (tools/gen_overlap_fixtures.py says how to read '
             'a case).',
             '-- Generated by tools/gen_overlap_fixtures.py with torch %s; do not edit by hand.'
             % torch.__version__, 'return {']
    for c in get_cases():
        fields = ['%s = %s' % (k, lua_value(c[k])) for k in ORDER if k in c]
        assert set(c) <= set(ORDER), c
        lines.append('  {' + ', '.join(fields) + '},')
    lines.append('}')
    return 'mem_overlap', '\n'.join(lines) + '\n'


if __name__ == '__main__':
    assert DTYPE_NAMES  # the writer names dtypes as the specs do
    fixture_main(__doc__, 'tools/gen_overlap_fixtures.py', render)
