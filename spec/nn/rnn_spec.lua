-- spec/nn/rnn_spec.lua: nn.LSTM and nn.GRU (lua/ddplua/nn/rnn_base.lua) and their native pieces,
-- the fused cells and the per-layer recurrence (engine/ops/nn_rnn_cell.c, nn_rnn_layer.c).
-- PyTorch 1.13 values in float64 come from spec/fixtures/rnn.lua (tools/gen_rnn_fixtures.py):
-- outputs, final states and every gradient across layers, directions, batch_first, unbatched
-- input, initial states and bias=false, with PyTorch's state_dict loaded unchanged. Then
-- float64 gradchecks, float32 against float64, dropout between layers, and bad input.
local H = require 'helpers'
local ddpl = H.ddpl
local nn = ddpl.nn
local F = ddpl.F
local gradcheck = ddpl.autograd.gradcheck
local S = require 'shell_util'

local RTOL, ATOL = 1e-9, 1e-10

local function build(case)
    local args = {}
    for i, a in ipairs(case.args) do args[i] = a end
    local opts = {dtype = 'float64'}
    for k, v in pairs(args[3] or {}) do opts[k] = v end
    args[3] = opts
    return nn[case.ctor](table.unpack(args))
end

local function run_case(case)
    local m = build(case)
    local sd = {}
    for i, kv in ipairs(case.state) do sd[kv[1]] = H.tensor(kv[2]) end
    m:load_state_dict(sd)
    local keys = {}
    for i, kv in ipairs(m:named_parameters()) do keys[i] = kv[1] end
    local x = H.tensor(case.input, {requires_grad = true})
    local hx, arg
    if case.hx then
        if case.ctor == 'LSTM' then
            hx = {H.tensor(case.hx[1], {requires_grad = true}),
                  H.tensor(case.hx[2], {requires_grad = true})}
            arg = hx
        else
            hx = {H.tensor(case.hx, {requires_grad = true})}
            arg = hx[1]
        end
    end
    local out, st = m(x, arg)
    local finals = case.ctor == 'LSTM' and st or {st}
    H.assert_close(out, case.output, RTOL, ATOL, case.name .. ': output')
    H.assert_close(finals[1], case.h_n, RTOL, ATOL, case.name .. ': h_n')
    if case.c_n then H.assert_close(finals[2], case.c_n, RTOL, ATOL, case.name .. ': c_n') end
    local loss = (out * H.tensor(case.grad_output)):sum() +
                 (finals[1] * H.tensor(case.grad_h_n)):sum()
    if case.grad_c_n then loss = loss + (finals[2] * H.tensor(case.grad_c_n)):sum() end
    loss:backward()
    H.assert_close(x.grad, case.input_grad, RTOL, ATOL, case.name .. ': input gradient')
    for i, e in ipairs(case.hx_grads or {}) do
        H.assert_close(hx[i].grad, e, RTOL, ATOL, case.name .. ': initial state ' .. i .. ' grad')
    end
    local params = {}
    for _, kv in ipairs(m:named_parameters()) do params[kv[1]] = kv[2] end
    for i, kv in ipairs(case.param_grads) do
        assert.are.equal(kv[1], keys[i], case.name .. ': parameter order')
        H.assert_close(params[kv[1]].grad, kv[2], RTOL, ATOL, case.name .. ': grad of ' .. kv[1])
    end
end

describe('nn.LSTM and nn.GRU against PyTorch (float64)', function()
    for _, case in ipairs(H.fixture('rnn')) do
        it(case.name, function() run_case(case) end)
    end
end)

local function U(shape, lo, hi)
    local t = ddpl.rand(shape, {dtype = 'float64'}) * ((hi or 1) - (lo or -1)) + (lo or -1)
    t.requires_grad = true
    return t
end

local function ok_gradcheck(fn, inputs)
    local ok, res = pcall(gradcheck, fn, inputs)
    if not ok then error('gradcheck raised: ' .. tostring(res), 2) end
    assert.is_true(res, 'gradcheck returned ' .. tostring(res))
end

