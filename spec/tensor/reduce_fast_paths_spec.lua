-- spec/tensor/reduce_fast_paths_spec.lua: the typed fast paths of the reductions, scans and
-- scatters that bench/ops measures (session 42) give what the general paths give: cummax/cummin
-- of one long contiguous row split over two threads against the strided (generic) loop, with
-- ties and NaNs on either side of the split; aminmax in one pass against amin and amax; the
-- float32 row sum (pairs added in float32, then double lanes) within PyTorch's error of the
-- float64 sum; the 1-D scatter_add and bincount against their definitions.
local H = require 'helpers'
local ddpl = H.ddpl

local N = 1 << 20 -- long enough for the split cummax (>= 4 * CPU_GRAIN elements)

-- x as a strided view (every other element of a doubled tensor): the generic loops
local function strided(x)
    local n = x:numel()
    return ddpl.stack({x, x}, 1):reshape(2 * n):as_strided({n}, {2}, 0)
end

local function same_with_nans(a, b)
    return ddpl.equal(a:isnan(), b:isnan()) and ddpl.equal(a:nan_to_num(0), b:nan_to_num(0))
end

describe('cummax and cummin of a long contiguous row', function()
    local threads
    before_each(function() threads = ddpl.get_num_threads() end)
    after_each(function() ddpl.set_num_threads(threads) end)

    local function inputs()
        ddpl.manual_seed(7)
        local ties = ddpl.randint(0, 50, {N}):float()
        local late_nan = ddpl.randn(N)
        late_nan[700000] = 0 / 0 -- in the second half
        local two_nans = ddpl.randn(N)
        two_nans[100] = 0 / 0
        two_nans[800000] = 0 / 0
        local f64 = ddpl.randn(N):double()
        f64[600000] = 0 / 0
        local falling = ddpl.arange(N):float():neg()
        return {ties = ties, late_nan = late_nan, two_nans = two_nans, f64 = f64,
                falling = falling, ones = ddpl.ones(N)}
    end

    for _, op in ipairs({'cummax', 'cummin'}) do
        it(op .. ' at 1 and 2 threads equals the generic loop (values, last index on ties, NaN)',
           function()
            for name, x in pairs(inputs()) do
                local gv, gi = strided(x)[op](strided(x), 0)
                for _, t in ipairs({1, 2}) do
                    ddpl.set_num_threads(t)
                    local v, i = x[op](x, 0)
                    assert.is_true(ddpl.equal(i, gi), name .. ' indices at ' .. t .. ' threads')
                    assert.is_true(same_with_nans(v, gv), name .. ' values at ' .. t .. ' threads')
                end
            end
        end)
    end

    it('rows of a matrix along the last dim, and a 2-element row', function()
        ddpl.manual_seed(3)
        local m = ddpl.randint(0, 9, {37, 301}):float()
        local v, i = m:cummax(1)
        local gv, gi = m:t():contiguous():t():cummax(1) -- a strided view: the generic loop
        assert.is_true(ddpl.equal(v, gv))
        assert.is_true(ddpl.equal(i, gi))
        local s, si = ddpl.tensor({2, 2}):cummin(0)
        assert.are.same({2, 2}, s:tolist())
        assert.are.same({0, 1}, si:tolist())
    end)
end)

describe('aminmax in one pass', function()
    it('equals amin and amax for float32, float64 (with a NaN) and int64', function()
        ddpl.manual_seed(11)
        local f = ddpl.randn(4096, 1024)
        local d = ddpl.randn(3000):double()
        d[1234] = 0 / 0
        local i = ddpl.randint(-(1 << 40), 1 << 40, {100003})
        for _, x in ipairs({f, d, i, f:t()}) do
            local lo, hi = x:aminmax()
            assert.is_true(same_with_nans(lo, x:amin()))
            assert.is_true(same_with_nans(hi, x:amax()))
            assert.are.equal(x.dtype, lo.dtype)
        end
        local lo, hi = f:aminmax({dim = 1, keepdim = true}) -- dims: the amin and amax kernels
        assert.is_true(ddpl.equal(lo, f:amin(1, true)))
        assert.is_true(ddpl.equal(hi, f:amax(1, true)))
    end)

    it('keeps the gradients of amin and amax', function()
        local x = ddpl.tensor({3, 1, 3, 2}, {dtype = 'float32', requires_grad = true})
        local lo, hi = x:aminmax()
        local s = lo + hi
        s:backward()
        assert.are.same({0.5, 1, 0.5, 0}, x.grad:tolist())
    end)
end)

