-- lua/ddplua/nn/KLDivLoss.lua: nn.KLDivLoss([{reduction='mean', log_target=false}]).
-- defines: KLDivLoss: loss(log-probabilities, target probabilities, or log-probabilities when
--          log_target) = F.kl_div; reduction 'batchmean' gives the KL divergence per sample
--          (PyTorch's 'mean' averages over every element, which is not it).
local Module = require 'ddplua.nn.Module'
local F = require 'ddplua.nn.functional'
local loss_options = require 'ddplua.nn.loss_options'

local KLDivLoss = Module:extend('KLDivLoss')

function KLDivLoss:init(opts)
    local o = loss_options(self.__name, opts, {reduction = 'mean', log_target = false},
                           'batchmean')
    if type(o.log_target) ~= 'boolean' then
        error(self.__name .. ': log_target must be a boolean, got ' .. tostring(o.log_target), 2)
    end
    self.reduction, self.log_target = o.reduction, o.log_target
end

function KLDivLoss:forward(input, target)
    return F.kl_div(input, target, {reduction = self.reduction, log_target = self.log_target})
end

return KLDivLoss
