#!/usr/bin/python3
"""tools/gen_optim_fixtures.py: PyTorch reference trajectories for spec/optim_spec.lua.

Regenerate (needs PyTorch; Debian's python3-torch is enough, so use /usr/bin/python3):

    /usr/bin/python3 tools/gen_optim_fixtures.py          # writes spec/fixtures/optim.lua
    /usr/bin/python3 tools/gen_optim_fixtures.py --check  # fails if the committed file differs

The file returns {optimizers = {case, ...}, schedulers = {case, ...}}.

An optimizer case gives the gradients directly (no model), so only the update is compared:
    { name = 'SGD/momentum', optimizer = 'SGD', opts = {lr = 0.1, momentum = 0.9},
      group_opts = { {}, {lr = 0.01} },   -- absent: all parameters in one group
      params = { T, T },                  -- initial values
      grads = { {T, T}, {T, false}, ...}, -- per step, per parameter; false: grad is None
      expected = { {T, T}, ... } }        -- parameters after each step
A tensor is {shape = {..}, dtype = 'float32', values = {row-major values}} as in
tools/gen_fixtures.py. A scheduler case lists get_last_lr() after construction and after each
of `steps` calls of step(), for an SGD optimizer with groups of the given lrs:
    { name = 'StepLR', scheduler = 'StepLR', opts = {...}, lrs = {0.1, 0.01}, steps = 12,
      expected = { {lr1, lr2}, ... } }
Everything is seeded, so a rerun with the same PyTorch gives the same file.
"""
import argparse
import math
import os
import sys

import numpy as np
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, 'spec', 'fixtures', 'optim.lua')
DTYPE_NAMES = {torch.float32: 'float32', torch.float64: 'float64'}
STEPS = 5


def lua_float(v, dtype=torch.float64):
    if math.isnan(v):
        return '0/0'
    if math.isinf(v):
        return '1/0' if v > 0 else '-1/0'
    if dtype == torch.float32:
        s = repr(np.float32(v))
        if s.startswith('np.float32('):  # numpy >= 2 spells the type
            s = s[len('np.float32('):-1]
        assert float(np.float32(float(s))) == np.float32(v)
    else:
        s = repr(float(v))
    if 'e' not in s and '.' not in s and 'n' not in s:
        s += '.0'
    return s


def lua(v):
    if isinstance(v, torch.Tensor):
        vals = ', '.join(lua_float(float(x), v.dtype) for x in v.reshape(-1).tolist())
        return "{shape = {%s}, dtype = '%s', values = {%s}}" % (
            ', '.join(str(s) for s in v.shape), DTYPE_NAMES[v.dtype], vals)
    if v is None or v is False:
        return 'false'
    if v is True:
        return 'true'
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return lua_float(v)
    if isinstance(v, str):
        return "'%s'" % v
    if isinstance(v, dict):
        return '{' + ', '.join('%s = %s' % (k, lua(x)) for k, x in sorted(v.items())) + '}'
    if isinstance(v, (list, tuple)):
        return '{' + ', '.join(lua(x) for x in v) + '}'
    raise TypeError(type(v))


def optimizer_case(name, cls, opts, dtype=torch.float32, group_opts=None, missing=()):
    """missing: (step, param) pairs (0-based) whose gradient is None."""
    g = torch.Generator().manual_seed(len(name) * 7919 + sum(map(ord, name)))
    shapes = [(3, 4), (5,)]
    params = [torch.randn(s, generator=g, dtype=dtype) for s in shapes]
    init = [p.clone() for p in params]
    ps = [p.clone().requires_grad_() for p in params]
    if group_opts:
        groups = [dict(params=[p], **o) for p, o in zip(ps, group_opts)]
    else:
        groups = ps
    topts = dict(opts)
    if 'betas' in topts:
        topts['betas'] = tuple(topts['betas'])
    opt = cls(groups, **topts)
    grads, expected = [], []
    for step in range(STEPS):
        gs = []
        for i, p in enumerate(ps):
            if (step, i) in missing:
                p.grad = None
                gs.append(None)
            else:
                gr = torch.randn(p.shape, generator=g, dtype=dtype)
                p.grad = gr.clone()
                gs.append(gr)
        opt.step()
        grads.append(gs)
        expected.append([p.detach().clone() for p in ps])
    case = dict(name=name, optimizer=cls.__name__, opts=opts, params=init, grads=grads,
                expected=expected)
    if group_opts:
        case['group_opts'] = group_opts
    return case