describe('gradcheck (float64)', function()
    ddpl.manual_seed(7)
    local B, Hd, T = 3, 4, 4

    it('the fused LSTM cell (h and c)', function()
        ok_gradcheck(function(ig, hg, cx)
            local h, c = F._fused_lstm_cell(ig, hg, cx)
            return ddpl.cat({h, c * 0.7}, 1)
        end, {U({B, 4 * Hd}, -2, 2), U({B, 4 * Hd}), U({B, Hd})})
    end)

    it('the fused GRU cell', function()
        ok_gradcheck(function(ig, hg, hx) return F._fused_gru_cell(ig, hg, hx) end,
                     {U({B, 3 * Hd}, -2, 2), U({B, 3 * Hd}), U({B, Hd})})
    end)

    for _, reverse in ipairs({false, true}) do
        local dir = reverse and ' (reverse)' or ''
        it('the LSTM layer recurrence' .. dir, function()
            ok_gradcheck(function(g, w, h0, c0)
                local hc = F._lstm_layer(g, w, h0, c0, reverse)
                return hc * 1 -- both planes: outputs h_t and cells c_t
            end, {U({T, B, 4 * Hd}), U({4 * Hd, Hd}), U({B, Hd}), U({B, Hd})})
        end)

        it('the GRU layer recurrence' .. dir, function()
            ok_gradcheck(function(g, w, b, h0) return F._gru_layer(g, w, b, h0, reverse) end,
                         {U({T, B, 3 * Hd}), U({3 * Hd, Hd}), U({3 * Hd}), U({B, Hd})})
        end)
    end

    it('a small bidirectional 2-layer LSTM (input and initial state)', function()
        local m = nn.LSTM(3, Hd, {num_layers = 2, bidirectional = true, dtype = 'float64'})
        ok_gradcheck(function(x, h0, c0)
            local out, s = m(x, {h0, c0})
            return ddpl.cat({out:reshape(-1), s[1]:reshape(-1), s[2]:reshape(-1)}, 0)
        end, {U({T, 2, 3}), U({4, 2, Hd}), U({4, 2, Hd})})
    end)

    it('a small batch_first GRU (input and initial state)', function()
        local m = nn.GRU(3, Hd, {num_layers = 2, batch_first = true, dtype = 'float64'})
        ok_gradcheck(function(x, h0)
            local out, hn = m(x, h0)
            return ddpl.cat({out:reshape(-1), hn:reshape(-1)}, 0)
        end, {U({2, T, 3}), U({2, 2, Hd})})
    end)
end)

