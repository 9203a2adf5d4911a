-- spec/tensor/sort_spec.lua: sort, argsort, kthvalue, unique, bincount, searchsorted, bucketize
-- and histc against PyTorch (spec/fixtures/sort.lua, tools/gen_sort_fixtures.py): values, index
-- order on ties (sort is always stable), NaN as the largest value, every dtype, gradients; then
-- empty and 0-dim inputs, the argument forms, the errors, and the CUDA kernels against the CPU
-- (pending without a CUDA device; the emulation build runs them).
local H = require 'helpers'
local ddpl = H.ddpl

-- a copy of a fixture's options (the runners add to them)
local function copy(o)
    local c = {}
    for k, v in pairs(o) do c[k] = v end
    return c
end

local runners = {
    sort = function(ins, o) return ins[1]:sort(o) end,
    argsort = function(ins, o) return ins[1]:argsort(o) end,
    kthvalue = function(ins, o) return ins[1]:kthvalue(ins[2], o) end,
    unique = function(ins, o) return ddpl.unique(ins[1], o) end,
    bincount = function(ins, o)
        o = copy(o)
        o.weights = ins[2]
        return ins[1]:bincount(o)
    end,
    searchsorted = function(ins, o) return ddpl.searchsorted(ins[1], ins[2], o) end,
    bucketize = function(ins, o) return ddpl.bucketize(ins[1], ins[2], o) end,
    histc = function(ins, o) return ins[1]:histc(o) end,
}

describe('sorting and counting match PyTorch', function()
    H.run_cases(H.fixture('sort'), runners, it)
end)

-- v nondecreasing (or nonincreasing) along the last dim of a 1-D result, and stable: equal
-- neighbours keep increasing indices; and v == x[idx]
local function check_sorted(x, v, idx, descending)
    local n = v:size(0)
    assert.are.equal(n, x:index_select(0, idx):eq(v):sum():item(), 'values are x at the indices')
    if n < 2 then return end
    local a, b = v:narrow(0, 0, n - 1), v:narrow(0, 1, n - 1)
    local ordered = descending and a:ge(b) or a:le(b)
    assert.are.equal(n - 1, ordered:sum():item(), 'values in order')
    local ia, ib = idx:narrow(0, 0, n - 1), idx:narrow(0, 1, n - 1)
    local unstable = (a:eq(b):long() * ia:gt(ib):long()):sum():item()
    assert.are.equal(0, unstable, 'equal values keep their input order')
end

