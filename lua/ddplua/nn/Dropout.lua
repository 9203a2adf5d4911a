-- lua/ddplua/nn/Dropout.lua: nn.Dropout([p=0.5 [, inplace=false]]) (or {p=, inplace=}).
-- defines: Dropout: in training mode zeroes each element with probability p and scales the
--          rest by 1/(1-p); in eval mode returns the input unchanged.
local Module = require 'ddplua.nn.Module'
local F = require 'ddplua.nn.functional'

local Dropout = Module:extend('Dropout')

function Dropout:init(p, inplace)
    if type(p) == 'table' then
        local o = Module.options('Dropout', p, {p = 0.5, inplace = false})
        p, inplace = o.p, o.inplace
    end
    p = p == nil and 0.5 or p
    if type(p) ~= 'number' or p < 0 or p > 1 then
        error('Dropout: probability p must be a number between 0 and 1, got ' .. tostring(p), 2)
    end
    self.p = p
    self.inplace = Module.inplace_option('Dropout', inplace)
end

function Dropout:forward(x)
    return F.dropout(x, self.p, self.training, {inplace = self.inplace})
end

function Dropout:extra_repr()
    return 'p=' .. Module.repr(self.p + 0.0) .. ', inplace=' .. (self.inplace and 'True' or 'False')
end

return Dropout
