-- spec/tensor/scan_spec.lua: the scans and reductions against PyTorch:
-- cumsum cumprod cummax cummin any all count_nonzero amax amin aminmax nansum nanmean.
-- Values, dtypes, shapes and gradients come from spec/fixtures/scan.lua
-- (tools/gen_scan_fixtures.py); the same cases run again on CUDA when there is a device (also
-- in the emulation build, where they launch every kernel of engine/cuda/cuda_scan.cu). Then
-- what fixtures cannot hold: empty tensors, errors, options, grad_fn names, second derivatives
-- (cummax/cummin's double backward is in the fixtures too),
-- finite-difference checks of cumprod through zeros and of amax through ties.
local H = require 'helpers'
local ddpl = H.ddpl

local cases = H.fixture('scan')

-- dim/keepdim positionally, as PyTorch code passes them
local function by_dims(name)
    return function(a, o) return a[1][name](a[1], o.dim, o.keepdim) end
end

-- d/dx of x:op(dim) for the incoming gradient a[2], with create_graph (x is a[1], detached)
local function first_derivative(op, a, o)
    local x = a[1]:detach()
    x.requires_grad = true
    local values = x[op](x, o.dim)
    return ddpl.autograd.grad({values}, {x}, {a[2]}, {create_graph = true})[1]
end

local runners = {
    cumsum = function(a, o)
        if o.dtype then return a[1]:cumsum(o.dim, {dtype = o.dtype}) end
        return a[1]:cumsum(o.dim)
    end,
    cumprod = function(a, o) return a[1]:cumprod(o.dim) end,
    cummax = function(a, o) return a[1]:cummax(o.dim) end,
    cummin = function(a, o) return a[1]:cummin(o.dim) end,
    -- the first derivative as a function of (x, grad), recorded: its gradient is the second
    cummax_backward = function(a, o) return first_derivative('cummax', a, o) end,
    cummin_backward = function(a, o) return first_derivative('cummin', a, o) end,
    any = by_dims('any'),
    all = by_dims('all'),
    count_nonzero = function(a, o) return a[1]:count_nonzero(o.dim) end,
    amax = by_dims('amax'),
    amin = by_dims('amin'),
    aminmax = function(a, o) return a[1]:aminmax({dim = o.dim, keepdim = o.keepdim}) end,
    nansum = by_dims('nansum'),
    nanmean = by_dims('nanmean'),
}

describe('scans and reductions match PyTorch (cpu)', function()
    H.run_cases(cases, runners, it)
end)

-- The same cases with the inputs moved to CUDA and the results back (the gradients flow
-- through both copies, so the backward formulas run on the device too).
local function on_cuda(run)
    return function(a, o)
        local moved = {}
        for i, v in ipairs(a) do moved[i] = type(v) == 'userdata' and v:cuda() or v end
        local outs = table.pack(run(moved, o))
        for i = 1, outs.n do outs[i] = outs[i]:cpu() end
        return table.unpack(outs, 1, outs.n)
    end
end

-- nansum is one pass of the NANSUM kernel: each NaN element is read as 0 in the sum's own order,
-- so it equals the sum of the same tensor with its NaN set to 0 bit for bit, on every path
-- (rows, columns, a whole tensor split over threads or blocks) and dtype. A NaN the sum makes
-- itself (+inf plus -inf) stays, as in PyTorch. move puts a tensor on the device under test.
local function check_nansum_kernel(move)
    local x = H.lcg({600, 700}, 5, 8, 'float32') -- 420000: one output above the parallel grain
    local flat = x:view(-1)
    for _, at in ipairs({0, 12345, 300001, 419999}) do flat[at] = 0 / 0 end
    local zeroed = x:masked_fill(x:isnan(), 0)
    for _, dt in ipairs({'float32', 'float64', 'bfloat16'}) do
        local a, z = move(x:to(dt)), move(zeroed:to(dt))
        H.assert_close(a:nansum():cpu(), z:sum():cpu(), 0, 0, dt .. ' whole')
        for _, d in ipairs({0, 1}) do
            H.assert_close(a:nansum(d):cpu(), z:sum(d):cpu(), 0, 0, dt .. ' dim ' .. d)
            H.assert_close(a:t():nansum(d):cpu(), z:t():sum(d):cpu(), 0, 0, dt .. ' strided')
        end
        assert.are.equal(dt, a:nansum().dtype)
    end
    local inf = math.huge
    local y = move(ddpl.tensor({{inf, 0 / 0, 1}, {-inf, 2, 0 / 0}}))
    local whole = y:nansum():item()
    assert.is_true(whole ~= whole, 'inf - inf')
    local cols = y:nansum(0):cpu():tolist()
    assert.is_true(cols[1] ~= cols[1], 'inf - inf by columns')
    assert.are.same({2, 1}, {cols[2], cols[3]})
    assert.are.same({inf, -inf + 2}, y:nansum(1):cpu():tolist())
    assert.are.equal(0, move(ddpl.full({3}, 0 / 0)):nansum():item())
end

describe('scans and reductions match PyTorch (cuda)', function()
    local cuda_runners = {}
    for op, run in pairs(runners) do cuda_runners[op] = on_cuda(run) end
    for _, case in ipairs(cases) do
        it(case.name, function()
            if not ddpl.cuda.is_available() then return pending('no CUDA device') end
            H.check_case(case, cuda_runners[case.op])
        end)
    end

    it('long rows and columns through the block and thread kernels', function()
        if not ddpl.cuda.is_available() then return pending('no CUDA device') end
        -- 3 x 5000 along 1: the block kernel over several tiles; 5000 x 3 along 0: threads;
        -- 70000 and 2 x 40000: slices split into chunks (chunk totals, their scan, the rescan)
        for _, c in ipairs({{{3, 5000}, 1}, {{5000, 3}, 0}, {{70, 90}, 1}, {{2, 40}, 1},
                            {{70000}, 0}, {{2, 40000}, 1}}) do
            local x = H.lcg(c[1], 11, 4, 'float64')
            x.requires_grad = true
            local xc = x:detach():cuda()
            xc.requires_grad = true
            H.assert_close(xc:cumsum(c[2]):cpu(), x:cumsum(c[2]), 1e-9, 1e-9, 'cumsum')
            local rev = ddpl.autograd.grad({xc:cumsum(c[2]):sum()}, {xc})[1] -- reverse scan
            H.assert_close(rev:cpu(), ddpl.autograd.grad({x:cumsum(c[2]):sum()}, {x})[1], 1e-9,
                           1e-9, 'cumsum gradient')
            H.assert_close(xc:cumprod(c[2]):cpu(), x:cumprod(c[2]), 1e-9, 1e-12, 'cumprod')
            local v, i = xc:cummax(c[2])
            local ev, ei = x:cummax(c[2])
            H.assert_close(v:cpu(), ev, 0, 0, 'cummax values')
            H.assert_close(i:cpu(), ei, 0, 0, 'cummax indices')
            v, i = xc:cummin(c[2])
            ev, ei = x:cummin(c[2])
            H.assert_close(v:cpu(), ev, 0, 0, 'cummin values')
            H.assert_close(i:cpu(), ei, 0, 0, 'cummin indices')
            -- ties: few distinct values, so the last-index rule decides most positions
            local t = x:gt(0):double() + x:gt(1):double() -- 0, 1, 2
            local tv, ti = t:cuda():cummax(c[2])
            local etv, eti = t:cummax(c[2])
            H.assert_close(tv:cpu(), etv, 0, 0, 'cummax tie values')
            H.assert_close(ti:cpu(), eti, 0, 0, 'cummax tie indices')
        end
    end)

    it('any/all find the one deciding element wherever it is', function()
        if not ddpl.cuda.is_available() then return pending('no CUDA device') end
        -- 5000 along one output: the block kernel; 3000 x 5 along 0: columns, threads
        for _, shape in ipairs({{5000}, {3000, 5}, {4, 700}}) do
            local n = 1
            for _, d in ipairs(shape) do n = n * d end
            for _, at in ipairs({0, n // 2, n - 1}) do
                local z = ddpl.zeros(n)
                z[at] = 1
                z = z:view(shape)
                local o = 1 - z
                for d = 0, #shape - 1 do
                    H.assert_close(z:cuda():any(d):cpu(), z:any(d), 0, 0, 'any')
                    H.assert_close(o:cuda():all(d):cpu(), o:all(d), 0, 0, 'all')
                end
                assert.is_true(z:cuda():any():item())
                assert.is_false(o:cuda():all():item())
            end
        end
    end)

    it('nansum: one kernel pass, the sum of the zeroed tensor bit for bit', function()
        if not ddpl.cuda.is_available() then return pending('no CUDA device') end
        check_nansum_kernel(function(t) return t:cuda() end)
    end)

    it('empty and 0-dim inputs', function()
        if not ddpl.cuda.is_available() then return pending('no CUDA device') end
        local e = ddpl.zeros(0, 3):cuda()
        assert.are.same({0, 3}, H.shape(e:cumsum(0)))
        local v, i = e:cummax(1)
        assert.are.same({0, 3}, H.shape(v))
        assert.are.same({0, 3}, H.shape(i))
        assert.are.same({false, false, false}, e:any(0):cpu():tolist())
        assert.are.same({true, true, true}, e:all(0):cpu():tolist())
        assert.are.equal(2.5, ddpl.tensor(2.5):cuda():cumsum(0):item())
    end)
end)

describe('scans: shapes, dtypes and options', function()
    it('empty inputs keep their shape', function()
        local e = ddpl.zeros(0, 3)
        assert.are.same({0, 3}, H.shape(e:cumsum(0)))
        assert.are.same({0, 3}, H.shape(e:cumprod(1)))
        local v, i = e:cummin(0)
        assert.are.same({0, 3}, H.shape(v))
        assert.are.equal('int64', H.dtype_name(i.dtype))
        assert.are.equal('int64', H.dtype_name(ddpl.zeros(0, {dtype = 'int32'}):cumsum(0).dtype))
    end)

    it('dim and dtype as options; ddpl.* forms; trailing nils', function()
        local x = ddpl.tensor({{1, 2}, {3, 4}})
        assert.are.same({{1, 3}, {3, 7}}, x:cumsum({dim = 1}):tolist())
        assert.are.same({{1, 2}, {4, 6}}, ddpl.cumsum(x, 0):tolist())
        assert.are.same({{1, 3}, {3, 7}}, x:cumsum(1, nil):tolist())
        assert.are.equal('float64', H.dtype_name(x:cumsum(1, {dtype = 'float64'}).dtype))
        assert.are.same({{1, 2}, {3, 12}}, ddpl.cumprod(x, 1):tolist())
        local v, i = ddpl.cummax(ddpl.tensor({1, 1, 0}), 0)
        assert.are.same({1, 1, 1}, v:tolist())
        assert.are.same({0, 1, 1}, i:tolist())
    end)

    -- Once a row's product is exactly 0 the kernel writes signed zeros at memory speed
    -- (cpu_scan.c's zero runs, 64 bytes at a time with AVX-512) until an infinity or NaN: the
    -- bits, sign of zero and NaNs included, must be those of one multiply after another in
    -- double (what PyTorch computes), here Lua's own doubles rounded to the dtype.
    it('cumprod through zero runs: the sequential product\'s bits, signs of zero, inf and NaN', function()
        local fmt = {float32 = 'f', float64 = 'd'}
        local function check(x, what)
            local f = fmt[H.dtype_name(x.dtype)]
            local got, xs, acc = x:cumprod(0):tolist(), x:tolist(), 1.0
            for i = 1, #got do
                acc = acc * xs[i]
                local want = string.unpack(f, string.pack(f, acc))
                if want ~= want then
                    assert(got[i] ~= got[i], ('%s: element %d should be NaN'):format(what, i - 1))
                else
                    assert(string.pack(f, got[i]) == string.pack(f, want),
                           ('%s: element %d is %s, the sequential product %s'):format(what, i - 1,
                               tostring(got[i]), tostring(want)))
                end
            end
        end
        ddpl.manual_seed(34)
        for _, dt in ipairs({'float32', 'float64'}) do
            -- randn: zero after ~1000 elements, then signed zeros to the end
            check(ddpl.randn(1 << 17):to(dt), dt .. ' randn')
            -- a zero early (found at the check after 256 elements), -0, then an infinity or
            -- NaN in a 64-byte block (element 270) or in the tail of the run
            for _, n in ipairs({5, 37, 300, 1003}) do
                local v = ddpl.randn(n):to(dt):tolist()
                v[2], v[4] = 0.0, -0.0
                check(ddpl.tensor(v, {dtype = dt}), ('%s n=%d'):format(dt, n))
                for _, at in ipairs(n > 256 and {270, n - 2} or {}) do
                    for _, bad in ipairs({1 / 0, -1 / 0, 0 / 0}) do
                        local w = {table.unpack(v)}
                        w[at + 1] = bad
                        check(ddpl.tensor(w, {dtype = dt}),
                              ('%s n=%d, %s at %d'):format(dt, n, tostring(bad), at))
                    end
                end
            end
        end
        -- rows of a matrix, one of them with a zero
        local x = ddpl.randn(3, 3000)
        x[1][5] = 0
        local got = x:cumprod(1):tolist()
        for r = 1, 3 do
            local acc, xs = 1.0, x[r - 1]:tolist()
            for i = 1, 3000 do
                acc = acc * xs[i]
                assert(string.pack('f', got[r][i]) == string.pack('f', acc), ('row %d element %d')
                    :format(r - 1, i - 1))
            end
        end
    end)

    it('refuses bad dims, unknown options and extra arguments, naming the function', function()
        local x = ddpl.ones(2, 3)
        H.assert_error(function() x:cumsum(2) end, 'cumsum', 'dimension 2 out of range')
        H.assert_error(function() x:cumsum() end, 'cumsum', 'expected an integer dim')
        H.assert_error(function() x:cumsum(0, {dtyp = 'float64'}) end, 'cumsum',
                       "unknown option 'dtyp'")
        H.assert_error(function() x:cumsum(0, {dtype = 'float99'}) end, 'cumsum', 'float99')
        H.assert_error(function() x:cumprod(0, true) end, 'cumprod', '2 arguments')
        H.assert_error(function() x:cummax(-3) end, 'cummax', 'out of range')
        H.assert_error(function() x:cummin(0, {keepdim = true}) end, 'cummin',
                       "unknown option 'keepdim'")
        H.assert_error(function() x:cumsum('a') end, 'cumsum', 'integer')
        H.assert_error(function() x:cumsum(0, {dtype = 'bool'}) end, 'cumsum', 'bool')
    end)

    it('names its nodes as PyTorch does', function()
        local x = ddpl.tensor({1.0, 2.0}, {requires_grad = true})
        assert.matches('^CumsumBackward', x:cumsum(0).grad_fn)
        assert.matches('^CumprodBackward', x:cumprod(0).grad_fn)
        assert.matches('^CummaxBackward', (x:cummax(0)).grad_fn)
        assert.matches('^CumminBackward', (x:cummin(0)).grad_fn)
        assert.matches('^AmaxBackward', x:amax().grad_fn)
        assert.matches('^NansumBackward', x:nansum().grad_fn)
        assert.matches('^DivBackward', x:nanmean().grad_fn) -- composite, as in PyTorch
        assert.is_nil(x:any().grad_fn)
        local _, i = x:cummax(0)
        assert.is_false(i.requires_grad)
    end)

    it('cumprod: finite differences agree through one and two zeros, also twice', function()
        local x = ddpl.tensor({{0.5, 0.0, 1.5, -0.7}, {0.0, 2.0, 0.0, 1.1}, {1.2, 0.9, -1.1, 0.8}},
                              {dtype = 'float64', requires_grad = true})
        local f = function(a) return a:cumprod(1) end
        assert.is_true(ddpl.autograd.gradcheck(f, {x}))
        assert.is_true(ddpl.autograd.gradgradcheck(f, {x}))
        assert.is_true(ddpl.autograd.gradcheck(function(a) return a:cumprod(0) end, {x}))
    end)

    it('cumsum: finite differences, also twice and with dtype=', function()
        local x = H.lcg({3, 4}, 5, 2, 'float64')
        x.requires_grad = true
        assert.is_true(ddpl.autograd.gradcheck(function(a) return a:cumsum(0) end, {x}))
        assert.is_true(ddpl.autograd.gradgradcheck(function(a) return a:cumsum(-1) end, {x}))
        local y = H.lcg({5}, 6, 2, 'float32')
        y.requires_grad = true
        local out = y:cumsum(0, {dtype = 'float64'})
        out:sum():backward()
        assert.are.equal('float32', H.dtype_name(y.grad.dtype))
        assert.are.same({5, 4, 3, 2, 1}, y.grad:tolist())
    end)

    it('cummax: the gradient adds up where one element is the running max of several', function()
        local x = ddpl.tensor({3.0, 1.0, 2.0, 5.0, 5.0}, {requires_grad = true})
        local v = x:cummax(0)
        v:backward(ddpl.tensor({1.0, 2.0, 4.0, 8.0, 16.0}))
        assert.are.same({7, 0, 0, 8, 16}, x.grad:tolist())
    end)
end)

describe('reductions: shapes, dtypes and options', function()
    it('any/all over nothing, count_nonzero of nothing', function()
        local e = ddpl.zeros(0, 3)
        assert.is_false(e:any():item())
        assert.is_true(e:all():item())
        assert.are.same({false, false, false}, e:any(0):tolist())
        assert.are.same({{true, true, true}}, e:all(0, true):tolist())
        assert.are.same({}, e:any(1):tolist())
        assert.are.equal(0, e:count_nonzero():item())
        assert.are.same({0, 0, 0}, e:count_nonzero(0):tolist())
        assert.are.equal(0, e:nansum():item())
        assert.is_true(e:nanmean():item() ~= e:nanmean():item()) -- NaN
    end)

    it('any/all find the one deciding element wherever it is (threaded parts too)', function()
        local n = 200000 -- one output above the parallel grain: split into parts
        for _, at in ipairs({0, 65537, n - 1}) do
            local z = ddpl.zeros(n)
            z[at] = 1
            assert.is_true(z:any():item())
            assert.is_false((1 - z):all():item())
            assert.is_true(z:view(400, 500):any(1):any():item())
            assert.are.equal(1, z:view(400, 500):t():any(0):sum():item()) -- strided rows
        end
        assert.is_false(ddpl.zeros(n):any():item())
        assert.is_true(ddpl.ones(n):all():item())
    end)

    it('every dtype for any/all: NaN is true, uint8 stays uint8', function()
        for _, dt in ipairs({'float32', 'float64', 'float16', 'bfloat16', 'int64', 'int32',
                             'int16', 'int8', 'uint8', 'bool'}) do
            local x = ddpl.tensor({0, 1, 0}, {dtype = dt})
            assert.is_true(x:any():item() ~= 0 and x:any():item() ~= false, dt)
            local all = x:all():item()
            assert.is_true(all == false or all == 0, dt)
            assert.are.equal(dt == 'uint8' and 'uint8' or 'bool', H.dtype_name(x:any().dtype))
        end
        assert.is_true(ddpl.tensor({0 / 0}):all():item())
        assert.is_true(ddpl.tensor(3):any():item())
    end)

    it('dims as lists and options; ddpl.* forms', function()
        local x = H.lcg({2, 3, 4}, 3, 4, 'float32')
        H.assert_close(x:amax({0, 2}), x:amax(0):amax(1), 0, 0)
        H.assert_close(x:amax({dim = {0, 2}, keepdim = true}), x:amax({0, 2}):view(1, 3, 1), 0, 0)
        H.assert_close(ddpl.amin(x, -1), x:amin(2), 0, 0)
        H.assert_close(x:amax(), x:max(), 0, 0)
        H.assert_close(x:nansum({1, 2}), x:sum(2):sum(1), 1e-6, 1e-6)
        H.assert_close(ddpl.nanmean(x, 1, true), x:mean(1, true), 1e-6, 1e-6)
        assert.are.same({{true, true, true, true}}, ddpl.any(x:ne(0), {0, 1}, true):tolist()[1])
        assert.are.equal(24, ddpl.count_nonzero(x + 100):item())
        local mn, mx = ddpl.aminmax(x)
        H.assert_close(mn, x:min(), 0, 0)
        H.assert_close(mx, x:max(), 0, 0)
    end)

    it('refuses what PyTorch refuses, naming the function and the argument', function()
        local x = ddpl.ones(2, 3)
        H.assert_error(function() x:amax(2) end, 'amax', 'out of range')
        H.assert_error(function() x:amax({0, 0}) end, 'amax', 'multiple times')
        H.assert_error(function() ddpl.zeros(0, 3):amax(0) end, 'amax', 'dim 0',
                       'non-zero size')
        H.assert_error(function() ddpl.zeros(0, 3):amin() end, 'amin', 'empty')
        H.assert_error(function() ddpl.zeros(0, 3):aminmax() end, 'aminmax', 'empty')
        H.assert_error(function() x:aminmax(1) end, 'aminmax', 'keyword')
        H.assert_error(function() x:aminmax({dims = 1}) end, 'aminmax', "unknown option 'dims'")
        H.assert_error(function() x:any(0, true, 1) end, 'any', '3 arguments')
        H.assert_error(function() x:all({keep = true}) end, 'all', "unknown option 'keep'")
        H.assert_error(function() x:count_nonzero(0, true) end, 'count_nonzero', 'keepdim')
        H.assert_error(function() x:nansum('x') end, 'nansum', "'dim'")
        H.assert_error(function() ddpl.tensor({1, 2}):nanmean() end, 'nanmean', 'floating',
                       'int64')
        H.assert_error(function() x:amax(0, 'yes') end, 'amax', 'keepdim')
    end)

    it('nansum: one kernel pass, the sum of the zeroed tensor bit for bit', function()
        check_nansum_kernel(function(t) return t end)
    end)

    -- float32 rows of 64 and more take 64-byte vectors where the CPU has AVX-512 (cpu_reduce.c,
    -- row_ext_f32_512): the same values as the columns' kernel, NaN in the vector part or in the
    -- tail winning, and rows shorter than a vector step
    it('amax/amin along float32 rows: the columns kernel\'s values, NaN wins anywhere', function()
        for _, width in ipairs({1000, 64, 63, 130}) do
            local x = H.lcg({6, width}, width, 100, 'float32')
            x[{1, 5}] = 0 / 0
            x[{2, width - 1}] = 0 / 0 -- the tail past whole steps of 64 (or the last element)
            x[{3, 0}] = math.huge
            x[{4, width // 2}] = -math.huge
            local xt = x:t():contiguous()
            for _, op in ipairs({'amax', 'amin'}) do
                local rows, cols = x[op](x, 1):tolist(), xt[op](xt, 0):tolist()
                for i = 1, 6 do
                    local a, b = rows[i], cols[i]
                    assert.is_true(a == b or (a ~= a and b ~= b),
                        ('%s width %d row %d: %s against %s'):format(op, width, i - 1, a, b))
                end
                assert.is_true(rows[2] ~= rows[2] and rows[3] ~= rows[3], op .. ' NaN rows')
            end
        end
    end)

    -- float32 products accumulate in double under flush-to-zero (engine/cpu/cpu_reduce.c,
    -- ftz_begin): a float32 subnormal result is kept, and a product that passes through double's
    -- subnormal range reads 0, as PyTorch's float32 product (flushed long before) does
    it('prod of float32: subnormal results kept, double underflow read as 0 as PyTorch', function()
        local vals = {1e-20, 1e-20, 1e-3}
        local x = ddpl.tensor({vals}, {dtype = 'float32'})
        local exact = 1
        for _, v in ipairs(x:double():tolist()[1]) do exact = exact * v end
        local want = ddpl.tensor(exact, {dtype = 'float32'}):item()
        assert.is_true(want > 0 and want < 2 ^ -126, 'a float32 subnormal')
        assert.are.equal(want, x:prod():item())
        assert.are.equal(want, x:prod(1):item())
        assert.are.equal(want, x:t():contiguous():prod(0):item())
        -- down a column, 1060 halves (2^-1060: a double subnormal) then 1000 twos: exact 2^-60,
        -- torch 0 (along a row both engines' lanes each see a few dozen factors and give 2^-60)
        local col = ddpl.cat({ddpl.full({1060, 3}, 0.5), ddpl.full({1000, 3}, 2.0)}, 0)
        assert.are.same({0, 0, 0}, col:prod(0):tolist())
        -- float64 keeps its subnormals (no flush): 2^-1060 survives
        assert.are.equal(2 ^ -1060, ddpl.full({1060}, 0.5, {dtype = 'float64'}):prod():item())
        -- and the thread's flush mode is restored: a float32 subnormal sum after it is exact
        local sub = ddpl.tensor({2 ^ -140, 2 ^ -140}, {dtype = 'float32'})
        assert.are.equal(2 ^ -139, sub:sum():item())
    end)

    it('amax/amin and nansum: finite differences through ties and NaN-free inputs', function()
        local x = ddpl.tensor({{1.0, 3.0, 3.0}, {2.0, 2.0, -1.0}},
                              {dtype = 'float64', requires_grad = true})
        -- ties are kinks: gradcheck would see them, so check the shared rule directly
        x:amax(1):sum():backward()
        assert.are.same({{0, 0.5, 0.5}, {0.5, 0.5, 0}}, x.grad:tolist())
        local y = H.lcg({3, 4}, 9, 4, 'float64')
        y.requires_grad = true
        assert.is_true(ddpl.autograd.gradcheck(function(a) return a:amin({0, 1}) end, {y}))
        assert.is_true(ddpl.autograd.gradcheck(function(a) return a:nansum(1) end, {y}))
        assert.is_true(ddpl.autograd.gradgradcheck(function(a) return a:nanmean(0) end, {y}))
    end)

    it('aminmax: the gradients are amin\'s and amax\'s', function()
        local x = ddpl.tensor({{1.0, 3.0, 3.0}, {-2.0, -2.0, 0.0}}, {requires_grad = true})
        local mn, mx = x:aminmax({dim = 1})
        local total = (mn * 2 + mx):sum()
        total:backward()
        assert.are.same({{2, 0.5, 0.5}, {1, 1, 1}}, x.grad:tolist())
    end)
end)
