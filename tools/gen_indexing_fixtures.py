#!/usr/bin/python3
"""tools/gen_indexing_fixtures.py: PyTorch reference values for spec/tensor/indexing_spec.lua:
x[key] and x[key] = v with integers, slices, index tensors and masks (issue 29, item 2).

Regenerate (needs PyTorch; Debian's python3-torch is enough, so use /usr/bin/python3):

    /usr/bin/python3 tools/gen_indexing_fixtures.py            # writes spec/fixtures/indexing.lua
    /usr/bin/python3 tools/gen_indexing_fixtures.py --check    # fails if the committed file differs

Cases use tools/gen_fixtures.py's format. A key is written in opts.key as a list with one entry per
leading dim: {i = n} an integer, {s = {a, b, step}} a slice (absent bounds are Python's None) and
{t = k} the case's input k (1-based; input 1 is x, and for assignments input 2 is the value);
opts.tensor_key = k is a key that is that one tensor. 'index' cases record x[key] and the gradient
of x; 'index_set' cases record y = x.clone(); y[key] = v, and the gradients of x and v (scalar
values are opts.number). Duplicate positions are only read (assigning twice to one place leaves
an unspecified winner in PyTorch).
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_fixtures import F32, F64, I64, fixture_main, make_case, rnd, write_fixture  # noqa: E402


def t(values, dtype=I64):
    return torch.tensor(values, dtype=dtype)


def build_key(entries, tensors):
    """The Python key of a list of entries (tensors: the case's inputs, 1-based as in Lua)."""
    out = []
    for e in entries:
        if 'i' in e:
            out.append(e['i'])
        elif 's' in e:
            a, b, s = (list(e['s']) + [None, None, None])[:3]
            out.append(slice(a, b, s))
        else:
            out.append(tensors[e['t'] - 1])
    return tuple(out)


def S(a=None, b=None, step=None):
    return {'s': [a, b, step]}


def get_cases():
    x3 = rnd(3, 4, 5)
    mask = x3 > 0.3
    keys = [
        ('int_slice_index', [{'i': 1}, S(), {'t': 2}], [t([4, 0, -1, 2])]),
        ('index_int_after', [{'t': 2}, {'i': 2}], [t([2, 0, 2])]),
        ('two_adjacent', [S(), {'t': 2}, {'t': 3}], [t([[0], [3]]), t([1, 4, 0])]),
        ('two_apart', [{'t': 2}, S(), {'t': 3}], [t([0, 2, 1]), t([4, 4, 0])]),
        ('slices_step', [S(1, None), S(0, 4, 2), S(None, None, 3)], []),
        ('negative_slice', [S(-2), S(-3, -1)], []),
        ('slice_then_mask', [S(), {'t': 2}], [(x3[0] > 0)]),
        ('duplicates', [S(), {'t': 2}], [t([1, 1, 3, 1])]),
    ]
    cases = []
    for name, key, ts in keys:
        def fn(x, *rest, key=key):
            return x[build_key(key, [x] + list(rest))]
        cases.append(make_case('index/' + name, 'index', [x3] + ts, fn, diff=(0,),
                               opts={'key': key}))
    for name, k in (('tensor', t([2, 0, 2, 1])), ('mask', mask), ('bool_1d', t([True, False, True], dtype=torch.bool))):
        cases.append(make_case('index/key_' + name, 'index', [x3, k], lambda x, k: x[k],
                               diff=(0,), opts={'tensor_key': 2}))
    x64 = rnd(4, 6, dtype=F64)
    cases.append(make_case('index/f64_grid', 'index', [x64, t([[0], [3]]), t([[5, 1]])],
                           lambda x, a, b: x[a, b], diff=(0,),
                           opts={'key': [{'t': 2}, {'t': 3}]}))
    xi = torch.arange(24, dtype=I64).reshape(4, 6)
    cases.append(make_case('index/int64_values', 'index', [xi, t([3, 0])],
                           lambda x, i: x[i, 1::2], opts={'key': [{'t': 2}, S(1, None, 2)]}))
    return cases


def set_cases():
    cases = []
    x = rnd(4, 5)

    def setter(key, number=None):
        def fn(x, v, *rest):
            y = x.clone()
            y[build_key(key, [x, v] + list(rest))] = number if number is not None else v
            return y
        return fn

    specs = [
        ('row_vector', [{'t': 3}], rnd(5), [t([3, 0])]),
        ('broadcast_scalar_tensor', [{'t': 3}, S(1, 4)], rnd(1), [t([2, 1])]),
        ('slice_only', [S(1, 3), S(None, None, 2)], rnd(2, 3), []),
        ('pairs', [{'t': 3}, {'t': 4}], rnd(3), [t([0, 3, 1]), t([4, 4, 0])]),
        ('int_and_index', [{'i': 2}, {'t': 3}], rnd(2), [t([1, 3])]),
    ]
    for name, key, v, ts in specs:
        cases.append(make_case('index_set/' + name, 'index_set', [x, v] + ts, setter(key),
                               diff=(0, 1), opts={'key': key}))
    m = x > 0
    cases.append(make_case('index_set/mask_number', 'index_set', [x, rnd(1), m],
                           setter([{'t': 3}], number=0.5), diff=(0,),
                           opts={'key': [{'t': 3}], 'number': 0.5}))
    cases.append(make_case('index_set/mask_values', 'index_set', [x, rnd(int(m.sum())), m],
                           setter([{'t': 3}]), diff=(0, 1), opts={'key': [{'t': 3}]}))
    return cases


def render():
    torch.manual_seed(0)
    return write_fixture('indexing', get_cases() + set_cases(),
                         'x[key] and x[key] = v (tools/gen_indexing_fixtures.py)')


if __name__ == '__main__':
    sys.exit(fixture_main(__doc__, 'tools/gen_indexing_fixtures.py', render))
