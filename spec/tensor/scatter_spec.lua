-- spec/tensor/scatter_spec.lua: scatter, scatter_add, scatter_reduce, index_add/copy/fill,
-- masked_select/scatter/fill_, nonzero, argwhere, one-argument where, take and take_along_dim
-- against PyTorch (spec/fixtures/scatter.lua, tools/gen_scatter_fixtures.py): values, dtypes,
-- shapes, gradients; then the in-place forms, the errors (x untouched), gradcheck, and the CUDA
-- kernels against the CPU (pending without a CUDA device; the emulation build runs them).
local H = require 'helpers'
local ddpl = H.ddpl

local function copy(o, drop)
    local c = {}
    for k, v in pairs(o) do
        if not drop[k] then c[k] = v end
    end
    return c
end

local function list_out(l)
    return table.unpack(l)
end

local runners = {
    scatter = function(ins, o)
        if o.reduce then return ins[1]:scatter(o.dim, ins[2], ins[3], {reduce = o.reduce}) end
        return ins[1]:scatter(o.dim, ins[2], ins[3])
    end,
    scatter_value = function(ins, o) return ddpl.scatter(ins[1], o.dim, ins[2], o.value) end,
    scatter_add = function(ins, o) return ins[1]:scatter_add(o.dim, ins[2], ins[3]) end,
    scatter_reduce = function(ins, o)
        return ins[1]:scatter_reduce(o.dim, ins[2], ins[3], o.reduce,
                                     {include_self = o.include_self})
    end,
    index_add = function(ins, o)
        return ins[1]:index_add(o.dim, ins[2], ins[3], copy(o, {dim = true}))
    end,
    index_copy = function(ins, o) return ins[1]:index_copy(o.dim, ins[2], ins[3]) end,
    index_fill = function(ins, o) return ins[1]:index_fill(o.dim, ins[2], o.value) end,
    masked_select = function(ins) return ins[1]:masked_select(ins[2]) end,
    masked_scatter = function(ins) return ddpl.masked_scatter(ins[1], ins[2], ins[3]) end,
    nonzero = function(ins) return ins[1]:nonzero() end,
    nonzero_tuple = function(ins) return list_out(ins[1]:nonzero({as_tuple = true})) end,
    argwhere = function(ins) return ddpl.argwhere(ins[1]) end,
    where1 = function(ins) return list_out(ddpl.where(ins[1])) end,
    take = function(ins, o) return ins[1]:take(ins[2]) end,
    take_along_dim = function(ins, o) return ins[1]:take_along_dim(ins[2], o.dim) end,
}

