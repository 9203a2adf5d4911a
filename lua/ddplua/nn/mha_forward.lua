-- lua/ddplua/nn/mha_forward.lua: the computation of multi-head attention, shared by
--          nn.MultiheadAttention and F.multi_head_attention_forward.
-- defines: mha_forward(fname, query, key, value, o) -> out, weights (nil unless o.need_weights).
--
-- PyTorch 1.13's F.multi_head_attention_forward, sequence first: query (L, N, E), key (S, N, kdim),
-- value (S, N, vdim), or unbatched (L, E), (S, kdim), (S, vdim). `o` holds embed_dim, num_heads,
-- the weights (in_proj_weight (3E, E) and in_proj_bias (3E), or q/k/v_proj_weight when
-- use_separate_proj_weight; bias_k, bias_v (1, 1, E); out_proj_weight (E, E), out_proj_bias (E)),
-- add_zero_attn, dropout_p, training, key_padding_mask (N, S), attn_mask (L, S) or (N*H, L, S),
-- need_weights, average_attn_weights and is_causal. fname names the caller in errors.
--
-- Masks: a bool mask is true where attention is NOT allowed (PyTorch 1.13's MultiheadAttention;
-- F.scaled_dot_product_attention's bool masks mean the opposite, so bool masks are turned into
-- additive float masks here, -inf where true, before anything reaches it); a float mask is added
-- to the scores. attn_mask and key_padding_mask are both made additive and summed.
--
-- Two paths compute the same thing. When the probabilities are not returned (need_weights false)
-- and no dropout applies, the heads go through F.scaled_dot_product_attention (the engine's fused
-- kernel where it applies, its composition otherwise); else scores, softmax, dropout and the
-- weighted sum are composed here, so the probabilities can be returned.
local ddpl = require 'ddplua'
local F = require 'ddplua.core.functional' -- the C functions (linear, softmax, sdpa, dropout)

local function shape_str(t) return '[' .. table.concat(t:shape(), ',') .. ']' end

local function fail(fname, fmt, ...)
    error(fname .. ': ' .. string.format(fmt, ...), 0)
end

-- a bool or float mask as an additive float mask of the query's dtype (-inf where bool true)
local function additive(fname, what, m, q)
    if m.dtype == 'bool' then
        return ddpl.zeros(m:shape(), {dtype = q.dtype, device = q.device}):masked_fill(m, -math.huge)
    end
    if not m:is_floating_point() then
        fail(fname, '%s must be bool or floating point, got %s', what, m.dtype)
    end
    if m.dtype ~= q.dtype then
        fail(fname, '%s (%s) must have the query\'s dtype %s', what, m.dtype, q.dtype)
    end
    return m
end

