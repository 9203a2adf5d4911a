-- lua/ddplua/nn/Softplus.lua: nn.Softplus([beta=1 [, threshold=20]]) (or {beta=, threshold=}).
-- defines: Softplus: y = log(1 + exp(beta x)) / beta, and x itself where beta x > threshold
--          (F.softplus).
local Module = require 'ddplua.nn.Module'
local F = require 'ddplua.nn.functional'

local Softplus = Module:extend('Softplus')

function Softplus:init(beta, threshold)
    if type(beta) == 'table' then
        local o = Module.options('Softplus', beta, {beta = 1, threshold = 20})
        beta, threshold = o.beta, o.threshold
    end
    if beta == nil then beta = 1 end
    if threshold == nil then threshold = 20 end
    if type(beta) ~= 'number' or beta == 0 or type(threshold) ~= 'number' then
        error(string.format('Softplus: beta must be a non-zero number and threshold a number, '
                            .. 'got %s and %s', tostring(beta), tostring(threshold)), 2)
    end
    self.beta, self.threshold = beta, threshold
end

function Softplus:forward(x)
    return F.softplus(x, self.beta, self.threshold)
end

function Softplus:extra_repr()
    return string.format('beta=%s, threshold=%s', Module.repr(self.beta),
                         Module.repr(self.threshold))
end

return Softplus
