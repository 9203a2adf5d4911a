-- spec/cuda/cuda_reduce_spec.lua: the CUDA reductions, index ops, softmax and NLL loss against the
-- CPU (the reference semantics): sum prod max min (all dims and along one), argmax, topk,
-- index_select gather (and their gradients, which run index_add and scatter_add), softmax and
-- log_softmax (last dim, long rows, inner dims) with gradients, nll_loss / cross_entropy with
-- weights, ignore_index, every reduction and the (N,C,d) layout, bad indices and targets.
-- Odd shapes on purpose: empty, 0-dim, size-1 dims, transposed inputs, rows longer than a block.
-- Every case is pending without a CUDA device.
local H = require 'helpers'
local ddpl = H.ddpl
local F = ddpl.F

-- Deterministic values in [-2, 2) (an LCG, so both devices see the same inputs).
local function data(shape, seed, dtype) return H.lcg(shape, seed, 4, dtype or 'float64') end

-- int64 values in [0, m) from the same generator; first (if given) replaces the first value
local function ints(shape, seed, m, first)
    local flat, n, s = {}, 1, seed
    for _, d in ipairs(shape) do n = n * d end
    for i = 1, n do
        s = (s * 1103515245 + 12345) % 2147483648
        flat[i] = s % m
    end
    if first then flat[1] = first end
    return ddpl.tensor(flat, {dtype = 'int64'}):reshape(shape)
end

-- DDPLUA_PARITY_SELFTEST=1 runs every case cpu against cpu, to check the spec itself on a
-- machine without a GPU.
local selftest = os.getenv('DDPLUA_PARITY_SELFTEST') == '1'

local function no_cuda()
    if selftest or ddpl.cuda.is_available() then return false end
    pending('no CUDA device')
    return true
end

-- a case about CUDA's own behaviour, which the cpu-against-cpu selftest cannot stand in for
-- (pending in the selftest even where CUDA exists: cu() then makes cpu tensors)
local function no_real_cuda()
    if not selftest and ddpl.cuda.is_available() then return false end
    pending('no CUDA device (the case is about the device itself)')
    return true
end

local function cu(t) return selftest and t:clone() or t:to('cuda') end
local function host(t) return t:to('cpu') end

-- got (a cuda tensor) against expected (the cpu result), with the dtype's tolerance
local function same(got, expected, what, scale)
    local rtol, atol = H.tolerance(H.dtype_name(expected.dtype))
    scale = scale or 1
    H.assert_close(host(got), expected, rtol * scale, atol * scale, what)
end

local function leaf(t)
    t = t:detach():clone()
    t.requires_grad = true
    return t
end

