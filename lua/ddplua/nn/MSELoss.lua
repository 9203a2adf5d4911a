-- lua/ddplua/nn/MSELoss.lua: nn.MSELoss([{reduction='mean'}]).
-- defines: MSELoss: loss(input, target) = mean (or sum, or none) of (input - target)^2.
local Module = require 'ddplua.nn.Module'
local F = require 'ddplua.nn.functional'

local MSELoss = Module:extend('MSELoss')

local REDUCTIONS = {mean = true, sum = true, none = true}

function MSELoss:init(opts)
    local o = Module.options(self.__name, opts, {reduction = 'mean'})
    if not REDUCTIONS[o.reduction] then
        error(string.format("%s: reduction must be 'mean', 'sum' or 'none', got %s", self.__name,
                            tostring(o.reduction)), 2)
    end
    self.reduction = o.reduction
end

function MSELoss:forward(input, target)
    return F.mse_loss(input, target, {reduction = self.reduction})
end

return MSELoss
