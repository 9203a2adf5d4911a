-- lua/ddplua/nn/L1Loss.lua: nn.L1Loss([{reduction='mean'}]).
-- defines: L1Loss: loss(input, target) = mean (or sum, or none) of |input - target|.
local Module = require 'ddplua.nn.Module'
local F = require 'ddplua.nn.functional'
local loss_options = require 'ddplua.nn.loss_options'

local L1Loss = Module:extend('L1Loss')

function L1Loss:init(opts)
    self.reduction = loss_options(self.__name, opts, {reduction = 'mean'}).reduction
end

function L1Loss:forward(input, target)
    return F.l1_loss(input, target, {reduction = self.reduction})
end

return L1Loss
