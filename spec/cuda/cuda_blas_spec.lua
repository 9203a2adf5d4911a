-- spec/cuda/cuda_blas_spec.lua: cuBLAS matmul and cuDNN conv2d against the CPU kernels (ggml's
-- test-backend-ops idea), in float32, float64, bfloat16 and float16: plain, transposed,
-- strided (no unit stride: packed copies), batched with broadcast, empty, addmm's alpha/beta,
-- conv2d with stride/padding/dilation/groups and bias; forward values and gradients. Also
-- TF32 under set_float32_matmul_precision('high') and autocast('cuda') result dtypes.
-- In the emulation build, conv2d's algorithm choice under DDPL_CUEMU_CUDNN_HEURISTICS (the
-- cuDNN stand-in's knob, tools/cuemu/cudnn/cudnn_algo.c), in child processes.
-- Pending without a CUDA device (the knob's cases: without the emulation).
local H = require 'helpers'
local S = require 'shell_util'
local ddpl = H.ddpl
local F = ddpl.F

local function no_cuda()
    if ddpl.cuda.is_available() then return false end
    pending('no CUDA device')
    return true
end

-- Deterministic values in [-1, 1), rounded to float32 first.
local function data(shape, seed, dtype)
    return H.lcg(shape, seed, 2, 'float32'):to(dtype or 'float32')
end

-- (rtol, atol) of a cuda-vs-cpu comparison in dtype for sums of about k products of values
-- in [-1, 1): 16-bit results are rounded once from float32 accumulations on both sides.
local function tol(dtype, k)
    k = k or 16
    if dtype == 'float64' then return 1e-10, 1e-10 * k end
    if dtype == 'float32' then return 1e-4, 2e-5 * k end
    if dtype == 'bfloat16' then return 2e-2, 1e-2 * math.sqrt(k) end
    return 4e-3, 2e-3 * math.sqrt(k) -- float16
end

local function compare(got, want, rtol, atol, what)
    assert.are.equal(H.dtype_name(want.dtype), H.dtype_name(got.dtype), what .. ': dtype')
    assert.are.equal('cuda', tostring(got.device):sub(1, 4), what .. ': device')
    H.assert_values(H.values(got:cpu():double()), H.values(want:double()), H.shape(want), rtol,
                    atol, what)
end

-- Runs fn(inputs...) on the cpu and on cuda copies (leaves require grad), backpropagates the
-- same upstream gradient, compares the result and every gradient. prep(t) may turn each
-- device's leaf into the operand actually used (a transposed or strided view).
local function parity(what, inputs, fn, rtol, atol, prep)
    prep = prep or function(t) return t end
    local gy
    local function run(dev)
        local leaves, args = {}, {}
        for i, t in ipairs(inputs) do
            leaves[i] = t:clone():to(dev)
            leaves[i].requires_grad = true
            args[i] = prep(leaves[i], i)
        end
        local y = fn(table.unpack(args))
        if not gy then
            gy = data(H.shape(y), 977, H.dtype_name(y.dtype))
        end
        if y:numel() > 0 then y:backward(gy:to(dev)) end
        return y, leaves
    end
    local want, wl = run('cpu')
    local got, gl = run('cuda')
    compare(got, want, rtol, atol, what .. ' result')
    if want:numel() > 0 then
        for i = 1, #wl do
            compare(gl[i].grad, wl[i].grad, rtol, atol, what .. ' grad ' .. i)
        end
    end
end

local dtypes = {'float32', 'float64', 'bfloat16', 'float16'}

describe('cuda matmul (cuBLAS)', function()
    for _, dt in ipairs(dtypes) do
        it('2-D, all four transpose combinations, ' .. dt, function()
            if no_cuda() then return end
            for ta = 0, 1 do
                for tb = 0, 1 do
                    -- stored so that the used operand is (37,29) @ (29,23)
                    local a = ta == 1 and data({29, 37}, 1, dt) or data({37, 29}, 1, dt)
                    local b = tb == 1 and data({23, 29}, 2, dt) or data({29, 23}, 2, dt)
                    local rt, at = tol(dt, 29)
                    parity(string.format('matmul %s t%d%d', dt, ta, tb), {a, b}, function(x, y)
                        return x:matmul(y)
                    end, rt, at, function(t, i)
                        local tr = (i == 1 and ta == 1) or (i == 2 and tb == 1)
                        return tr and t:t() or t
                    end)
                end
            end
        end)

        it('operands without a unit stride (packed), ' .. dt, function()
            if no_cuda() then return end
            -- select(2, 1) of (M, K, 3) has strides (3K, 3): neither row- nor column-major
            local a, b = data({9, 13, 3}, 3, dt), data({13, 7, 2}, 4, dt)
            local rt, at = tol(dt, 13)
            parity('matmul strided ' .. dt, {a, b}, function(x, y) return x:matmul(y) end, rt,
                   at, function(t, i) return t:select(2, i == 1 and 1 or 0) end)
        end)

        it('batched with broadcast batch dims and vectors, ' .. dt, function()
            if no_cuda() then return end
            local rt, at = tol(dt, 12)
            parity('bmm ' .. dt, {data({5, 6, 12}, 5, dt), data({5, 12, 4}, 6, dt)},
                   function(x, y) return x:bmm(y) end, rt, at)
            parity('matmul broadcast ' .. dt, {data({3, 1, 6, 12}, 7, dt), data({2, 12, 4}, 8, dt)},
                   function(x, y) return x:matmul(y) end, rt, at)
            parity('matmul folded ' .. dt, {data({3, 4, 12}, 9, dt), data({12, 5}, 10, dt)},
                   function(x, y) return x:matmul(y) end, rt, at)
            parity('matmul batched transposed ' .. dt,
                   {data({4, 12, 6}, 11, dt), data({4, 5, 12}, 12, dt)},
                   function(x, y) return x:matmul(y) end, rt, at,
                   function(t) return t:transpose(1, 2) end)
            parity('matmul vec ' .. dt, {data({12}, 13, dt), data({3, 12, 5}, 14, dt)},
                   function(x, y) return x:matmul(y) end, rt, at)
        end)

        it('addmm with alpha and beta, and linear, ' .. dt, function()
            if no_cuda() then return end
            local rt, at = tol(dt, 20)
            parity('addmm ' .. dt, {data({8}, 15, dt), data({6, 20}, 16, dt), data({20, 8}, 17, dt)},
                   function(c, x, y) return ddpl.addmm(c, x, y, {beta = 0.5, alpha = 2}) end, rt,
                   2 * at)
            parity('linear ' .. dt, {data({2, 3, 20}, 18, dt), data({7, 20}, 19, dt), data({7}, 20, dt)},
                   function(x, w, b) return F.linear(x, w, b) end, rt, at)
        end)
    end

    it('handles empty products (K = 0 gives zeros, M = 0 gives an empty result)', function()
        if no_cuda() then return end
        local a, b = ddpl.zeros(4, 0, {device = 'cuda'}), ddpl.zeros(0, 3, {device = 'cuda'})
        local y = a:matmul(b)
        assert.are.same({4, 3}, H.shape(y))
        assert.are.equal(0, y:abs():sum():item())
        local c = ddpl.addmm(ddpl.ones(4, 3, {device = 'cuda'}), a, b, {beta = 3})
        assert.are.equal(36, c:sum():item())
        assert.are.same({0, 3}, H.shape(ddpl.zeros(0, 5, {device = 'cuda'}):matmul(
            ddpl.zeros(5, 3, {device = 'cuda'}))))
    end)

    -- addmm with an empty inner dim is beta * input, as on the cpu (torch too): an inf in the
    -- input stays inf whatever beta is, and the products round once (the first version computed
    -- c + (beta - 1) * c: NaN for an inf with beta 1 or 0.5)
    it('K = 0 scales the input by beta exactly as the cpu does, infinities included', function()
        if no_cuda() then return end
        local c = ddpl.tensor({{1, math.huge, -math.huge}, {0.1, -0.3, 7}})
        local a, b = ddpl.zeros(2, 0), ddpl.zeros(0, 3)
        for _, beta in ipairs({1, 0.5, 3, -2}) do
            local want = ddpl.addmm(c, a, b, {beta = beta})
            local got = ddpl.addmm(c:cuda(), a:cuda(), b:cuda(), {beta = beta}):cpu()
            assert.are.same(H.values(want), H.values(got), 'beta ' .. beta)
        end
    end)

    it('refuses integer dtypes with a clear error', function()
        if no_cuda() then return end
        local a = ddpl.ones(2, 2, {dtype = 'int64', device = 'cuda'})
        H.assert_error(function() return a:matmul(a) end, 'matmul', 'int64', 'cuda')
    end)

    it("uses TF32 only under precision 'high', within TF32's precision", function()
        if no_cuda() then return end
        local a, b = data({64, 256}, 21), data({256, 48}, 22)
        local want = a:matmul(b)
        ddpl.set_float32_matmul_precision('high')
        local ok, err = pcall(function()
            compare(a:cuda():matmul(b:cuda()), want, 1e-2, 2e-2, 'tf32 matmul')
            local x, w = data({2, 8, 9, 9}, 23), data({16, 8, 3, 3}, 24)
            compare(F.conv2d(x:cuda(), w:cuda(), nil, {padding = 1}), F.conv2d(x, w, nil,
                    {padding = 1}), 1e-2, 2e-2, 'tf32 conv2d')
        end)
        ddpl.set_float32_matmul_precision('highest')
        assert(ok, err)
        compare(a:cuda():matmul(b:cuda()), want, 1e-4, 1e-4, 'highest matmul')
    end)
end)

describe('cuda conv2d (cuDNN)', function()
    local configs = {
        {name = 'plain 3x3', x = {2, 3, 9, 9}, w = {4, 3, 3, 3}, o = {}},
        {name = 'stride 2 padding 1', x = {2, 4, 10, 11}, w = {6, 4, 3, 3}, o = {stride = 2, padding = 1}},
        {name = 'dilation 2 groups 2', x = {1, 4, 12, 12}, w = {6, 2, 3, 3}, o = {dilation = 2, padding = 2, groups = 2}},
        {name = '1x1', x = {3, 8, 5, 5}, w = {5, 8, 1, 1}, o = {}},
        {name = 'depthwise 5x3', x = {2, 6, 8, 7}, w = {6, 1, 5, 3}, o = {padding = {2, 1}, groups = 6}},
    }
    for _, dt in ipairs(dtypes) do
        for i, c in ipairs(configs) do
            it(c.name .. ', with bias, ' .. dt, function()
                if no_cuda() then return end
                local k = c.w[2] * c.w[3] * c.w[4]
                local rt, at = tol(dt, k)
                parity('conv2d ' .. c.name .. ' ' .. dt,
                       {data(c.x, 30 + i, dt), data(c.w, 40 + i, dt), data({c.w[1]}, 50 + i, dt)},
                       function(x, w, b) return F.conv2d(x, w, b, c.o) end, rt, 4 * at)
            end)
        end
        it('without bias, ' .. dt, function()
            if no_cuda() then return end
            local rt, at = tol(dt, 27)
            parity('conv2d nobias ' .. dt, {data({2, 3, 7, 7}, 61, dt), data({4, 3, 3, 3}, 62, dt)},
                   function(x, w) return F.conv2d(x, w, nil, {padding = 1}) end, rt, 4 * at)
        end)
    end
end)

-- The engine's algorithm choice (engine/cuda/cuda_conv.c: choose_algo, PICK_ALGO) on search
-- results the stand-in only gives under DDPL_CUEMU_CUDNN_HEURISTICS: none (cudnnGet*_v7 offers
-- nothing runnable: the engine must fall back to cudnnFind*) and conversion_first (both searches
-- first offer an algorithm that runs only under CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION, on inputs
-- rounded to float16: strict float32 must pass over it). The knob is read when a search runs,
-- and the engine caches its choice per shape, so each mode runs in a child ddplua of its own,
-- which prints "MAXDIFF <dtype> <max |cuda - cpu|>" over conv2d's result and its three
-- gradients.
local KNOB_CHILD = [[
local F = ddpl.F
-- strict float32 (FMA math only) unless the spec asks for 'high' (TF32 allowed)
ddpl.set_float32_matmul_precision(os.getenv('KNOB_PRECISION') or 'highest')
for _, dt in ipairs({...}) do
    ddpl.manual_seed(5)
    local x, w, b = ddpl.randn(2, 4, 9, 8), ddpl.randn(6, 2, 3, 3), ddpl.randn(6)
    local gy
    local function run(dev)
        local leaves = {}
        for i, t in ipairs({x, w, b}) do
            leaves[i] = t:detach():to(dt):to(dev) -- a leaf of its own, x itself untouched
            leaves[i].requires_grad = true
        end
        local y = F.conv2d(leaves[1], leaves[2], leaves[3], {padding = 1, groups = 2})
        gy = gy or ddpl.randn(table.unpack(y:size()))
        y:backward(gy:to(dt):to(dev))
        return {y, leaves[1].grad, leaves[2].grad, leaves[3].grad}
    end
    local want, got = run('cpu'), run('cuda')
    local diff = 0
    for i = 1, 4 do
        assert(tostring(got[i].device):sub(1, 4) == 'cuda', 'not computed on cuda')
        diff = math.max(diff, (got[i]:cpu():double() - want[i]:double()):abs():max():item())
    end
    print(('MAXDIFF %s %.6g'):format(dt, diff))
end
]]

-- Runs KNOB_CHILD for the dtypes with DDPL_CUEMU_CUDNN_HEURISTICS=mode; returns its output, its
-- exit status and {dtype = max abs difference}.
local function run_knob_child(mode, dtypes, precision)
    local path = os.tmpname()
    S.write(path, KNOB_CHILD)
    local out, code = S.sh(('KNOB_PRECISION=%s DDPL_CUEMU_CUDNN_HEURISTICS=%s timeout 120 %s %s %s')
        :format(S.q(precision or 'highest'), S.q(mode), S.q(S.bin), S.q(path),
            table.concat(dtypes, ' ')))
    os.remove(path)
    local diffs = {}
    for dt, v in out:gmatch('MAXDIFF (%S+) (%S+)') do diffs[dt] = tonumber(v) end
    return out, code, diffs
end

-- Asserts the child succeeded and every dtype's difference is within its bound: sums of up to
-- 144 products of N(0,1) values (backward filter), the same loops on both sides in float32 and
-- float64; float16 inputs would put float32 differences near 1e-2.
local function assert_knob_child(mode, dtypes, bounds, precision)
    local out, code, diffs = run_knob_child(mode, dtypes, precision)
    assert(code == 0, ('child with DDPL_CUEMU_CUDNN_HEURISTICS=%s failed (exit %s):\n%s'):format(
        mode, tostring(code), out))
    for _, dt in ipairs(dtypes) do
        local d = diffs[dt]
        assert(d and d <= bounds[dt], ('%s, %s: max |cuda - cpu| %s, bound %g:\n%s'):format(mode,
            dt, tostring(d), bounds[dt], out))
    end
end

local function no_standin()
    if ddpl.config().cuda_emulated == true and ddpl.cuda.is_available() then return false end
    pending('DDPL_CUEMU_CUDNN_HEURISTICS is a knob of the emulation build\'s cuDNN stand-in')
    return true
end

describe('cuda conv2d algorithm choice (the cuDNN stand-in\'s heuristics knob)', function()
    local bounds = {float32 = 1e-4, float64 = 1e-10, bfloat16 = 0.5, float16 = 0.1}

    it('falls back to cudnnFind* when cudnnGet*_v7 offers nothing runnable (none)', function()
        if no_standin() then return end
        assert_knob_child('none', {'float32', 'float64', 'bfloat16', 'float16'}, bounds)
    end)

    it('passes over a result needing down-conversion for strict float32 (conversion_first)',
       function()
        if no_standin() then return end
        assert_knob_child('conversion_first', {'float32', 'float64'}, bounds)
    end)

    -- TF32 allowed ('high') is still no licence to round float32 operands to float16, which
    -- ALLOW_CONVERSION permits (PyTorch never asks cuDNN for it): the first version took that
    -- result under 'high' and lost 1e-2
    it('passes over a down-converting result for float32 under TF32 too (conversion_first)',
       function()
        if no_standin() then return end
        assert_knob_child('conversion_first', {'float32'}, {float32 = 1e-3}, 'high')
    end)

    -- so that the cases above cannot pass because the knob never reached the stand-in
    it('reaches the stand-in: an unknown value fails the search', function()
        if no_standin() then return end
        local out, code = run_knob_child('no-such-mode', {'float32'})
        assert(code ~= 0 and out:find('algorithm search failed (CUDNN_STATUS_BAD_PARAM)', 1, true),
               'exit ' .. tostring(code) .. ':\n' .. out)
    end)
end)

describe('cuda autocast', function()
    it('runs matmul, linear and conv2d in bfloat16 and softmax in float32', function()
        if no_cuda() then return end
        local x, w = data({4, 8}, 71):cuda(), data({3, 8}, 72):cuda()
        local cx, cw = data({1, 2, 6, 6}, 73):cuda(), data({3, 2, 3, 3}, 74):cuda()
        local y, s, c = ddpl.autocast('cuda', {dtype = 'bfloat16'}, function()
            local y = F.linear(x, w)
            return y, y:softmax(1), F.conv2d(cx, cw)
        end)
        assert.are.equal('bfloat16', H.dtype_name(y.dtype))
        assert.are.equal('float32', H.dtype_name(s.dtype))
        assert.are.equal('bfloat16', H.dtype_name(c.dtype))
        local h = ddpl.autocast('cuda', {dtype = 'float16'}, function() return x:matmul(w:t()) end)
        assert.are.equal('float16', H.dtype_name(h.dtype))
        compare(h:float(), x:cpu():matmul(w:cpu():t()), 1e-2, 1e-2, 'fp16 autocast matmul')
    end)
end)