describe('the float32 row sum', function()
    it('is within float32 rounding of the float64 sum (as PyTorch\'s cascade)', function()
        ddpl.manual_seed(5)
        for _, n in ipairs({63, 64, 65, 1000, 4096 * 1024}) do
            local x = ddpl.randn(n) * 100 + 1
            local exact = x:double():sum():item()
            local got = x:sum():item()
            local scale = x:double():abs():sum():item()
            assert.is_true(math.abs(got - exact) <= 2 ^ -23 * scale,
                           ('n %d: %.9g against %.9g'):format(n, got, exact))
        end
        assert.are.equal(16777216, ddpl.ones(1 << 24):sum():item()) -- exact in pairs
    end)

    it('norm p=2 of a contiguous tensor keeps the bits of sqrt(sum(x * x))', function()
        ddpl.manual_seed(9)
        local m = ddpl.randn(1024, 1024)
        assert.is_true(ddpl.equal(m:norm(2, 1), (m * m):sum(1):sqrt()))
        assert.is_true(ddpl.equal(m:norm(), (m * m):sum():sqrt()))
    end)
end)

describe('the 1-D scatter_add and bincount', function()
    it('add every value into its bin, in order', function()
        ddpl.manual_seed(13)
        local u, v = ddpl.randint(0, 1000, {100003}), ddpl.randn(100003):double()
        local s = ddpl.zeros(1000):double():scatter_add(0, u, v)
        local ref = ddpl.zeros(1000):double():index_add(0, u, v) -- the same order of adds
        assert.is_true(ddpl.equal(s, ref))
        local c = u:bincount()
        local counts = ddpl.zeros(1000):double():scatter_add(0, u, ddpl.ones(100003):double())
        assert.is_true(ddpl.equal(c, counts:long()))
        assert.are.same({0, 2, 0, 1}, ddpl.tensor({1, 3, 1}, {dtype = 'int64'}):bincount():tolist())
        assert.has_error(function() ddpl.tensor({1, -2}, {dtype = 'int64'}):bincount() end)
    end)

    -- enough values for bincount to count on several threads, each into its own bins (the parts
    -- of 2^17 values, added in order): the same counts on 1 and 2 threads as the definition,
    -- with the last part short and some bins empty
    it('bincount split over threads counts every value once', function()
        ddpl.manual_seed(15)
        local threads = ddpl.get_num_threads()
        local n = 3 * 2 ^ 17 + 12345
        local u = ddpl.randint(0, 5000, {n}) * 2 -- odd bins empty
        local counts = ddpl.zeros(10001):double():scatter_add(0, u, ddpl.ones(n):double()):long()
        for _, nt in ipairs({1, 2}) do
            ddpl.set_num_threads(nt)
            local ok, err = pcall(function()
                assert.is_true(ddpl.equal(u:bincount({minlength = 10001}), counts), nt .. ' threads')
            end)
            ddpl.set_num_threads(threads)
            assert(ok, err)
        end
    end)

    -- a long 1-D index into a small output checks its indices as it reads them (cpu_scatter.c):
    -- the same results as the two-pass walk, which a (1, n) index along dim 1 takes, for every
    -- reduce and typed dtype; a bad index anywhere leaves the output as it was
    it('checks indices in the same pass, with the two-pass results', function()
        ddpl.manual_seed(14)
        local n, bins = 100003, 997
        local u = ddpl.randint(0, bins, {n})
        local base = ddpl.rand(n) * 0.01 + 0.995 -- near 1: products stay finite
        for _, dt in ipairs({'float32', 'float64', 'int64', 'int32', 'int16', 'int8', 'uint8'}) do
            local v = dt:match('^float') and base:to(dt) or ddpl.randint(0, 3, {n}):to(dt)
            local x0 = ddpl.ones(bins):to(dt)
            for _, red in ipairs({'sum', 'prod', 'amax', 'amin'}) do
                local fast = x0:scatter_reduce(0, u, v, red)
                local walk = x0:view(1, bins):scatter_reduce(1, u:view(1, n), v:view(1, n), red)
                assert.is_true(ddpl.equal(fast, walk:view(bins)), dt .. ' ' .. red)
            end
            local fast = x0:scatter(0, u, v)
            assert.is_true(ddpl.equal(fast, x0:view(1, bins):scatter(1, u:view(1, n),
                                                                     v:view(1, n)):view(bins)),
                           dt .. ' assign')
        end
        local v = base:float()
        for _, at in ipairs({0, 64 * 500 + 3, n - 1}) do
            local bad = u:clone()
            bad[at] = bins
            local x = ddpl.arange(bins):float()
            H.assert_error(function() x:scatter_add_(0, bad, v) end, 'scatter_add_',
                           'index ' .. bins)
            assert.is_true(ddpl.equal(x, ddpl.arange(bins):float()), 'untouched, bad at ' .. at)
            bad[at] = -1
            H.assert_error(function() x:index_add_(0, bad, v) end, 'index -1')
            assert.is_true(ddpl.equal(x, ddpl.arange(bins):float()), 'untouched, -1 at ' .. at)
        end
    end)
end)
