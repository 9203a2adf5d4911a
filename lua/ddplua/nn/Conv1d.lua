-- lua/ddplua/nn/Conv1d.lua: nn.Conv1d(in, out, kernel_size [, {stride=1, padding=0,
--          dilation=1, groups=1, bias=true, padding_mode='zeros', dtype, device}]).
-- defines: Conv1d: 1-D cross-correlation over (N, C, L) or (C, L) inputs (F.conv1d);
--          weight (out, in/groups, k), bias (out), as PyTorch's state_dict.
--
-- Sizes are an int or a one-element list; padding may also be 'same' or 'valid'. padding_mode
-- 'reflect', 'replicate' or 'circular' pads with F.pad's mode and convolves with padding 0.
-- Initialisation and printing are Conv2d's (conv_common.lua: kaiming_uniform_(a=sqrt(5)), bias
-- U(-1/sqrt(fan_in), 1/sqrt(fan_in)), fan_in = in/groups * k).
local Module = require 'ddplua.nn.Module'
local F = require 'ddplua.nn.functional'
local conv_common = require 'ddplua.nn.conv_common'

local Conv1d = Module:extend('Conv1d')

function Conv1d:init(in_channels, out_channels, kernel_size, opts)
    conv_common.init(self, 'Conv1d', 1, in_channels, out_channels, kernel_size, opts)
end

Conv1d.reset_parameters = conv_common.reset_parameters
Conv1d.extra_repr = conv_common.extra_repr

-- x (N, in, L) -> (N, out, L')
function Conv1d:forward(x)
    local xp, p = conv_common.padded(self, x)
    return F.conv1d(xp, self.weight, self.bias, {stride = self.stride[1],
                                                padding = type(p) == 'string' and p or p[1],
                                                dilation = self.dilation[1], groups = self.groups})
end

return Conv1d