describe('cuda reductions match the cpu', function()
    -- the shapes reach every launch shape of cuda_reduce.cu: thread mode (short rows, columns
    -- split over chunks: 1000x3 along 0), warp mode (1100x40 along 1), block mode split over
    -- chunks (3x70000 along 1, and every full reduction), empty outputs (0x3)
    local shapes = {{7}, {3, 5}, {4, 1, 6}, {2, 3, 4, 5}, {1000, 3}, {1100, 40}, {3, 70000}, {0, 3}}
    for _, dtype in ipairs({'float32', 'float64'}) do
        for _, shape in ipairs(shapes) do
            local name = table.concat(shape, 'x') .. ' ' .. dtype
            it('sum, max, min over everything and each dim: ' .. name, function()
                if no_cuda() then return end
                local x = data(shape, 7, dtype)
                local xc = cu(x)
                same(xc:sum(), x:sum(), 'sum', 10)
                if x:numel() > 0 then
                    same(xc:max(), x:max(), 'max')
                    same(xc:min(), x:min(), 'min')
                end
                for d = 0, #shape - 1 do
                    same(xc:sum(d), x:sum(d), 'sum(' .. d .. ')', 10)
                    same(xc:sum(d, true), x:sum(d, true), 'sum keepdim')
                    if shape[d + 1] > 0 and x:numel() > 0 then
                        local v, i = xc:max(d)
                        local ev, ei = x:max(d)
                        same(v, ev, 'max values')
                        assert.are.same(ei:tolist(), host(i):tolist())
                        v, i = xc:min(d, true)
                        ev, ei = x:min(d, true)
                        same(v, ev, 'min values')
                        assert.are.same(ei:tolist(), host(i):tolist())
                    end
                end
            end)
        end
    end

    it('reductions of transposed and permuted (strided) inputs', function()
        if no_cuda() then return end
        local x = data({6, 5, 4}, 3, 'float32')
        local xc = cu(x)
        local views = {function(t) return t:transpose(0, 2) end,
                       function(t) return t:permute(1, 2, 0) end,
                       function(t) return t:transpose(1, 2) end}
        for _, view in ipairs(views) do
            local t, tc = view(x), view(xc)
            same(tc:sum(), t:sum(), 'strided full sum')
            for d = 0, 2 do
                same(tc:sum(d), t:sum(d), 'strided sum')
                same(tc:max(d), t:max(d), 'strided max')
            end
            same(tc:max(), t:max(), 'strided amax')
        end
    end)

    it('prod, and integer sums in int64', function()
        if no_cuda() then return end
        local x = data({4, 9}, 5, 'float64') * 0.5 + 1
        same(cu(x):prod(1), x:prod(1), 'prod')
        same(cu(x):prod(), x:prod(), 'prod all')
        local i = ints({5, 300}, 11, 1000):to('int32')
        local s = cu(i):sum(1)
        assert.are.equal('int64', H.dtype_name(s.dtype))
        assert.are.same(i:sum(1):tolist(), host(s):tolist())
        assert.are.same(i:sum():item(), cu(i):sum():item())
        assert.are.same(i:max(1):tolist(), host(cu(i):max(1)):tolist())
    end)

    it('max/min pick the first index on ties and NaN wins', function()
        if no_cuda() then return end
        local x = ddpl.tensor({{1, 3, 3, 0}, {2, 2, 2, 2}, {0, 0 / 0, 5, 0 / 0}})
        local long = ddpl.cat({ddpl.zeros(3, 50), x, ddpl.zeros(3, 40)}, 1) -- the warp path
        for _, t in ipairs({x, long}) do
            local v, i = cu(t):max(1)
            local ev, ei = t:max(1)
            assert.are.same(ei:tolist(), host(i):tolist())
            H.assert_close(host(v), ev, 0, 0, 'max with ties')
            v, i = cu(t):min(1)
            ev, ei = t:min(1)
            assert.are.same(ei:tolist(), host(i):tolist())
        end
        assert.is_true(cu(x):max():item() ~= cu(x):max():item()) -- NaN
    end)

    it('topk: sorted values and indices, largest and smallest, short and long rows', function()
        if no_cuda() then return end
        for _, c in ipairs({{{5, 10}, 3, 'float32'}, {{3, 3000}, 5, 'float32'},
                            {{2, 5000}, 7, 'float64'}, {{4, 1}, 1, 'float64'}}) do
            local x = data(c[1], 13, c[3])
            for _, largest in ipairs({true, false}) do
                local v, i = ddpl.topk(cu(x), c[2], {largest = largest})
                local ev, ei = ddpl.topk(x, c[2], {largest = largest})
                same(v, ev, 'topk values')
                assert.are.same(ei:tolist(), host(i):tolist())
            end
            local k0 = math.min(c[2], c[1][1])
            local v, i = ddpl.topk(cu(x), k0, {dim = 0})
            local ev, ei = ddpl.topk(x, k0, {dim = 0})
            same(v, ev, 'topk along dim 0')
            assert.are.same(ei:tolist(), host(i):tolist())
        end
    end)
end)

describe('cuda index ops match the cpu', function()
    it('index_select on each dim, contiguous and strided, with its gradient', function()
        if no_cuda() then return end
        local x = data({5, 4, 3}, 17, 'float64')
        local size = H.shape(x)
        for d = 0, 2 do
            local id = ints({5}, 71 + d, size[d + 1]) -- in range for this dim
            same(cu(x):index_select(d, cu(id)), x:index_select(d, id), 'index_select')
            local t = x:transpose(0, 2)
            local it_ = ints({4}, 83 + d, H.shape(t)[d + 1])
            same(cu(x):transpose(0, 2):index_select(d, cu(it_)), t:index_select(d, it_),
                 'strided index_select')
            local a, b = leaf(x), leaf(cu(x))
            local w = data(H.shape(x:index_select(d, id)), 3, 'float64')
            local la, lb = (a:index_select(d, id) * w):sum(), (b:index_select(d, cu(id)) * cu(w)):sum()
            la:backward()
            lb:backward()
            same(b.grad, a.grad, 'index_add (index_select backward)')
        end
    end)

    it('gather along each dim with its gradient (scatter_add)', function()
        if no_cuda() then return end
        local x = data({4, 6}, 19, 'float32')
        for d = 0, 1 do
            local idx = ints({3, 5}, 23 + d, H.shape(x)[d + 1])
            same(cu(x):gather(d, cu(idx)), x:gather(d, idx), 'gather')
            local a, b = leaf(x), leaf(cu(x))
            local w = data({3, 5}, 29, 'float32')
            local la, lb = (a:gather(d, idx) * w):sum(), (b:gather(d, cu(idx)) * cu(w)):sum()
            la:backward()
            lb:backward()
            same(b.grad, a.grad, 'scatter_add (gather backward)')
        end
    end)

    -- checked without waiting for the device: the error surfaces at the next synchronisation
    -- (a copy to the host, cuda.synchronize), naming the op and the index (cuda_index_check.h)
    it('an index out of range raises at the next synchronisation naming the op and index',
       function()
        if no_real_cuda() then return end
        local x = cu(data({3, 4}, 1, 'float32'))
        local y = x:index_select(0, cu(ddpl.tensor({0, 7})))
        H.assert_error(function() return y:cpu() end, 'index_select: index 7', 'copy from cuda')
        x:index_select(1, cu(ddpl.tensor({-1})))
        x:gather(1, cu(ddpl.tensor({{0, 9}}))) -- a second bad op: the first one is reported
        H.assert_error(function() ddpl.cuda.synchronize() end, 'index_select: index -1',
                       'cuda.synchronize')
        ddpl.cuda.synchronize() -- reported once
        x:gather(1, cu(ddpl.tensor({{0, 9}})))
        H.assert_error(function() return x:sum():item() end, 'gather: index 9')
        -- more bad ops than the ring holds, never synchronised: an op itself raises
        local ok, err = pcall(function()
            for _ = 1, 300 do x:index_select(0, cu(ddpl.tensor({5}))) end
        end)
        assert.is_false(ok)
        assert.truthy(tostring(err):find('index_select: index 5', 1, true), tostring(err))
        ddpl.cuda.synchronize()
        -- the device is still usable afterwards
        same(x:sum(), host(x):sum(), 'sum after an error')
    end)
end)

