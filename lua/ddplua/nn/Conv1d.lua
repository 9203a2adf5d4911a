-- lua/ddplua/nn/Conv1d.lua: nn.Conv1d(in, out, kernel_size [, {stride=1, padding=0,
--          dilation=1, groups=1, bias=true, dtype, device}]).
-- defines: Conv1d: 1-D cross-correlation over (N, C, L) or (C, L) inputs (F.conv1d);
--          weight (out, in/groups, k), bias (out), as PyTorch's state_dict.
--
-- Sizes are an int or a one-element list; padding may also be 'same' or 'valid'.
-- Initialisation and printing are Conv2d's (kaiming_uniform_(a=sqrt(5)), bias
-- U(-1/sqrt(fan_in), 1/sqrt(fan_in)), fan_in = in/groups * k).
local ddpl = require 'ddplua'
local Module = require 'ddplua.nn.Module'
local Parameter = require 'ddplua.nn.Parameter'
local Conv2d = require 'ddplua.nn.Conv2d'
local F = require 'ddplua.nn.functional'

local Conv1d = Module:extend('Conv1d')

-- an int or a one-element list -> {n}
local function single(v, what, min)
    if type(v) == 'table' and #v == 1 then v = v[1] end
    return {Module.check_int('Conv1d', v, what, min)}
end

function Conv1d:init(in_channels, out_channels, kernel_size, opts)
    local o = Module.options('Conv1d', opts, {stride = 1, padding = 0, dilation = 1, groups = 1,
                                              bias = true}, true)
    self.in_channels = Module.check_int('Conv1d', in_channels, 'in_channels')
    self.out_channels = Module.check_int('Conv1d', out_channels, 'out_channels')
    self.groups = Module.check_int('Conv1d', o.groups, 'groups')
    if self.in_channels % self.groups ~= 0 or self.out_channels % self.groups ~= 0 then
        error(string.format('Conv1d: in_channels (%d) and out_channels (%d) must both be '
                            .. 'divisible by groups (%d)', self.in_channels, self.out_channels,
                            self.groups), 2)
    end
    self.kernel_size = single(kernel_size, 'kernel_size', 1)
    self.stride = single(o.stride, 'stride', 1)
    self.dilation = single(o.dilation, 'dilation', 1)
    if o.padding == 'same' or o.padding == 'valid' then
        self.padding = o.padding
    else
        self.padding = single(o.padding, 'padding', 0)
    end
    local topts = {dtype = o.dtype, device = o.device}
    self.weight = Parameter(ddpl.empty({self.out_channels, self.in_channels // self.groups,
                                        self.kernel_size[1]}, topts))
    if o.bias then
        self.bias = Parameter(ddpl.empty({self.out_channels}, topts))
    else
        self:register_parameter('bias', nil)
    end
    self:reset_parameters()
end

Conv1d.reset_parameters = Conv2d.reset_parameters
Conv1d.extra_repr = Conv2d.extra_repr

-- x (N, in, L) -> (N, out, L')
function Conv1d:forward(x)
    local p = self.padding
    return F.conv1d(x, self.weight, self.bias, {stride = self.stride[1],
                                                padding = type(p) == 'string' and p or p[1],
                                                dilation = self.dilation[1], groups = self.groups})
end

return Conv1d
