#!/usr/bin/python3
"""tools/gen_nn_fixtures.py: PyTorch reference values for the nn module spec (spec/nn/nn_modules_spec.lua).

Regenerate (needs PyTorch; Debian's python3-torch is enough, so use /usr/bin/python3):

    /usr/bin/python3 tools/gen_nn_fixtures.py            # writes spec/fixtures/nn_modules.lua
                                                         # and spec/fixtures/nn_breadth.lua
    /usr/bin/python3 tools/gen_nn_fixtures.py --check    # fails if a committed file differs
    /usr/bin/python3 tools/gen_nn_fixtures.py --only nn_breadth   # one of the two files

nn_breadth.lua holds the nn.functional cases of issue 16's layers (losses, activations, one_hot,
pad, group_norm, rms_norm, conv1d, conv_transpose2d) in tools/gen_fixtures.py's case format (read by
spec/nn/nn_breadth_spec.lua); their module forms are cases of nn_modules.lua, in float64.

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

A container without forward (ModuleDict, ParameterList, ParameterDict) has only name, module,
repr and state. ModuleDict and ParameterDict modules are {ctor = ..., entries = {{key, module
spec or tensor}, ...}}; a ParameterList's args hold the list of tensors.

Tensors use tools/gen_fixtures.py's format (read by spec/support/helpers.lua). Everything is seeded.
"""
import argparse
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_fixtures import Tensor, lua_value, make_case, write_fixture  # noqa: E402  (shared)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, 'spec', 'fixtures', 'nn_modules.lua')
OUT_BREADTH = os.path.join(ROOT, 'spec', 'fixtures', 'nn_breadth.lua')
F32, F64 = torch.float32, torch.float64


def spec(ctor, *args, **opts):
    """The Lua constructor call of a module: positional args, then options as a table."""
    args = list(args)
    if opts:
        args.append(opts)
    return {'ctor': ctor, 'args': args}


def case(name, module, lua, inputs, train=True, backward=True, rtol=1e-4, atol=1e-5):
    if inputs is None:  # a container without forward: names, shapes and printed form only
        return {'name': name, 'module': lua, 'repr': str(module).split('\n'),
                'state': [[k, Tensor(v)] for k, v in module.state_dict().items()]}
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
    return out + breadth_module_cases()


