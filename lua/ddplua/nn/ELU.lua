-- lua/ddplua/nn/ELU.lua: nn.ELU([alpha=1.0]) (or {alpha=}).
-- defines: ELU: y = x for x > 0, alpha * (exp(x) - 1) otherwise (F.elu).
local Module = require 'ddplua.nn.Module'
local F = require 'ddplua.nn.functional'

local ELU = Module:extend('ELU')

function ELU:init(alpha, inplace)
    if type(alpha) == 'table' then
        local o = Module.options('ELU', alpha, {alpha = 1.0, inplace = false})
        alpha, inplace = o.alpha, o.inplace
    end
    if alpha == nil then alpha = 1.0 end
    if type(alpha) ~= 'number' then
        error('ELU: alpha must be a number, got ' .. tostring(alpha), 2)
    end
    self.alpha = alpha
    self.inplace = Module.inplace_option('ELU', inplace)
end

function ELU:forward(x)
    return F.elu(x, self.alpha, self.inplace)
end

function ELU:extra_repr()
    return 'alpha=' .. Module.repr(self.alpha) .. (self.inplace and ', inplace=True' or '')
end

return ELU
