-- lua/ddplua/nn/CTCLoss.lua: nn.CTCLoss([{blank=0, reduction='mean', zero_infinity=false}]).
-- defines: CTCLoss: loss(log_probs (T, N, C) or (T, C), targets, input_lengths,
--          target_lengths) = F.ctc_loss with these options (the connectionist temporal
--          classification loss; lengths as Lua lists or integer tensors).
local Module = require 'ddplua.nn.Module'
local F = require 'ddplua.nn.functional'

local CTCLoss = Module:extend('CTCLoss')

local REDUCTIONS = {mean = true, sum = true, none = true}

function CTCLoss:init(opts)
    local o = Module.options('CTCLoss', opts, {blank = 0, reduction = 'mean',
                                               zero_infinity = false})
    if not REDUCTIONS[o.reduction] then
        error(string.format("CTCLoss: reduction must be 'mean', 'sum' or 'none', got %s",
                            type(o.reduction) == 'string' and "'" .. o.reduction .. "'"
                            or tostring(o.reduction)), 2)
    end
    self.blank = Module.check_int('CTCLoss', o.blank, 'blank', 0)
    self.reduction, self.zero_infinity = o.reduction, o.zero_infinity
end

function CTCLoss:forward(log_probs, targets, input_lengths, target_lengths)
    return F.ctc_loss(log_probs, targets, input_lengths, target_lengths,
                      {blank = self.blank, reduction = self.reduction,
                       zero_infinity = self.zero_infinity})
end

return CTCLoss