describe('cuda softmax and nll_loss match the cpu', function()
    local cases = {{{4, 10}, -1}, {{3, 2000}, -1}, {{2, 5, 3}, 1}, {{2, 3}, 0}, {{1, 1}, -1},
                   {{6, 33}, 1}}
    for _, dtype in ipairs({'float32', 'float64'}) do
        for _, c in ipairs(cases) do
            it(('softmax/log_softmax %s dim %d %s with gradients'):format(
                   table.concat(c[1], 'x'), c[2], dtype), function()
                if no_cuda() then return end
                local x = data(c[1], 31, dtype) * 3
                local w = data(c[1], 37, dtype)
                for _, fn in ipairs({'softmax', 'log_softmax'}) do
                    local a, b = leaf(x), leaf(cu(x))
                    local ya, yb = F[fn](a, c[2]), F[fn](b, c[2])
                    same(yb, ya, fn)
                    local la, lb = (ya * w):sum(), (yb * cu(w)):sum()
                    la:backward()
                    lb:backward()
                    same(b.grad, a.grad, fn .. ' backward', 10)
                end
            end)
        end
    end

    it('softmax of rows with -inf and of all -inf rows', function()
        if no_cuda() then return end
        local inf = math.huge
        local x = ddpl.tensor({{0, -inf, 1}, {-inf, -inf, -inf}})
        local y = host(F.softmax(cu(x), -1))
        local e = F.softmax(x, -1)
        H.assert_close(y:narrow(0, 0, 1), e:narrow(0, 0, 1))
        for _, v in ipairs(y:tolist()[2]) do assert.is_true(v ~= v) end
    end)

    for _, dtype in ipairs({'float32', 'float64'}) do
        for _, reduction in ipairs({'mean', 'sum', 'none'}) do
            it(('nll_loss %s %s: weights, ignore_index, (N,C,d) layout, gradients'):format(
                   reduction, dtype), function()
                if no_cuda() then return end
                for _, c in ipairs({{{6, 5}, {6}}, {{3, 4, 7}, {3, 7}}, {{1, 3, 2, 2}, {1, 2, 2}}}) do
                    local logp = F.log_softmax(data(c[1], 41, dtype), 1)
                    local target = ints(c[2], 43, c[1][2], -100) -- one ignored target
                    local weight = data({c[1][2]}, 47, dtype):abs() + 0.5
                    for _, wt in ipairs({false, true}) do
                        local opts = {reduction = reduction, weight = wt and weight or nil}
                        local copts = {reduction = reduction, weight = wt and cu(weight) or nil}
                        local a, b = leaf(logp), leaf(cu(logp))
                        local la = F.nll_loss(a, target, opts)
                        local lb = F.nll_loss(b, cu(target), copts)
                        same(lb, la, 'nll_loss')
                        la:sum():backward()
                        lb:sum():backward()
                        same(b.grad, a.grad, 'nll_loss backward')
                    end
                end
            end)
        end
    end

    it('cross_entropy with ignore_index on cuda', function()
        if no_cuda() then return end
        local logits = data({8, 11}, 53, 'float32')
        local target = ints({8}, 59, 11, 3)
        local a, b = leaf(logits), leaf(cu(logits))
        local la = F.cross_entropy(a, target, {ignore_index = 3})
        local lb = F.cross_entropy(b, cu(target), {ignore_index = 3})
        same(lb, la, 'cross_entropy')
        la:backward()
        lb:backward()
        same(b.grad, a.grad, 'cross_entropy backward')
    end)

    it('a target out of range raises naming it', function()
        if no_cuda() then return end
        local logp = cu(F.log_softmax(data({2, 3}, 61, 'float32'), 1))
        H.assert_error(function() return F.nll_loss(logp, cu(ddpl.tensor({0, 5}))):item() end,
                       'nll_loss', '5')
    end)
end)
