-- lua/ddplua/nn/utils.lua: nn.utils, helpers over a model's parameters.
-- defines: clip_grad_norm_(params, max_norm [, {norm_type=2, error_if_nonfinite=false}])
--          -> the total norm before clipping (a 0-d tensor), clip_grad_value_(params, clip);
--          meta_init, is_meta, materialize_module_ (nn/meta_init.lua: modules built without
--          memory for FullyShardedDataParallel to materialise one unit at a time).
--
-- clip_grad_norm_ follows torch.nn.utils.clip_grad_norm_: the total norm is the norm of the
-- per-gradient norms (equal to the norm of all gradients concatenated, without the copy), and
-- each gradient is scaled by min(1, max_norm / (total + 1e-6)). The scale stays a tensor, so
-- there is no host round trip between the two phases (on a GPU nothing waits on the device);
-- the work is one norm kernel per gradient, one to combine them and one in-place scale per
-- gradient, the same count as PyTorch's non-foreach path.
local ddpl = require 'ddplua'

local utils = {}

-- A tensor or a list of tensors -> the gradients that exist.
local function grads_of(fname, params)
    if ddpl.is_tensor(params) then params = {params} end
    if type(params) ~= 'table' then
        error(string.format('nn.utils.%s: expected a tensor or a list of tensors, got %s', fname,
                            type(params)), 3)
    end
    local grads = {}
    for i, p in ipairs(params) do
        if not ddpl.is_tensor(p) then
            error(string.format('nn.utils.%s: element %d of params is a %s, not a tensor', fname,
                                i, type(p)), 3)
        end
        local g = p.grad
        if g ~= nil then grads[#grads + 1] = g end
    end
    return grads
end

function utils.clip_grad_norm_(params, max_norm, opts)
    if type(max_norm) ~= 'number' then
        error('nn.utils.clip_grad_norm_: max_norm must be a number, got ' .. type(max_norm), 2)
    end
    local norm_type, error_if_nonfinite = 2.0, false
    if type(opts) == 'number' then
        norm_type = opts
    elseif type(opts) == 'table' then
        norm_type = opts.norm_type or norm_type
        error_if_nonfinite = opts.error_if_nonfinite or false
    end
    local grads = grads_of('clip_grad_norm_', params)
    if #grads == 0 then return ddpl.tensor(0.0) end
    return ddpl.no_grad(function()
        local norms = {}
        for i, g in ipairs(grads) do norms[i] = g:norm({p = norm_type}):float() end
        local total = ddpl.stack(norms, 0):norm({p = norm_type})
        if error_if_nonfinite then
            local v = total:item()
            if v ~= v or v == math.huge or v == -math.huge then
                error(string.format('nn.utils.clip_grad_norm_: the total norm of order %g of the '
                                    .. 'gradients is %s; set error_if_nonfinite=false to clip '
                                    .. 'anyway', norm_type, tostring(v)), 3)
            end
        end
        local scale = (max_norm / (total + 1e-6)):clamp(nil, 1.0)
        for _, g in ipairs(grads) do g:mul_(scale) end
        ddpl._release(grads)
        return total
    end)
end

-- clip_grad_value_(params, clip_value): clamps every gradient element into [-clip, clip].
function utils.clip_grad_value_(params, clip_value)
    if type(clip_value) ~= 'number' then
        error('nn.utils.clip_grad_value_: clip_value must be a number, got ' .. type(clip_value), 2)
    end
    local grads = grads_of('clip_grad_value_', params)
    ddpl.no_grad(function()
        for _, g in ipairs(grads) do g:clamp_(-clip_value, clip_value) end
        ddpl._release(grads)
    end)
end

do
    local meta = require 'ddplua.nn.meta_init'
    utils.meta_init, utils.is_meta = meta.meta_init, meta.is_meta
    utils.materialize_module_ = meta.materialize_module_
end

return utils
