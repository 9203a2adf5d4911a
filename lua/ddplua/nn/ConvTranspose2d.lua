-- lua/ddplua/nn/ConvTranspose2d.lua: nn.ConvTranspose2d(in, out, kernel_size [, {stride=1,
--          padding=0, output_padding=0, groups=1, bias=true, dilation=1, dtype, device}]).
-- defines: ConvTranspose2d: the transposed 2-D convolution (F.conv_transpose2d, the adjoint of
--          conv2d: an upsampling layer) over (N, C, H, W) or (C, H, W) inputs;
--          weight (in, out/groups, kh, kw), bias (out), as PyTorch's state_dict.
--
-- Sizes are an int or an {h, w} pair. Initialisation and printing are Conv2d's
-- (conv_common.lua; fan_in = weight:size(1) * kh * kw = out/groups * kh * kw, as PyTorch computes
-- it from the transposed weight). forward has no output_size argument (PyTorch's way of choosing
-- output_padding at call time): set output_padding instead.
local Module = require 'ddplua.nn.Module'
local F = require 'ddplua.nn.functional'
local conv_common = require 'ddplua.nn.conv_common'

local ConvTranspose2d = Module:extend('ConvTranspose2d')

function ConvTranspose2d:init(in_channels, out_channels, kernel_size, opts)
    conv_common.init(self, 'ConvTranspose2d', 2, in_channels, out_channels, kernel_size, opts,
                     true)
end

ConvTranspose2d.reset_parameters = conv_common.reset_parameters
ConvTranspose2d.extra_repr = conv_common.extra_repr

-- x (N, in, H, W) -> (N, out, (H-1)*s - 2p + d(k-1) + output_padding + 1, likewise W)
function ConvTranspose2d:forward(x)
    return F.conv_transpose2d(x, self.weight, self.bias, {stride = self.stride,
                                                          padding = self.padding,
                                                          output_padding = self.output_padding,
                                                          groups = self.groups,
                                                          dilation = self.dilation})
end

return ConvTranspose2d
