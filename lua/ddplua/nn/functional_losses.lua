-- lua/ddplua/nn/functional_losses.lua: the losses of nn.functional beyond the C ones.
-- defines: binary_cross_entropy, binary_cross_entropy_with_logits, l1_loss, smooth_l1_loss,
--          huber_loss, kl_div (installed into ddpl.F by functional.lua).
--
-- Each is composed from differentiable tensor ops whose gradient equals PyTorch's formula
-- (docs/internals/nn-layers.md gives the derivations), so they run on every device and under
-- autograd without a kernel of their own. Formulas are PyTorch 1.13's (ATen's native loss
-- functions). Where a branch could overflow or divide by zero (exp of a large logit, 1/beta
-- with beta = 0), the value fed to it is replaced first, so its zero share of the gradient is
-- never 0 * inf.
local ddpl = require 'ddplua'
local Args = require 'ddplua.nn.functional_args'

local L = {}

-- binary_cross_entropy(input, target [, weight [, reduction='mean']]): input probabilities in
-- [0, 1]; loss = -w (y log x + (1 - y) log(1 - x)), each log clamped at -100 as PyTorch does.
function L.binary_cross_entropy(...)
    local fname = 'binary_cross_entropy'
    local a = Args.parse(fname, {{'input', 'ftensor'}, {'target', 'ftensor'},
                                 {'weight', 'ftensor?'}, {'reduction', 'reduction', 'mean'}}, ...)
    local x, y = a.input, a.target
    Args.check_same_shape(fname, 'input', x, 'target', y)
    -- PyTorch refuses probabilities outside [0, 1] (and NaN): one readback, as its CPU kernel
    if x:numel() > 0 then
        local inside = ddpl.no_grad(function() return x:ge(0):long():mul(x:le(1):long()):min() end)
        if inside:item() == 0 then
            error(fname .. ': all elements of input should be between 0 and 1', 2)
        end
    end
    -- log clamped at -100 as PyTorch; the argument is first kept >= e^-100 so that at a
    -- probability of exactly 0 or 1 the clamped term's gradient is 0, not 0/0 = NaN (PyTorch's
    -- native backward divides by max(x (1 - x), 1e-12) instead)
    local tiny = math.exp(-100)
    local log_x = x:clamp(tiny):log():clamp(-100)
    local log_1mx = (1 - x):clamp(tiny):log():clamp(-100)
    local loss = (y - 1) * log_1mx - y * log_x
    if a.weight ~= nil then loss = loss * a.weight end
    return Args.reduce(loss, a.reduction)
end

-- binary_cross_entropy_with_logits(input, target [, weight [, reduction [, pos_weight]]]):
-- with m = max(-x, 0) held constant (detached; it cancels in the value),
--   loss = (1 - y) x + lw (m + log(exp(-m) + exp(-x - m))),   lw = 1 + (pos_weight - 1) y
-- which is PyTorch's formula term for term; its derivative in x is
--   sigmoid(x) (pos_weight y + 1 - y) - pos_weight y,
-- PyTorch's backward, also at x = 0 (where max(x,0) + log1p(exp(-|x|)) would give -y).
-- Both exponents are <= 0, so no value overflows.
function L.binary_cross_entropy_with_logits(...)
    local fname = 'binary_cross_entropy_with_logits'
    local a = Args.parse(fname, {{'input', 'ftensor'}, {'target', 'ftensor'},
                                 {'weight', 'ftensor?'}, {'reduction', 'reduction', 'mean'},
                                 {'pos_weight', 'ftensor?'}}, ...)
    local x, y = a.input, a.target
    Args.check_same_shape(fname, 'input', x, 'target', y)
    local m = (-x):clamp(0):detach()
    local log_term = m + ((-m):exp() + (-x - m):exp()):log()
    local loss
    if a.pos_weight ~= nil then
        local log_weight = (a.pos_weight - 1) * y + 1
        loss = (1 - y) * x + log_weight * log_term
    else
        loss = (1 - y) * x + log_term
    end
    if a.weight ~= nil then loss = loss * a.weight end
    return Args.reduce(loss, a.reduction)
