#!/usr/bin/python3
"""tools/gen_nn_fixtures.py: PyTorch reference values for the nn module spec (spec/nn_spec.lua).

Regenerate (needs PyTorch; Debian's python3-torch is enough, so use /usr/bin/python3):

    /usr/bin/python3 tools/gen_nn_fixtures.py            # writes spec/fixtures/nn_modules.lua
    /usr/bin/python3 tools/gen_nn_fixtures.py --check    # fails if the committed file differs

Each case builds one torch.nn module, records its state dict (keys in PyTorch's order, with the
values the spec loads into its own module), its printed form, and for one forward and backward
pass the output, the gradients of the inputs and of the parameters, and the buffers afterwards
(BatchNorm's running statistics). A case is

    { name = 'Linear/bias',
      module = {ctor = 'Linear', args = {5, 3, {bias = false}}},
                                           -- nn[ctor](table.unpack(args)); for containers
                                           -- children = {module, ...} instead of args
      train = true,                        -- training mode for the forward
      repr = {'Linear(...)'},          -- str(module), one entry per line
      state = {{'weight', T}, ...},        -- state_dict() in order (loaded before the forward)
      inputs = {T, ...},                   -- forward arguments
      output = T, grad_out = T,            -- result and the upstream gradient (absent: no backward)
      input_grads = {[1] = T},             -- gradients of floating point inputs
      param_grads = {{'weight', T}, ...},
      state_after = {{'running_mean', T}, ...},
      rtol = 1e-4, atol = 1e-5 }

Tensors use tools/gen_fixtures.py's format (read by spec/helpers.lua). Everything is seeded.
"""
import argparse
import os
import sys

import torch
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_fixtures import Tensor, lua_value  # noqa: E402  (the shared Lua writer)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, 'spec', 'fixtures', 'nn_modules.lua')


def spec(ctor, *args, **opts):
    """The Lua constructor call of a module: positional args, then options as a table."""
    args = list(args)
    if opts:
        args.append(opts)
    return {'ctor': ctor, 'args': args}


def case(name, module, lua, inputs, train=True, backward=True, rtol=1e-4, atol=1e-5):
    torch.manual_seed(sum(map(ord, name)))  # per case, so cases do not shift each other
    # parameters get fresh values (not the default init) so that a wrong layout shows
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn_like(p) * 0.5)
        if hasattr(module, 'running_var') and module.running_var is not None:
            module.running_mean.copy_(torch.randn_like(module.running_mean) * 0.1)
            module.running_var.copy_(torch.rand_like(module.running_var) + 0.5)
    module.train(train)
    state = [[k, Tensor(v.clone())] for k, v in module.state_dict().items()]  # before forward
    ins = [x.clone().requires_grad_(x.is_floating_point() and backward) for x in inputs]
    out = module(*ins)
    c = {'name': name, 'module': lua, 'train': train, 'repr': str(module).split('\n'),
         'state': state, 'inputs': [Tensor(x) for x in ins], 'output': Tensor(out),
         'rtol': rtol, 'atol': atol}
    if backward:
        g = torch.randn_like(out)
        out.backward(g)
        c['grad_out'] = Tensor(g)
        c['input_grads'] = {i + 1: Tensor(x.grad) for i, x in enumerate(ins) if x.grad is not None}
        c['param_grads'] = [[k, Tensor(p.grad)] for k, p in module.named_parameters()]
    c['state_after'] = [[k, Tensor(v)] for k, v in module.state_dict().items()]
    return c


