-- lua/ddplua/nn/LeakyReLU.lua: nn.LeakyReLU([negative_slope=0.01]) (or {negative_slope=}).
-- defines: LeakyReLU: y = x for x > 0, negative_slope * x otherwise (F.leaky_relu).
local Module = require 'ddplua.nn.Module'
local F = require 'ddplua.nn.functional'

local LeakyReLU = Module:extend('LeakyReLU')

function LeakyReLU:init(negative_slope, inplace)
    if type(negative_slope) == 'table' then
        local o = Module.options('LeakyReLU', negative_slope,
                                 {negative_slope = 0.01, inplace = false})
        negative_slope, inplace = o.negative_slope, o.inplace
    end
    if negative_slope == nil then negative_slope = 0.01 end
    if type(negative_slope) ~= 'number' then
        error('LeakyReLU: negative_slope must be a number, got ' .. tostring(negative_slope), 2)
    end
    self.negative_slope = negative_slope
    self.inplace = Module.inplace_option('LeakyReLU', inplace)
end

function LeakyReLU:forward(x)
    return F.leaky_relu(x, self.negative_slope, self.inplace)
end

function LeakyReLU:extra_repr()
    return 'negative_slope=' .. Module.repr(self.negative_slope) .. (self.inplace and ', inplace=True' or '')
end

return LeakyReLU