class RMSNorm(nn.Module):
    """PyTorch 2.4's torch.nn.RMSNorm (1.13 has none), written with torch ops: its forward is
    torch.nn.functional.rms_norm's composite (aten/src/ATen/native/layer_norm.cpp)."""

    def __init__(self, normalized_shape, eps=None, elementwise_affine=True, dtype=None):
        super().__init__()
        if isinstance(normalized_shape, int):
            normalized_shape = (normalized_shape,)
        self.normalized_shape = tuple(normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        if elementwise_affine:
            self.weight = nn.Parameter(torch.ones(self.normalized_shape, dtype=dtype))
        else:
            self.register_parameter('weight', None)

    def extra_repr(self):
        return '{normalized_shape}, eps={eps}, elementwise_affine={elementwise_affine}'.format(
            **self.__dict__)

    def forward(self, x):
        return rms_norm_ref(x, self.normalized_shape, self.weight, self.eps)


def rms_norm_ref(x, normalized_shape, weight=None, eps=None):
    dims = tuple(range(-len(normalized_shape), 0))
    xc = x.float() if x.dtype in (torch.float16, torch.bfloat16) else x
    if eps is None:
        eps = torch.finfo(xc.dtype).eps
    y = (xc * torch.rsqrt(xc.pow(2).mean(dims, keepdim=True) + eps)).type_as(x)
    return y * weight if weight is not None else y


def breadth_module_cases():
    """issue 16's modules in float64 (parameters made float64 on both sides: dtype='float64' in
    the Lua constructor), compared to 1e-9 relative."""
    r = lambda *shape: torch.randn(*shape, dtype=F64)  # noqa: E731
    tight = {'rtol': 1e-9, 'atol': 1e-12}
    out = []

    def add(name, module, lua, inputs, **kw):
        opts = dict(tight)
        opts.update(kw)
        out.append(case(name, module.double(), lua, inputs, **opts))

    prob = lambda *shape: torch.rand(*shape, dtype=F64) * 0.9 + 0.05  # noqa: E731
    w4 = torch.tensor([0.5, 1.0, 2.0, 1.5], dtype=F64)
    add('BCELoss/weight', nn.BCELoss(weight=w4), spec('BCELoss', weight=Tensor(w4)),
        [prob(3, 4), torch.rand(3, 4, dtype=F64)])
    add('BCELoss/sum', nn.BCELoss(reduction='sum'), spec('BCELoss', reduction='sum'),
        [prob(5), torch.tensor([0, 1, 1, 0, 1], dtype=F64)])
    pw = torch.tensor([3.0, 0.5, 1.0, 2.0], dtype=F64)
    logits = torch.tensor([[0.0, -45.0, 45.0, 1.5], [-2.0, 0.25, -0.75, 30.0],
                           [7.0, -7.0, 0.0, -30.0]], dtype=F64)
    add('BCEWithLogitsLoss/pos_weight_weight',
        nn.BCEWithLogitsLoss(weight=w4, pos_weight=pw),
        spec('BCEWithLogitsLoss', weight=Tensor(w4), pos_weight=Tensor(pw)),
        [logits, torch.rand(3, 4, dtype=F64)])
    add('BCEWithLogitsLoss/none', nn.BCEWithLogitsLoss(reduction='none'),
        spec('BCEWithLogitsLoss', reduction='none'), [logits, torch.rand(3, 4, dtype=F64)])
    add('L1Loss/mean', nn.L1Loss(), spec('L1Loss'), [r(3, 4), r(3, 4)])
    add('L1Loss/sum', nn.L1Loss(reduction='sum'), spec('L1Loss', reduction='sum'),
        [r(2, 3, 2), r(2, 3, 2)])
    add('SmoothL1Loss/beta', nn.SmoothL1Loss(beta=0.5), spec('SmoothL1Loss', beta=0.5),
        [r(4, 5), r(4, 5)])
    add('SmoothL1Loss/none', nn.SmoothL1Loss(reduction='none'),
        spec('SmoothL1Loss', reduction='none'), [r(4, 5), r(4, 5)])
    add('HuberLoss/delta_sum', nn.HuberLoss(reduction='sum', delta=0.7),
        spec('HuberLoss', reduction='sum', delta=0.7), [r(4, 5), r(4, 5)])
    target = torch.softmax(r(3, 5), 1)  # no zero: PyTorch's target gradient is NaN there
    add('KLDivLoss/batchmean', nn.KLDivLoss(reduction='batchmean'),
        spec('KLDivLoss', reduction='batchmean'), [torch.log_softmax(r(3, 5), 1), target])
    add('KLDivLoss/log_target', nn.KLDivLoss(log_target=True),
        spec('KLDivLoss', log_target=True),
        [torch.log_softmax(r(3, 5), 1), torch.log_softmax(r(3, 5), 1)])
    edges = torch.tensor([[0.0, -60.0, 60.0, 1.5, -0.5], [2.5, -2.5, 10.0, -10.0, 0.1]],
                         dtype=F64)
    add('LeakyReLU/default', nn.LeakyReLU(), spec('LeakyReLU'), [edges])
    add('LeakyReLU/0.2', nn.LeakyReLU(0.2), spec('LeakyReLU', 0.2), [edges])
    add('ELU/default', nn.ELU(), spec('ELU'), [edges])
    add('ELU/alpha', nn.ELU(alpha=0.5), spec('ELU', alpha=0.5), [edges])
    add('Softplus/default', nn.Softplus(), spec('Softplus'), [edges * 0.5])
    add('Softplus/beta_threshold', nn.Softplus(beta=2, threshold=5),
        spec('Softplus', beta=2, threshold=5), [edges])
    add('Softmax/dim1', nn.Softmax(dim=1), spec('Softmax', 1), [r(3, 4, 2)])
    add('LogSoftmax/dim-1', nn.LogSoftmax(dim=-1), spec('LogSoftmax', -1), [r(3, 4)])
    add('GroupNorm/2_of_4', nn.GroupNorm(2, 4), spec('GroupNorm', 2, 4, dtype='float64'),
        [r(2, 4, 3, 3)])
    add('GroupNorm/no_affine_3d', nn.GroupNorm(3, 6, eps=1e-3, affine=False),
        spec('GroupNorm', 3, 6, eps=1e-3, affine=False, dtype='float64'), [r(2, 6, 5)])
    add('RMSNorm/two_dims', RMSNorm((3, 4)), spec('RMSNorm', [3, 4], dtype='float64'),
        [r(2, 3, 4)])
    add('RMSNorm/eps_no_affine', RMSNorm(4, eps=1e-3, elementwise_affine=False),
        spec('RMSNorm', 4, eps=1e-3, elementwise_affine=False), [r(5, 4)])
    add('Conv1d/padding', nn.Conv1d(2, 4, 3, padding=1),
        spec('Conv1d', 2, 4, 3, padding=1, dtype='float64'), [r(2, 2, 7)])
    add('Conv1d/stride_groups_dilation_nobias',
        nn.Conv1d(4, 6, 3, stride=2, dilation=2, groups=2, bias=False),
        spec('Conv1d', 4, 6, 3, stride=2, dilation=2, groups=2, bias=False, dtype='float64'),
        [r(1, 4, 11)])
    add('Conv1d/same_unbatched', nn.Conv1d(3, 2, 4, padding='same'),
        spec('Conv1d', 3, 2, 4, padding='same', dtype='float64'), [r(3, 9)])
    add('ConvTranspose2d/stride_outpad', nn.ConvTranspose2d(3, 4, 3, stride=2, padding=1,
                                                            output_padding=1),
        spec('ConvTranspose2d', 3, 4, 3, stride=2, padding=1, output_padding=1,
             dtype='float64'), [r(2, 3, 4, 4)])
    add('ConvTranspose2d/groups_dilation_nobias',
        nn.ConvTranspose2d(4, 6, (2, 3), groups=2, dilation=(2, 1), bias=False),
        spec('ConvTranspose2d', 4, 6, [2, 3], groups=2, dilation=[2, 1], bias=False,
             dtype='float64'), [r(1, 4, 3, 5)])

    # containers: state_dict names, shapes and printed form as PyTorch's
    md = nn.ModuleDict({'conv': nn.Conv1d(2, 3, 3), 'act': nn.LeakyReLU(),
                        'norm': nn.GroupNorm(1, 3)})
    out.append(case('ModuleDict/ordered', md,
                    {'ctor': 'ModuleDict', 'entries': [['conv', spec('Conv1d', 2, 3, 3)],
                                                       ['act', spec('LeakyReLU')],
                                                       ['norm', spec('GroupNorm', 1, 3)]]},
                    None))
    pl = nn.ParameterList([nn.Parameter(torch.ones(3, 4)), torch.zeros(2, dtype=F64)])
    out.append(case('ParameterList/two', pl,
                    {'ctor': 'ParameterList', 'args': [[Tensor(torch.ones(3, 4)),
                                                        Tensor(torch.zeros(2, dtype=F64))]]},
                    None))
    pd = nn.ParameterDict({'scale': nn.Parameter(torch.ones(3)),
                           'bias': nn.Parameter(torch.zeros(2, 2))})
    out.append(case('ParameterDict/sorted', pd,
                    {'ctor': 'ParameterDict', 'entries': [['bias', Tensor(torch.zeros(2, 2))],
                                                          ['scale', Tensor(torch.ones(3))]]},
                    None))
    return out


def breadth_functional_cases():
    """nn.functional forms in float64 (and a few float32), written as tools/gen_fixtures.py's
    cases: inputs, options, outputs and input gradients for a random upstream gradient."""
    g = torch.Generator().manual_seed(16)
    r = lambda *shape, dt=F64: torch.randn(*shape, generator=g, dtype=dt)  # noqa: E731
    u = lambda *shape: torch.rand(*shape, generator=g, dtype=F64)  # noqa: E731
    cases = []

    def add(name, op, inputs, fn, diff=(0,), opts=None, rtol=None, atol=None):
        cases.append(make_case(name, op, inputs, fn, diff=list(diff), opts=opts, rtol=rtol,
                               atol=atol))

    prob = u(3, 4) * 0.9 + 0.05
    w = u(4) + 0.5
    for red in ('mean', 'sum', 'none'):
        add('binary_cross_entropy/f64/%s' % red, 'binary_cross_entropy', [prob, u(3, 4), w],
            lambda x, y, w, red=red: F.binary_cross_entropy(x, y, w, reduction=red),
            diff=(0, 1), opts={'reduction': red})
    # probabilities 0 and 1: the logs are clamped at -100 (values only: PyTorch's gradient
    # there is (x - y) / 1e-12)
    add('binary_cross_entropy/f64/clamped_logs', 'binary_cross_entropy',
        [torch.tensor([0.0, 1.0, 0.0, 1.0, 0.5], dtype=F64),
         torch.tensor([1.0, 0.0, 0.0, 1.0, 0.3], dtype=F64)],
        lambda x, y: F.binary_cross_entropy(x, y, reduction='none'), diff=(),
        opts={'reduction': 'none'})
    add('binary_cross_entropy/f32/mean', 'binary_cross_entropy',
        [prob.float(), u(3, 4).float()], F.binary_cross_entropy, diff=(0,),
        opts={'reduction': 'mean'})
    logits = torch.tensor([[0.0, -45.0, 45.0, 1.5], [-2.0, 0.25, -0.75, 800.0],
                           [7.0, -7.0, 0.0, -800.0]], dtype=F64)
    pw = torch.tensor([3.0, 0.5, 1.0, 2.0], dtype=F64)
    for red in ('mean', 'sum', 'none'):
        add('binary_cross_entropy_with_logits/f64/%s' % red, 'binary_cross_entropy_with_logits',
            [logits, u(3, 4)],
            lambda x, y, red=red: F.binary_cross_entropy_with_logits(x, y, reduction=red),
            diff=(0, 1), opts={'reduction': red})
    add('binary_cross_entropy_with_logits/f64/pos_weight_weight',
        'binary_cross_entropy_with_logits', [logits, u(3, 4), w, pw],
        lambda x, y, w, pw: F.binary_cross_entropy_with_logits(x, y, w, pos_weight=pw),
        diff=(0, 1), opts={'reduction': 'mean'})
    add('binary_cross_entropy_with_logits/f32/sum', 'binary_cross_entropy_with_logits',
        [logits.float(), u(3, 4).float()],
        lambda x, y: F.binary_cross_entropy_with_logits(x, y, reduction='sum'), diff=(0,),
        opts={'reduction': 'sum'})
    a, b = r(4, 5), r(4, 5)
    b[0, 0] = a[0, 0]  # |d| = 0: the gradient of abs there is 0 in both
    for red in ('mean', 'sum', 'none'):
        add('l1_loss/f64/%s' % red, 'l1_loss', [a, b],
            lambda x, y, red=red: F.l1_loss(x, y, reduction=red), diff=(0, 1),
            opts={'reduction': red})
    # smooth_l1 without the tie at [0, 0]: with beta = 0 PyTorch 1.13's kernel gives -1 there
    # (PyTorch 2.x and ddplua: 0, l1_loss's subgradient)
    a2, b2 = r(4, 5), r(4, 5)
    for beta in (1.0, 0.5, 0.0):
        for red in ('mean', 'none'):
            add('smooth_l1_loss/f64/%s/beta%s' % (red, beta), 'smooth_l1_loss', [a2, b2],
                lambda x, y, red=red, beta=beta: F.smooth_l1_loss(x, y, reduction=red, beta=beta),
                diff=(0, 1), opts={'reduction': red, 'beta': beta})
    for delta in (1.0, 2.5):
        for red in ('sum', 'none'):
            add('huber_loss/f64/%s/delta%s' % (red, delta), 'huber_loss', [a, b],
                lambda x, y, red=red, delta=delta: F.huber_loss(x, y, reduction=red, delta=delta),
                diff=(0, 1), opts={'reduction': red, 'delta': delta})
    logp = torch.log_softmax(r(3, 5), 1)
    tgt = torch.softmax(r(3, 5), 1)
    for red in ('batchmean', 'sum', 'none', 'mean'):
        add('kl_div/f64/%s' % red, 'kl_div', [logp, tgt],
            lambda x, y, red=red: F.kl_div(x, y, reduction=red), diff=(0, 1),
            opts={'reduction': red, 'log_target': False})
    # a zero target: xlogy's 0 log 0 = 0 (the input's gradient only: PyTorch's target gradient
    # there is NaN, ddplua's -input, the limit of log t + 1 - input being -inf)
    tgt0 = tgt.clone()
    tgt0[1, 3] = 0.0
    add('kl_div/f64/zero_target', 'kl_div', [logp, tgt0],
        lambda x, y: F.kl_div(x, y, reduction='sum'), diff=(0,),
        opts={'reduction': 'sum', 'log_target': False})
    add('kl_div/f64/log_target', 'kl_div', [logp, torch.log_softmax(r(3, 5), 1)],
        lambda x, y: F.kl_div(x, y, reduction='batchmean', log_target=True), diff=(0, 1),
        opts={'reduction': 'batchmean', 'log_target': True})
    edges = torch.cat([torch.tensor([0.0, -60.0, 60.0, 800.0, -800.0, 19.99, 20.0, 20.01],
                                    dtype=F64), r(8) * 3])
    for slope in (0.01, 0.2, -0.5):
        add('leaky_relu/f64/%s' % slope, 'leaky_relu', [edges],
            lambda x, slope=slope: F.leaky_relu(x, slope), opts={'negative_slope': slope})
    for alpha in (1.0, 0.3):
        add('elu/f64/%s' % alpha, 'elu', [edges], lambda x, alpha=alpha: F.elu(x, alpha),
            opts={'alpha': alpha})
    for beta, thr in ((1, 20), (2, 5), (0.5, 10), (-1, 20)):
        add('softplus/f64/beta%s_threshold%s' % (beta, thr), 'softplus', [edges],
            lambda x, beta=beta, thr=thr: F.softplus(x, beta, thr),
            opts={'beta': beta, 'threshold': thr})
    add('elu/f32', 'elu', [edges.float()], F.elu, opts={'alpha': 1.0})
    add('softplus/f32', 'softplus', [edges.float()], F.softplus, opts={'beta': 1, 'threshold': 20})
    ids = torch.tensor([[0, 3, 1], [2, 2, 0]])
    add('one_hot/infer', 'one_hot', [ids], F.one_hot, diff=(), opts={'num_classes': -1})
    add('one_hot/num_classes', 'one_hot', [ids], lambda t: F.one_hot(t, 6), diff=(),
        opts={'num_classes': 6})
    add('one_hot/0d', 'one_hot', [torch.tensor(2)], lambda t: F.one_hot(t, 4), diff=(),
        opts={'num_classes': 4})
    x4 = r(2, 3, 4, 5)
    for name, pad, value in (('last', [1, 2], 0.0), ('two_dims', [2, 0, 1, 3], 1.5),
                             ('three_dims_neg', [-1, 2, 0, 1, 1, -1], -2.0),
                             ('all_four', [1, 1, 1, 1, 1, 1, 1, 1], 0.0)):
        add('pad/constant/%s' % name, 'pad', [x4],
            lambda x, pad=pad, value=value: F.pad(x, pad, value=value),
            opts={'pad': pad, 'mode': 'constant', 'value': value})
    for mode in ('reflect', 'replicate', 'circular'):
        add('pad/%s/3d' % mode, 'pad', [r(2, 3, 6)],
            lambda x, mode=mode: F.pad(x, [2, 3], mode=mode), opts={'pad': [2, 3], 'mode': mode})
        add('pad/%s/4d' % mode, 'pad', [x4],
            lambda x, mode=mode: F.pad(x, [3, 1, 2, 2], mode=mode),
            opts={'pad': [3, 1, 2, 2], 'mode': mode})
    add('group_norm/f64/affine', 'group_norm', [r(2, 6, 3, 2), r(6), r(6)],
        lambda x, w, b: F.group_norm(x, 3, w, b), diff=(0, 1, 2),
        opts={'num_groups': 3, 'eps': 1e-5})
    add('group_norm/f64/eps_plain_2d', 'group_norm', [r(4, 6)],
        lambda x: F.group_norm(x, 2, eps=0.1), opts={'num_groups': 2, 'eps': 0.1})
    add('group_norm/f32/one_group', 'group_norm', [r(2, 4, 5, dt=F32)],
        lambda x: F.group_norm(x, 1), opts={'num_groups': 1, 'eps': 1e-5})
    add('rms_norm/f64/weight', 'rms_norm', [r(2, 3, 4), r(3, 4)],
        lambda x, w: rms_norm_ref(x, (3, 4), w), diff=(0, 1), opts={'normalized_shape': [3, 4]})
    add('rms_norm/f64/eps', 'rms_norm', [r(5, 4) * 1e-3],
        lambda x: rms_norm_ref(x, (4,), eps=1e-6), opts={'normalized_shape': [4], 'eps': 1e-6})
    # float32: the gradient sums in another order than PyTorch's, so 1e-4
    add('rms_norm/f32/default_eps', 'rms_norm', [r(3, 8, dt=F32) * 1e-3],
        lambda x: rms_norm_ref(x, (8,)), opts={'normalized_shape': [8]}, rtol=1e-4, atol=1e-5)
    add('conv1d/f64/bias_padding', 'conv1d', [r(2, 4, 9), r(6, 4, 3), r(6)],
        lambda x, w, b: F.conv1d(x, w, b, padding=2), diff=(0, 1, 2),
        opts={'stride': 1, 'padding': 2, 'dilation': 1, 'groups': 1})
    add('conv1d/f64/stride_dilation_groups', 'conv1d', [r(1, 4, 12), r(4, 2, 3)],
        lambda x, w: F.conv1d(x, w, stride=2, dilation=3, groups=2), diff=(0, 1),
        opts={'stride': 2, 'padding': 0, 'dilation': 3, 'groups': 2})
    for k, dil in ((4, 1), (3, 2), (3, 1)):  # 'same' with uneven and even total padding
        add('conv1d/f64/same_k%d_d%d' % (k, dil), 'conv1d', [r(2, 3, 8), r(2, 3, k)],
            lambda x, w, dil=dil: F.conv1d(x, w, padding='same', dilation=dil), diff=(0, 1),
            opts={'stride': 1, 'padding': 'same', 'dilation': dil, 'groups': 1})
    for name, xs, ws, kw in (
            ('plain', (2, 3, 4, 5), (3, 2, 3, 3), {}),
            ('stride_padding_outpad', (1, 4, 3, 4), (4, 3, 3, 2),
             {'stride': 2, 'padding': 1, 'output_padding': 1}),
            ('groups_dilation', (2, 4, 3, 3), (4, 1, 2, 3),
             {'stride': (2, 1), 'padding': (0, 2), 'groups': 2, 'dilation': (1, 2)}),
            ('outpad_below_dilation', (1, 2, 4, 4), (2, 2, 3, 3),
             {'stride': 1, 'dilation': 2, 'output_padding': 1}),
            ('unbatched', (3, 4, 4), (3, 2, 2, 2), {'stride': 2})):
        opts = {'stride': 1, 'padding': 0, 'output_padding': 0, 'groups': 1, 'dilation': 1}
        opts.update({k: list(v) if isinstance(v, tuple) else v for k, v in kw.items()})
        add('conv_transpose2d/f64/%s' % name, 'conv_transpose2d',
            [r(*xs), r(*ws), r(ws[1] * opts['groups'])],
            lambda x, w, b, kw=kw: F.conv_transpose2d(x, w, b, **kw), diff=(0, 1, 2), opts=opts)
    add('conv_transpose2d/f32/no_bias', 'conv_transpose2d',
        [r(2, 2, 3, 3, dt=F32), r(2, 3, 3, 3, dt=F32)],
        lambda x, w: F.conv_transpose2d(x, w, stride=2, padding=1), diff=(0, 1),
        opts={'stride': 2, 'padding': 1, 'output_padding': 0, 'groups': 1, 'dilation': 1})
    add('conv1d/f64/valid', 'conv1d', [r(2, 3, 8), r(2, 3, 4)],
        lambda x, w: F.conv1d(x, w, padding='valid'), diff=(0, 1),
        opts={'stride': 1, 'padding': 'valid', 'dilation': 1, 'groups': 1})
    return cases


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
    ap.add_argument('--check', action='store_true', help='compare with the files on disk')
    ap.add_argument('--only', choices=['nn_modules', 'nn_breadth'], help='one file only')
    args = ap.parse_args()
    torch.set_num_threads(1)  # reproducible reductions
    files = []
    if args.only in (None, 'nn_modules'):
        files.append((OUT, render(cases())))
    if args.only in (None, 'nn_breadth'):
        _, text = write_fixture('nn_breadth', breadth_functional_cases(),
                                'issue 16 nn.functional cases (tools/gen_nn_fixtures.py).')
        files.append((OUT_BREADTH, text.replace('Generated by tools/gen_fixtures.py',
                                                'Generated by tools/gen_nn_fixtures.py')))
    stale = 0
    for path, text in files:
        if args.check:
            old = open(path).read() if os.path.exists(path) else None
            if old != text:
                print('stale fixture (rerun tools/gen_nn_fixtures.py):', path)
                stale = 1
            continue
        with open(path, 'w') as f:
            f.write(text)
        print('%s %d bytes' % (os.path.relpath(path, ROOT), len(text)))
    return stale


if __name__ == '__main__':
    sys.exit(main())
