-- lua/ddplua/nn/RMSNorm.lua: nn.RMSNorm(normalized_shape [, {eps, elementwise_affine=true,
--          dtype, device}]).
-- defines: RMSNorm: PyTorch 2.4's layer (1.13 has none): x / sqrt(mean(x^2) + eps) over the
--          trailing normalized_shape dims, times a learned weight (ones); no bias. eps nil
--          (the default) is the machine epsilon of the compute dtype (F.rms_norm).
local ddpl = require 'ddplua'
local Module = require 'ddplua.nn.Module'
local Parameter = require 'ddplua.nn.Parameter'
local LayerNorm = require 'ddplua.nn.LayerNorm'
local F = require 'ddplua.nn.functional'

local RMSNorm = Module:extend('RMSNorm')

function RMSNorm:init(normalized_shape, opts)
    local copy = LayerNorm.normalized_shape_arg('RMSNorm', normalized_shape)
    self.normalized_shape = copy
    local o = Module.options('RMSNorm', opts, {eps = false, elementwise_affine = true}, true)
    if o.eps and type(o.eps) ~= 'number' then
        error('RMSNorm: eps must be a number or nil, got ' .. tostring(o.eps), 2)
    end
    self.eps = o.eps or nil
    self.elementwise_affine = o.elementwise_affine
    if self.elementwise_affine then
        self.weight = Parameter(ddpl.ones(copy, {dtype = o.dtype, device = o.device}))
    else
        self:register_parameter('weight', nil)
    end
end

-- x (*, normalized_shape) -> same shape
function RMSNorm:forward(x)
    return F.rms_norm(x, self.normalized_shape, self.weight, self.eps)
end

function RMSNorm:extra_repr()
    local R = Module.repr
    return string.format('%s, eps=%s, elementwise_affine=%s', R(self.normalized_shape),
                         R(self.eps), R(self.elementwise_affine))
end

return RMSNorm
