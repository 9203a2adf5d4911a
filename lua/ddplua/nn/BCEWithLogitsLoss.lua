-- lua/ddplua/nn/BCEWithLogitsLoss.lua: nn.BCEWithLogitsLoss([{weight, reduction='mean',
--          pos_weight}]).
-- defines: BCEWithLogitsLoss: loss(logits, target of the same shape) =
--          F.binary_cross_entropy_with_logits: sigmoid and binary cross entropy in one stable
--          formula; pos_weight (broadcast along the last dimension: one per class) scales the
--          positive term.
--
-- weight and pos_weight are buffers, registered in PyTorch's order.
local Module = require 'ddplua.nn.Module'
local F = require 'ddplua.nn.functional'
local loss_options = require 'ddplua.nn.loss_options'

local BCEWithLogitsLoss = Module:extend('BCEWithLogitsLoss')

function BCEWithLogitsLoss:init(opts)
    local o = loss_options(self.__name, opts, {weight = false, reduction = 'mean',
                                               pos_weight = false})
    self:register_buffer('weight', o.weight or nil)
    self:register_buffer('pos_weight', o.pos_weight or nil)
    self.reduction = o.reduction
end

function BCEWithLogitsLoss:forward(input, target)
    return F.binary_cross_entropy_with_logits(input, target, {weight = self.weight,
                                                              pos_weight = self.pos_weight,
                                                              reduction = self.reduction})
end

return BCEWithLogitsLoss
