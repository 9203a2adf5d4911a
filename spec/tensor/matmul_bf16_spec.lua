-- spec/tensor/matmul_bf16_spec.lua: bfloat16 products on the CPU (engine/cpu/cpu_gemm_bf16.c
-- on AMX tiles or AVX512-BF16 where the CPU has them, the widening path elsewhere or with
-- DDPLUA_CPU_BF16_GEMM=0).
--
-- The product of bf16 operands is the float32 product of the same values, up to the order of
-- the float32 additions, rounded once. Small-integer operands make every product and partial
-- sum exact in float32, so there the result must equal the float32 reference bit for bit, on
-- both paths, for every operand layout: odd sizes (partial tiles), K past one slice (1024) and
-- odd, N past one column block (2048), transposed, strided and batched operands, broadcast
-- batches, alpha and beta. The kernel's output layouts (column-major, strided, float32) are
-- reached only from C: spec/c/test_gemm_bf16.c. Random operands check the rounding: within one bf16 unit
-- in the last place of the reference.
local ddpl = require 'ddplua'

local function ints(shape, lo, hi)
    return ddpl.randint(lo or -8, hi or 9, shape):to('bfloat16')
end

-- the float32 product of the same values, rounded to bfloat16 once
local function reference(a, b)
    return a:float():matmul(b:float()):to('bfloat16')
end

local function assert_same(got, want, what)
    assert.are.same(want:size(), got:size(), what)
    assert.are.equal('bfloat16', got.dtype, what)
    local diff = (got:float() - want:float()):abs():max():item()
    assert(diff == 0, ('%s: differs from the float32 product by %g'):format(what, diff))
end

