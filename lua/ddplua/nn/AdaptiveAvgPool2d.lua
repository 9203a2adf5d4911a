-- lua/ddplua/nn/AdaptiveAvgPool2d.lua: nn.AdaptiveAvgPool2d(output_size).
-- defines: AdaptiveAvgPool2d: averages (N, C, H, W) inputs down to (N, C, oh, ow) whatever
--          H and W are (output_size an int or an {oh, ow} pair).
local Module = require 'ddplua.nn.Module'
local F = require 'ddplua.nn.functional'

local AdaptiveAvgPool2d = Module:extend('AdaptiveAvgPool2d')

function AdaptiveAvgPool2d:init(output_size)
    if output_size == nil then error('AdaptiveAvgPool2d: output_size is required', 2) end
    self.output_size = output_size
end

function AdaptiveAvgPool2d:forward(x)
    return F.adaptive_avg_pool2d(x, self.output_size)
end

function AdaptiveAvgPool2d:extra_repr()
    return 'output_size=' .. Module.repr(self.output_size)
end

return AdaptiveAvgPool2d
