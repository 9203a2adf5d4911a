-- lua/ddplua/nn/functional_attention.lua: F.multi_head_attention_forward, PyTorch's functional
--          form of nn.MultiheadAttention (installed into ddpl.F by functional.lua).
-- defines: multi_head_attention_forward(query, key, value, embed_dim_to_check, num_heads,
--          in_proj_weight, in_proj_bias, bias_k, bias_v, add_zero_attn, dropout_p,
--          out_proj_weight, out_proj_bias [, training=true [, key_padding_mask [,
--          need_weights=true [, attn_mask [, use_separate_proj_weight=false [, q_proj_weight [,
--          k_proj_weight [, v_proj_weight [, static_k [, static_v [, average_attn_weights=true [,
--          is_causal=false]]]]]]]]]]]]) -> out, weights
--
-- PyTorch's argument order, positionally or by name in a trailing options table; sequence-first
-- shapes as in PyTorch (the computation and its shapes: mha_forward.lua). static_k and static_v
-- are not supported (an error says so). is_causal is PyTorch 2's: without attn_mask it hides key
-- j from query i for j > i; with attn_mask it is only a hint and the mask is used.
local Args = require 'ddplua.nn.functional_args'
local mha_forward = require 'ddplua.nn.mha_forward'

local Att = {}

local SPEC = {
    {'query', 'ftensor'}, {'key', 'ftensor'}, {'value', 'ftensor'},
    {'embed_dim_to_check', 'int'}, {'num_heads', 'int'},
    {'in_proj_weight', 'ftensor?'}, {'in_proj_bias', 'ftensor?'},
    {'bias_k', 'ftensor?'}, {'bias_v', 'ftensor?'}, {'add_zero_attn', 'boolean', false},
    {'dropout_p', 'number', 0}, {'out_proj_weight', 'ftensor'}, {'out_proj_bias', 'ftensor?'},
    {'training', 'boolean', true}, {'key_padding_mask', 'tensor?'},
    {'need_weights', 'boolean', true}, {'attn_mask', 'tensor?'},
    {'use_separate_proj_weight', 'boolean', false}, {'q_proj_weight', 'ftensor?'},
    {'k_proj_weight', 'ftensor?'}, {'v_proj_weight', 'ftensor?'}, {'static_k', 'tensor?'},
    {'static_v', 'tensor?'}, {'average_attn_weights', 'boolean', true},
    {'is_causal', 'boolean', false},
}

function Att.multi_head_attention_forward(...)
    local fname = 'multi_head_attention_forward'
    local a = Args.parse(fname, SPEC, ...)
    if a.static_k ~= nil or a.static_v ~= nil then
        error(fname .. ': static_k and static_v are not supported', 2)
    end
    if a.num_heads < 1 then
        error(string.format('%s: num_heads must be positive, got %d', fname, a.num_heads), 2)
    end
    if (a.bias_k == nil) ~= (a.bias_v == nil) then
        error(fname .. ': bias_k and bias_v must be given together', 2)
    end
    if not (a.dropout_p >= 0 and a.dropout_p <= 1) then
        error(string.format('%s: dropout_p must be in [0, 1], got %s', fname, a.dropout_p), 2)
    end
    local need = a.use_separate_proj_weight and {'q_proj_weight', 'k_proj_weight', 'v_proj_weight'}
                     or {'in_proj_weight'}
    for _, name in ipairs(need) do
        if a[name] == nil then
            error(string.format('%s: %s is required when use_separate_proj_weight is %s', fname,
                                name, tostring(a.use_separate_proj_weight)), 2)
        end
    end
    a.embed_dim = a.embed_dim_to_check
    return mha_forward(fname, a.query, a.key, a.value, a)
end

return Att
