-- spec/cuda/cuda_pointwise_spec.lua: the elementwise CUDA kernels against the CPU ones, on the
-- paths the generic parity spec does not single out: every dtype (integers with wraparound, bool,
-- float16, bfloat16), NaN propagation, the flat vectorised path with odd lengths and
-- misaligned starts, strided and broadcast operands, 0-dim and empty tensors, fill/copy/arange
-- conversions, and random draws that equal the CPU's for one seed. Pending without a device.
local H = require 'helpers'
local ddpl = H.ddpl
local F = ddpl.F

-- DDPLUA_POINTWISE_DEVICE=cpu runs every case cpu against cpu: a check of this file itself on
-- machines without a GPU
local DEV = os.getenv('DDPLUA_POINTWISE_DEVICE') or 'cuda'

local function need_cuda()
    if DEV == 'cuda' and not ddpl.cuda.is_available() then
        pending('no CUDA device')
        return false
    end
    return true
end

local FLOATS = {'float32', 'float64', 'float16', 'bfloat16'}
local INTS = {'int64', 'int32', 'uint8'}
local TOL = {float32 = {1e-5, 1e-6}, float64 = {1e-12, 1e-14}, float16 = {1e-3, 1e-3},
             bfloat16 = {1e-2, 1e-2}}

-- runs f(device) on cpu and cuda and compares (exact for integers and bool)
local function same(f, dtype, what)
    local want = f('cpu')
    local got = f(DEV)
    assert.are.equal(DEV, tostring(got.device):sub(1, #DEV))
    local tol = TOL[dtype] or {0, 0}
    H.assert_close(got:cpu(), want, tol[1], tol[2], what)
end

-- values with negatives, zero, fractions and (for floats) NaN and +-inf
local function sample(dtype, n, device, shift)
    shift = shift or 0
    local v = {}
    for i = 1, n do v[i] = ((i * 37 + shift) % 23) - 11 end
    if dtype == 'uint8' then for i = 1, n do v[i] = (v[i] + 11) * 10 end end
    if dtype == 'bool' then for i = 1, n do v[i] = v[i] > 0 and 1 or 0 end end
    local isfloat = dtype:find('float') ~= nil
    if isfloat then
        for i = 1, n do v[i] = v[i] / 4 end
        if n > 5 then v[3], v[5] = 0 / 0, math.huge end
        if n > 7 then v[7] = -math.huge end
    end
    return ddpl.tensor(v, {dtype = dtype, device = device})
end

describe('cuda pointwise: binary', function()
    local n = 1027 -- not a multiple of any vector width
    local ops = {'add', 'sub', 'mul', 'maximum', 'minimum', 'eq', 'ne', 'lt', 'le', 'gt', 'ge'}
    for _, dt in ipairs({'float32', 'float64', 'float16', 'bfloat16', 'int64', 'int32',
                         'uint8'}) do
        for _, op in ipairs(ops) do
            it(op .. ' ' .. dt .. ', contiguous', function()
                if not need_cuda() then return end
                same(function(d) return sample(dt, n, d)[op](sample(dt, n, d), sample(dt, n, d, 5)) end,
                     dt, op)
            end)
        end
        it('broadcast, strided and misaligned operands ' .. dt, function()
            if not need_cuda() then return end
            same(function(d)
                local a = sample(dt, 6 * 35, d):view(6, 35)
                local b = sample(dt, 35, d, 3)
                return a:t():contiguous():t() + b                   -- transposed + row
            end, dt, 'add transposed')
            same(function(d)
                local a = sample(dt, 1 + 4 * 33, d):narrow(0, 1, 4 * 33) -- starts off alignment
                local b = sample(dt, 4 * 33, d, 7)
                return a * b
            end, dt, 'mul misaligned')
            same(function(d)
                local col = sample(dt, 9, d):view(9, 1)
                local row = sample(dt, 13, d, 2)
                return ddpl.maximum(col, row)                        -- outer broadcast
            end, dt, 'maximum outer')
        end)
    end
    it('division and pow in floating dtypes, alpha', function()
        if not need_cuda() then return end
        for _, dt in ipairs(FLOATS) do
            same(function(d) return sample(dt, n, d) / sample(dt, n, d, 4) end, dt, 'div')
            same(function(d) return sample(dt, n, d):abs() ^ sample(dt, n, d, 4) end, dt, 'pow')
            same(function(d) return sample(dt, n, d) ^ 2 end, dt, 'square')
            same(function(d) return sample(dt, n, d):add(sample(dt, n, d, 1), 0.5) end, dt,
                 'add alpha')
        end
    end)
    it('integer wraparound and integer pow', function()
        if not need_cuda() then return end
        same(function(d)
            local big = ddpl.tensor({2 ^ 62, -2 ^ 62, 3, -7}, {dtype = 'int64', device = d})
            return big * ddpl.tensor({4, 4, 5, 2}, {dtype = 'int64', device = d})
        end, 'int64', 'int64 wrap')
        same(function(d)
            local b = ddpl.tensor({2, -2, 1, -1, 3}, {dtype = 'int64', device = d})
            return b ^ ddpl.tensor({10, 3, -2, -3, -1}, {dtype = 'int64', device = d})
        end, 'int64', 'int pow')
        same(function(d) return sample('uint8', 100, d) + sample('uint8', 100, d, 9) end,
             'uint8', 'uint8 wrap')
    end)
    it('NaN propagates through maximum and minimum', function()
        if not need_cuda() then return end
        local a = ddpl.tensor({0 / 0, 1, 0 / 0, -1}, {device = DEV})
        local b = ddpl.tensor({1, 0 / 0, 0 / 0, 2}, {device = DEV})
        local mx, mn = H.values(ddpl.maximum(a, b)), H.values(ddpl.minimum(a, b))
        for i = 1, 3 do
            assert.is_true(mx[i] ~= mx[i])
            assert.is_true(mn[i] ~= mn[i])
        end
        assert.are.equal(2, mx[4])
        assert.are.equal(-1, mn[4])
    end)
    it('0-dim and empty operands', function()
        if not need_cuda() then return end
        same(function(d) return sample('float32', 10, d) * ddpl.tensor(3, {device = d}) end,
             'float32', '0-dim')
        local e = ddpl.zeros(0, 3, {device = DEV}) + ddpl.ones(3, {device = DEV})
        assert.are.same({0, 3}, H.shape(e))
    end)
end)

describe('cuda pointwise: where, unary, activations', function()
    it('where in every dtype with broadcasting', function()
        if not need_cuda() then return end
        for _, dt in ipairs({'float32', 'float64', 'float16', 'int64', 'int32', 'uint8',
                             'bool'}) do
            same(function(d)
                local c = sample('float32', 7 * 11, d):view(7, 11):gt(0)
                local x = sample(dt, 11, d)
                local y = sample(dt, 7, d, 3):view(7, 1)
                return ddpl.where(c, x, y)
            end, dt, 'where ' .. dt)
        end
    end)
    local float_ops = {'exp', 'log', 'sqrt', 'rsqrt', 'sin', 'cos', 'tanh', 'sigmoid', 'silu',
                       'gelu', 'neg', 'abs', 'sign', 'relu'}
    for _, dt in ipairs(FLOATS) do
        it('unary ops ' .. dt, function()
            if not need_cuda() then return end
            for _, op in ipairs(float_ops) do
                same(function(d) return sample(dt, 1031, d)[op](sample(dt, 1031, d)) end, dt, op)
                same(function(d) return sample(dt, 12 * 7, d):view(12, 7):t()[op](
                    sample(dt, 12 * 7, d):view(12, 7):t()) end, dt, op .. ' strided')
            end
            same(function(d) return F.gelu(sample(dt, 1031, d), {approximate = 'tanh'}) end, dt,
                 'gelu tanh')
            same(function(d) return sample(dt, 1031, d):clamp(-1.5, 2) end, dt, 'clamp')
            same(function(d) return sample(dt, 1031, d):clamp(nil, 0.5) end, dt, 'clamp max')
        end)
    end
    it('integer neg abs sign relu clamp', function()
        if not need_cuda() then return end
        for _, dt in ipairs({'int64', 'int32'}) do
            for _, op in ipairs({'neg', 'abs', 'sign', 'relu'}) do
                same(function(d) return sample(dt, 300, d)[op](sample(dt, 300, d)) end, dt, op)
            end
            same(function(d) return sample(dt, 300, d):clamp(-3, 4) end, dt, 'clamp')
        end
    end)
    it('activation gradients match the cpu', function()
        if not need_cuda() then return end
        for _, dt in ipairs({'float32', 'float64'}) do
            for _, act in ipairs({'relu', 'sigmoid', 'tanh', 'silu', 'gelu', 'gelu_tanh'}) do
                local grads = {}
                for _, d in ipairs({'cpu', DEV}) do
                    local x = ddpl.tensor(H.values(sample('float64', 257, 'cpu', 2)),
                                          {dtype = dt, device = d})
                    x = x:clamp(-20, 20):detach()
                    x.requires_grad = true
                    local y
                    if act == 'gelu_tanh' then
                        y = F.gelu(x, {approximate = 'tanh'})
                    else
                        y = x[act](x)
                    end
                    y:sum():backward()
                    grads[d] = x.grad
                end
                H.assert_close(grads[DEV]:cpu(), grads.cpu, TOL[dt][1] * 10, TOL[dt][2] * 10,
                               act .. ' grad ' .. dt)
            end
        end
    end)
end)

describe('cuda pointwise: creation and copies', function()
    it('fill in every dtype, contiguous and strided', function()
        if not need_cuda() then return end
        for _, dt in ipairs({'float32', 'float64', 'float16', 'bfloat16', 'int64', 'int32',
                             'uint8', 'bool'}) do
            same(function(d) return ddpl.full({1029}, 2.5, {dtype = dt, device = d}) end, dt,
                 'full')
            same(function(d)
                local z = ddpl.zeros(9, 14, {dtype = dt, device = d})
                z:narrow(1, 1, 5):fill_(-3)
                return z
            end, dt, 'strided fill')
        end
    end)
    it('copy converts between every pair of dtypes', function()
        if not need_cuda() then return end
        local all = {'float32', 'float64', 'float16', 'bfloat16', 'int64', 'int32', 'uint8',
                     'bool'}
        for _, from in ipairs(all) do
            for _, to in ipairs(all) do
                same(function(d) return sample(from, 301, d):to(to) end, to, from .. '->' .. to)
                same(function(d) return sample(from, 10 * 31, d):view(10, 31):t():to(to) end, to,
                     from .. '->' .. to .. ' strided')
            end
        end
        same(function(d) return sample('float32', 5 * 7, d):view(5, 7):t():contiguous() end,
             'float32', 'transpose copy')
    end)
    it('arange in floating and integer dtypes', function()
        if not need_cuda() then return end
        same(function(d) return ddpl.arange(-3, 7, 0.25, {device = d}) end, 'float32', 'arange')
        same(function(d) return ddpl.arange(0, 1000, 3, {dtype = 'int64', device = d}) end,
             'int64', 'arange int64')
        same(function(d) return ddpl.arange(5, {dtype = 'float64', device = d}) end, 'float64',
             'arange float64')
    end)
    it('rand and randn equal the cpu draws for one seed', function()
        if not need_cuda() then return end
        for _, dt in ipairs(FLOATS) do
            for _, fn in ipairs({'rand', 'randn'}) do
                local t = {}
                for _, d in ipairs({'cpu', DEV}) do
                    ddpl.manual_seed(77)
                    t[d] = ddpl[fn](1001, {dtype = dt, device = d})
                end
                -- uniform: identical; normal: the last bit of double log/cos may differ
                local tol = fn == 'rand' and {0, 0} or
                                (dt == 'float64' and {1e-14, 1e-15} or {1e-6, 1e-7})
                H.assert_close(t[DEV]:cpu(), t.cpu, tol[1], tol[2], fn .. ' ' .. dt)
            end
        end
        -- the generator advances the same way: the second draw also matches
        local a, b = {}, {}
        for _, d in ipairs({'cpu', DEV}) do
            ddpl.manual_seed(5)
            a[d] = ddpl.rand(10, {device = d})
            b[d] = ddpl.rand(10, {device = d})
        end
        H.assert_close(b[DEV]:cpu(), b.cpu, 0, 0, 'second draw')
    end)
    it('uniform_, normal_ and bernoulli_ in place, dropout', function()
        if not need_cuda() then return end
        local t = {}
        for _, d in ipairs({'cpu', DEV}) do
            ddpl.manual_seed(3)
            local u = ddpl.empty(64, 33, {device = d}):uniform_(-2, 3)
            local v = ddpl.empty(33, 64, {device = d}):t():normal_(1, 2) -- non-contiguous
            local m = ddpl.empty(500, {device = d}):bernoulli_(0.3)
            t[d] = {u, v, m}
        end
        H.assert_close(t[DEV][1]:cpu(), t.cpu[1], 0, 0, 'uniform_')
        H.assert_close(t[DEV][2]:cpu(), t.cpu[2], 1e-6, 1e-6, 'normal_')
        H.assert_close(t[DEV][3]:cpu(), t.cpu[3], 0, 0, 'bernoulli_')
        local x = ddpl.ones(10000, {device = DEV})
        local y = F.dropout(x, 0.25, true)
        local kept = y:ne(0):sum():item()
        assert.is_true(kept > 7200 and kept < 7800)
    end)
end)
