-- spec/nn/attention_spec.lua: the fused scaled dot-product attention (ATTENTION kernels) against
-- PyTorch (spec/fixtures/attention.lua) and against the composition of matmul, masking and
-- softmax. On the CPU (the flash kernel of cpu/cpu_attention.c, the default for every call it
-- covers; the threshold knob that forces the composition is checked too): the fused path is
-- taken for 4-D unmasked inputs (grad_fn), matches the composition (forced by an explicit
-- all-true or causal bool mask) in values and gradients for L = S and L != S, E != Ev, odd head
-- sizes, causal or not, T = 1, queries and keys spanning several of the kernel's tiles with sizes
-- that are not multiples of a block, non-contiguous inputs (head views taken in place, other
-- layouts copied, expanded heads) and a custom scale, at 1 and 2 threads; the output's (B,L,H,Ev)
-- layout and the gradients' (head views of a split projection get (B,T,H,E) gradients, equal to
-- the composition's through the split); float64 gradcheck of the fused backward, also across tiles. On CUDA (pending without a device): the fused kernel against the CPU
-- reference for head sizes 64 and 128 and odd ones, float32, bfloat16 and float16, causal or
-- not; head sizes over the kernel's limit fall back to the composition.
local H = require 'helpers'
local ddpl = H.ddpl
local F = ddpl.F

local FUSED = 'ScaledDotProductAttentionBackward0'
-- the CPU's default: fused from this many bytes of (B,H,L,S) scores (0: always)
local CPU_DEFAULT_MIN_BYTES = ddpl._sdpa_cpu_fused_min_bytes(0)

-- Deterministic values in [-2, 2) (an LCG, so cpu and cuda runs see the same inputs).
local function data(shape, seed, dtype) return H.lcg(shape, seed, 4, dtype or 'float64') end

-- The (L,S) bool mask that keeps what is_causal keeps (key j visible to query i when j <= i),
-- or everything.
local function keep_mask(L, S, causal)
    local rows = {}
    for i = 1, L do
        rows[i] = {}
        for j = 1, S do rows[i][j] = not causal or j <= i end
    end
    return ddpl.tensor(rows)
end

local function leaf(t)
    t = t:detach():clone()
    t.requires_grad = true
    return t
end

-- Runs attention on fresh leaves copied from q, k, v and backpropagates gy; returns the output
-- and the three gradients. `composed` forces the composition with an equivalent bool mask.
local function run(q, k, v, gy, opts, composed)
    local ql, kl, vl = leaf(q), leaf(k), leaf(v)
    local o = {is_causal = opts.causal, scale = opts.scale}
    if composed then
        o = {attn_mask = keep_mask(q:size(2), k:size(2), opts.causal):to(q.device),
             scale = opts.scale}
    end
    local y = F.scaled_dot_product_attention(ql, kl, vl, o)
    y:backward(gy)
    return y, ql.grad, kl.grad, vl.grad
end

local function shape_name(s) return table.concat(s, 'x') end

-- B, H, L, S, E, Ev
local cpu_cases = {
    {2, 3, 5, 5, 8, 8},
    {1, 2, 7, 4, 6, 3},   -- L > S, E != Ev
    {2, 1, 3, 9, 4, 5},   -- L < S
    {1, 2, 70, 150, 16, 8}, -- keys span three 64-key blocks
    {1, 1, 1, 1, 1, 1},
    {1, 1, 1, 130, 5, 3},  -- one query, keys over three backward key blocks
    -- several forward key tiles (float32 512 keys, float64 256) and backward query tiles
    -- (256 and 128 rows), no size a multiple of a block
    {1, 1, 300, 600, 5, 3},
    {2, 2, 200, 70, 7, 9}, -- L > S, odd head sizes
}

-- PyTorch's values (tools/gen_attention_fixtures.py); every case takes the fused path
local function sdpa_fixture(q, k, v, o)
    local y = F.scaled_dot_product_attention(q, k, v, {is_causal = o.is_causal, scale = o.scale})
    assert.are.equal(FUSED, y.grad_fn)
    return y
end

