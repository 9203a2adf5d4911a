-- lua/ddplua/nn/MaxPool2d.lua: nn.MaxPool2d(kernel_size [, {stride=kernel_size, padding=0}]).
-- defines: MaxPool2d: the maximum over each window of (N, C, H, W) or (C, H, W) inputs.
--
-- Sizes are an int or an {h, w} pair, kept as given so that tostring reads like PyTorch's
-- ("kernel_size=2" or "kernel_size=(2, 2)"). ceil_mode rounds the output size up (PyTorch's
-- rule); dilation is accepted at its default only (F.max_pool2d raises for others).
local Module = require 'ddplua.nn.Module'
local F = require 'ddplua.nn.functional'

local MaxPool2d = Module:extend('MaxPool2d')

function MaxPool2d:init(kernel_size, opts)
    if kernel_size == nil then error('MaxPool2d: kernel_size is required', 2) end
    local o = Module.options('MaxPool2d', opts, {stride = false, padding = 0, dilation = 1,
                                                 ceil_mode = false})
    self.kernel_size = kernel_size
    self.stride = o.stride or kernel_size -- PyTorch: stride defaults to the kernel size
    self.padding, self.dilation, self.ceil_mode = o.padding, o.dilation, o.ceil_mode
end

function MaxPool2d:forward(x)
    return F.max_pool2d(x, self.kernel_size, {stride = self.stride, padding = self.padding,
                                              dilation = self.dilation, ceil_mode = self.ceil_mode})
end

function MaxPool2d:extra_repr()
    local R = Module.repr
    return string.format('kernel_size=%s, stride=%s, padding=%s, dilation=%s, ceil_mode=%s',
                         R(self.kernel_size), R(self.stride), R(self.padding), R(self.dilation),
                         R(self.ceil_mode))
end

return MaxPool2d
