-- lua/ddplua/nn/GELU.lua: nn.GELU([approximate='none']).
-- defines: GELU: x * Phi(x) elementwise; approximate='tanh' uses the tanh approximation.
local Module = require 'ddplua.nn.Module'
local F = require 'ddplua.nn.functional'

local GELU = Module:extend('GELU')

function GELU:init(approximate)
    if type(approximate) == 'table' then approximate = approximate.approximate end
    approximate = approximate or 'none'
    if approximate ~= 'none' and approximate ~= 'tanh' then
        error("GELU: approximate must be 'none' or 'tanh', got " .. tostring(approximate), 2)
    end
    self.approximate = approximate
end

function GELU:forward(x)
    return F.gelu(x, {approximate = self.approximate})
end

function GELU:extra_repr()
    return 'approximate=' .. Module.repr(self.approximate)
end

return GELU
