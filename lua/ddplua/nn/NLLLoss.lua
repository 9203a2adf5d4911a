-- lua/ddplua/nn/NLLLoss.lua: nn.NLLLoss([{weight, reduction='mean', ignore_index=-100}]).
-- defines: NLLLoss: loss(log-probabilities (N, C) or (N, C, d...), target int64 class indices,
--          0-based) = F.nll_loss with these options; pair it with F.log_softmax.
--
-- A class weight is registered as a buffer, as in PyTorch.
local ddpl = require 'ddplua'
local Module = require 'ddplua.nn.Module'
local F = require 'ddplua.nn.functional'

local NLLLoss = Module:extend('NLLLoss')

local REDUCTIONS = {mean = true, sum = true, none = true}

function NLLLoss:init(opts)
    local o = Module.options(self.__name, opts, {weight = false, reduction = 'mean',
                                                 ignore_index = -100})
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
end

function NLLLoss:forward(input, target)
    return F.nll_loss(input, target, {weight = self.weight, reduction = self.reduction,
                                      ignore_index = self.ignore_index})
end

return NLLLoss
