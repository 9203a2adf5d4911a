-- spec/nn/transformer_layers_spec.lua: nn.MultiheadAttention, nn.TransformerEncoderLayer,
-- nn.TransformerEncoder and F.multi_head_attention_forward.
-- PyTorch reference values: spec/fixtures/transformer_layers.lua (tools/gen_transformer_fixtures.py,
-- float64, PyTorch's state_dict loaded unchanged): outputs, attention weights (averaged and per
-- head), the gradients of the inputs and of every parameter, for bool and float masks, key
-- padding, is_causal, batch_first both ways, kdim/vdim, unbatched inputs, add_bias_kv,
-- add_zero_attn, norm_first both ways, relu/gelu. Then float64 gradchecks and a gradgradcheck,
-- PyTorch's initialisation, the choice of the fused attention path, dropout, the deep copies of
-- TransformerEncoder, and errors for bad input.
local H = require 'helpers'
local ddpl = H.ddpl
local nn = ddpl.nn
local F = ddpl.F
local C = require 'ddplua.core.functional' -- what mha_forward.lua calls

local function keys_of(pairs_list)
    local out = {}
    for i, kv in ipairs(pairs_list) do out[i] = kv[1] end
    return out
end

-- A module from a fixture spec (tools/gen_transformer_fixtures.py's docstring), in float64.
local function build(desc)
    if desc.ctor == 'TransformerEncoder' then
        return nn.TransformerEncoder(build(desc.layer), desc.num_layers,
                                     {norm = desc.norm and build(desc.norm) or nil})
    end
    local args = {}
    for i, a in ipairs(desc.args) do
        if type(a) == 'table' then
            local opts = {}
            for k, v in pairs(a) do
                if type(v) == 'table' and v.fn then
                    v = F[v.fn]
                elseif type(v) == 'table' and v.module then
                    v = build(v.module)
                end
                opts[k] = v
            end
            a = opts
        end
        args[i] = a
    end
    return nn[desc.ctor](table.unpack(args))
end

local function fixture_opts(c)
    local opts = {}
    for k, v in pairs(c.opts or {}) do opts[k] = type(v) == 'table' and H.tensor(v) or v end
    return opts
end

-- the module's forward arguments: the distinct inputs, repeated as the case says
local function call_args(c, ins)
    if c.same == 'qkv' then return {ins[1], ins[1], ins[1]} end
    if c.same == 'kv' then return {ins[1], ins[2], ins[2]} end
    return ins
end

describe('transformer layers against PyTorch (fixture)', function()
    for _, c in ipairs(H.fixture('transformer_layers')) do
        it(c.name, function()
            local m = build(c.module):double()
            m:eval()
            assert.are.equal(table.concat(c.repr, '\n'), tostring(m))
            local sd = {}
            for _, kv in ipairs(c.state) do sd[kv[1]] = H.tensor(kv[2]) end
            local names = {}
            for name in m:named_parameters() do names[#names + 1] = name end
            assert.are.same(keys_of(c.state), names) -- PyTorch's names, in its order
            m:load_state_dict(sd) -- strict: every key known, none missing
            local ins = {}
            for i, e in ipairs(c.inputs) do ins[i] = H.tensor(e, {requires_grad = true}) end
            local args = call_args(c, ins)
            args[#args + 1] = fixture_opts(c)
            local out, w = m(table.unpack(args))
            local tol = {c.rtol, c.atol}
            H.assert_close(out, c.output, tol[1], tol[2], c.name .. ': output')
            local loss = (out * H.tensor(c.grad_out)):sum()
            if c.weights then
                H.assert_close(w, c.weights, tol[1], tol[2], c.name .. ': weights')
                loss = loss + (w * H.tensor(c.grad_weights)):sum()
            else
                assert.is_nil(w)
            end
            loss:backward()
            for i, e in pairs(c.input_grads) do
                H.assert_close(ins[i].grad, e, tol[1], tol[2], c.name .. ': grad of input ' .. i)
            end
            local params = {}
            for name, p in m:named_parameters() do params[name] = p end
            for _, kv in ipairs(c.param_grads) do
                H.assert_close(params[kv[1]].grad, kv[2], tol[1], tol[2],
                               c.name .. ': grad of ' .. kv[1])
            end
        end)
    end
end)

-- deterministic float64 values in [-1, 1) (an LCG)
local function data(shape, seed)
    return H.lcg(shape, seed, 2, 'float64')
end

describe('multi_head_attention_forward gradcheck (float64)', function()
    local E, Hh, L, S, N = 4, 2, 3, 4, 2
    local function inputs()
        local ts = {data({L, N, E}, 1), data({S, N, E}, 2), data({S, N, E}, 3),
                    data({3 * E, E}, 4) * 0.5, data({3 * E}, 5) * 0.1, data({E, E}, 6) * 0.5,
                    data({E}, 7) * 0.1}
        for _, t in ipairs(ts) do t.requires_grad = true end
        return ts
    end
    local mask = ddpl.tensor({{false, true, false, false}, {false, false, true, true},
                              {false, false, false, true}})
    local kpm = ddpl.tensor({{false, false, false, true}, {false, true, false, false}})

    local function mha(opts)
        return function(q, k, v, w, b, ow, ob)
            local out, weights = F.multi_head_attention_forward(q, k, v, E, Hh, w, b, nil, nil,
                                                                false, 0, ow, ob, opts)
            return weights and {out, weights} or out
        end
    end

    it('with weights, bool mask and key padding', function()
        assert.is_true(ddpl.autograd.gradcheck(mha({attn_mask = mask, key_padding_mask = kpm}),
                                               inputs()))
    end)

    it('without weights (F.scaled_dot_product_attention), float mask', function()
        local fmask = data({N * Hh, L, S}, 8)
        assert.is_true(ddpl.autograd.gradcheck(mha({attn_mask = fmask, need_weights = false}),
                                               inputs()))
    end)

    it('causal, per-head weights', function()
        local ts = inputs()
        ts[1] = data({S, N, E}, 9) -- L = S
        ts[1].requires_grad = true
        assert.is_true(ddpl.autograd.gradcheck(mha({is_causal = true,
                                                    average_attn_weights = false}), ts))
    end)

    it('gradgradcheck (second derivatives, for gradient penalties), both paths', function()
        local ts = inputs()
        for _, nw in ipairs({true, false}) do
            assert.is_true(ddpl.autograd.gradgradcheck(function(x, w, ow)
                local out = F.multi_head_attention_forward(x, x, x, E, Hh, w, nil, nil, nil,
                                                           false, 0, ow, nil, {need_weights = nw,
                                                           key_padding_mask = kpm:narrow(1, 0, 3)})
                return out
            end, {ts[1], ts[4], ts[6]}))
        end
    end)

    it('TransformerEncoderLayer (input gradient), post-norm and norm_first', function()
        for _, nf in ipairs({false, true}) do
            ddpl.manual_seed(3)
            local layer = nn.TransformerEncoderLayer(4, 2, {dim_feedforward = 6, dropout = 0,
                                                            norm_first = nf, activation = 'gelu'})
            layer:double()
            local x = data({3, 2, 4}, 10)
            x.requires_grad = true
            assert.is_true(ddpl.autograd.gradcheck(function(src)
                return layer(src, {src_key_padding_mask = kpm:narrow(1, 0, 3)})
            end, {x}))
        end
    end)
end)

describe('nn.MultiheadAttention', function()
    it("initialises as PyTorch: xavier_uniform_ in_proj_weight, zero biases", function()
        ddpl.manual_seed(0)
        local E = 64
        local m = nn.MultiheadAttention(E, 8)
        local bound = math.sqrt(6 / (E + 3 * E)) -- fan_in E, fan_out 3E
        local w = m.in_proj_weight
        assert.are.same({3 * E, E}, w:shape())
        assert.is_true(w:abs():max():item() <= bound)
        assert.is_true(w:abs():max():item() > 0.9 * bound) -- uses the whole range
        assert.are.equal(0, m.in_proj_bias:abs():sum():item())
        assert.are.equal(0, m.out_proj.bias:abs():sum():item())
        -- out_proj keeps Linear's kaiming_uniform_(a = sqrt(5)): U(-1/sqrt(E), 1/sqrt(E))
        local ob = m.out_proj.weight:abs():max():item()
        assert.is_true(ob <= 1 / math.sqrt(E) and ob > 0.9 / math.sqrt(E))
        assert.is_nil(m.bias_k)
        assert.are.equal('NonDynamicallyQuantizableLinear', m.out_proj.__name)
    end)

    it('has separate projections when kdim or vdim differ, and bias_k/bias_v on request', function()
        local m = nn.MultiheadAttention(6, 3, {kdim = 4, vdim = 5, add_bias_kv = true,
                                               bias = false})
        local shapes = {}
        for name, p in m:named_parameters() do shapes[#shapes + 1] = {name, p:shape()} end
        assert.are.same({{'q_proj_weight', {6, 6}}, {'k_proj_weight', {6, 4}},
                         {'v_proj_weight', {6, 5}}, {'bias_k', {1, 1, 6}}, {'bias_v', {1, 1, 6}},
                         {'out_proj.weight', {6, 6}}}, shapes)
        assert.is_nil(m.in_proj_weight)
        assert.is_true(m.bias_k:abs():sum():item() > 0) -- xavier_normal_
        -- kdim = vdim = embed_dim given explicitly: the packed weight, as PyTorch
        assert.is_not_nil(nn.MultiheadAttention(6, 3, {kdim = 6, vdim = 6}).in_proj_weight)
    end)

    it('runs without weights through F.scaled_dot_product_attention, with them without', function()
        local m = nn.MultiheadAttention(4, 2):double()
        local x = data({3, 2, 4}, 11)
        local calls, orig = {}, C.scaled_dot_product_attention
        C.scaled_dot_product_attention = function(...)
            calls[#calls + 1] = select(4, ...)
            return orig(...)
        end
        local ok, err = pcall(function()
            local with = m(x, x, x)
            assert.are.equal(0, #calls)
            local without, w = m(x, x, x, {need_weights = false, is_causal = true})
            assert.is_nil(w)
            assert.are.equal(1, #calls)
            assert.is_true(calls[1].is_causal) -- the kernel's own causal flag, no mask
            assert.is_nil(calls[1].attn_mask)
            local masked = m(x, x, x, {need_weights = false, is_causal = true,
                                       key_padding_mask = ddpl.zeros(2, 3, {dtype = 'bool'})})
            assert.is_false(calls[2].is_causal) -- causal merged with the padding mask
            assert.are.equal('float64', calls[2].attn_mask.dtype)
            local causal_w = m(x, x, x, {is_causal = true})
            H.assert_close(without, causal_w, 1e-12, 1e-12, 'fused vs composed')
            H.assert_close(masked, causal_w, 1e-12, 1e-12, 'all-false padding changes nothing')
            -- in training with dropout the probabilities are composed (sdpa has no dropout)
            local d = nn.MultiheadAttention(4, 2, {dropout = 0.5})
            d(x:float(), x:float(), x:float(), {need_weights = false})
            assert.are.equal(2, #calls)
            assert.are.same({3, 2, 4}, with:shape())
        end)
        C.scaled_dot_product_attention = orig
        assert(ok, err)
    end)

    it("takes the fused CPU kernel when it applies, with the composition's values", function()
        local old = ddpl._sdpa_cpu_fused_min_bytes(0)
        local orig, grad_fns = C.scaled_dot_product_attention, {}
        C.scaled_dot_product_attention = function(...)
            local y = orig(...)
            grad_fns[#grad_fns + 1] = y.grad_fn
            return y
        end
        local ok, err = pcall(function()
            local m = nn.MultiheadAttention(8, 2):double()
            local x = data({5, 3, 8}, 12)
            x.requires_grad = true
            local fused = m(x, x, x, {need_weights = false})
            assert.are.same({'ScaledDotProductAttentionBackward0'}, grad_fns)
            local g1 = ddpl.autograd.grad({fused:sum()}, {x, m.in_proj_weight})
            local composed = m(x, x, x)
            local g2 = ddpl.autograd.grad({composed:sum()}, {x, m.in_proj_weight})
            H.assert_close(fused, composed, 1e-12, 1e-12, 'output')
            H.assert_close(g1[1], g2[1], 1e-10, 1e-12, 'grad of x')
            H.assert_close(g1[2], g2[2], 1e-10, 1e-12, 'grad of in_proj_weight')
        end)
        C.scaled_dot_product_attention = orig
        ddpl._sdpa_cpu_fused_min_bytes(old)
        assert(ok, err)
    end)

    it('applies dropout to the probabilities in training only', function()
        ddpl.manual_seed(1)
        local m = nn.MultiheadAttention(4, 2, {dropout = 1.0}):double()
        ddpl.no_grad(function() m.out_proj.bias:copy_(data({4}, 15)) end)
        local x = data({3, 2, 4}, 13)
        local out, w = m(x, x, x)
        assert.are.equal(0, w:abs():sum():item()) -- every probability dropped
        H.assert_close(out, m.out_proj.bias:expand(3, 2, 4), 0, 0, 'only the bias is left')
        m:eval()
        local _, we = m(x, x, x)
        H.assert_close(we:sum(-1), ddpl.ones(2, 3, {dtype = 'float64'}), 1e-12, 1e-12,
                       'rows sum to one')
    end)

    it('accepts its forward options positionally, as PyTorch', function()
        local m = nn.MultiheadAttention(4, 2):double()
        local x = data({3, 2, 4}, 14)
        local kpm = ddpl.tensor({{false, false, true}, {false, false, false}})
        local a, wa = m(x, x, x, kpm, true, nil, false)
        local b, wb = m(x, x, x, {key_padding_mask = kpm, average_attn_weights = false})
        H.assert_close(a, b, 0, 0)
        H.assert_close(wa, wb, 0, 0)
        assert.are.same({2, 2, 3, 3}, wa:shape())
    end)

    it('rejects bad input, naming the class and the shapes', function()
        H.assert_error(function() nn.MultiheadAttention(6, 4) end, 'MultiheadAttention',
                       'embed_dim 6', 'divisible by num_heads 4')
        H.assert_error(function() nn.MultiheadAttention(4, 2, {heads = 3}) end,
                       "unknown option 'heads'")
        H.assert_error(function() nn.MultiheadAttention(4, 2, {dropout = 2}) end, 'dropout')
        local m = nn.MultiheadAttention(4, 2)
        local q, k = ddpl.randn(3, 2, 4), ddpl.randn(5, 2, 4)
        H.assert_error(function() m(q, k, k, {attn_mask = ddpl.zeros(3, 4, {dtype = 'bool'})}) end,
                       'MultiheadAttention', 'attn_mask [3,4]', '[3,5]')
        H.assert_error(function() m(q, k, k, {attn_mask = ddpl.zeros(3, 3, 5)}) end,
                       'attn_mask [3,3,5]', '[4,3,5]')
        H.assert_error(function() m(q, k, k, {key_padding_mask = ddpl.zeros(2, 4, {dtype = 'bool'})}) end,
                       'key_padding_mask [2,4]', '[2,5]')
        H.assert_error(function() m(q, k, k, {key_padding_mask = ddpl.zeros(5, {dtype = 'bool'})}) end,
                       'key_padding_mask [5]', '(N, S)')
        H.assert_error(function() m(q, k, k, {attn_mask = ddpl.zeros(3, 5, {dtype = 'int64'})}) end,
                       'attn_mask must be bool or floating point', 'int64')
        H.assert_error(function() m(q, k, k, {attn_mask = ddpl.zeros(3, 5, {dtype = 'float64'})}) end,
                       "attn_mask (float64) must have the query's dtype float32")
        H.assert_error(function() m(ddpl.randn(3, 2, 5), k, k) end, 'query [3,2,5]',
                       'embed_dim 4')
        H.assert_error(function() m(q, ddpl.randn(5, 3, 4), ddpl.randn(5, 3, 4)) end,
                       'query [3,2,4], key [5,3,4] and value [5,3,4] do not match')
        H.assert_error(function() m(q, k, ddpl.randn(6, 2, 4)) end, 'do not match')
        H.assert_error(function() m(q, ddpl.randn(5, 4), ddpl.randn(5, 4)) end,
                       'key and value must be 3-D')
        H.assert_error(function() m(ddpl.randn(4), k, k) end, 'query must be 2-D', '[4]')
        H.assert_error(function() m(q, k) end, 'MultiheadAttention', 'missing argument value')
        local kv = nn.MultiheadAttention(4, 2, {kdim = 3, vdim = 5})
        H.assert_error(function() kv(q, ddpl.randn(5, 2, 4), ddpl.randn(5, 2, 5)) end,
                       'key [5,2,4] and value [5,2,5]', 'kdim 3 and vdim 5')
        H.assert_error(function()
            F.multi_head_attention_forward(q, k, k, 4, 2, nil, nil, nil, nil, false, 0,
                                           ddpl.randn(4, 4), nil)
        end, 'multi_head_attention_forward', 'in_proj_weight is required')
    end)
end)

describe('nn.TransformerEncoderLayer and nn.TransformerEncoder', function()
    it('has PyTorch defaults and checks its arguments', function()
        local l = nn.TransformerEncoderLayer(8, 2)
        assert.are.same({2048, 8}, l.linear1.weight:shape())
        assert.are.equal(0.1, l.dropout.p)
        assert.are.equal(0.1, l.self_attn.dropout)
        assert.are.equal(1e-5, l.norm1.eps)
        assert.are.equal(F.relu, l.activation)
        assert.is_false(l.norm_first)
        H.assert_error(function() nn.TransformerEncoderLayer(6, 4) end,
                       'TransformerEncoderLayer', 'd_model 6', 'nhead 4')
        H.assert_error(function() nn.TransformerEncoderLayer(4, 2, {activation = 'tanh'}) end,
                       'TransformerEncoderLayer', "'tanh'")
        H.assert_error(function() nn.TransformerEncoderLayer(4, 2, {nhead = 2}) end,
                       "unknown option 'nhead'")
        H.assert_error(function() l(ddpl.randn(2, 3, 4, 8)) end, 'TransformerEncoderLayer',
                       '[2,3,4,8]')
        H.assert_error(function() l(ddpl.randn(3, 2, 8), {src_mask = ddpl.zeros(2, 2)}) end,
                       'attn_mask [2,2]', '[3,3]')
        H.assert_error(function() nn.TransformerEncoder(l, 0) end, 'TransformerEncoder',
                       'num_layers')
        H.assert_error(function() nn.TransformerEncoder({}, 2) end, 'encoder_layer must be a Module')
        H.assert_error(function() nn.TransformerEncoder(l, 2, {norm = 3}) end, 'norm must be a Module')
    end)

    it('stacks independent deep copies of the layer', function()
        local l = nn.TransformerEncoderLayer(4, 2, {dim_feedforward = 6, dropout = 0})
        local enc = nn.TransformerEncoder(l, 2, nn.LayerNorm(4)) -- PyTorch's positional norm
        assert.are.equal(2, #enc.layers)
        local p0, p1 = enc.layers[0].self_attn.in_proj_weight, enc.layers[1].self_attn.in_proj_weight
        assert.is_false(rawequal(p0, p1))
        assert.is_false(rawequal(p0, l.self_attn.in_proj_weight))
        H.assert_close(p0, l.self_attn.in_proj_weight, 0, 0)
        assert.is_true(p0.requires_grad and p0:is_leaf())
        ddpl.no_grad(function() p0:fill_(0) end)
        assert.is_true(p1:abs():sum():item() > 0)
        assert.is_true(l.self_attn.in_proj_weight:abs():sum():item() > 0)
        assert.are.equal(F.relu, enc.layers[1].activation)
        assert.are.equal(26, #enc:parameters()) -- 12 per layer, 2 for the final norm
        -- training mode reaches the copies
        enc:eval()
        assert.is_false(enc.layers[1].dropout1.training)
    end)

    it('deep copies keep tied weights tied and buffers cloned', function()
        local deepcopy = require 'ddplua.nn.module_copy'
        local seq = nn.Sequential(nn.Linear(3, 3), nn.BatchNorm1d(3))
        seq.tied = seq[0] -- the same module twice
        local c = deepcopy(seq)
        assert.is_true(rawequal(c.tied, c[0]))
        assert.is_false(rawequal(c[0], seq[0]))
        assert.is_false(rawequal(c[1].running_mean, seq[1].running_mean))
        H.assert_close(c[1].running_var, seq[1].running_var, 0, 0)
        local a, b = {}, {}
        for k in pairs(seq:state_dict()) do a[#a + 1] = k end
        for k in pairs(c:state_dict()) do b[#b + 1] = k end
        table.sort(a)
        table.sort(b)
        assert.are.same(a, b)
        H.assert_error(function() deepcopy(3) end, 'deepcopy', 'nn.Module')
    end)
end)
