-- lua/ddplua/nn/TransformerEncoderLayer.lua: nn.TransformerEncoderLayer(d_model, nhead [,
--          {dim_feedforward=2048, dropout=0.1, activation='relu', layer_norm_eps=1e-5,
--          batch_first=false, norm_first=false, dtype, device}]).
-- defines: TransformerEncoderLayer: forward(src [, src_mask [, src_key_padding_mask [,
--          is_causal=false]]]) -> (same shape as src) (arguments after src positionally or by
--          name in an options table).
--
-- PyTorch 1.13's layer ("Attention Is All You Need"): self-attention then a feed-forward block,
-- each with dropout and a residual connection, and a LayerNorm after each (post-norm) or
-- before each (norm_first):
--     post-norm:  x = norm1(x + sa(x));  x = norm2(x + ff(x))
--     pre-norm:   x = x + sa(norm1(x));  x = x + ff(norm2(x))
--     sa(x) = dropout1(self_attn(x, x, x, src_mask, src_key_padding_mask))
--     ff(x) = dropout2(linear2(dropout(activation(linear1(x)))))
-- The submodules carry PyTorch's names (self_attn, linear1, dropout, linear2, norm1, norm2,
-- dropout1, dropout2), so its state_dict loads unchanged. src is (S, N, E), (N, S, E) with
-- batch_first, or (S, E) unbatched; the masks are MultiheadAttention's. activation is 'relu',
-- 'gelu', a function or a module (a module is registered as the child `activation`, as in
-- PyTorch). The attention skips its probabilities, so it runs through the fused attention path.
local Module = require 'ddplua.nn.Module'
local MultiheadAttention = require 'ddplua.nn.MultiheadAttention'
local Linear = require 'ddplua.nn.Linear'
local Dropout = require 'ddplua.nn.Dropout'
local LayerNorm = require 'ddplua.nn.LayerNorm'
local Args = require 'ddplua.nn.functional_args'
local F = require 'ddplua.nn.functional'

local TransformerEncoderLayer = Module:extend('TransformerEncoderLayer')

local NAME = 'TransformerEncoderLayer'
local ACTIVATIONS = {relu = F.relu, gelu = F.gelu}

local function activation_arg(act)
    if type(act) == 'string' then
        if not ACTIVATIONS[act] then
            error(string.format("%s: activation should be 'relu' or 'gelu' (or a function), not "
                                .. "'%s'", NAME, act), 4)
        end
        return ACTIVATIONS[act]
    end
    local callable = type(act) == 'function' or Module.is(act) or
                         (type(act) == 'table' and (getmetatable(act) or {}).__call ~= nil)
    if not callable then
        error(string.format("%s: activation should be 'relu', 'gelu', a function or a module, "
                            .. 'got %s', NAME, type(act)), 4)
    end
    return act
end

function TransformerEncoderLayer:init(d_model, nhead, opts)
    local E = Module.check_int(NAME, d_model, 'd_model', 1)
    local H = Module.check_int(NAME, nhead, 'nhead', 1)
    local o = Module.options(NAME, opts, {dim_feedforward = 2048, dropout = 0.1,
                                          activation = 'relu', layer_norm_eps = 1e-5,
                                          batch_first = false, norm_first = false}, true)
    local FF = Module.check_int(NAME, o.dim_feedforward, 'dim_feedforward', 1)
    if E % H ~= 0 then
        error(string.format('%s: d_model %d must be divisible by nhead %d', NAME, E, H), 2)
    end
    local factory = {dtype = o.dtype, device = o.device}
    self.self_attn = MultiheadAttention(E, H, {dropout = o.dropout, batch_first = o.batch_first,
                                               dtype = o.dtype, device = o.device})
    self.linear1 = Linear(E, FF, factory)
    self.dropout = Dropout(o.dropout)
    self.linear2 = Linear(FF, E, factory)
    self.norm_first = o.norm_first == true
    self.norm1 = LayerNorm(E, {eps = o.layer_norm_eps, dtype = o.dtype, device = o.device})
    self.norm2 = LayerNorm(E, {eps = o.layer_norm_eps, dtype = o.dtype, device = o.device})
    self.dropout1 = Dropout(o.dropout)
    self.dropout2 = Dropout(o.dropout)
    self.activation = activation_arg(o.activation)
end

local FORWARD_ARGS = {
    {'src', 'ftensor'}, {'src_mask', 'tensor?'}, {'src_key_padding_mask', 'tensor?'},
    {'is_causal', 'boolean', false},
}

function TransformerEncoderLayer:_sa_block(x, a)
    local y = self.self_attn(x, x, x, {attn_mask = a.src_mask,
                                       key_padding_mask = a.src_key_padding_mask,
                                       need_weights = false, is_causal = a.is_causal})
    return self.dropout1(y)
end

function TransformerEncoderLayer:_ff_block(x)
    return self.dropout2(self.linear2(self.dropout(self.activation(self.linear1(x)))))
end

function TransformerEncoderLayer:forward(...)
    local a = Args.parse(NAME, FORWARD_ARGS, ...)
    local x = a.src
    if x:dim() ~= 2 and x:dim() ~= 3 then
        error(string.format('%s: src must be 2-D (S, E) unbatched or 3-D batched, got [%s]', NAME,
                            table.concat(x:shape(), ',')), 0)
    end
    if self.norm_first then
        x = x + self:_sa_block(self.norm1(x), a)
        return x + self:_ff_block(self.norm2(x))
    end
    x = self.norm1(x + self:_sa_block(x, a))
    return self.norm2(x + self:_ff_block(x))
end

return TransformerEncoderLayer