describe('sort', function()
    it('is stable on long slices with many ties, both directions', function()
        local x = ddpl.randint(0, 50, {200000}):float()
        for _, desc in ipairs({false, true}) do
            local v, i = x:sort({descending = desc})
            check_sorted(x, v, i, desc)
        end
        -- 64-bit keys: of a narrow range (packed like 32-bit ones) and of a wide one (sorted
        -- with a separate position array), long (radix) and short (insertion)
        local wide = ddpl.randint(-1000, 1000, {5000}) * (1 << 40)
        for _, xi in ipairs({ddpl.randint(-3, 3, {5000}), wide, wide:narrow(0, 0, 20),
                             ddpl.randn(70000, {dtype = 'float64'}) * 1e6}) do
            for _, desc in ipairs({false, true}) do
                local v, i = xi:sort(0, desc)
                check_sorted(xi, v, i, desc)
            end
        end
    end)

    it('takes dim and descending positionally, or as options, and ddpl.sort', function()
        local x = ddpl.tensor({{3, 1, 2}, {0, 5, 4}})
        local v1, i1 = x:sort(0, true)
        local v2, i2 = ddpl.sort(x, {dim = 0, descending = true, stable = true})
        assert.are.same(v1:tolist(), v2:tolist())
        assert.are.same(i1:tolist(), i2:tolist())
        assert.are.same({{1, 0, 0}, {0, 1, 1}}, (ddpl.argsort(x, 0)):tolist())
        assert.are.same({{1, 2, 0}, {0, 2, 1}}, x:argsort():tolist())
        assert.are.equal('int64', H.dtype_name(i1.dtype))
    end)

    it('handles empty tensors and size-1 dims', function()
        local e = ddpl.zeros(0, 3)
        local v, i = e:sort(0)
        assert.are.same({0, 3}, H.shape(v))
        assert.are.same({0, 3}, H.shape(i))
        v, i = ddpl.zeros(3, 0):sort()
        assert.are.same({3, 0}, H.shape(v))
        v, i = ddpl.tensor({{5}, {2}}):sort(1)
        assert.are.same({{0}, {0}}, i:tolist())
    end)

    it('is differentiable: gradcheck in float64', function()
        local x = H.lcg({4, 5}, 3, 4, 'float64')
        x.requires_grad = true
        local f = function(a) return (a:sort(1, true)) end
        assert.is_true(ddpl.autograd.gradcheck(f, {x}))
        local v = x:sort(0)
        assert.are.equal('SortBackward0', v.grad_fn)
    end)

    it('refuses bad arguments, naming sort and the argument', function()
        local x = ddpl.zeros(2, 3)
        H.assert_error(function() x:sort(2) end, 'sort', 'dimension 2 out of range')
        H.assert_error(function() x:sort({bogus = 1}) end, 'sort', "unknown option 'bogus'")
        H.assert_error(function() x:sort({descending = 1}) end, 'sort', 'descending')
        H.assert_error(function() x:sort({stable = 'yes'}) end, 'sort', 'stable')
        H.assert_error(function() x:argsort(-3) end, 'argsort', 'out of range')
        H.assert_error(function() ddpl.sort(1) end, 'sort', 'expected a tensor')
    end)
end)

describe('kthvalue', function()
    it('is 1-based and refuses k outside 1..size', function()
        local x = ddpl.tensor({5, 1, 4})
        local v, i = x:kthvalue(1)
        assert.are.equal(1, v:item())
        assert.are.equal(1, i:item())
        H.assert_error(function() x:kthvalue(0) end, 'kthvalue', 'k (0)', '1-based')
        H.assert_error(function() x:kthvalue(4) end, 'kthvalue', 'out of range')
        H.assert_error(function() x:kthvalue() end, 'kthvalue', 'expected k')
        H.assert_error(function() x:kthvalue(1, 1) end, 'kthvalue', 'out of range')
        H.assert_error(function() x:kthvalue(1, {largest = true}) end, "unknown option 'largest'")
    end)
end)