describe('LSTM and GRU behaviour', function()
    it('float32 matches float64 (the vectorised float32 cell kernels)', function()
        for _, ctor in ipairs({'LSTM', 'GRU'}) do
            ddpl.manual_seed(3)
            local m64 = nn[ctor](5, 8, {num_layers = 2, bidirectional = true, dtype = 'float64'})
            local m32 = nn[ctor](5, 8, {num_layers = 2, bidirectional = true})
            local sd = {}
            for k, v in pairs(m64:state_dict()) do sd[k] = v:float() end
            m32:load_state_dict(sd)
            local x = ddpl.randn(7, 3, 5, {dtype = 'float64'}) * 2
            local x32 = x:float()
            x32.requires_grad = true
            local y64 = m64(x)
            local y32 = m32(x32)
            H.assert_close(y32:double(), y64, 1e-5, 1e-6, ctor .. ' float32 output')
            y32:sum():backward()
            assert.is_true(x32.grad:abs():sum():item() > 0)
        end
    end)

    it('takes PyTorch default init bounds U(-1/sqrt(H), 1/sqrt(H))', function()
        local m = nn.GRU(6, 16, {num_layers = 2})
        for _, p in ipairs(m:parameters()) do
            assert.is_true(p:abs():max():item() <= 0.25)
            assert.is_true(p:abs():max():item() > 0.2) -- spread over the range, not zeros
        end
    end)

    it('applies dropout between layers only in training', function()
        ddpl.manual_seed(11)
        local m = nn.LSTM(4, 6, {num_layers = 2, dropout = 0.5})
        local x = ddpl.randn(5, 3, 4)
        m:eval()
        local e1, e2 = m(x), m(x)
        H.assert_close(e1, e2, 0, 0, 'eval is deterministic')
        m:train()
        local t1 = m(x)
        assert.is_true((t1 - e1):abs():max():item() > 1e-4, 'dropout changed nothing in training')
        -- one layer: nothing lies between layers, so dropout does nothing (as PyTorch)
        local one = nn.GRU(4, 6, {dropout = 0.5})
        H.assert_close(one(x), one:eval()(x), 0, 0, 'single layer')
    end)

    it('refuses a second derivative clearly (the backward runs native kernels)', function()
        local x = ddpl.randn(5, 2, 3, {requires_grad = true})
        local out = nn.LSTM(3, 4)(x)
        local g = ddpl.autograd.grad({out:sum()}, {x}, {create_graph = true})
        H.assert_error(function() g[1]:sum():backward() end, 'create_graph', 'LSTM')
        local _, h = nn.GRU(3, 4)(x)
        g = ddpl.autograd.grad({h:sum()}, {x}, {create_graph = true})
        H.assert_error(function() g[1]:sum():backward() end, 'create_graph', 'GRU')
    end)

    it('runs in the autocast dtype under autocast, as PyTorch\'s mkldnn_rnn_layer/cudnn_rnn',
       function()
        for _, ctor in ipairs({'LSTM', 'GRU'}) do
            for _, dt in ipairs({'bfloat16', 'float16'}) do
                ddpl.manual_seed(5)
                local m = nn[ctor](6, 8, {num_layers = 2, bidirectional = true})
                local x = ddpl.randn(5, 3, 6)
                local ref = m(x)
                ref:sum():backward()
                local gref = {}
                for i, p in ipairs(m:parameters()) do gref[i] = p.grad:clone() end
                m:zero_grad()
                local y, s = ddpl.autocast('cpu', {dtype = dt}, function() return m(x) end)
                local h_n = ctor == 'LSTM' and s[1] or s
                assert.are.equal(dt, H.dtype_name(y.dtype), ctor .. ' output dtype')
                assert.are.equal(dt, H.dtype_name(h_n.dtype), ctor .. ' h_n dtype')
                if ctor == 'LSTM' then assert.are.equal(dt, H.dtype_name(s[2].dtype)) end
                H.assert_close(y:float(), ref, 2e-2, 2e-2, ctor .. ' ' .. dt .. ' output')
                y:float():sum():backward()
                for i, p in ipairs(m:parameters()) do
                    assert.are.equal('float32', H.dtype_name(p.grad.dtype))
                    local rel = ((p.grad - gref[i]):norm() / gref[i]:norm()):item()
                    assert.is_true(rel < 3e-2, ctor .. ' ' .. dt .. ' parameter grad ' .. i
                                   .. ' relative error ' .. rel)
                end
                -- given float32 states are cast too, as autocast casts every eligible operand
                local h0 = ddpl.zeros(4, 3, 8)
                local hx = ctor == 'LSTM' and {h0, h0} or h0
                local y2 = ddpl.autocast('cpu', {dtype = dt}, function() return m(x, hx) end)
                H.assert_close(y2, y, 0, 0, ctor .. ' zero states given')
            end
        end
    end)

    -- The layer, forward and backward, runs with autocast off inside: its operands are already
    -- in the dtype it computes in. A backward inside the region is common PyTorch code.
    it('runs backward inside the autocast region', function()
        for _, ctor in ipairs({'LSTM', 'GRU'}) do
            for _, dt in ipairs({'bfloat16', 'float16'}) do
                ddpl.manual_seed(9)
                local m = nn[ctor](6, 8, {num_layers = 2})
                local x = ddpl.randn(5, 3, 6)
                m(x):sum():backward()
                local ref = m.weight_hh_l1.grad:clone()
                m:zero_grad()
                local y = ddpl.autocast('cpu', {dtype = dt}, function()
                    local out = m(x)
                    out:float():sum():backward()
                    return out
                end)
                assert.are.equal(dt, H.dtype_name(y.dtype))
                local g = m.weight_hh_l1.grad
                assert.are.equal('float32', H.dtype_name(g.dtype))
                local rel = ((g - ref):norm() / ref:norm()):item()
                assert.is_true(rel < 3e-2, ctor .. ' ' .. dt .. ' grad relative error ' .. rel)
            end
        end
    end)

    -- Where the CPU would widen each bf16 product to float32 (no AVX512-BF16, or
    -- DDPLUA_CPU_BF16_GEMM=0; float16 always), the layer computes in float32 and only its
    -- output is cast: the same dtypes, float32's values rounded once.
    it('computes in float32 where bf16 products would be widened (DDPLUA_CPU_BF16_GEMM=0)',
       function()
        local script = S.script_file([[
local ddpl = require 'ddplua'
assert(ddpl.config().cpu_bf16_gemm == 'widened', ddpl.config().cpu_bf16_gemm)
for _, ctor in ipairs({'LSTM', 'GRU'}) do
    ddpl.manual_seed(2)
    local m = ddpl.nn[ctor](6, 8, {num_layers = 2, bidirectional = true})
    local x = ddpl.randn(5, 3, 6)
    local ref = m(x)
    local y, s = ddpl.autocast('cpu', {dtype = 'bfloat16'}, function() return m(x) end)
    local h_n = ctor == 'LSTM' and s[1] or s
    y:float():sum():backward()
    print(ctor, y.dtype, h_n.dtype, (y:float() - ref):abs():max():item(),
          m.weight_hh_l0.grad.dtype)
end
]])
        local out, code = S.sh('DDPLUA_CPU_BF16_GEMM=0 ' .. S.q(S.bin) .. ' ' .. S.q(script))
        os.remove(script)
        assert.are.equal(0, code, out)
        local seen = 0
        for ctor, ydt, hdt, diff, gdt in out:gmatch('(%u%u%u%u?)\t(%w+)\t(%w+)\t(%S+)\t(%w+)') do
            seen = seen + 1
            assert.are.equal('bfloat16', ydt, ctor .. ' output: ' .. out)
            assert.are.equal('bfloat16', hdt, ctor .. ' h_n: ' .. out)
            assert.are.equal('float32', gdt, ctor .. ' gradient: ' .. out)
            assert.is_true(tonumber(diff) < 2e-2, ctor .. ' output differs by ' .. diff)
        end
        assert.are.equal(2, seen, out)
    end)

    it('keeps float64 parameters in float64 under autocast (16-bit inputs cast up)', function()
        local m = nn.LSTM(3, 4, {num_layers = 2, dtype = 'float64'})
        local x = ddpl.randn(5, 2, 3):bfloat16()
        local ref = m(x:double())
        local y, s = ddpl.autocast('cpu', function() return m(x) end)
        assert.are.equal('float64', H.dtype_name(y.dtype))
        assert.are.equal('float64', H.dtype_name(s[2].dtype))
        H.assert_close(y, ref, 0, 0, 'autocast output')
    end)

    it('bfloat16 and float16 cells compute in float32 and round once', function()
        ddpl.manual_seed(8)
        for _, dt in ipairs({'bfloat16', 'float16'}) do
            local ig, hg, c = ddpl.randn(3, 16):to(dt), ddpl.randn(3, 16):to(dt),
                              ddpl.randn(3, 4):to(dt)
            local h1, c1 = F._fused_lstm_cell(ig, hg, c)
            local h32, c32 = F._fused_lstm_cell(ig:float(), hg:float(), c:float())
            H.assert_close(h1, h32:to(dt), 0, 0, dt .. ' LSTM cell h')
            H.assert_close(c1, c32:to(dt), 0, 0, dt .. ' LSTM cell c')
            local ig3, hg3, h = ddpl.randn(3, 12):to(dt), ddpl.randn(3, 12):to(dt),
                                ddpl.randn(3, 4):to(dt)
            H.assert_close(F._fused_gru_cell(ig3, hg3, h),
                           F._fused_gru_cell(ig3:float(), hg3:float(), h:float()):to(dt), 0, 0,
                           dt .. ' GRU cell h')
        end
    end)

    it('trains with bfloat16 and float16 parameters (close to float32)', function()
        for _, ctor in ipairs({'LSTM', 'GRU'}) do
            for _, dt in ipairs({'bfloat16', 'float16'}) do
                ddpl.manual_seed(6)
                local m32 = nn[ctor](5, 8, {num_layers = 2, bidirectional = true})
                local m16 = nn[ctor](5, 8, {num_layers = 2, bidirectional = true, dtype = dt})
                local sd = {}
                for k, v in pairs(m32:state_dict()) do sd[k] = v:to(dt) end
                m16:load_state_dict(sd)
                local x = ddpl.randn(7, 3, 5)
                local x16 = x:to(dt)
                x16.requires_grad = true
                local y16, y32 = m16(x16), m32(x)
                assert.are.equal(dt, H.dtype_name(y16.dtype))
                H.assert_close(y16:float(), y32, 3e-2, 3e-2, ctor .. ' ' .. dt .. ' output')
                y16:float():sum():backward()
                assert.are.equal(dt, H.dtype_name(m16.weight_hh_l0.grad.dtype))
                assert.is_true(x16.grad:float():abs():sum():item() > 0)
            end
        end
    end)

    it('prints like PyTorch', function()
        assert.are.equal('LSTM(10, 20, num_layers=2, batch_first=True, dropout=0.1, '
                         .. 'bidirectional=True)',
                         tostring(nn.LSTM(10, 20, {num_layers = 2, batch_first = true,
                                                   dropout = 0.1, bidirectional = true})))
        assert.are.equal('GRU(3, 4, bias=False)', tostring(nn.GRU(3, 4, {bias = false})))
    end)
end)

