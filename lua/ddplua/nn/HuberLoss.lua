-- lua/ddplua/nn/HuberLoss.lua: nn.HuberLoss([{reduction='mean', delta=1}]).
-- defines: HuberLoss: loss(input, target) = F.huber_loss: 0.5 d^2 below |d| = delta,
--          delta (|d| - 0.5 delta) above (SmoothL1Loss times beta, for beta = delta).
local Module = require 'ddplua.nn.Module'
local F = require 'ddplua.nn.functional'
local loss_options = require 'ddplua.nn.loss_options'

local HuberLoss = Module:extend('HuberLoss')

function HuberLoss:init(opts)
    local o = loss_options(self.__name, opts, {reduction = 'mean', delta = 1.0})
    if type(o.delta) ~= 'number' or not (o.delta > 0) then
        error(self.__name .. ': delta must be a positive number, got ' .. tostring(o.delta), 2)
    end
    self.reduction, self.delta = o.reduction, o.delta
end

function HuberLoss:forward(input, target)
    return F.huber_loss(input, target, {reduction = self.reduction, delta = self.delta})
end

return HuberLoss
