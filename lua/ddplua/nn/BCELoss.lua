-- lua/ddplua/nn/BCELoss.lua: nn.BCELoss([{weight, reduction='mean'}]).
-- defines: BCELoss: loss(probabilities in [0, 1], target of the same shape) =
--          F.binary_cross_entropy (logs clamped at -100, as PyTorch).
--
-- The weight (broadcast to the input's shape) is a buffer, as in PyTorch.
local Module = require 'ddplua.nn.Module'
local F = require 'ddplua.nn.functional'
local loss_options = require 'ddplua.nn.loss_options'

local BCELoss = Module:extend('BCELoss')

function BCELoss:init(opts)
    local o = loss_options(self.__name, opts, {weight = false, reduction = 'mean'})
    self:register_buffer('weight', o.weight or nil)
    self.reduction = o.reduction
end

function BCELoss:forward(input, target)
    return F.binary_cross_entropy(input, target, {weight = self.weight,
                                                  reduction = self.reduction})
end

return BCELoss