describe('LSTM and GRU bad input', function()
    local lstm, gru = nn.LSTM(3, 4, {num_layers = 2}), nn.GRU(3, 4)

    it('names the layer and the shapes', function()
        H.assert_error(function() lstm(ddpl.randn(5, 2, 6)) end, 'LSTM', '3 features',
                       '[5,2,6]')
        H.assert_error(function() gru(ddpl.randn(5, 2, 6)) end, 'GRU', '[5,2,6]')
        H.assert_error(function() lstm(ddpl.randn(5)) end, 'LSTM', '3-D', '[5]')
        H.assert_error(function() gru(ddpl.randn(1, 5, 2, 3)) end, 'GRU', '[1,5,2,3]')
        H.assert_error(function() lstm(ddpl.randn(5, 2, 3), {ddpl.zeros(1, 2, 4),
                                                              ddpl.zeros(2, 2, 4)}) end,
                       'LSTM', 'h_0', '[2,2,4]', '[1,2,4]')
        H.assert_error(function() lstm(ddpl.randn(5, 2, 3), {ddpl.zeros(2, 2, 4),
                                                              ddpl.zeros(2, 3, 4)}) end,
                       'LSTM', 'c_0', '[2,2,4]', '[2,3,4]')
        H.assert_error(function() gru(ddpl.randn(5, 2, 3), ddpl.zeros(1, 4)) end, 'GRU',
                       'h_0', '[1,2,4]', '[1,4]')
        H.assert_error(function() gru(ddpl.randn(5, 3), ddpl.zeros(1, 2, 4)) end, 'GRU',
                       'h_0', '[1,4]')
        H.assert_error(function() lstm(ddpl.randn(5, 2, 3), ddpl.zeros(2, 2, 4)) end, 'LSTM',
                       '{h_0, c_0}')
        H.assert_error(function() gru(ddpl.randn(0, 2, 3)) end, 'GRU', 'no time steps')
    end)

    it('names the dtypes', function()
        H.assert_error(function() lstm(ddpl.randn(5, 2, 3, {dtype = 'float64'})) end, 'LSTM',
                       'float64', 'float32')
        H.assert_error(function() gru(ddpl.randn(5, 2, 3), ddpl.zeros(1, 2, 4,
                                                                   {dtype = 'float64'})) end,
                       'GRU', 'h_0', 'float64')
        H.assert_error(function() gru(ddpl.ones(5, 2, 3, {dtype = 'int64'})) end, 'GRU', 'int64')
    end)

    it('checks constructor arguments', function()
        H.assert_error(function() nn.LSTM(3, 0) end, 'LSTM', 'hidden_size')
        H.assert_error(function() nn.GRU(3, 4, {dropout = 2}) end, 'GRU', 'dropout')
        H.assert_error(function() nn.GRU(3, 4, {proj_size = 2}) end, 'GRU', 'proj_size')
        H.assert_error(function() nn.LSTM(3, 4, {bidirectional = 1}) end, 'LSTM', 'boolean')
    end)

    it('the native pieces name themselves and the shapes', function()
        H.assert_error(function() F._fused_lstm_cell(ddpl.randn(2, 8), ddpl.randn(2, 8),
                                                     ddpl.randn(2, 3)) end,
                       'lstm_cell', '[2,8]', '[2,3]')
        H.assert_error(function() F._fused_gru_cell(ddpl.randn(2, 6), ddpl.randn(2, 6),
                                                    ddpl.randn(2, 2, {dtype = 'float64'})) end,
                       'gru_cell', 'float64')
        H.assert_error(function() F._lstm_layer(ddpl.randn(3, 2, 8), ddpl.randn(8, 2),
                                                ddpl.randn(3, 2), ddpl.randn(2, 2)) end,
                       'LSTM', 'h_0', '[2,2]', '[3,2]')
        H.assert_error(function() F._gru_layer(ddpl.randn(3, 2, 6), ddpl.randn(6, 3),
                                               nil, ddpl.randn(2, 2)) end,
                       'GRU', 'weight_hh', '[6,3]')
    end)
end)