end

-- l1_loss(input, target [, reduction='mean']): |x - y|.
function L.l1_loss(...)
    local a = Args.parse('l1_loss', {{'input', 'ftensor'}, {'target', 'ftensor'},
                                     {'reduction', 'reduction', 'mean'}}, ...)
    Args.check_broadcast('l1_loss', 'input', a.input, 'target', a.target)
    return Args.reduce((a.input - a.target):abs(), a.reduction)
end

-- smooth_l1_loss(input, target [, reduction='mean' [, beta=1]]): with d = |x - y|,
-- 0.5 d^2 / beta where d < beta, else d - 0.5 beta; beta = 0 is l1_loss (PyTorch's shortcut,
-- which also keeps 1/beta out of the graph).
function L.smooth_l1_loss(...)
    local fname = 'smooth_l1_loss'
    local a = Args.parse(fname, {{'input', 'ftensor'}, {'target', 'ftensor'},
                                 {'reduction', 'reduction', 'mean'}, {'beta', 'number', 1.0}}, ...)
    if a.beta < 0 then
        error(fname .. ': beta must be non-negative, got ' .. tostring(a.beta), 2)
    end
    Args.check_broadcast(fname, 'input', a.input, 'target', a.target)
    local d = (a.input - a.target):abs()
    if a.beta == 0 then return Args.reduce(d, a.reduction) end
    local loss = ddpl.where(d:lt(a.beta), d * d * (0.5 / a.beta), d - 0.5 * a.beta)
    return Args.reduce(loss, a.reduction)
end

-- huber_loss(input, target [, reduction='mean' [, delta=1]]): with d = |x - y|, 0.5 d^2 where
-- d < delta, else delta (d - 0.5 delta).
function L.huber_loss(...)
    local fname = 'huber_loss'
    local a = Args.parse(fname, {{'input', 'ftensor'}, {'target', 'ftensor'},
                                 {'reduction', 'reduction', 'mean'}, {'delta', 'number', 1.0}}, ...)
    if not (a.delta > 0) then
        error(fname .. ': delta must be positive, got ' .. tostring(a.delta), 2)
    end
    Args.check_broadcast(fname, 'input', a.input, 'target', a.target)
    local d = (a.input - a.target):abs()
    local loss = ddpl.where(d:lt(a.delta), d * d * 0.5, (d - 0.5 * a.delta) * a.delta)
    return Args.reduce(loss, a.reduction)
end

-- kl_div(input, target [, reduction='mean' [, log_target=false]]): input holds
-- log-probabilities; pointwise target (log target - input) (xlogy: 0 where target == 0), or
-- exp(target) (target - input) when log_target. 'batchmean' is the sum over input's first
-- dimension's size (the true KL divergence per sample); 'mean' averages over every element, as
-- PyTorch (which warns about it).
function L.kl_div(...)
    local fname = 'kl_div'
    local a = Args.parse(fname, {{'input', 'ftensor'}, {'target', 'ftensor'},
                                 {'reduction', 'reduction+batchmean', 'mean'},
                                 {'log_target', 'boolean', false}}, ...)
    local x, t = a.input, a.target
    Args.check_broadcast(fname, 'input', x, 'target', t)
    local loss
    if a.log_target then
        loss = t:exp() * (t - x)
    else
        -- xlogy(t, t): log of 1 where t == 0, so neither the value nor the gradient is 0 * inf
        local zero = t:eq(0)
        local safe = ddpl.where(zero, 1.0, t)
        loss = t * safe:log() - t * x
    end
    if a.reduction == 'batchmean' then
        local n = x:dim() > 0 and x:size(0) or 1
        return loss:sum() / n
    end
    return Args.reduce(loss, a.reduction)
end

return L
