-- lua/ddplua/nn/MultiheadAttention.lua: nn.MultiheadAttention(embed_dim, num_heads [, {dropout=0,
--          bias=true, add_bias_kv=false, add_zero_attn=false, kdim, vdim, batch_first=false,
--          dtype, device}]).
-- defines: MultiheadAttention: forward(query, key, value [, key_padding_mask [, need_weights=true
--          [, attn_mask [, average_attn_weights=true [, is_causal=false]]]]]) -> out, weights
--          (arguments after value positionally or by name in an options table).
--
-- PyTorch 1.13's module: shapes are sequence first, query (L, N, E), key (S, N, kdim), value
-- (S, N, vdim), out (L, N, E), unless batch_first (then (N, L, E), ...); unbatched inputs (L, E)
-- give out (L, E). weights are the attention probabilities averaged over heads, (N, L, S), or per
-- head, (N, num_heads, L, S) when average_attn_weights is false ((L, S) and (num_heads, L, S)
-- unbatched); nil when need_weights is false, which lets the heads run through
-- F.scaled_dot_product_attention. Masks: mha_forward.lua (bool true = masked out).
--
-- Parameters, in PyTorch's order and with its initialisation: in_proj_weight (3E, E),
-- xavier_uniform_ (or q_proj_weight (E, E), k_proj_weight (E, kdim), v_proj_weight (E, vdim),
-- each xavier_uniform_, when kdim or vdim differ from E); in_proj_bias (3E) zeros; bias_k and
-- bias_v (1, 1, E) xavier_normal_ with add_bias_kv; out_proj (NonDynamicallyQuantizableLinear,
-- a Linear: kaiming_uniform_ weight, bias zeroed here).
local ddpl = require 'ddplua'
local Module = require 'ddplua.nn.Module'
local Parameter = require 'ddplua.nn.Parameter'
local OutProj = require 'ddplua.nn.NonDynamicallyQuantizableLinear'
local Args = require 'ddplua.nn.functional_args'
local init = require 'ddplua.nn.init_functions'
local mha_forward = require 'ddplua.nn.mha_forward'

local MultiheadAttention = Module:extend('MultiheadAttention')

local NAME = 'MultiheadAttention'

function MultiheadAttention:init(embed_dim, num_heads, opts)
    local E = Module.check_int(NAME, embed_dim, 'embed_dim', 1)
    local H = Module.check_int(NAME, num_heads, 'num_heads', 1)
    if E % H ~= 0 then
        error(string.format('%s: embed_dim %d must be divisible by num_heads %d', NAME, E, H), 2)
    end
    local o = Module.options(NAME, opts, {dropout = 0.0, bias = true, add_bias_kv = false,
                                          add_zero_attn = false, kdim = false, vdim = false,
                                          batch_first = false}, true)
    if type(o.dropout) ~= 'number' or o.dropout < 0 or o.dropout > 1 then
        error(NAME .. ': dropout must be a number between 0 and 1, got ' .. tostring(o.dropout), 2)
    end
    self.embed_dim, self.num_heads, self.head_dim = E, H, E // H
    self.kdim = o.kdim and Module.check_int(NAME, o.kdim, 'kdim', 1) or E
    self.vdim = o.vdim and Module.check_int(NAME, o.vdim, 'vdim', 1) or E
    self._qkv_same_embed_dim = self.kdim == E and self.vdim == E
    self.dropout, self.batch_first = o.dropout, o.batch_first == true
    local topts = {dtype = o.dtype, device = o.device}
    if self._qkv_same_embed_dim then
        local E3 = Module.size_product(NAME, 'the packed q, k, v rows (3 x embed_dim)', 3, E)
        self.in_proj_weight = Parameter(ddpl.empty({E3, E}, topts))
        self:register_parameter('q_proj_weight', nil)
        self:register_parameter('k_proj_weight', nil)
        self:register_parameter('v_proj_weight', nil)
    else
        self.q_proj_weight = Parameter(ddpl.empty({E, E}, topts))
        self.k_proj_weight = Parameter(ddpl.empty({E, self.kdim}, topts))
        self.v_proj_weight = Parameter(ddpl.empty({E, self.vdim}, topts))
        self:register_parameter('in_proj_weight', nil)
    end
    if o.bias then
        self.in_proj_bias = Parameter(ddpl.empty({3 * E}, topts)) -- 3 x E checked above
    else
        self:register_parameter('in_proj_bias', nil)
    end
    self.out_proj = OutProj(E, E, {bias = o.bias, dtype = o.dtype, device = o.device})
    if o.add_bias_kv then
        self.bias_k = Parameter(ddpl.empty({1, 1, E}, topts))
        self.bias_v = Parameter(ddpl.empty({1, 1, E}, topts))
    else
        self:register_parameter('bias_k', nil)
        self:register_parameter('bias_v', nil)
    end
    self.add_zero_attn = o.add_zero_attn == true
    self:_reset_parameters()
end

function MultiheadAttention:_reset_parameters()
    if self._qkv_same_embed_dim then
        init.xavier_uniform_(self.in_proj_weight)
    else
        init.xavier_uniform_(self.q_proj_weight)
        init.xavier_uniform_(self.k_proj_weight)
        init.xavier_uniform_(self.v_proj_weight)
    end
    if self.in_proj_bias ~= nil then
        init.zeros_(self.in_proj_bias)
        init.zeros_(self.out_proj.bias)
    end
    if self.bias_k ~= nil then
        init.xavier_normal_(self.bias_k)
        init.xavier_normal_(self.bias_v)
    end
end

local FORWARD_ARGS = {
    {'query', 'ftensor'}, {'key', 'ftensor'}, {'value', 'ftensor'},
    {'key_padding_mask', 'tensor?'}, {'need_weights', 'boolean', true}, {'attn_mask', 'tensor?'},
    {'average_attn_weights', 'boolean', true}, {'is_causal', 'boolean', false},
}

function MultiheadAttention:forward(...)
    local a = Args.parse(NAME, FORWARD_ARGS, ...)
    local query, key, value = a.query, a.key, a.value
    local swap = self.batch_first and query:dim() == 3
    if swap then -- to sequence first, keeping which of the three are the same tensor
        local kq, vk = rawequal(key, query), rawequal(value, key)
        query = query:transpose(0, 1)
        key = kq and query or key:transpose(0, 1)
        value = vk and key or value:transpose(0, 1)
    end
    local out, weights = mha_forward(NAME, query, key, value, {
        embed_dim = self.embed_dim, num_heads = self.num_heads,
        in_proj_weight = self.in_proj_weight, in_proj_bias = self.in_proj_bias,
        use_separate_proj_weight = not self._qkv_same_embed_dim,
        q_proj_weight = self.q_proj_weight, k_proj_weight = self.k_proj_weight,
        v_proj_weight = self.v_proj_weight, bias_k = self.bias_k, bias_v = self.bias_v,
        add_zero_attn = self.add_zero_attn, dropout_p = self.dropout, training = self.training,
        out_proj_weight = self.out_proj.weight, out_proj_bias = self.out_proj.bias,
        key_padding_mask = a.key_padding_mask, need_weights = a.need_weights,
        attn_mask = a.attn_mask, average_attn_weights = a.average_attn_weights,
        is_causal = a.is_causal,
    })
    if swap then out = out:transpose(0, 1) end
    return out, weights
end

return MultiheadAttention