-- {name, a, b}: the operand layouts the engine's matmul, linear and bmm produce
local function layout_cases()
    local cases = {}
    local function add(name, a, b) cases[#cases + 1] = { name, a, b } end
    for _, s in ipairs({ { 1, 1, 1 }, { 5, 7, 3 }, { 12, 32, 2 }, { 13, 33, 17 }, { 25, 70, 1025 },
        { 11, 40, 2049 }, { 3, 2100, 5 }, { 1, 50, 600 }, { 50, 1, 600 } }) do
        local M, N, K = s[1], s[2], s[3]
        local tag = ('%dx%dx%d'):format(M, N, K)
        add(tag .. ' row-major', ints({ M, K }), ints({ K, N }))
        add(tag .. ' a transposed', ints({ K, M }):t(), ints({ K, N }))
        add(tag .. ' b transposed (linear)', ints({ M, K }), ints({ N, K }):t())
        add(tag .. ' both transposed', ints({ K, M }):t(), ints({ N, K }):t())
    end
    -- strided: rows of a wider matrix (a leading dimension), every other column (no unit stride)
    add('narrowed rows', ints({ 20, 64 }):narrow(1, 3, 37), ints({ 37, 90 }):narrow(1, 1, 45))
    add('every other column', ints({ 9, 34 })[{ {}, { 0, nil, 2 } }], ints({ 17, 22 })[{ {}, { 1, nil, 2 } }])
    add('batched', ints({ 3, 14, 19 }), ints({ 3, 19, 35 }))
    add('batched, transposed b', ints({ 4, 7, 40 }), ints({ 4, 33, 40 }):transpose(1, 2))
    add('broadcast batch', ints({ 2, 3, 6, 9 }), ints({ 9, 5 }))
    add('many small batches', ints({ 64, 4, 8 }), ints({ 64, 8, 3 }))
    return cases
end

describe('bfloat16 matmul on the CPU', function()
    it('equals the float32 product for exact (small-integer) operands in every layout', function()
        ddpl.manual_seed(1)
        for _, c in ipairs(layout_cases()) do
            assert_same(c[2]:matmul(c[3]), reference(c[2], c[3]), c[1])
        end
    end)

    it('applies alpha and beta (addmm) to a bias of any layout', function()
        ddpl.manual_seed(2)
        local a, b = ints({ 21, 37 }), ints({ 37, 45 })
        local biases = { ints({ 21, 45 }), ints({ 45, 21 }):t(), ints({ 21, 90 })[{ {}, { 0, nil, 2 } }],
            ints({ 45 }) }
        for i, c in ipairs(biases) do
            local want = (c:float() * 0.5 + a:float():matmul(b:float()) * 2):to('bfloat16')
            assert_same(ddpl.addmm(c, a, b, { beta = 0.5, alpha = 2 }), want, 'bias ' .. i)
            assert_same(ddpl.addmm(c, a, b), (c:float() + a:float():matmul(b:float())):to('bfloat16'),
                'bias ' .. i .. ', beta 1')
        end
    end)

    it('ignores what the output held when beta is 0 (a NaN there does not propagate)', function()
        local a, b = ints({ 6, 40 }), ints({ 40, 9 })
        local c = ddpl.full({ 6, 9 }, 0 / 0):to('bfloat16')
        assert_same(ddpl.addmm(c, a, b, { beta = 0 }), reference(a, b), 'beta 0')
    end)

    it('propagates NaN and infinity from the operands as the float32 product does', function()
        local a, b = ints({ 14, 40 }), ints({ 40, 33 })
        a[{ 3, 5 }] = 0 / 0
        b[{ 7, 30 }] = 1 / 0
        local got, want = a:matmul(b):float(), a:float():matmul(b:float())
        local gnan, wnan = got:isnan(), want:isnan()
        assert.is_true(gnan:equal(wnan))
        assert.is_true(got:isinf():equal(want:isinf()))
        local finite = wnan:logical_not():logical_and(want:isinf():logical_not())
        assert.is_true(got[finite]:equal(want[finite]:to('bfloat16'):float()))
    end)

    it('rounds random operands within one bf16 unit of the float32 product', function()
        ddpl.manual_seed(3)
        for _, s in ipairs({ { 64, 96, 1500 }, { 130, 70, 300 } }) do
            local a = ddpl.randn(s[1], s[3]):to('bfloat16')
            local b = ddpl.randn(s[3], s[2]):to('bfloat16')
            local exact = a:float():matmul(b:float())
            local got = a:matmul(b):float()
            -- a bf16 has 8 significant bits: one unit in the last place is at most |x| * 2^-7
            local ulp = exact:abs() * 2 ^ -7 + 1e-30
            assert.is_true(((got - exact):abs() - ulp):max():item() <= 0,
                'beyond one bf16 unit for ' .. table.concat(s, 'x'))
        end
    end)

    it('gives the same bits on 1 and 2 threads', function()
        ddpl.manual_seed(4)
        local a, b = ddpl.randn(300, 700):to('bfloat16'), ddpl.randn(700, 260):to('bfloat16')
        local threads = ddpl.get_num_threads()
        ddpl.set_num_threads(1)
        local one = a:matmul(b)
        ddpl.set_num_threads(2)
        local two = a:matmul(b)
        ddpl.set_num_threads(threads)
        assert.is_true(one:equal(two))
    end)

    it('backward of a bf16 linear matches the float32 gradients of the same values', function()
        ddpl.manual_seed(5)
        local x = ints({ 17, 40 }):requires_grad_()
        local w = ints({ 23, 40 }):requires_grad_()
        local g = ints({ 17, 23 })
        x:matmul(w:t()):backward(g)
        local xf, wf = x:detach():float(), w:detach():float()
        assert_same(x.grad, g:float():matmul(wf):to('bfloat16'), 'grad x')
        assert_same(w.grad, g:float():t():matmul(xf):to('bfloat16'), 'grad w')
    end)

    -- the same exact products through a fresh process with the kernel turned off: both paths give
    -- the same bits, and ddpl.config() says which one ran
    it('agrees bit for bit with the widening path (DDPLUA_CPU_BF16_GEMM=0 and =avx512_bf16)', function()
        local bin = os.getenv('DDPLUA_BIN')
        assert(bin and bin ~= '', 'DDPLUA_BIN is not set (ctest sets it to the ddplua executable)')
        local dir = os.tmpname()
        os.remove(dir)
        assert(os.execute('mkdir -p ' .. dir))
        local script = dir .. '/products.lua'
        local f = assert(io.open(script, 'w'))
        f:write([[
local ddpl = require 'ddplua'
ddpl.manual_seed(7)
local out = {}
local shapes = { { 13, 33, 17 }, { 25, 70, 1025 }, { 3, 2100, 5 }, { 40, 9, 2500 } }
for i, s in ipairs(shapes) do
    local a = ddpl.randint(-8, 9, { s[1], s[3] }):to('bfloat16')
    local b = ddpl.randint(-8, 9, { s[2], s[3] }):to('bfloat16'):t()
    out['p' .. i] = a:matmul(b)
    out['a' .. i], out['b' .. i] = a, b:contiguous()
end
ddpl.save(out, arg[1])
print('path=' .. ddpl.config().cpu_bf16_gemm)
]])
        f:close()
        local function run(env, file)
            local p = assert(io.popen(('env %s %s %s %s 2>&1'):format(env, bin, script, file)))
            local text = p:read('a')
            p:close()
            return text:match('path=(%S+)'), text
        end
        local on, on_text = run('', dir .. '/on.safetensors')
        local off, off_text = run('DDPLUA_CPU_BF16_GEMM=0', dir .. '/off.safetensors')
        -- where the CPU has AMX, the vdpbf16ps kernel it would otherwise take
        local dp, dp_text = run('DDPLUA_CPU_BF16_GEMM=avx512_bf16', dir .. '/dp.safetensors')
        assert(on, on_text)
        assert(off, off_text)
        assert(dp, dp_text)
        assert.are.equal('widened', off)
        assert.is_true(on == 'amx' or on == 'avx512_bf16' or on == 'widened', on)
        assert.are.equal(on == 'widened' and 'widened' or 'avx512_bf16', dp)
        local a, b = ddpl.load(dir .. '/on.safetensors'), ddpl.load(dir .. '/off.safetensors')
        local c = ddpl.load(dir .. '/dp.safetensors')
        for i = 1, 4 do
            local k = 'p' .. i
            assert.is_true(a[k]:equal(b[k]), k)
            assert.is_true(c[k]:equal(b[k]), k)
            assert_same(a[k], reference(a['a' .. i], a['b' .. i]), k)
        end
        os.execute('rm -rf ' .. dir)
    end)
end)
