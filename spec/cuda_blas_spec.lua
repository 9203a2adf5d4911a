-- spec/cuda_blas_spec.lua: cuBLAS matmul and cuDNN conv2d against the CPU kernels (ggml's
-- test-backend-ops idea), in float32, float64, bfloat16 and float16: plain, transposed,
-- strided (no unit stride: packed copies), batched with broadcast, empty, addmm's alpha/beta,
-- conv2d with stride/padding/dilation/groups and bias; forward values and gradients. Also
-- TF32 under set_float32_matmul_precision('high') and autocast('cuda') result dtypes.
-- Pending without a CUDA device.
local H = require 'helpers'
local ddpl = H.ddpl
local F = ddpl.F

local function no_cuda()
    if ddpl.cuda.is_available() then return false end
    pending('no CUDA device')
    return true
end

-- Deterministic values in [-1, 1).
local function data(shape, seed, dtype)
    local s, n, flat = seed, 1, {}
    for _, d in ipairs(shape) do n = n * d end
    for i = 1, n do
        s = (s * 1103515245 + 12345) % 2147483648
        flat[i] = s / 2147483648 * 2 - 1
    end
    return ddpl.tensor(flat, {dtype = 'float32'}):reshape(shape):to(dtype or 'float32')
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
