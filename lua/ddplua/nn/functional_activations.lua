-- lua/ddplua/nn/functional_activations.lua: activations of nn.functional beyond the C ones.
-- defines: leaky_relu, elu, softplus (installed into ddpl.F by functional.lua).
--
-- Composed from differentiable ops with PyTorch's values and gradients, kinks included:
--   leaky_relu  x > 0 ? x : slope x                     d/dx at 0: slope (PyTorch: x > 0)
--   elu         x > 0 ? x : alpha (exp(x) - 1)          d/dx at 0: alpha (PyTorch: x <= 0)
--   softplus    beta x > threshold ? x : log(1 + exp(beta x)) / beta
-- The exponential branches see x clamped (elu) or replaced by 0 (softplus) where they are not
-- taken, so a large x never makes exp overflow and feed inf * 0 = NaN into the gradient.
-- PyTorch uses expm1 and log1p; the engine has neither, so the values differ by at most one
-- rounding of 1 + exp(.) (absolute error below 2^-53 alpha, or 2^-53 / beta).
local ddpl = require 'ddplua'
local Args = require 'ddplua.nn.functional_args'

local A = {}

-- f(x), or with inplace its result written into x, which takes its history (a recorded copy_)
-- and is returned, as PyTorch's leaky_relu_ returns its input. The composition may save its
-- input for backward, and the write overwrites x: while autograd records, it reads a clone.
local function apply(x, inplace, f)
    if not inplace then return f(x) end
    local recorded = ddpl.is_grad_enabled() and x.requires_grad
    x:copy_(f(recorded and x:clone() or x))
    return x
end

-- leaky_relu(input [, negative_slope=0.01 [, inplace=false]])
function A.leaky_relu(...)
    local a = Args.parse('leaky_relu', {{'input', 'ftensor'}, {'negative_slope', 'number', 0.01},
                                        {'inplace', 'boolean', false}}, ...)
    return apply(a.input, a.inplace, function(x)
        return ddpl.where(x:gt(0), x, x * a.negative_slope)
    end)
end

-- elu(input [, alpha=1 [, inplace=false]])
function A.elu(...)
    local a = Args.parse('elu', {{'input', 'ftensor'}, {'alpha', 'number', 1.0},
                                 {'inplace', 'boolean', false}}, ...)
    return apply(a.input, a.inplace, function(x)
        local neg = (x:clamp(nil, 0):exp() - 1) * a.alpha
        return ddpl.where(x:gt(0), x, neg)
    end)
end

-- softplus(input [, beta=1 [, threshold=20]])
function A.softplus(...)
    local fname = 'softplus'
    local a = Args.parse(fname, {{'input', 'ftensor'}, {'beta', 'number', 1},
                                 {'threshold', 'number', 20}}, ...)
    if a.beta == 0 then error(fname .. ': beta must not be 0', 2) end
    local x, beta = a.input, a.beta
    local z = x * beta
    local linear = z:gt(a.threshold)
    local soft = (ddpl.where(linear, 0.0, z):exp() + 1):log() / beta
    return ddpl.where(linear, x, soft)
end

return A
