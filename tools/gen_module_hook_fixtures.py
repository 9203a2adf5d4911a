#!/usr/bin/python3
"""tools/gen_module_hook_fixtures.py: PyTorch reference values for spec/nn/module_backward_hooks_spec.lua:
what register_full_backward_hook's hook sees (grad_input, grad_output) and what its replacement
grad_input does to the gradients of the module's inputs and parameters (issue 29, item 5).

Regenerate (needs PyTorch; Debian's python3-torch is enough, so use /usr/bin/python3):

    /usr/bin/python3 tools/gen_module_hook_fixtures.py          # writes spec/fixtures/module_hooks.lua
    /usr/bin/python3 tools/gen_module_hook_fixtures.py --check  # fails if the committed file differs

Cases use tools/gen_fixtures.py's format with their own ops (the spec has a runner for each).
Each op runs forward and backward inside PyTorch and returns, in order: the hook's grad_input
entries, its grad_output entries, then the gradients of the leaves. An entry PyTorch gives as
None is written as a 0-element tensor and listed in opts.none (1-based output positions).
"""
import os
import sys

import torch
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_fixtures import fixture_main, make_case, rnd, write_fixture  # noqa: E402

NONE = torch.zeros(0)


class Two(nn.Module):
    """forward(x, y) = (x * y, x + y): two arguments, two results."""

    def forward(self, x, y):
        return x * y, x + y


def leaf(t, grad=True):
    return t.detach().clone().requires_grad_(grad)


def run_hooked(module, args, loss_fn, scale=None):
    """Registers a full backward hook on module that records what it sees and, with scale, returns
    grad_input with entry 0 multiplied by it; runs loss_fn(module(*args)).backward()."""
    seen = {}

    def hook(mod, gi, go):
        seen['gi'], seen['go'] = gi, go
        if scale is not None:
            return (gi[0] * scale,) + tuple(gi[1:])
        return None
    module.register_full_backward_hook(hook)
    out = module(*args)
    loss_fn(out).backward()
    return seen['gi'], seen['go']


def flat(gi, go, grads):
    """The op's outputs and opts.none (1-based positions of the None entries)."""
    outs, none = [], []
    for g in list(gi) + list(go) + list(grads):
        if g is None:
            none.append(len(outs) + 1)
            outs.append(NONE)
        else:
            outs.append(g.detach())
    return outs, none


def get_cases():
    cases = []
    x, y, w1, w2 = rnd(2, 3), rnd(2, 3), rnd(2, 3), rnd(2, 3)

    def two(x, y, w1, w2, *, used, scale, x_grad=True):
        xl, yl = leaf(x, x_grad), leaf(y)
        gi, go = run_hooked(Two(), (xl, yl), lambda o: sum((o[k] * w).sum() for k, w in
                                                           zip(used, (w1, w2))), scale)
        outs, none = flat(gi, go, (xl.grad, yl.grad))
        return outs, none

    for name, used, scale, x_grad in (('two_in_two_out', (0, 1), None, True),
                                      ('replace_grad_input', (0, 1), 2.0, True),
                                      ('one_result_used', (0,), None, True),
                                      ('one_input_without_grad', (0, 1), None, False)):
        outs, none = two(x, y, w1, w2, used=used, scale=scale, x_grad=x_grad)
        c = make_case(name, 'two', [x, y, w1, w2], lambda *a, o=outs: tuple(o),
                      opts={'used': [u for u in used], 'scale': scale, 'x_grad': x_grad,
                            'none': none})
        cases.append(c)

    # Linear -> ReLU, the hook on the Linear halving grad_input: parameters' gradients unchanged
    xin, wt, b, up = rnd(4, 3), rnd(2, 3), rnd(2), rnd(4, 2)
    for name, x_grad, scale in (('linear_relu_scaled', True, 0.5), ('linear_input_no_grad', False,
                                                                     None)):
        lin = nn.Linear(3, 2)
        with torch.no_grad():
            lin.weight.copy_(wt)
            lin.bias.copy_(b)
        xl = leaf(xin, x_grad)
        model = nn.Sequential(lin, nn.ReLU())
        seen = {}

        def hook(mod, gi, go, scale=scale):
            seen['gi'], seen['go'] = gi, go
            return None if scale is None else (gi[0] * scale,)
        lin.register_full_backward_hook(hook)
        (model(xl) * up).sum().backward()
        outs, none = flat(seen['gi'], seen['go'], (xl.grad, lin.weight.grad, lin.bias.grad))
        cases.append(make_case(name, 'linear_relu', [xin, wt, b, up],
                               lambda *a, o=outs: tuple(o),
                               opts={'x_grad': x_grad, 'scale': scale, 'none': none}))
    return cases


def render():
    return write_fixture('module_hooks', get_cases(), 'full backward hooks of nn.Module against '
                         'PyTorch (tools/gen_module_hook_fixtures.py)')


if __name__ == '__main__':
    sys.exit(fixture_main(__doc__, 'tools/gen_module_hook_fixtures.py', render))