describe('unique', function()
    it('returns only what was asked for, in PyTorch order', function()
        local x = ddpl.tensor({3, 1, 3, 2}, {dtype = 'int64'})
        local out, extra = ddpl.unique(x)
        assert.are.same({1, 2, 3}, out:tolist())
        assert.is_nil(extra)
        local o2, counts, none = x:unique({return_counts = true})
        assert.are.same({1, 1, 2}, counts:tolist())
        assert.is_nil(none)
        local o3, inv, cnt = x:unique({sorted = false, return_inverse = true, return_counts = true})
        assert.are.same({2, 0, 2, 1}, inv:tolist())
        assert.are.same({1, 1, 2}, cnt:tolist())
    end)

    it('of empty tensors; NaNs each stay distinct, last', function()
        local out, inv, cnt = ddpl.zeros(0, 2):unique({return_inverse = true, return_counts = true})
        assert.are.same({0}, H.shape(out))
        assert.are.same({0, 2}, H.shape(inv))
        assert.are.same({0}, H.shape(cnt))
        local nan = 0 / 0
        local u = ddpl.tensor({nan, 1, nan, 1}):unique()
        local l = u:tolist()
        assert.are.equal(3, #l)
        assert.are.equal(1, l[1])
        assert.is_true(l[2] ~= l[2] and l[3] ~= l[3])
        out, inv, cnt = ddpl.zeros(0, 3):unique({dim = 0, return_inverse = true,
                                                 return_counts = true})
        assert.are.same({0, 3}, H.shape(out))
        assert.are.same({0}, H.shape(inv))
    end)

    -- integers of a narrow range take a histogram on the CPU instead of the sort; float64
    -- holds these integers exactly and always sorts, so it is the reference
    it('of integers, by histogram, agrees with the sort', function()
        local function check(x, what)
            local o, inv, cnt = x:unique({return_inverse = true, return_counts = true})
            local ro, rinv, rcnt = x:double():unique({return_inverse = true, return_counts = true})
            assert.are.equal(x.dtype, o.dtype, what .. ' dtype')
            assert.are.same(ro:tolist(), o:double():tolist(), what .. ' values')
            assert.are.same(rinv:tolist(), inv:tolist(), what .. ' inverse')
            assert.are.same(rcnt:tolist(), cnt:tolist(), what .. ' counts')
            assert.are.same(ro:tolist(), x:unique():double():tolist(), what .. ' values alone')
        end
        ddpl.manual_seed(3)
        local base = ddpl.randint(-50, 50, {40, 30})
        for _, dt in ipairs({'int64', 'int32', 'int16', 'int8'}) do check(base:to(dt), dt) end
        check(ddpl.randint(0, 200, {999}):to('uint8'), 'uint8')
        check(base:gt(0), 'bool')
        check(base:t(), 'a transposed (strided) view')
        check(base[{{}, 3}], 'a column')
        check(ddpl.tensor(7, {dtype = 'int64'}), '0-dim')
        check(ddpl.tensor({5, -3, 5, 5}, {dtype = 'int64'}), 'short')
        -- a range far wider than the count (the sort), and the int64 extremes (max - min
        -- overflows a signed subtraction)
        check(ddpl.tensor({2 ^ 40, 5, -2 ^ 40, 5}, {dtype = 'int64'}), 'wide')
        local lo, hi = math.mininteger, math.maxinteger
        local o, inv, cnt = ddpl.tensor({hi, lo, hi, 0}, {dtype = 'int64'}):unique({
            return_inverse = true, return_counts = true})
        assert.are.same({lo, 0, hi}, o:tolist())
        assert.are.same({2, 0, 2, 1}, inv:tolist())
        assert.are.same({1, 1, 2}, cnt:tolist())
    end)

    it('refuses bad dims and options', function()
        local x = ddpl.zeros(2, 3)
        H.assert_error(function() x:unique({dim = 2}) end, 'unique', 'out of range')
        H.assert_error(function() x:unique({foo = true}) end, 'unique', "unknown option 'foo'")
        H.assert_error(function() ddpl.zeros(3, 0):unique({dim = 0}) end, 'unique', 'size 0')
        H.assert_error(function() ddpl.tensor(1):unique({dim = 0}) end, 'unique', '0-dim')
    end)
end)

describe('bincount, searchsorted, bucketize, histc', function()
    it('bincount of an empty input is int64 zeros of minlength (PyTorch 1.13)', function()
        local e = ddpl.zeros(0, {dtype = 'int64'})
        local r = e:bincount({minlength = 3})
        assert.are.same({0, 0, 0}, r:tolist())
        assert.are.equal('int64', H.dtype_name(r.dtype))
        assert.are.same({0}, H.shape(e:bincount()))
    end)

    it('bincount refuses bad input without crashing', function()
        local x = ddpl.tensor({1, -2, 3}, {dtype = 'int64'})
        H.assert_error(function() x:bincount() end, 'bincount', 'non-negative', '-2')
        H.assert_error(function() ddpl.zeros(2, 2, {dtype = 'int64'}):bincount() end,
                       'bincount', '1-D')
        H.assert_error(function() ddpl.zeros(3):bincount() end, 'bincount', 'float32')
        local ok = ddpl.tensor({1, 2}, {dtype = 'int64'})
        H.assert_error(function() ok:bincount({minlength = -1}) end, 'bincount', 'minlength')
        H.assert_error(function() ok:bincount({minlength = 1 << 62}) end, 'bincount')
        H.assert_error(function() ok:bincount({weights = ddpl.ones(3)}) end, 'bincount',
                       'weights', '[3]')
        H.assert_error(function() ok:bincount({bins = 3}) end, "unknown option 'bins'")
        local huge = ddpl.tensor({(1 << 62)}, {dtype = 'int64'})
        H.assert_error(function() huge:bincount() end, 'bincount', 'too large')
        local top = ddpl.tensor({math.maxinteger}, {dtype = 'int64'})
        H.assert_error(function() top:bincount() end, 'bincount', 'too many bins')
    end)

    it('searchsorted takes a number; refuses mismatched rows and bad options', function()
        local s = ddpl.tensor({1, 3, 5})
        local r = ddpl.searchsorted(s, 4)
        assert.are.same({}, H.shape(r))
        assert.are.equal(2, r:item())
        local rows = ddpl.zeros(2, 3)
        H.assert_error(function() ddpl.searchsorted(rows, ddpl.zeros(3, 4)) end,
                       'searchsorted', '[2,3]', '[3,4]')
        H.assert_error(function() ddpl.searchsorted(ddpl.tensor(1), s) end,
                       'searchsorted', '0-dim')
        H.assert_error(function() ddpl.searchsorted(s, s, {side = 'left', right = true}) end,
                       'searchsorted', 'opposites')
        H.assert_error(function() ddpl.searchsorted(s, s, {side = 'up'}) end,
                       'searchsorted', "'left' or 'right'")
        H.assert_error(function() ddpl.searchsorted(s, s, {sorter = s}) end,
                       "unknown option 'sorter'")
        H.assert_error(function() ddpl.bucketize(s, rows) end, 'bucketize', '1-D')
        H.assert_error(function() ddpl.bucketize(s, s, {side = 'left'}) end,
                       "unknown option 'side'")
        local e = ddpl.searchsorted(ddpl.zeros(0), ddpl.tensor({1, 2}))
        assert.are.same({0, 0}, e:tolist())
    end)

    it('histc refuses bad bins, ranges and dtypes', function()
        local x = ddpl.tensor({1.0, 2.0})
        H.assert_error(function() x:histc({bins = 0}) end, 'histc', 'bins')
        H.assert_error(function() x:histc({min = 3, max = 1}) end, 'histc', 'min')
        H.assert_error(function() x:long():histc() end, 'histc', 'int64')
        H.assert_error(function() ddpl.tensor({1, 0 / 0}):histc() end, 'histc', 'not finite')
        H.assert_error(function() x:histc({min = 0, max = 1 / 0}) end, 'histc', 'not finite')
        assert.are.same({0, 0}, ddpl.zeros(0):histc({bins = 2}):tolist())
        -- NaN is not counted (PyTorch's CUDA kernel; 1.13's CPU kernel puts it in bin 0)
        assert.are.same({1, 0, 1}, ddpl.tensor({0 / 0, 0.0, 3.0}):histc({bins = 3, min = 0,
                                                                          max = 3}):tolist())
    end)
end)

-- ---- CUDA against the CPU (pending without a device) ----
local function no_cuda()
    if ddpl.cuda.is_available() then return false end
    pending('no CUDA device')
    return true
end

local function same_tensor(got, expected, what)
    H.assert_close(got:cpu(), expected, 0, 0, what)
end

describe('cuda sorting and counting match the cpu', function()
    it('sort and argsort: shared-memory and long (global scratch) slices, strided, dtypes',
       function()
        if no_cuda() then return end
        local cases = {
            {ddpl.randint(0, 5, {6, 37}):float(), 1},
            {ddpl.randint(0, 9, {5000}):double(), 0},  -- beyond shared memory: global scratch
            {ddpl.randint(-4, 4, {7, 5, 3}), 1},
            {H.lcg({9, 4}, 5, 8, 'float32'):t(), 0},   -- strided
            {ddpl.tensor({1, 0 / 0, -0.0, 0.0, -1 / 0, 1}, {dtype = 'float16'}), 0},
            {ddpl.tensor({true, false, true}, {dtype = 'bool'}), 0},
            {ddpl.tensor(3.5), 0},
        }
        for k, c in ipairs(cases) do
            local x, dim = c[1], c[2]
            for _, desc in ipairs({false, true}) do
                local ev, ei = x:sort(dim, desc)
                local v, i = x:cuda():sort(dim, desc)
                same_tensor(v, ev, 'case ' .. k .. ' values')
                same_tensor(i, ei, 'case ' .. k .. ' indices')
                same_tensor(x:cuda():argsort({dim = dim, descending = desc}), ei, 'argsort')
            end
        end
        local v = ddpl.zeros(0, 4):cuda():sort(0)
        assert.are.same({0, 4}, H.shape(v))
    end)

    it('sort gradient and kthvalue on the device', function()
        if no_cuda() then return end
        local x = H.lcg({5, 6}, 9, 4, 'float64')
        local xc = x:cuda()
        xc.requires_grad = true
        local g = H.lcg({5, 6}, 4, 2, 'float64')
        local v = xc:sort(1, true)
        v:backward(g:cuda())
        x.requires_grad = true
        local ev = x:sort(1, true)
        ev:backward(g)
        same_tensor(xc.grad, x.grad, 'sort gradient')
        local kv, ki = xc:detach():kthvalue(3, 0, true)
        local ekv, eki = x:detach():kthvalue(3, 0, true)
        same_tensor(kv, ekv, 'kthvalue values')
        same_tensor(ki, eki, 'kthvalue indices')
    end)

    it('unique, bincount, searchsorted, bucketize, histc', function()
        if no_cuda() then return end
        local x = ddpl.randint(0, 20, {300})
        local o, inv, cnt = x:unique({return_inverse = true, return_counts = true})
        local go, ginv, gcnt = x:cuda():unique({return_inverse = true, return_counts = true})
        same_tensor(go, o, 'unique')
        same_tensor(ginv, inv, 'inverse')
        same_tensor(gcnt, cnt, 'counts')
        local rows = ddpl.randint(0, 2, {6, 3})
        same_tensor(rows:cuda():unique({dim = 0}), rows:unique({dim = 0}), 'unique rows')
        same_tensor(x:cuda():bincount({minlength = 25}), x:bincount({minlength = 25}), 'bincount')
        for _, dt in ipairs({'float32', 'float64', 'int64'}) do
            local w = H.lcg({300}, 2, 4, dt == 'int64' and 'float64' or dt):to(dt)
            H.assert_close(x:cuda():bincount({weights = w:cuda()}):cpu(), x:bincount({weights = w}),
                           1e-5, 1e-5, 'bincount weights ' .. dt)
        end
        local s = ddpl.randint(0, 50, {4, 30}):float():sort(1)
        local v = ddpl.randint(-5, 55, {4, 7}):float()
        for _, right in ipairs({false, true}) do
            same_tensor(ddpl.searchsorted(s:cuda(), v:cuda(), {right = right}),
                        ddpl.searchsorted(s, v, {right = right}), 'searchsorted rows')
            same_tensor(ddpl.bucketize(v:cuda():long(), s[0]:cuda():long(),
                                       {right = right, out_int32 = true}),
                        ddpl.bucketize(v:long(), s[0]:long(), {right = right, out_int32 = true}),
                        'bucketize')
        end
        local h = H.lcg({1000}, 6, 6, 'float32')
        same_tensor(h:cuda():histc({bins = 13, min = -2, max = 2}),
                    h:histc({bins = 13, min = -2, max = 2}), 'histc')
        same_tensor(h:double():cuda():histc(), h:double():histc(), 'histc data range')
        H.assert_error(function() ddpl.tensor({-1, 2}, {dtype = 'int64'}):cuda():bincount() end,
                       'bincount', 'non-negative')
    end)
end)