-- m (..., S) with `extra` zero columns appended (the keys bias_k and add_zero_attn add)
local function pad_keys(m, extra)
    if extra == 0 then return m end
    local shape = m:shape()
    shape[#shape] = extra
    return ddpl.cat({m, ddpl.zeros(shape, {dtype = m.dtype, device = m.device})}, -1)
end

local function check_inputs(fname, query, key, value, o)
    local qd = query:dim()
    if qd ~= 2 and qd ~= 3 then
        fail(fname, 'query must be 2-D (L, E) unbatched or 3-D batched, got %s', shape_str(query))
    end
    if key:dim() ~= qd or value:dim() ~= qd then
        fail(fname, 'for a %d-D query %s, key and value must be %d-D too, got key %s and value %s',
             qd, shape_str(query), qd, shape_str(key), shape_str(value))
    end
    local E = o.embed_dim
    if query:size(-1) ~= E then
        fail(fname, 'query %s: the last dimension must be embed_dim %d', shape_str(query), E)
    end
    local kdim, vdim = E, E
    if o.use_separate_proj_weight then
        kdim, vdim = o.k_proj_weight:size(1), o.v_proj_weight:size(1)
    end
    if key:size(-1) ~= kdim or value:size(-1) ~= vdim then
        fail(fname, 'key %s and value %s: the last dimensions must be kdim %d and vdim %d',
             shape_str(key), shape_str(value), kdim, vdim)
    end
    if key:size(0) ~= value:size(0) or (qd == 3 and (key:size(1) ~= query:size(1)
                                                       or value:size(1) ~= query:size(1))) then
        fail(fname, 'query %s, key %s and value %s do not match: expected (L, N, E), (S, N, '
             .. 'kdim) and (S, N, vdim)%s', shape_str(query), shape_str(key), shape_str(value),
             qd == 2 and ' without the batch dimension' or '')
    end
end

-- Both masks as one additive float mask broadcastable to (N, H, L, S + extra), or nil.
local function merged_mask(fname, o, q, N, L, S, extra)
    local H = o.num_heads
    local mask
    local am = o.attn_mask
    if am ~= nil then
        local ok2 = am:dim() == 2 and am:size(0) == L and am:size(1) == S
        local ok3 = am:dim() == 3 and am:size(0) == N * H and am:size(1) == L and am:size(2) == S
        if not (ok2 or ok3) then
            fail(fname, 'attn_mask %s: expected (L, S) = [%d,%d] or (N*num_heads, L, S) = '
                 .. '[%d,%d,%d]', shape_str(am), L, S, N * H, L, S)
        end
        mask = pad_keys(additive(fname, 'attn_mask', am, q), extra)
        if ok3 then mask = mask:reshape(N, H, L, S + extra) end
    elseif o.is_causal then
        -- key j is hidden from query i when j > i
        local hide = ddpl.arange(S, {device = q.device}):gt(
                         ddpl.arange(L, {device = q.device}):unsqueeze(1))
        mask = pad_keys(additive(fname, 'attn_mask', hide, q), extra)
    end
    local kpm = o.key_padding_mask
    if kpm ~= nil then
        if kpm:dim() ~= 2 or kpm:size(0) ~= N or kpm:size(1) ~= S then
            fail(fname, 'key_padding_mask %s: expected (N, S) = [%d,%d] (or (S) unbatched)',
                 shape_str(kpm), N, S)
        end
        kpm = pad_keys(additive(fname, 'key_padding_mask', kpm, q), extra):reshape(N, 1, 1,
                                                                                  S + extra)
        mask = mask and mask + kpm or kpm
    end
    return mask
end

-- (T, N, E) -> (N, H, T, D)
local function heads(x, H)
    local T, N, E = x:size(0), x:size(1), x:size(2)
    return x:reshape(T, N, H, E // H):permute(1, 2, 0, 3)
end

local function project(query, key, value, o)
    local E = o.embed_dim
    if o.use_separate_proj_weight then
        local b = o.in_proj_bias and o.in_proj_bias:chunk(3) or {}
        return F.linear(query, o.q_proj_weight, b[1]), F.linear(key, o.k_proj_weight, b[2]),
               F.linear(value, o.v_proj_weight, b[3])
    end
    local w, b = o.in_proj_weight, o.in_proj_bias
    -- one GEMM for self-attention (PyTorch's _in_projection_packed does the same)
    if rawequal(query, key) and rawequal(key, value) then
        return table.unpack(F.linear(query, w, b):chunk(3, -1))
    end
    local function part(first, n)
        return w:narrow(0, first * E, n * E), b and b:narrow(0, first * E, n * E)
    end
    local q = F.linear(query, part(0, 1))
    if rawequal(key, value) then
        local kv = F.linear(key, part(1, 2)):chunk(2, -1)
        return q, kv[1], kv[2]
    end
    return q, F.linear(key, part(1, 1)), F.linear(value, part(2, 1))
end

local function mha_forward(fname, query, key, value, o)
    check_inputs(fname, query, key, value, o)
    local batched = query:dim() == 3
    if o.key_padding_mask ~= nil and o.key_padding_mask:dim() ~= (batched and 2 or 1) then
        fail(fname, 'key_padding_mask %s: expected %s for a %d-D query', shape_str(
                 o.key_padding_mask), batched and '(N, S)' or '(S)', query:dim())
    end
    if not batched then
        -- one sequence: a batch of one, squeezed again at the end (as PyTorch)
        local kq, vk = rawequal(key, query), rawequal(value, key)
        query = query:unsqueeze(1)
        key = kq and query or key:unsqueeze(1)
        value = vk and key or value:unsqueeze(1)
        o = setmetatable({key_padding_mask = o.key_padding_mask and
                          o.key_padding_mask:unsqueeze(0)}, {__index = o})
    end
    local L, N, E, S = query:size(0), query:size(1), query:size(2), key:size(0)
    local H = o.num_heads
    if E % H ~= 0 then fail(fname, 'embed_dim %d is not divisible by num_heads %d', E, H) end

    local q, k, v = project(query, key, value, o)
    local extra = 0
    if o.bias_k ~= nil then -- one learned key and value appended to every sequence
        k = ddpl.cat({k, o.bias_k:expand(1, N, E)}, 0)
        v = ddpl.cat({v, o.bias_v:expand(1, N, E)}, 0)
        extra = 1
    end
    q, k, v = heads(q, H), heads(k, H), heads(v, H)
    if o.add_zero_attn then -- one all-zero key and value appended after the projection
        local z = ddpl.zeros({N, H, 1, E // H}, {dtype = k.dtype, device = k.device})
        k, v = ddpl.cat({k, z}, 2), ddpl.cat({v, z}, 2)
        extra = extra + 1
    end

    local dropout_p = o.training and o.dropout_p or 0
    local fused = not o.need_weights and dropout_p == 0
    -- causal attention without other masks is the kernel's own flag
    local causal_flag = fused and o.is_causal and o.attn_mask == nil and
                            o.key_padding_mask == nil and extra == 0
    local mask = not causal_flag and merged_mask(fname, o, q, N, L, S, extra) or nil

    local y, weights
    if fused then
        y = F.scaled_dot_product_attention(q, k, v, {attn_mask = mask, is_causal = causal_flag})
    else
        -- PyTorch scales q before the product: scores = mask + (q / sqrt(D)) k^T
        local scores = (q / math.sqrt(E // H)):matmul(k:transpose(-2, -1))
        if mask then scores = scores + mask end
        weights = F.softmax(scores, -1)
        if dropout_p > 0 then weights = F.dropout(weights, dropout_p, true) end
        y = weights:matmul(v) -- (N, H, L, D)
    end
    local out = F.linear(y:permute(2, 0, 1, 3):reshape(L, N, E), o.out_proj_weight,
                         o.out_proj_bias) -- (L, N, E)
    if weights and o.average_attn_weights then weights = weights:sum(1) / H end
    if not batched then
        out = out:squeeze(1)
        weights = weights and weights:squeeze(0)
    end
    if not o.need_weights then weights = nil end
    return out, weights
end

return mha_forward
