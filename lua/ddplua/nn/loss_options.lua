-- lua/ddplua/nn/loss_options.lua: the constructor options shared by the loss modules added for
--          issue 16 (BCELoss, BCEWithLogitsLoss, L1Loss, SmoothL1Loss, HuberLoss, KLDivLoss).
-- defines: loss_options(cls_name, opts, defaults [, extra_reduction]) -> the merged options,
--          with reduction checked ('mean', 'sum', 'none', and extra_reduction when given) and
--          the optional tensors weight and pos_weight (default false: none) checked.
local ddpl = require 'ddplua'
local Module = require 'ddplua.nn.Module'

return function(cls_name, opts, defaults, extra_reduction)
    local o = Module.options(cls_name, opts, defaults)
    local r = o.reduction
    if not (r == 'mean' or r == 'sum' or r == 'none'
            or (extra_reduction and r == extra_reduction)) then
        error(string.format("%s: reduction must be 'mean', 'sum', 'none'%s, got %s", cls_name,
                            extra_reduction and " or '" .. extra_reduction .. "'" or '',
                            tostring(r)), 3)
    end
    for _, k in ipairs({'weight', 'pos_weight'}) do
        if o[k] and not ddpl.is_tensor(o[k]) then
            error(string.format('%s: %s must be a tensor, got %s', cls_name, k, type(o[k])), 3)
        end
    end
    return o
end