describe('scatter, index ops and masks match PyTorch', function()
    local mine = {}
    for _, c in ipairs(H.fixture('scatter')) do
        if runners[c.op] then mine[#mine + 1] = c end
    end
    H.run_cases(mine, runners, it)
end)

local function L(t) return ddpl.tensor(t, {dtype = 'int64'}) end

describe('scatter', function()
    it('writes in place, returns x, and bumps the version', function()
        local x = ddpl.zeros(2, 3)
        local v0 = x._version
        local r = x:scatter_(1, L({{2, 0}, {1, 1}}), ddpl.tensor({{1., 2.}, {3., 4.}}))
        assert.are.equal(x, r)
        assert.are.same({{2, 0, 1}, {0, 4, 0}}, x:tolist())
        if v0 then assert.is_true(x._version > v0) end
        x:scatter_add_(0, L({{0, 0, 0}}), ddpl.ones(1, 3))
        assert.are.same({{3, 1, 2}, {0, 4, 0}}, x:tolist())
        x:scatter_(0, L({{1}}), 5, {reduce = 'add'})
        assert.are.same({{3, 1, 2}, {5, 4, 0}}, x:tolist())
        x:scatter_reduce_(1, L({{0, 0}}), ddpl.tensor({{10., 20.}}), 'amax', {include_self = false})
        assert.are.same({{20, 1, 2}, {5, 4, 0}}, x:tolist())
        x:scatter_reduce_(1, L({{2, 2}, {0, 0}}), ddpl.tensor({{1., 3.}, {2., 2.}}), 'mean')
        assert.are.same({{20, 1, 2}, {3, 4, 0}}, x:tolist())
    end)

    it('refuses bad indices, naming the function, and leaves x untouched', function()
        local x = ddpl.arange(6):float():view(2, 3)
        H.assert_error(function() x:scatter_(1, L({{0, 3}}), ddpl.ones(1, 2)) end,
                       'scatter_', 'index 3', 'size 3')
        H.assert_error(function() x:scatter_add_(0, L({{0, -1, 0}}), ddpl.ones(1, 3)) end,
                       'scatter_add_', 'index -1')
        H.assert_error(function()
            x:scatter_reduce_(0, L({{1, 2}}), ddpl.ones(1, 2), 'mean', {include_self = false})
        end, 'scatter_reduce_', 'index 2')
        assert.are.same({{0, 1, 2}, {3, 4, 5}}, x:tolist())
        H.assert_error(function() x:scatter(0, ddpl.tensor({{0.5}}), ddpl.ones(1, 1)) end,
                       'scatter', 'int64')
        H.assert_error(function() x:scatter(0, L({{0}}), ddpl.ones(1, 1):double()) end,
                       'scatter', 'dtype')
        H.assert_error(function() x:scatter(0, L({0}), ddpl.ones(1)) end, 'same number of dim')
        H.assert_error(function() x:scatter(0, L({{0, 0, 0, 0}}), ddpl.ones(1, 4)) end,
                       'smaller than self')
        H.assert_error(function() x:scatter(2, L({{0}}), ddpl.ones(1, 1)) end, 'dimension')
        H.assert_error(function() x:scatter(0, L({{0}}), 1, {reduce = 'max'}) end, "'add'")
        H.assert_error(function() x:scatter_reduce(0, L({{0}}), ddpl.ones(1, 1), 'max') end,
                       "'amax'")
        H.assert_error(function() x:scatter(0, L({{0}}), 1, {foo = 1}) end, 'unknown option')
    end)

    it('handles empty indices and 0-dim tensors', function()
        local x = ddpl.ones(2, 3)
        assert.are.same(x:tolist(), x:scatter(0, L({}):view(0, 3), 5):tolist())
        local s = ddpl.tensor(2.0)
        assert.are.equal(7, s:scatter(0, ddpl.tensor(0, {dtype = 'int64'}), 7):item())
        assert.are.equal(9, s:scatter_add(0, ddpl.tensor(0, {dtype = 'int64'}),
                                          ddpl.tensor(7.0)):item())
    end)

    it('the legacy reduce has no gradient, as in PyTorch 1.13', function()
        local x = ddpl.ones(2, 2, {requires_grad = true})
        local y = x:scatter(0, L({{0, 1}}), 2.0, {reduce = 'multiply'})
        H.assert_error(function() y:sum():backward() end, 'not implemented')
    end)

    it('src larger than index: its gradient is zero where index does not reach', function()
        local s = ddpl.ones(2, 3, {dtype = 'float64', requires_grad = true})
        ddpl.zeros(2, 2, {dtype = 'float64'}):scatter(1, L({{1}, {0}}), s):sum():backward()
        assert.are.same({{1, 0, 0}, {1, 0, 0}}, s.grad:tolist())
    end)

    it('is differentiable: gradcheck in float64', function()
        local x = ddpl.randn(4, 3, {dtype = 'float64', requires_grad = true})
        local src = ddpl.randn(5, 3, {dtype = 'float64', requires_grad = true})
        local dup = L({{0, 1, 2}, {3, 3, 0}, {1, 1, 1}, {0, 2, 3}, {2, 0, 1}})
        local distinct = L({{0, 1, 2}, {3, 2, 0}})
        local gc = ddpl.autograd.gradcheck
        assert.is_true(gc(function(a, b) return a:scatter(0, distinct, b:narrow(0, 0, 2)) end,
                          {x, src}))
        assert.is_true(gc(function(a, b) return a:scatter_add(0, dup, b) end, {x, src}))
        for _, red in ipairs({'sum', 'mean', 'amax', 'amin', 'prod'}) do
            for _, inc in ipairs({true, false}) do
                assert.is_true(gc(function(a, b)
                    return a:scatter_reduce(0, dup, b, red, {include_self = inc})
                end, {x, src}), red)
            end
        end
    end)

    it('records in place on a non-leaf that requires grad', function()
        local w = ddpl.randn(3, 2, {dtype = 'float64', requires_grad = true})
        local src = ddpl.randn(1, 2, {dtype = 'float64', requires_grad = true})
        local h = w * 2
        h:scatter_add_(0, L({{2, 0}}), src)
        h:sum():backward()
        H.assert_close(w.grad, ddpl.full({3, 2}, 2, {dtype = 'float64'}))
        H.assert_close(src.grad, ddpl.ones(1, 2, {dtype = 'float64'}))
        H.assert_error(function() w:scatter_(0, L({{0, 0}}), 1.0) end, 'leaf')
    end)
end)

describe('index_add, index_copy, index_fill', function()
    it('in place, with the errors PyTorch gives', function()
        local x = ddpl.zeros(3, 2)
        x:index_add_(0, L({0, 0, 2}), ddpl.ones(3, 2), {alpha = 2})
        assert.are.same({{4, 4}, {0, 0}, {2, 2}}, x:tolist())
        x:index_copy_(1, L({1}), ddpl.tensor({{7.}, {8.}, {9.}}))
        assert.are.same({{4, 7}, {0, 8}, {2, 9}}, x:tolist())
        x:index_fill_(0, L({-1}), -1)
        assert.are.same({{4, 7}, {0, 8}, {-1, -1}}, x:tolist())
        H.assert_error(function() x:index_add_(0, L({3}), ddpl.ones(1, 2)) end, 'index_add',
                       'index 3')
        H.assert_error(function() x:index_copy_(0, L({-1}), ddpl.ones(1, 2)) end, 'index_copy_',
                       'index -1')
        H.assert_error(function() x:index_fill_(1, L({-3}), 0) end, 'index_fill_', 'index -3')
        assert.are.same({{4, 7}, {0, 8}, {-1, -1}}, x:tolist())
        H.assert_error(function() x:index_add(0, L({0}), ddpl.ones(1, 3)) end, 'same size')
        H.assert_error(function() x:index_add(0, L({0, 1}), ddpl.ones(1, 2)) end,
                       'number of indices')
        H.assert_error(function() x:index_add(0, L({{0}}), ddpl.ones(1, 2)) end, 'dimension 1')
        H.assert_error(function() x:index_add(0, L({0}), ddpl.ones(1, 2):double()) end,
                       'scalar type')
        H.assert_error(function() x:index_copy(0, ddpl.tensor({0.}), ddpl.ones(1, 2)) end,
                       'int64 or int32')
        H.assert_error(function()
            ddpl.zeros(2, {dtype = 'int64'}):index_add(0, L({0}), L({1}), {alpha = 0.5})
        end, 'alpha')
    end)

    it('is differentiable: gradcheck in float64', function()
        local x = ddpl.randn(4, 3, {dtype = 'float64', requires_grad = true})
        local s = ddpl.randn(4, 2, {dtype = 'float64', requires_grad = true})
        local gc = ddpl.autograd.gradcheck
        assert.is_true(gc(function(a, b)
            return a:index_add(1, L({2, 0}), b:narrow(0, 0, 4), {alpha = -1.5})
        end, {x, s}))
        assert.is_true(gc(function(a, b) return a:index_copy(1, L({2, 0}), b) end, {x, s}))
        assert.is_true(gc(function(a) return a:index_fill(0, L({1, -1}), 3) end, {x}))
    end)
end)

describe('masks, nonzero, take', function()
    it('masked_fill_ and masked_scatter_ write in place; masks must be bool', function()
        local x = ddpl.arange(6):float():view(2, 3)
        local m = ddpl.tensor({true, false, true})
        assert.are.equal(x, x:masked_fill_(m, -1))
        assert.are.same({{-1, 1, -1}, {-1, 4, -1}}, x:tolist())
        x:masked_scatter_(m, ddpl.tensor({10., 20., 30., 40., 50.}))
        assert.are.same({{10, 1, 20}, {30, 4, 40}}, x:tolist())
        H.assert_error(function() x:masked_scatter_(m, ddpl.ones(3)) end, 'masked_scatter',
                       'source')
        assert.are.same({{10, 1, 20}, {30, 4, 40}}, x:tolist())
        H.assert_error(function() x:masked_select(ddpl.ones(3)) end, 'masked_select', 'bool')
        H.assert_error(function() x:masked_fill_(ddpl.ones(2, 2, 3):bool(), 0) end,
                       'does not broadcast')
        H.assert_error(function() x:masked_select(ddpl.ones(4):bool()) end, 'masked_select')
    end)

    it('nonzero of empty and 0-dim tensors, and where with one argument', function()
        assert.are.same({0, 2}, H.shape(ddpl.zeros(0, 2):nonzero()))
        assert.are.same({1, 0}, H.shape(ddpl.tensor(3):nonzero()))
        assert.are.same({0, 0}, H.shape(ddpl.tensor(0):nonzero()))
        local t = ddpl.tensor(3):nonzero({as_tuple = true})
        assert.are.equal(1, #t)
        assert.are.same({0}, t[1]:tolist())
        local w = ddpl.where(ddpl.tensor({{0, 1}, {1, 1}}))
        assert.are.same({{0, 1, 1}, {1, 0, 1}}, {w[1]:tolist(), w[2]:tolist()})
        assert.are.equal('int64', H.dtype_name(w[1].dtype))
        -- a long input: the cumsum and the spare slot
        local big = ddpl.arange(100000):remainder(7):eq(3)
        local nz = big:nonzero()
        assert.are.equal(big:sum():item(), nz:size(0))
        assert.are.same({3, 10, 17}, nz:view(-1):narrow(0, 0, 3):tolist())
    end)

    it('take refuses out-of-range indices naming take; take_along_dim as PyTorch', function()
        local x = ddpl.arange(6):view(2, 3)
        H.assert_error(function() x:take(L({6})) end, 'take', 'index 6')
        H.assert_error(function() x:take(L({-7})) end, 'take', 'index -7')
        H.assert_error(function() ddpl.zeros(0):take(L({0})) end, 'empty')
        H.assert_error(function() x:take(ddpl.tensor({0.5})) end, 'take', 'int64')
        assert.are.same({}, x:take(L({})):tolist())
        H.assert_error(function() x:take_along_dim(L({0}), 0) end, 'same number of dimensions')
    end)

    -- Rows along a contiguous last dim of 4- or 8-byte elements take 64-byte gathers where the
    -- CPU has AVX-512, checking each block of 8 indices as they load (cpu_index.c): widths with
    -- and without a tail, bad indices in a vector block and in the tail, and the layouts that
    -- keep the general loop (bfloat16, a transposed x).
    it('gather along rows: every width and dtype, bad indices in any block', function()
        ddpl.manual_seed(29)
        for _, dt in ipairs({'float32', 'float64', 'int32', 'int64', 'bfloat16'}) do
            for _, n in ipairs({5, 8, 16, 1003}) do
                local x = ddpl.randn(3, 1003):mul(100):to(dt)
                local idx = ddpl.randint(0, 1003, {3, n})
                local got, xs, is = x:gather(1, idx):tolist(), x:tolist(), idx:tolist()
                for r = 1, 3 do
                    for i = 1, n do
                        assert(got[r][i] == xs[r][is[r][i] + 1],
                               ('%s n=%d [%d][%d]'):format(dt, n, r - 1, i - 1))
                    end
                end
                local xt = x:t():contiguous():t() -- strided along dim 1: the general loop
                assert.are.same(got, xt:gather(1, idx):tolist(), dt .. ' transposed')
            end
        end
        local x = ddpl.randn(2, 1003)
        for _, case in ipairs({{3, 1003}, {1001, -1}, {4, math.mininteger}, {1002, 5000}}) do
            local idx = ddpl.randint(0, 1003, {2, 1003})
            idx[1][case[1]] = case[2]
            H.assert_error(function() x:gather(1, idx) end, 'gather',
                           ('index %d is out of range for dimension 1 with size 1003'):format(case[2]))
        end
    end)

    it('is differentiable: gradcheck in float64', function()
        local x = ddpl.randn(3, 4, {dtype = 'float64', requires_grad = true})
        local s = ddpl.randn(12, {dtype = 'float64', requires_grad = true})
        local m = ddpl.tensor({true, false, true, true})
        local gc = ddpl.autograd.gradcheck
        assert.is_true(gc(function(a) return a:masked_select(m) end, {x}))
        assert.is_true(gc(function(a, b) return a:masked_scatter(m, b) end, {x, s}))
        assert.is_true(gc(function(a) return a:take(L({{-1, 0}, {5, 5}})) end, {x}))
        assert.is_true(gc(function(a) return a:take_along_dim(L({{1}, {0}, {3}}), 1) end, {x}))
    end)
end)

-- ---- CUDA against the CPU (pending without a device) ----
local function no_cuda()
    if ddpl.cuda.is_available() then return false end
    pending('no CUDA device')
    return true
end

local function same(got, expected, what)
    H.assert_close(got:cpu(), expected, 0, 0, what)
end

describe('cuda scatter and masks match the cpu', function()
    it('scatter reductions in every dtype, with duplicates (atomics and CAS loops)', function()
        if no_cuda() then return end
        local idx = ddpl.randint(0, 4, {30, 5})
        for _, dt in ipairs({'float32', 'float64', 'float16', 'bfloat16', 'int64', 'int32',
                             'int16', 'int8', 'uint8'}) do
            local x = ddpl.randint(1, 4, {4, 5}):to(dt)
            local s = ddpl.randint(1, 3, {30, 5}):to(dt)
            for _, red in ipairs({'sum', 'prod', 'amax', 'amin', 'mean'}) do
                if not (red == 'prod' and (dt == 'float16' or dt == 'bfloat16')) then
                    for _, inc in ipairs({true, false}) do
                        local o = {include_self = inc}
                        local tol = (dt == 'float16' or dt == 'bfloat16') and 1e-2 or 0
                        H.assert_close(x:cuda():scatter_reduce(0, idx:cuda(), s:cuda(), red, o):cpu(),
                                       x:scatter_reduce(0, idx, s, red, o), tol, tol,
                                       dt .. ' ' .. red)
                    end
                end
            end
            same(x:cuda():scatter_add(0, idx:cuda(), s:cuda()), x:scatter_add(0, idx, s),
                 dt .. ' scatter_add')
        end
        local b = ddpl.zeros(3, {dtype = 'bool'})
        same(b:cuda():scatter_add(0, L({0, 0, 2}):cuda(), ddpl.ones(3):bool():cuda()),
             b:scatter_add(0, L({0, 0, 2}), ddpl.ones(3):bool()), 'bool')
        -- distinct targets: a plain scatter is deterministic
        local x = ddpl.randn(5, 7)
        local pidx = ddpl.randperm(5):view(5, 1):expand(5, 7):contiguous()
        same(x:cuda():scatter(0, pidx:cuda(), x:cuda() * 2), x:scatter(0, pidx, x * 2), 'scatter')
        same(x:cuda():scatter(1, L({{6}, {0}}):cuda(), -1), x:scatter(1, L({{6}, {0}}), -1),
             'scatter value')
    end)

    it('index ops, masks, nonzero, take and gradients', function()
        if no_cuda() then return end
        local x = ddpl.randn(6, 5)
        local i = L({5, 0, 5, 2})
        same(x:cuda():index_add(0, i:cuda(), ddpl.ones(4, 5):cuda()),
             x:index_add(0, i, ddpl.ones(4, 5)), 'index_add')
        same(x:cuda():index_copy(1, L({4, 0}):cuda(), ddpl.ones(6, 2):cuda()),
             x:index_copy(1, L({4, 0}), ddpl.ones(6, 2)), 'index_copy')
        same(x:cuda():index_fill(1, L({-1}):cuda(), 3), x:index_fill(1, L({-1}), 3), 'index_fill')
        local m = x:gt(0)
        same(x:cuda():masked_select(m:cuda()), x:masked_select(m), 'masked_select')
        same(m:cuda():nonzero(), m:nonzero(), 'nonzero')
        same(x:cuda():masked_scatter(m:cuda(), ddpl.arange(30):float():cuda()),
             x:masked_scatter(m, ddpl.arange(30):float()), 'masked_scatter')
        same(x:cuda():take(L({-1, 3, 29}):cuda()), x:take(L({-1, 3, 29})), 'take')
        local xc = x:cuda():requires_grad_()
        xc:scatter_reduce(0, L({{1, 1, 1, 1, 1}}):cuda(), ddpl.zeros(1, 5):cuda(), 'amax')
            :sum():backward()
        local xg = x:clone():requires_grad_()
        xg:scatter_reduce(0, L({{1, 1, 1, 1, 1}}), ddpl.zeros(1, 5), 'amax'):sum():backward()
        H.assert_close(xc.grad:cpu(), xg.grad, 1e-6, 1e-6, 'amax gradient')
    end)

    it('a bad index surfaces at the next synchronisation, naming the op', function()
        if no_cuda() then return end
        local x = ddpl.zeros(3, 2):cuda()
        H.assert_error(function()
            x:scatter_(0, L({{0, 3}}):cuda(), 1.0)
            x:cpu()
        end, 'scatter_', 'index 3', 'size 3')
        H.assert_error(function()
            x:index_copy(0, L({7}):cuda(), ddpl.ones(1, 2):cuda()):cpu()
        end, 'index_copy', 'index 7')
        H.assert_error(function() x:take(L({-9}):cuda()):cpu() end, 'take', 'index -9')
    end)
end)