def cases():
    torch.manual_seed(0)
    r = torch.randn
    out = []
    out.append(case('Linear/bias', nn.Linear(5, 3), spec('Linear', 5, 3), [r(4, 5)]))
    out.append(case('Linear/no_bias_3d', nn.Linear(5, 3, bias=False),
                    spec('Linear', 5, 3, bias=False), [r(2, 4, 5)]))
    out.append(case('Conv2d/padding', nn.Conv2d(2, 4, 3, padding=1),
                    spec('Conv2d', 2, 4, 3, padding=1), [r(2, 2, 5, 5)]))
    out.append(case('Conv2d/stride_groups_nobias',
                    nn.Conv2d(4, 6, (3, 2), stride=2, groups=2, bias=False),
                    spec('Conv2d', 4, 6, [3, 2], stride=2, groups=2, bias=False),
                    [r(1, 4, 7, 6)]))
    out.append(case('Conv2d/dilation', nn.Conv2d(2, 3, 3, padding=2, dilation=2),
                    spec('Conv2d', 2, 3, 3, padding=2, dilation=2), [r(1, 2, 6, 6)]))
    out.append(case('MaxPool2d/k2', nn.MaxPool2d(2), spec('MaxPool2d', 2), [r(2, 3, 6, 6)]))
    out.append(case('MaxPool2d/k3_s2_p1', nn.MaxPool2d(3, stride=2, padding=1),
                    spec('MaxPool2d', 3, stride=2, padding=1), [r(1, 2, 7, 7)]))
    out.append(case('AvgPool2d/k2', nn.AvgPool2d(2), spec('AvgPool2d', 2), [r(2, 3, 6, 6)]))
    out.append(case('AvgPool2d/k3_s2_p1', nn.AvgPool2d(3, stride=2, padding=1),
                    spec('AvgPool2d', 3, stride=2, padding=1), [r(1, 2, 7, 7)]))
    out.append(case('AdaptiveAvgPool2d/2x3', nn.AdaptiveAvgPool2d((2, 3)),
                    spec('AdaptiveAvgPool2d', [2, 3]), [r(2, 3, 7, 8)]))
    out.append(case('BatchNorm1d/train', nn.BatchNorm1d(3), spec('BatchNorm1d', 3), [r(6, 3)]))
    out.append(case('BatchNorm1d/train_3d', nn.BatchNorm1d(3, momentum=0.3),
                    spec('BatchNorm1d', 3, momentum=0.3), [r(4, 3, 5)]))
    out.append(case('BatchNorm2d/train', nn.BatchNorm2d(3), spec('BatchNorm2d', 3),
                    [r(4, 3, 2, 3)]))
    out.append(case('BatchNorm2d/eval', nn.BatchNorm2d(3, eps=1e-3),
                    spec('BatchNorm2d', 3, eps=1e-3), [r(4, 3, 2, 3)], train=False))
    out.append(case('BatchNorm2d/cumulative', nn.BatchNorm2d(2, momentum=None),
                    spec('BatchNorm2d', 2, momentum=False), [r(3, 2, 2, 2)]))
    out.append(case('BatchNorm2d/no_affine', nn.BatchNorm2d(2, affine=False),
                    spec('BatchNorm2d', 2, affine=False), [r(3, 2, 2, 2)]))
    out.append(case('LayerNorm/last', nn.LayerNorm(4), spec('LayerNorm', 4), [r(3, 4)]))
    out.append(case('LayerNorm/two_dims', nn.LayerNorm((3, 4), eps=1e-3),
                    spec('LayerNorm', [3, 4], eps=1e-3), [r(2, 3, 4)]))
    out.append(case('Embedding/2d_ids', nn.Embedding(10, 3), spec('Embedding', 10, 3),
                    [torch.tensor([[0, 9, 3], [3, 3, 1]])]))
    out.append(case('Dropout/eval', nn.Dropout(0.3), spec('Dropout', 0.3), [r(3, 4)],
                    train=False))
    out.append(case('ReLU', nn.ReLU(), spec('ReLU'), [r(3, 4)]))
    out.append(case('GELU', nn.GELU(), spec('GELU'), [r(3, 4)]))
    out.append(case('GELU/tanh', nn.GELU('tanh'), spec('GELU', 'tanh'), [r(3, 4)]))
    out.append(case('SiLU', nn.SiLU(), spec('SiLU'), [r(3, 4)]))
    out.append(case('Tanh', nn.Tanh(), spec('Tanh'), [r(3, 4)]))
    out.append(case('Sigmoid', nn.Sigmoid(), spec('Sigmoid'), [r(3, 4)]))
    out.append(case('Flatten/default', nn.Flatten(), spec('Flatten'), [r(2, 3, 2, 2)]))
    out.append(case('Flatten/0_1', nn.Flatten(0, 1), spec('Flatten', 0, 1), [r(2, 3, 2)]))
    out.append(case('Identity', nn.Identity(), spec('Identity'), [r(2, 3)]))
    w = torch.tensor([0.5, 1.0, 2.0, 1.5])
    out.append(case('CrossEntropyLoss/weight_smoothing',
                    nn.CrossEntropyLoss(weight=w, label_smoothing=0.1),
                    spec('CrossEntropyLoss', weight=Tensor(w), label_smoothing=0.1),
                    [r(5, 4), torch.tensor([0, 3, 1, 2, 3])]))
    out.append(case('CrossEntropyLoss/sum_ignore', nn.CrossEntropyLoss(reduction='sum',
                                                                       ignore_index=1),
                    spec('CrossEntropyLoss', reduction='sum', ignore_index=1),
                    [r(5, 4), torch.tensor([0, 1, 1, 2, 3])]))
    out.append(case('NLLLoss/none', nn.NLLLoss(reduction='none'), spec('NLLLoss', reduction='none'),
                    [torch.log_softmax(r(5, 4), 1), torch.tensor([0, 3, 1, 2, 3])]))
    out.append(case('MSELoss/mean', nn.MSELoss(), spec('MSELoss'), [r(3, 4), r(3, 4)]))
    seq = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 3))
    lua = {'ctor': 'Sequential', 'children': [spec('Linear', 4, 8), spec('Tanh'),
                                              spec('Linear', 8, 8), spec('ReLU'),
                                              spec('Linear', 8, 3)]}
    out.append(case('Sequential/mlp', seq, lua, [r(5, 4)]))
    cnn = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(),
                        nn.MaxPool2d(2), nn.Flatten(), nn.Linear(4 * 3 * 3, 5))
    lua = {'ctor': 'Sequential', 'children': [spec('Conv2d', 1, 4, 3, padding=1),
                                              spec('BatchNorm2d', 4), spec('ReLU'),
                                              spec('MaxPool2d', 2), spec('Flatten'),
                                              spec('Linear', 36, 5)]}
    out.append(case('Sequential/cnn_bn', cnn, lua, [r(2, 1, 6, 6)]))
    return out


