-- lua/ddplua/nn/SmoothL1Loss.lua: nn.SmoothL1Loss([{reduction='mean', beta=1}]).
-- defines: SmoothL1Loss: loss(input, target) = F.smooth_l1_loss: quadratic 0.5 d^2 / beta
--          below |d| = beta, linear |d| - 0.5 beta above.
local Module = require 'ddplua.nn.Module'
local F = require 'ddplua.nn.functional'
local loss_options = require 'ddplua.nn.loss_options'

local SmoothL1Loss = Module:extend('SmoothL1Loss')

function SmoothL1Loss:init(opts)
    local o = loss_options(self.__name, opts, {reduction = 'mean', beta = 1.0})
    if type(o.beta) ~= 'number' or o.beta < 0 then
        error(self.__name .. ': beta must be a non-negative number, got ' .. tostring(o.beta), 2)
    end
    self.reduction, self.beta = o.reduction, o.beta
end

function SmoothL1Loss:forward(input, target)
    return F.smooth_l1_loss(input, target, {reduction = self.reduction, beta = self.beta})
end

return SmoothL1Loss