describe('fused attention matches PyTorch', function()
    H.run_cases(H.fixture('attention'), {
        sdpa = function(ins, o) return sdpa_fixture(ins[1], ins[2], ins[3], o) end,
        -- stored (B,L,H,E), attended as (B,H,L,E)
        sdpa_bhle = function(ins, o)
            return sdpa_fixture(ins[1]:transpose(1, 2), ins[2]:transpose(1, 2),
                                ins[3]:transpose(1, 2), o)
        end,
    }, it)
end)

describe('fused attention on the cpu', function()
    it('by default fuses every call the kernel covers; the threshold forces the composition',
       function()
        ddpl._sdpa_cpu_fused_min_bytes(CPU_DEFAULT_MIN_BYTES)
        local ok, err = pcall(function()
            assert.are.equal(0, CPU_DEFAULT_MIN_BYTES)
            local q = leaf(data({2, 2, 3, 4}, 1))
            assert.are.equal(FUSED, F.scaled_dot_product_attention(q, q, q).grad_fn)
            -- 2*2*3*3 float64 scores = 288 bytes: composed from 289 on, fused again at 288
            ddpl._sdpa_cpu_fused_min_bytes(289)
            assert.are_not.equal(FUSED, F.scaled_dot_product_attention(q, q, q).grad_fn)
            ddpl._sdpa_cpu_fused_min_bytes(288)
            assert.are.equal(FUSED, F.scaled_dot_product_attention(q, q, q).grad_fn)
        end)
        ddpl._sdpa_cpu_fused_min_bytes(0)
        assert(ok, err)
    end)

    it('is the path 4-D unmasked inputs take; masks and broadcasting compose', function()
        local q, k, v = leaf(data({2, 2, 3, 4}, 1)), leaf(data({2, 2, 5, 4}, 2)),
                        leaf(data({2, 2, 5, 3}, 3))
        assert.are.equal(FUSED, F.scaled_dot_product_attention(q, k, v).grad_fn)
        assert.are.equal(FUSED, F.scaled_dot_product_attention(q, k, v, {is_causal = true}).grad_fn)
        local m = keep_mask(3, 5, false)
        assert.are_not.equal(FUSED,
                             F.scaled_dot_product_attention(q, k, v, {attn_mask = m}).grad_fn)
        local kb, vb = leaf(data({1, 2, 5, 4}, 4)), leaf(data({1, 2, 5, 3}, 5))
        local y = F.scaled_dot_product_attention(q, kb, vb)
        assert.are_not.equal(FUSED, y.grad_fn)
        assert.are.same({2, 2, 3, 3}, H.shape(y))
    end)

    for _, dtype in ipairs({'float64', 'float32'}) do
        local rtol, atol = H.tolerance(dtype)
        if dtype == 'float64' then rtol, atol = 1e-10, 1e-12 end
        for _, c in ipairs(cpu_cases) do
            for _, causal in ipairs({false, true}) do
                local B, Hh, L, S, E, Ev = table.unpack(c)
                local name = string.format('%s %s%s', dtype, shape_name(c),
                                           causal and ' causal' or '')
                it('matches the composition in values and gradients, ' .. name, function()
                    local q = data({B, Hh, L, E}, 11, dtype)
                    local k = data({B, Hh, S, E}, 12, dtype)
                    local v = data({B, Hh, S, Ev}, 13, dtype)
                    local gy = data({B, Hh, L, Ev}, 14, dtype)
                    local opts = {causal = causal}
                    local y2, dq2, dk2, dv2 = run(q, k, v, gy, opts, true)
                    -- one thread, then two (the work split over heads and query blocks)
                    local threads = ddpl.get_num_threads()
                    for _, nt in ipairs({1, 2}) do
                        ddpl.set_num_threads(nt)
                        local ok, err = pcall(function()
                            local y1, dq1, dk1, dv1 = run(q, k, v, gy, opts, false)
                            assert.are.equal(FUSED, y1.grad_fn)
                            local at = ' (' .. nt .. ' threads)'
                            H.assert_close(y1, y2, rtol, atol, 'y' .. at)
                            H.assert_close(dq1, dq2, rtol, atol, 'dq' .. at)
                            H.assert_close(dk1, dk2, rtol, atol, 'dk' .. at)
                            H.assert_close(dv1, dv2, rtol, atol, 'dv' .. at)
                        end)
                        ddpl.set_num_threads(threads)
                        assert(ok, err)
                    end
                end)
            end
        end
    end

    -- bfloat16 (autocast's dtype): the fused kernel's products on the bf16 GEMM with float32
    -- scores, softmax and sums, P and dS rounded to bf16 for the products that consume them (as
    -- PyTorch's CPU flash attention), against the float32 kernel on the same bf16 values. Where
    -- the CPU lacks AVX512-BF16 the call composes, within twice the bound.
    for _, c in ipairs(cpu_cases) do
        for _, causal in ipairs({false, true}) do
            local B, Hh, L, S, E, Ev = table.unpack(c)
            local name = string.format('%s%s', shape_name(c), causal and ' causal' or '')
            it('bfloat16 agrees with float32 on the same values within bf16 rounding, ' .. name,
               function()
                local q = data({B, Hh, L, E}, 11, 'float32'):bfloat16()
                local k = data({B, Hh, S, E}, 12, 'float32'):bfloat16()
                local v = data({B, Hh, S, Ev}, 13, 'float32'):bfloat16()
                local gy = data({B, Hh, L, Ev}, 14, 'float32'):bfloat16()
                local opts = {causal = causal}
                local ref = {run(q:float(), k:float(), v:float(), gy:float(), opts, false)}
                local got, first
                local threads = ddpl.get_num_threads()
                for _, nt in ipairs({1, 2}) do
                    ddpl.set_num_threads(nt)
                    local ok, err = pcall(function()
                        got = {run(q, k, v, gy, opts, false)}
                        if ddpl.config().cpu_bf16_gemm ~= 'widened' then
                            assert.are.equal(FUSED, got[1].grad_fn)
                        end
                        first = first or got
                        for i = 1, 4 do -- the same bits on 1 and 2 threads
                            assert.is_true(got[i]:equal(first[i]), 'result ' .. i .. ' threads')
                        end
                    end)
                    ddpl.set_num_threads(threads)
                    assert(ok, err)
                end
                -- a bf16 rounding is 2^-9 relative; P and dS add one each before a sum over S
                -- keys, so the bound is a few bf16 units of the largest value. The composition
                -- (no AVX512-BF16) also rounds the scores before the softmax, whose exponential
                -- turns a 2^-9 relative error of a score into an absolute one of the
                -- probability: twice the bound (measured: dv of 2x2x200x70x7x9 at 1.09 x 2^-6)
                local bound = ddpl.config().cpu_bf16_gemm ~= 'widened' and 2 ^ -6 or 2 ^ -5
                for i, what in ipairs({'y', 'dq', 'dk', 'dv'}) do
                    assert.are.equal('bfloat16', got[i].dtype, what)
                    local scale = math.max(ref[i]:abs():max():item(), 1e-3)
                    local diff = (got[i]:float() - ref[i]):abs():max():item()
                    assert(diff <= bound * scale,
                        ('%s: max|diff| %g, bound %g'):format(what, diff, bound * scale))
                end
            end)
        end
    end

    it('takes non-contiguous inputs and a custom scale', function()
        -- (B,L,H,E) transposed to (B,H,L,E), as a multi-head layer does
        local q = data({2, 5, 3, 4}, 21):transpose(1, 2)
        local k = data({2, 6, 3, 4}, 22):transpose(1, 2)
        local v = data({2, 6, 3, 2}, 23):transpose(1, 2)
        local gy = data({2, 3, 5, 2}, 24)
        for _, causal in ipairs({false, true}) do
            local opts = {causal = causal, scale = 0.3}
            local y1, dq1, dk1, dv1 = run(q, k, v, gy, opts, false)
            local y2, dq2, dk2, dv2 = run(q, k, v, gy, opts, true)
            assert.are.equal(FUSED, y1.grad_fn)
            H.assert_close(y1, y2, 1e-10, 1e-12, 'y')
            H.assert_close(dq1, dq2, 1e-10, 1e-12, 'dq')
            H.assert_close(dk1, dk2, 1e-10, 1e-12, 'dk')
            H.assert_close(dv1, dv2, 1e-10, 1e-12, 'dv')
        end
    end)

    it('takes strided heads in place, copies other layouts, lays the output out (B,L,H,Ev)',
       function()
        -- (B,T,3,H,E) as a fused qkv projection leaves it: q, k, v are head views with rows
        -- 3*H*E apart; a (B,H,E,L) tensor transposed has no unit column stride (copied);
        -- heads expanded from one (stride 0)
        local qkv = data({2, 70, 3, 2, 5}, 71)
        local function head(i) return qkv:select(2, i):transpose(1, 2) end -- (2,2,70,5)
        local kt = data({2, 2, 5, 70}, 72):transpose(2, 3)
        local vx = data({2, 1, 70, 5}, 73):expand(2, 2, 70, 5)
        local gy = data({2, 2, 70, 5}, 74)
        for _, causal in ipairs({false, true}) do
            for _, ins in ipairs({{head(0), head(1), head(2)}, {head(0), kt, vx}}) do
                local opts = {causal = causal}
                local y1, dq1, dk1, dv1 = run(ins[1], ins[2], ins[3], gy, opts, false)
                local y2, dq2, dk2, dv2 = run(ins[1]:contiguous(), ins[2]:contiguous(),
                                              ins[3]:contiguous(), gy, opts, true)
                assert.are.equal(FUSED, y1.grad_fn)
                H.assert_close(y1, y2, 1e-10, 1e-12, 'y')
                H.assert_close(dq1, dq2, 1e-10, 1e-12, 'dq')
                H.assert_close(dk1, dk2, 1e-10, 1e-12, 'dk')
                H.assert_close(dv1, dv2, 1e-10, 1e-12, 'dv')
                -- merging the heads is free: (B,H,L,Ev) transposed back is contiguous
                assert.is_true(y1:transpose(1, 2):is_contiguous())
                assert.is_false(y1:is_contiguous())
            end
        end
    end)

    it('lays the gradients of head views out as the heads (B,T,H,E), of other inputs contiguous',
       function()
        -- a transformer's q, k, v: a (B,T,3*H*E) projection split, each viewed (B,T,H,E) and
        -- transposed; the gradient reaching x must equal the composition's
        local B, T, Hh, E = 2, 37, 3, 4
        local x0 = data({B, T, 3 * Hh * E}, 81)
        local gy = data({B, T, Hh * E}, 82)
        local function through(composed)
            local x = leaf(x0)
            local parts = x:split(Hh * E, 2)
            local heads, layouts = {}, {}
            for i = 1, 3 do
                heads[i] = parts[i]:view(B, T, Hh, E):transpose(1, 2)
                heads[i]:register_hook(function(g)
                    layouts[i] = g:transpose(1, 2):is_contiguous()
                end)
            end
            local o = {is_causal = true}
            if composed then o = {attn_mask = keep_mask(T, T, true)} end
            local y = F.scaled_dot_product_attention(heads[1], heads[2], heads[3], o)
            if not composed then assert.are.equal(FUSED, y.grad_fn) end
            y:transpose(1, 2):contiguous():view(B, T, Hh * E):backward(gy)
            return x.grad, layouts
        end
        local g1, layouts = through(false)
        local g2 = through(true)
        H.assert_close(g1, g2, 1e-10, 1e-12, 'dx')
        for i = 1, 3 do assert.is_true(layouts[i], 'gradient ' .. i .. ' laid out (B,T,H,E)') end
        -- a contiguous (B,H,L,E) input gets a contiguous gradient
        local q = leaf(data({B, Hh, T, E}, 83))
        local seen
        q:register_hook(function(g) seen = g:is_contiguous() end)
        F.scaled_dot_product_attention(q, q:detach(), q:detach()):sum():backward()
        assert.is_true(seen)
    end)

    it('passes gradcheck in float64', function()
        -- the last: two query blocks and two backward key blocks, both partial
        for _, c in ipairs({{1, 2, 3, 4, 3, 2}, {2, 1, 4, 2, 2, 3}, {1, 1, 70, 70, 3, 2}}) do
            local B, Hh, L, S, E, Ev = table.unpack(c)
            for _, causal in ipairs({false, true}) do
                local q, k, v = leaf(data({B, Hh, L, E}, 31)), leaf(data({B, Hh, S, E}, 32)),
                                leaf(data({B, Hh, S, Ev}, 33))
                assert.is_true(ddpl.autograd.gradcheck(function(a, b, cc)
                    return F.scaled_dot_product_attention(a, b, cc, {is_causal = causal})
                end, {q, k, v}, {atol = 1e-7, rtol = 1e-6}))
            end
        end
    end)

    it('saves its inputs: modifying one in place before backward is an error', function()
        local q, k, v = leaf(data({1, 1, 2, 2}, 41)), data({1, 1, 2, 2}, 42),
                        data({1, 1, 2, 2}, 43)
        local y = F.scaled_dot_product_attention(q, k, v)
        k:add_(1)
        assert.has_error(function() y:sum():backward() end)
    end)
end)

-- ---- CUDA: fused kernel against the cpu reference ----

local function no_cuda()
    if ddpl.cuda.is_available() then return false end
    pending('no CUDA device')
    return true
end

local function cuda_parity(c, dtype, causal, expect_fused)
    local B, Hh, L, S, E, Ev = table.unpack(c)
    -- inputs rounded to the dtype once, so both devices see the same values
    local function inp(shape, seed) return data(shape, seed, dtype):float() end
    local q, k, v = inp({B, Hh, L, E}, 51), inp({B, Hh, S, E}, 52), inp({B, Hh, S, Ev}, 53)
    local gy = inp({B, Hh, L, Ev}, 54)
    local opts = {causal = causal}
    -- reference: float32 on the cpu from the same (rounded) values
    local y1, dq1, dk1, dv1 = run(q, k, v, gy, opts, false)
    local dc = function(t) return t:to('cuda'):to(dtype) end
    local y2, dq2, dk2, dv2 = run(dc(q), dc(k), dc(v), dc(gy), opts, false)
    if expect_fused then assert.are.equal(FUSED, y2.grad_fn) end
    assert.are.equal(dtype, H.dtype_name(y2.dtype))
    local tol = dtype == 'float32' and 2e-4 or dtype == 'float16' and 1e-2 or 4e-2
    local function cmp(got, want, what)
        H.assert_close(got:cpu():float(), want, tol, tol, what)
    end
    cmp(y2, y1, 'y')
    cmp(dq2, dq1, 'dq')
    cmp(dk2, dk1, 'dk')
    cmp(dv2, dv1, 'dv')
end

describe('fused attention on cuda', function()
    local cases = {
        {2, 3, 64, 64, 64, 64},
        {1, 2, 100, 37, 64, 64},   -- partial query and key tiles, L > S
        {1, 2, 33, 130, 128, 128}, -- L < S
        {2, 2, 17, 17, 40, 24},    -- odd head sizes, E != Ev
        {1, 1, 1, 1, 8, 8},
    }
    for _, dtype in ipairs({'float32', 'bfloat16', 'float16'}) do
        for _, c in ipairs(cases) do
            for _, causal in ipairs({false, true}) do
                local name = string.format('%s %s%s', dtype, shape_name(c),
                                           causal and ' causal' or '')
                it('matches the cpu, ' .. name, function()
                    if no_cuda() then return end
                    cuda_parity(c, dtype, causal, true)
                end)
            end
        end
    end

    it('composes for head sizes over the kernel limit and for float64', function()
        if no_cuda() then return end
        cuda_parity({1, 2, 9, 11, 160, 32}, 'float32', true, false)
        local q = data({1, 2, 5, 8}, 61)
        local y1 = F.scaled_dot_product_attention(q, q, q, {is_causal = true})
        local y2 = F.scaled_dot_product_attention(q:cuda(), q:cuda(), q:cuda(), {is_causal = true})
        H.assert_close(y2:cpu(), y1, 1e-10, 1e-12, 'float64 y')
    end)

    it('runs GPT-2 sized causal heads (L=1024, E=64) in bfloat16', function()
        if no_cuda() then return end
        cuda_parity({1, 2, 1024, 1024, 64, 64}, 'bfloat16', true, true)
    end)
end)
