-- lua/ddplua/nn/CrossEntropyLoss.lua: nn.CrossEntropyLoss([{weight, reduction='mean',
--          ignore_index=-100, label_smoothing=0}]).
-- defines: CrossEntropyLoss: loss(logits (N, C) or (N, C, d...), target int64 class indices
--          (N) or (N, d...), 0-based) = F.cross_entropy with these options.
--
-- A class weight is registered as a buffer (as PyTorch does), so it follows :to() and is
-- part of the state dict.
local ddpl = require 'ddplua'
local Module = require 'ddplua.nn.Module'
local F = require 'ddplua.nn.functional'

local CrossEntropyLoss = Module:extend('CrossEntropyLoss')

local REDUCTIONS = {mean = true, sum = true, none = true}

function CrossEntropyLoss:init(opts)
    local o = Module.options(self.__name, opts, {weight = false, reduction = 'mean',
                                                 ignore_index = -100, label_smoothing = 0.0})
    if not REDUCTIONS[o.reduction] then
        error(string.format("%s: reduction must be 'mean', 'sum' or 'none', got %s", self.__name,
                            tostring(o.reduction)), 2)
    end
    if o.weight and not ddpl.is_tensor(o.weight) then
        error(self.__name .. ': weight must be a tensor of class weights, got '
              .. type(o.weight), 2)
    end
    self:register_buffer('weight', o.weight or nil)
    self.reduction, self.ignore_index = o.reduction, o.ignore_index
    self.label_smoothing = o.label_smoothing
end

function CrossEntropyLoss:forward(input, target)
    return F.cross_entropy(input, target, {weight = self.weight, reduction = self.reduction,
                                           ignore_index = self.ignore_index,
                                           label_smoothing = self.label_smoothing})
end

return CrossEntropyLoss
