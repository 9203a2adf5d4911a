-- lua/ddplua/nn/LayerNorm.lua: nn.LayerNorm(normalized_shape [, {eps=1e-5,
--          elementwise_affine=true, dtype, device}]).
-- defines: LayerNorm: normalises over the trailing dimensions given by normalized_shape (an int
--          or a list of sizes), with a learned per-element weight (ones) and bias (zeros).
local ddpl = require 'ddplua'
local Module = require 'ddplua.nn.Module'
local Parameter = require 'ddplua.nn.Parameter'
local F = require 'ddplua.nn.functional'

local LayerNorm = Module:extend('LayerNorm')

-- normalized_shape (an int or a non-empty list of positive ints) -> a new list; RMSNorm's too
function LayerNorm.normalized_shape_arg(cls, normalized_shape)
    local shape = type(normalized_shape) == 'table' and normalized_shape or {normalized_shape}
    local copy = {}
    for i, s in ipairs(shape) do copy[i] = Module.check_int(cls, s, 'normalized_shape', 1) end
    if #copy == 0 then error(cls .. ': normalized_shape must not be empty', 3) end
    return copy
end

function LayerNorm:init(normalized_shape, opts)
    local copy = LayerNorm.normalized_shape_arg('LayerNorm', normalized_shape)
    self.normalized_shape = copy
    local o = Module.options('LayerNorm', opts, {eps = 1e-5, elementwise_affine = true}, true)
    self.eps, self.elementwise_affine = o.eps, o.elementwise_affine
    local topts = {dtype = o.dtype, device = o.device}
    if self.elementwise_affine then
        self.weight = Parameter(ddpl.ones(copy, topts))
        self.bias = Parameter(ddpl.zeros(copy, topts))
    else
        self:register_parameter('weight', nil)
        self:register_parameter('bias', nil)
    end
end

-- weight ones, bias zeros (PyTorch's; what nn.utils.meta_init's materialisation runs)
function LayerNorm:reset_parameters()
    if self.elementwise_affine then
        ddpl.no_grad(function()
            self.weight:fill_(1)
            self.bias:zero_()
        end)
    end
end

-- x (*, normalized_shape) -> same shape
function LayerNorm:forward(x)
    return F.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)
end

function LayerNorm:extra_repr()
    local R = Module.repr
    return string.format('%s, eps=%s, elementwise_affine=%s', R(self.normalized_shape), R(self.eps),
                         R(self.elementwise_affine))
end

return LayerNorm