def optimizer_cases():
    SGD, Adam, AdamW = torch.optim.SGD, torch.optim.Adam, torch.optim.AdamW
    F64 = torch.float64
    return [
        optimizer_case('SGD/plain', SGD, dict(lr=0.1)),
        optimizer_case('SGD/weight_decay', SGD, dict(lr=0.1, weight_decay=0.01)),
        optimizer_case('SGD/momentum', SGD, dict(lr=0.05, momentum=0.9)),
        optimizer_case('SGD/dampening', SGD, dict(lr=0.05, momentum=0.9, dampening=0.3,
                                                  weight_decay=0.1)),
        optimizer_case('SGD/nesterov', SGD, dict(lr=0.05, momentum=0.8, nesterov=True,
                                                 weight_decay=0.02)),
        optimizer_case('SGD/maximize', SGD, dict(lr=0.05, momentum=0.5, maximize=True)),
        optimizer_case('SGD/momentum/f64', SGD, dict(lr=0.05, momentum=0.9), dtype=F64),
        optimizer_case('SGD/groups', SGD, dict(lr=0.1, momentum=0.9),
                       group_opts=[{}, dict(lr=0.01, momentum=0.5)]),
        optimizer_case('SGD/missing_grad', SGD, dict(lr=0.1, momentum=0.9),
                       missing={(0, 1), (2, 0)}),
        optimizer_case('Adam/default', Adam, dict()),
        optimizer_case('Adam/options', Adam, dict(lr=0.01, betas=[0.8, 0.99], eps=1e-6,
                                                  weight_decay=0.1)),
        optimizer_case('Adam/f64', Adam, dict(lr=0.01, weight_decay=0.05), dtype=F64),
        optimizer_case('Adam/groups', Adam, dict(lr=0.01),
                       group_opts=[{}, dict(lr=0.1, betas=[0.5, 0.9])]),
        optimizer_case('Adam/missing_grad', Adam, dict(lr=0.01), missing={(0, 1), (3, 0)}),
        optimizer_case('Adam/maximize', Adam, dict(lr=0.01, maximize=True)),
        optimizer_case('AdamW/default', AdamW, dict()),
        optimizer_case('AdamW/options', AdamW, dict(lr=0.02, betas=[0.85, 0.95], eps=1e-7,
                                                    weight_decay=0.3)),
        optimizer_case('AdamW/f64', AdamW, dict(lr=0.01, weight_decay=0.1), dtype=F64),
        optimizer_case('AdamW/groups', AdamW, dict(lr=0.01),
                       group_opts=[dict(weight_decay=0.0), dict(lr=0.05, weight_decay=0.5)]),
    ]


def scheduler_case(name, make, opts, lrs=(0.1, 0.02), steps=12):
    ps = [torch.zeros(1, requires_grad=True) for _ in lrs]
    opt = torch.optim.SGD([dict(params=[p], lr=lr) for p, lr in zip(ps, lrs)], lr=lrs[0])
    sched = make(opt)
    expected = [list(sched.get_last_lr())]
    for _ in range(steps):
        opt.step()
        sched.step()
        expected.append(list(sched.get_last_lr()))
    return dict(name=name, scheduler=name.split('/')[0], opts=opts, lrs=list(lrs),
                steps=steps, expected=expected)


def scheduler_cases():
    S = torch.optim.lr_scheduler
    return [
        scheduler_case('StepLR/default', lambda o: S.StepLR(o, step_size=3), dict(step_size=3)),
        scheduler_case('StepLR/gamma', lambda o: S.StepLR(o, step_size=2, gamma=0.5),
                       dict(step_size=2, gamma=0.5)),
        scheduler_case('CosineAnnealingLR/default', lambda o: S.CosineAnnealingLR(o, T_max=5),
                       dict(T_max=5), steps=16),
        scheduler_case('CosineAnnealingLR/eta_min',
                       lambda o: S.CosineAnnealingLR(o, T_max=4, eta_min=0.001),
                       dict(T_max=4, eta_min=0.001), steps=14),
        scheduler_case('LinearLR/default', lambda o: S.LinearLR(o), dict()),
        scheduler_case('LinearLR/options',
                       lambda o: S.LinearLR(o, start_factor=0.5, end_factor=0.1, total_iters=4),
                       dict(start_factor=0.5, end_factor=0.1, total_iters=4)),
        # LambdaLR's function is written again in the spec: 0.95^epoch
        scheduler_case('LambdaLR/exp', lambda o: S.LambdaLR(o, lambda e: 0.95 ** e), dict()),
    ]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--check', action='store_true')
    args = ap.parse_args()
    torch.manual_seed(0)
    lines = ['-- spec/fixtures/optim.lua: written by tools/gen_optim_fixtures.py (PyTorch %s); '
             'do not edit.' % torch.__version__, 'return {', 'optimizers = {']
    lines += ['  %s,' % lua(c) for c in optimizer_cases()]
    lines += ['},', 'schedulers = {']
    lines += ['  %s,' % lua(c) for c in scheduler_cases()]
    lines += ['},', '}', '']
    text = '\n'.join(lines)
    if args.check:
        with open(OUT) as f:
            if f.read() != text:
                sys.exit('%s differs from what the generator writes' % OUT)
        return
    with open(OUT, 'w') as f:
        f.write(text)
    print('wrote', OUT)


if __name__ == '__main__':
    main()
