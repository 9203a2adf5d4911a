-- lua/ddplua/nn/AvgPool2d.lua: nn.AvgPool2d(kernel_size [, {stride=kernel_size, padding=0,
--          ceil_mode=false, count_include_pad=true, divisor_override}]).
-- defines: AvgPool2d: the mean over each window of (N, C, H, W) or (C, H, W) inputs.
--
-- Sizes are an int or an {h, w} pair, kept as given for PyTorch's tostring text.
local Module = require 'ddplua.nn.Module'
local F = require 'ddplua.nn.functional'

local AvgPool2d = Module:extend('AvgPool2d')

function AvgPool2d:init(kernel_size, opts)
    if kernel_size == nil then error('AvgPool2d: kernel_size is required', 2) end
    local o = Module.options('AvgPool2d', opts, {stride = false, padding = 0, ceil_mode = false,
                                                 count_include_pad = true,
                                                 divisor_override = false})
    self.kernel_size = kernel_size
    self.stride = o.stride or kernel_size -- PyTorch: stride defaults to the kernel size
    self.padding, self.ceil_mode, self.count_include_pad = o.padding, o.ceil_mode,
        o.count_include_pad
    self.divisor_override = o.divisor_override or nil -- PyTorch's None
end

function AvgPool2d:forward(x)
    return F.avg_pool2d(x, self.kernel_size, {stride = self.stride, padding = self.padding,
                                              ceil_mode = self.ceil_mode,
                                              count_include_pad = self.count_include_pad,
                                              divisor_override = self.divisor_override})
end

function AvgPool2d:extra_repr()
    local R = Module.repr
    return string.format('kernel_size=%s, stride=%s, padding=%s', R(self.kernel_size),
                         R(self.stride), R(self.padding))
end

return AvgPool2d