ORDER = ['name', 'module', 'train', 'repr', 'state', 'inputs', 'output', 'grad_out',
         'input_grads', 'param_grads', 'state_after', 'rtol', 'atol']


def render(cs):
    lines = ['-- spec/fixtures/nn_modules.lua: torch.nn modules: state dicts, printed form, '
             'forward and backward.',
             '-- Generated by tools/gen_nn_fixtures.py with torch %s; do not edit by hand.'
             % torch.__version__, 'return {']
    for c in cs:
        assert set(c) <= set(ORDER), set(c) - set(ORDER)
        lines.append('  {')
        for k in ORDER:
            if k in c:
                lines.append('    %s = %s,' % (k, lua_value(c[k])))
        lines.append('  },')
    lines.append('}')
    return '\n'.join(lines) + '\n'


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--check', action='store_true', help='compare with the file on disk')
    args = ap.parse_args()
    torch.set_num_threads(1)  # reproducible reductions
    text = render(cases())
    if args.check:
        old = open(OUT).read() if os.path.exists(OUT) else None
        if old != text:
            print('stale fixture (rerun tools/gen_nn_fixtures.py):', OUT)
            return 1
        return 0
    with open(OUT, 'w') as f:
        f.write(text)
    print('%s %d bytes' % (os.path.relpath(OUT, ROOT), len(text)))
    return 0


if __name__ == '__main__':
    sys.exit(main())
