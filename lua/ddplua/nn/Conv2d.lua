-- lua/ddplua/nn/Conv2d.lua: nn.Conv2d(in, out, kernel_size [, {stride=1, padding=0,
--          dilation=1, groups=1, bias=true, padding_mode='zeros', dtype, device}]).
-- defines: Conv2d: 2-D cross-correlation over (N, C, H, W) or (C, H, W) inputs;
--          weight (out, in/groups, kh, kw), bias (out).
--
-- Sizes are an int or an {h, w} pair; padding may also be 'same' or 'valid' (F.conv2d checks
-- what it supports). padding_mode 'reflect', 'replicate' or 'circular' pads with F.pad's mode
-- and convolves with padding 0, as PyTorch. Initialisation is PyTorch's: kaiming_uniform_(a=sqrt(5)) for the weight,
-- U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for the bias, fan_in = in/groups * kh * kw
-- (conv_common.lua, shared with Conv1d and ConvTranspose2d).
local Module = require 'ddplua.nn.Module'
local F = require 'ddplua.nn.functional'
local conv_common = require 'ddplua.nn.conv_common'

local Conv2d = Module:extend('Conv2d')

function Conv2d:init(in_channels, out_channels, kernel_size, opts)
    conv_common.init(self, 'Conv2d', 2, in_channels, out_channels, kernel_size, opts)
end

Conv2d.reset_parameters = conv_common.reset_parameters
Conv2d.extra_repr = conv_common.extra_repr

-- x (N, in, H, W) -> (N, out, H', W')
function Conv2d:forward(x)
    local xp, padding = conv_common.padded(self, x)
    return F.conv2d(xp, self.weight, self.bias, {stride = self.stride, padding = padding,
                                                 dilation = self.dilation, groups = self.groups})
end

return Conv2d
