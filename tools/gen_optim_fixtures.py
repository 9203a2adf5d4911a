#!/usr/bin/python3
"""tools/gen_optim_fixtures.py: PyTorch reference trajectories for spec/optim/optim_spec.lua.

Regenerate (needs PyTorch; Debian's python3-torch is enough, so use /usr/bin/python3):

    /usr/bin/python3 tools/gen_optim_fixtures.py          # writes spec/fixtures/optim.lua
    /usr/bin/python3 tools/gen_optim_fixtures.py --check  # fails if the committed file differs

The file returns {optimizers = {case, ...}, schedulers = {case, ...}, plateau = {case, ...},
sequential = {case, ...}, grad_scaler = {case, ...}}.

An optimizer case gives the gradients directly (no model), so only the update is compared:
    { name = 'SGD/momentum', optimizer = 'SGD', opts = {lr = 0.1, momentum = 0.9},
      group_opts = { {}, {lr = 0.01} },   -- absent: all parameters in one group
      params = { T, T },                  -- initial values
      grads = { {T, T}, {T, false}, ...}, -- per step, per parameter; false: grad is None
      expected = { {T, T}, ... } }        -- parameters after each step
A tensor is {shape = {..}, dtype = 'float32', values = {row-major values}} as in
tools/gen_fixtures.py. A scheduler case lists get_last_lr() after construction and after each
of `steps` calls of step(), for an optimizer (SGD with momentum 0.9 unless `optimizer` says
'Adam') with groups of the given lrs; `momenta` (OneCycleLR) lists each group's momentum (SGD)
or betas[1] (Adam) at the same points:
    { name = 'StepLR', scheduler = 'StepLR', opts = {...}, lrs = {0.1, 0.01}, steps = 12,
      expected = { {lr1, lr2}, ... }, momenta = { {m1, m2}, ... } }
A plateau case (ReduceLROnPlateau) gives the metric of each step instead of `steps`:
    { name = ..., opts = {...}, lrs = {...}, metrics = {...}, expected = { {lr1, lr2}, ... } }
(expected[1] at construction, expected[k + 1] after step(metrics[k])). A sequential case
(SequentialLR) lists its schedulers as {scheduler = name, opts = {...}} and the milestones.
A grad_scaler case runs GradScaler(opts) with an optimizer over `params`; step k's loss is
sum_i sum(params[i] * coefs[k][i]) (coefficients with inf or NaN make that step's gradients
non-finite), then scaler.scale(loss).backward(), [unscale_ (then `unscaled` holds the
gradients)], scaler.step(opt), scaler.update(); `scales`, `trackers` and `skipped` record
get_scale(), the growth tracker and whether the step was skipped, and `expected` the
parameters, after each update:
    { name = ..., opts = {...}, optimizer = 'SGD', optimizer_opts = {...}, params = {T, T},
      coefs = { {T, T}, ... }, unscale_first = false, expected = { {T, T}, ... },
      scales = {...}, trackers = {...}, skipped = {...}, unscaled = { {T, T} or false, ...} }
PyTorch 1.13 has GradScaler only for CUDA, so the generator runs the real class
(torch.cuda.amp.GradScaler) on CPU with its two CUDA kernels replaced by Python transcripts of
them (cpu_amp_kernels below: _amp_foreach_non_finite_check_and_unscale_ and
_amp_update_scale_, whose float32 scale arithmetic is done in double and rounded, as the
kernel does) and its is_cuda asserts lifted.
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
    RMSprop, Adagrad = torch.optim.RMSprop, torch.optim.Adagrad
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
        optimizer_case('Adam/amsgrad', Adam, dict(lr=0.05, amsgrad=True, weight_decay=0.1)),
        optimizer_case('Adam/amsgrad/f64', Adam, dict(lr=0.05, amsgrad=True), dtype=F64),
        optimizer_case('Adam/amsgrad/missing_grad', Adam, dict(lr=0.02, amsgrad=True),
                       missing={(1, 0), (2, 1)}),
        optimizer_case('AdamW/amsgrad', AdamW, dict(lr=0.05, amsgrad=True, weight_decay=0.2,
                                                    betas=[0.8, 0.9])),
        optimizer_case('AdamW/amsgrad/f64', AdamW, dict(lr=0.05, amsgrad=True), dtype=F64),
        optimizer_case('RMSprop/default', RMSprop, dict()),
        optimizer_case('RMSprop/weight_decay', RMSprop, dict(lr=0.02, alpha=0.9,
                                                             weight_decay=0.1)),
        optimizer_case('RMSprop/momentum', RMSprop, dict(lr=0.01, momentum=0.9)),
        optimizer_case('RMSprop/centered', RMSprop, dict(lr=0.01, centered=True, eps=1e-6)),
        optimizer_case('RMSprop/all', RMSprop, dict(lr=0.01, alpha=0.95, eps=1e-5,
                                                    weight_decay=0.05, momentum=0.5,
                                                    centered=True)),
        optimizer_case('RMSprop/maximize', RMSprop, dict(lr=0.01, momentum=0.3, maximize=True)),
        optimizer_case('RMSprop/f64', RMSprop, dict(lr=0.01, weight_decay=0.05), dtype=F64),
        optimizer_case('RMSprop/all/f64', RMSprop, dict(lr=0.01, momentum=0.8, centered=True,
                                                        weight_decay=0.1), dtype=F64),
        optimizer_case('RMSprop/groups', RMSprop, dict(lr=0.01),
                       group_opts=[dict(centered=True), dict(lr=0.05, momentum=0.9)]),
        optimizer_case('RMSprop/missing_grad', RMSprop, dict(lr=0.01, momentum=0.9),
                       missing={(0, 1), (3, 0)}),
        optimizer_case('Adagrad/default', Adagrad, dict()),
        optimizer_case('Adagrad/lr_decay', Adagrad, dict(lr=0.1, lr_decay=0.3)),
        optimizer_case('Adagrad/initial_accumulator', Adagrad,
                       dict(lr=0.1, initial_accumulator_value=0.5, eps=1e-6)),
        optimizer_case('Adagrad/weight_decay', Adagrad, dict(lr=0.1, weight_decay=0.2,
                                                             lr_decay=0.05)),
        optimizer_case('Adagrad/maximize', Adagrad, dict(lr=0.1, maximize=True)),
        optimizer_case('Adagrad/f64', Adagrad, dict(lr=0.1, lr_decay=0.1, weight_decay=0.1,
                                                    initial_accumulator_value=0.2), dtype=F64),
        optimizer_case('Adagrad/missing_grad', Adagrad, dict(lr=0.1, lr_decay=0.1),
                       missing={(0, 0), (2, 1)}),
    ]


def make_optimizer(lrs, optimizer='SGD'):
    ps = [torch.zeros(1, requires_grad=True) for _ in lrs]
    groups = [dict(params=[p], lr=lr) for p, lr in zip(ps, lrs)]
    if optimizer == 'Adam':
        return torch.optim.Adam(groups, lr=lrs[0])
    return torch.optim.SGD(groups, lr=lrs[0], momentum=0.9)


def momenta(opt):
    return [g['betas'][0] if 'betas' in g else g['momentum'] for g in opt.param_groups]


def scheduler_case(name, make, opts, lrs=(0.1, 0.02), steps=12, optimizer='SGD',
                   with_momenta=False):
    opt = make_optimizer(lrs, optimizer)
    sched = make(opt)
    expected, ms = [list(sched.get_last_lr())], [momenta(opt)]
    for _ in range(steps):
        opt.step()
        sched.step()
        expected.append(list(sched.get_last_lr()))
        ms.append(momenta(opt))
    case = dict(name=name, scheduler=name.split('/')[0], opts=opts, lrs=list(lrs),
                steps=steps, expected=expected)
    if optimizer != 'SGD':
        case['optimizer'] = optimizer
    if with_momenta:
        case['momenta'] = ms
    return case


def plateau_case(name, opts, metrics, lrs=(0.1, 0.02)):
    opt = make_optimizer(lrs)
    sched = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, **opts)
    expected = [[g['lr'] for g in opt.param_groups]]
    for m in metrics:
        opt.step()
        sched.step(m)
        expected.append(list(sched._last_lr))
    return dict(name=name, opts=opts, lrs=list(lrs), metrics=metrics, expected=expected)


def plateau_cases():
    # patience 2: the 3rd bad epoch in a row reduces; cooldown 2 ignores the next 2 epochs;
    # min_lr stops group 2 (0.02 -> 0.01, then no lower) and later group 1 (at 0.001)
    fall_then_flat = [10.0, 9.0, 8.0, 8.0, 8.0, 8.0, 8.0, 8.0, 8.0, 7.0, 7.0, 7.0, 7.0, 7.0,
                      7.0, 7.0, 7.0, 7.0, 7.0, 7.0, 7.0, 7.0, 7.0, 7.0]
    return [
        plateau_case('min/rel', dict(patience=2, cooldown=2, factor=0.5,
                                     min_lr=[0.001, 0.01]), fall_then_flat),
        # a 1e-4 relative improvement is not enough in 'rel' mode (7.0 -> 6.9995)
        plateau_case('min/rel/threshold', dict(patience=1, threshold=0.01),
                     [5.0, 4.99, 4.98, 4.0, 3.97, 3.96, 3.95, 3.0, 2.99]),
        plateau_case('max/abs', dict(mode='max', threshold_mode='abs', threshold=0.1,
                                     patience=1, factor=0.2, min_lr=0.0005),
                     [0.5, 0.55, 0.58, 0.7, 0.75, 0.79, 0.8, 0.85, 0.9, 0.95, 0.99, 1.0]),
        # eps: a reduction smaller than eps is skipped (0.02 -> 0.0199 is 1e-4 < eps)
        plateau_case('eps', dict(patience=0, factor=0.995, eps=1e-3), [3.0, 3.0, 3.0, 3.0]),
    ]


SUB = torch.optim.lr_scheduler


def make_sub(opt, spec):
    name, opts = spec['scheduler'], spec['opts']
    return getattr(SUB, name)(opt, **opts)


def sequential_case(name, subs, milestones, lrs=(0.1, 0.02), steps=14):
    opt = make_optimizer(lrs)
    scheds = [make_sub(opt, s) for s in subs]
    sched = SUB.SequentialLR(opt, schedulers=scheds, milestones=milestones)
    expected = [list(sched.get_last_lr())]
    for _ in range(steps):
        opt.step()
        sched.step()
        expected.append(list(sched.get_last_lr()))
    return dict(name=name, schedulers=subs, milestones=milestones, lrs=list(lrs), steps=steps,
                expected=expected)


def sequential_cases():
    def S(name, **opts):
        return dict(scheduler=name, opts=opts)
    return [
        sequential_case('warmup/exponential',
                        [S('LinearLR', start_factor=0.1, total_iters=3), S('ExponentialLR',
                                                                           gamma=0.8)], [3]),
        sequential_case('step/cosine/multistep',
                        [S('StepLR', step_size=2, gamma=0.5), S('CosineAnnealingLR', T_max=4,
                                                                eta_min=0.001),
                         S('MultiStepLR', milestones=[2, 3], gamma=0.3)], [4, 9]),
        sequential_case('onecycle/linear',
                        [S('OneCycleLR', max_lr=0.5, total_steps=6), S('LinearLR',
                                                                       start_factor=0.5,
                                                                       total_iters=4)], [5]),
    ]


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
        scheduler_case('MultiStepLR/default', lambda o: S.MultiStepLR(o, milestones=[2, 5]),
                       dict(milestones=[2, 5])),
        scheduler_case('MultiStepLR/repeated',
                       lambda o: S.MultiStepLR(o, milestones=[3, 1, 6, 6], gamma=0.5),
                       dict(milestones=[3, 1, 6, 6], gamma=0.5)),
        scheduler_case('ExponentialLR/default', lambda o: S.ExponentialLR(o, gamma=0.8),
                       dict(gamma=0.8)),
        scheduler_case('OneCycleLR/cos', lambda o: S.OneCycleLR(o, max_lr=1.0, total_steps=12),
                       dict(max_lr=1.0, total_steps=12), steps=11, with_momenta=True),
        scheduler_case('OneCycleLR/linear/adam',
                       lambda o: S.OneCycleLR(o, max_lr=[0.5, 0.05], epochs=3, steps_per_epoch=5,
                                              pct_start=0.4, anneal_strategy='linear',
                                              base_momentum=0.8, max_momentum=0.9,
                                              div_factor=10.0, final_div_factor=100.0),
                       dict(max_lr=[0.5, 0.05], epochs=3, steps_per_epoch=5, pct_start=0.4,
                            anneal_strategy='linear', base_momentum=0.8, max_momentum=0.9,
                            div_factor=10.0, final_div_factor=100.0),
                       steps=14, optimizer='Adam', with_momenta=True),
        scheduler_case('OneCycleLR/three_phase',
                       lambda o: S.OneCycleLR(o, max_lr=0.3, total_steps=20, three_phase=True),
                       dict(max_lr=0.3, total_steps=20, three_phase=True), steps=19,
                       with_momenta=True),
        scheduler_case('OneCycleLR/no_momentum',
                       lambda o: S.OneCycleLR(o, max_lr=0.3, total_steps=8,
                                              cycle_momentum=False),
                       dict(max_lr=0.3, total_steps=8, cycle_momentum=False), steps=7,
                       with_momenta=True),
    ]


def cpu_amp_kernels():
    """Python transcripts of the two CUDA kernels GradScaler calls (PyTorch 1.13
    aten/src/ATen/native/cuda/AmpKernels.cu), so the real GradScaler runs on CPU."""
    def unscale(grads, found_inf, inv_scale):
        inv = float(inv_scale.item())
        for g in grads:
            if not bool(torch.isfinite(g).all()):
                found_inf.fill_(1.0)
            if inv != 1.0:
                g.mul_(inv)

    def update_scale(scale, growth_tracker, found_inf, growth, backoff, interval):
        # current_scale is float, the factors double: the product is double, stored as float
        if found_inf.item():
            scale.fill_(float(np.float32(scale.item() * backoff)))
            growth_tracker.fill_(0)
        else:
            successful = int(growth_tracker.item()) + 1
            if successful == interval:
                new_scale = float(np.float32(scale.item() * growth))
                if math.isfinite(new_scale):
                    scale.fill_(new_scale)
                growth_tracker.fill_(0)
            else:
                growth_tracker.fill_(successful)
        return scale

    torch._amp_foreach_non_finite_check_and_unscale_ = unscale
    torch._amp_update_scale_ = update_scale
    gs = torch.cuda.amp.grad_scaler
    gs.amp_definitely_not_available = lambda: False

    class Replicator(gs._MultiDeviceReplicator):
        def __init__(self, master):  # without the is_cuda assert
            self.master = master
            self._per_device_tensors = {}
    gs._MultiDeviceReplicator = Replicator

    class CPUGradScaler(gs.GradScaler):
        def scale(self, outputs):  # the tensor path of scale() without its is_cuda assert
            if self._scale is None:
                self._lazy_init_scale_growth_tracker(outputs.device)
            return outputs * self._scale.to(device=outputs.device)
    return CPUGradScaler


def grad_scaler_case(name, opts, bad, steps=8, optimizer='SGD', optimizer_opts=None,
                     unscale_first=False):
    """bad: {step: 'inf' | 'nan'} (0-based) makes that step's coefficients non-finite."""
    Scaler = cpu_amp_kernels()
    g = torch.Generator().manual_seed(sum(map(ord, name)))
    shapes = [(3, 4), (5,)]
    params = [torch.randn(s, generator=g) for s in shapes]
    init = [p.clone() for p in params]
    ps = [p.clone().requires_grad_() for p in params]
    optimizer_opts = optimizer_opts or dict(lr=0.1, momentum=0.9)
    opt = getattr(torch.optim, optimizer)(ps, **optimizer_opts)
    scaler = Scaler(**opts)
    coefs, expected, scales, trackers, skipped, unscaled = [], [], [], [], [], []
    for step in range(steps):
        cs = [torch.randn(s, generator=g) for s in shapes]
        if step in bad:
            cs[step % 2].view(-1)[step % 5] = math.inf if bad[step] == 'inf' else math.nan
        coefs.append(cs)
        opt.zero_grad()
        loss = sum((p * c).sum() for p, c in zip(ps, cs))
        scaler.scale(loss).backward()
        if unscale_first:
            scaler.unscale_(opt)
            unscaled.append([p.grad.clone() for p in ps])
        else:
            unscaled.append(None)
        before = [p.detach().clone() for p in ps]
        scaler.step(opt)
        skipped.append(all(bool(torch.equal(b, p.detach())) for b, p in zip(before, ps)))
        scaler.update()
        expected.append([p.detach().clone() for p in ps])
        scales.append(scaler.get_scale())
        trackers.append(scaler._get_growth_tracker())
    case = dict(name=name, opts=opts, optimizer=optimizer, optimizer_opts=optimizer_opts,
                params=init, coefs=coefs, expected=expected, scales=scales, trackers=trackers,
                skipped=skipped, unscale_first=unscale_first)
    if unscale_first:
        case['unscaled'] = unscaled
    return case


def grad_scaler_cases():
    return [
        grad_scaler_case('default/growth', dict(init_scale=2.0 ** 10, growth_interval=3),
                         {2: 'inf', 3: 'nan', 7: 'inf'}, steps=10),
        # factors that are not powers of two: the scale is rounded to float32 at each update
        grad_scaler_case('odd_factors', dict(init_scale=1000.0, growth_factor=1.7,
                                             backoff_factor=0.3, growth_interval=2),
                         {1: 'inf', 4: 'nan'}, steps=9),
        grad_scaler_case('unscale_first/adam', dict(init_scale=256.0, growth_interval=2),
                         {3: 'inf'}, steps=6, optimizer='Adam', optimizer_opts=dict(lr=0.01),
                         unscale_first=True),
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
    lines += ['},', 'plateau = {']
    lines += ['  %s,' % lua(c) for c in plateau_cases()]
    lines += ['},', 'sequential = {']
    lines += ['  %s,' % lua(c) for c in sequential_cases()]
    lines += ['},', 'grad_scaler = {']
    lines += ['  %s,' % lua(c) for c in grad_scaler_cases()]
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
