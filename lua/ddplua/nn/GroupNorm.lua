-- lua/ddplua/nn/GroupNorm.lua: nn.GroupNorm(num_groups, num_channels [, {eps=1e-5,
--          affine=true, dtype, device}]).
-- defines: GroupNorm: normalises (N, C, *) inputs over groups of C/num_groups channels and
--          the spatial dims (F.group_norm), then a per-channel weight (ones) and bias (zeros).
local ddpl = require 'ddplua'
local Module = require 'ddplua.nn.Module'
local Parameter = require 'ddplua.nn.Parameter'
local F = require 'ddplua.nn.functional'

local GroupNorm = Module:extend('GroupNorm')

function GroupNorm:init(num_groups, num_channels, opts)
    self.num_groups = Module.check_int('GroupNorm', num_groups, 'num_groups', 1)
    self.num_channels = Module.check_int('GroupNorm', num_channels, 'num_channels', 1)
    if self.num_channels % self.num_groups ~= 0 then
        error(string.format('GroupNorm: num_channels (%d) must be divisible by num_groups (%d)',
                            self.num_channels, self.num_groups), 2)
    end
    local o = Module.options('GroupNorm', opts, {eps = 1e-5, affine = true}, true)
    self.eps, self.affine = o.eps, o.affine
    local topts = {dtype = o.dtype, device = o.device}
    if self.affine then
        self.weight = Parameter(ddpl.ones({self.num_channels}, topts))
        self.bias = Parameter(ddpl.zeros({self.num_channels}, topts))
    else
        self:register_parameter('weight', nil)
        self:register_parameter('bias', nil)
    end
end

-- x (N, C, *) -> same shape
function GroupNorm:forward(x)
    return F.group_norm(x, self.num_groups, self.weight, self.bias, self.eps)
end

function GroupNorm:extra_repr()
    local R = Module.repr
    return string.format('%d, %d, eps=%s, affine=%s', self.num_groups, self.num_channels,
                         R(self.eps), R(self.affine))
end

return GroupNorm
