-- spec/tensor/advanced_index_spec.lua: the C core of advanced indexing (ddpl_index, reached
-- through the private x:_index(list) until x[...] binds it) and index_put / index_put_ against
-- PyTorch (spec/fixtures/scatter.lua, tools/gen_scatter_fixtures.py): index tensors with
-- duplicates and negative values, broadcasting, bool masks, the result dims where PyTorch puts
-- them (adjacent indexed dims in place, separated ones first), gradients; then the errors,
-- gradcheck, in place, and CUDA against the CPU (pending without a device).
local H = require 'helpers'
local ddpl = H.ddpl

-- the entries of a case: o.n of them, false (a full slice) at o.slices, else the next inputs
local function entries(ins, first, o)
    local slice = {}
    for _, p in ipairs(o.slices or {}) do slice[p] = true end
    local e, k = {}, first
    for p = 1, o.n do
        if slice[p] then
            e[p] = false
        else
            e[p] = ins[k]
            k = k + 1
        end
    end
    return e, k
end

local runners = {
    index = function(ins, o) return ins[1]:_index((entries(ins, 2, o))) end,
    index_put = function(ins, o)
        local e, k = entries(ins, 2, o)
        return ins[1]:index_put(e, ins[k], {accumulate = o.accumulate})
    end,
}

describe('advanced indexing matches PyTorch', function()
    local mine = {}
    for _, c in ipairs(H.fixture('scatter')) do
        if runners[c.op] then mine[#mine + 1] = c end
    end
    H.run_cases(mine, runners, it)
end)

local function L(t) return ddpl.tensor(t, {dtype = 'int64'}) end

describe('ddpl_index (x:_index)', function()
    it('places the result dims as PyTorch', function()
        local x = ddpl.zeros(2, 3, 4, 5)
        local i = L({0, 1, 0})
        assert.are.same({2, 3, 5}, H.shape(x:_index({false, i, i})))
        assert.are.same({3, 3, 4}, H.shape(x:_index({i, false, false, i})))
        assert.are.same({2, 3, 4, 5}, H.shape(x:_index({false})))
        assert.are.same({2, 2, 3, 4, 5}, H.shape(x:_index({L({{0, 1}, {1, 0}})})))
        assert.are.same({2, 3, 2, 5}, H.shape(x:_index({false, false, L({0, 3})})))
    end)

    it('takes empty indices', function()
        local x = ddpl.arange(12):view(3, 4)
        assert.are.same({0, 4}, H.shape(x:_index({L({})})))
        assert.are.same({3, 0}, H.shape(x:_index({false, L({})})))
        assert.are.same(x:tolist(), x:index_put({L({})}, 5):tolist())
    end)

    it('takes int32 indices as int64 ones', function()
        local x = ddpl.arange(12):view(3, 4)
        assert.are.same(x:_index({L({2, -1})}):tolist(),
                        x:_index({ddpl.tensor({2, -1}, {dtype = 'int32'})}):tolist())
    end)

    it('refuses bad indices naming the op', function()
        local x = ddpl.arange(12):float():view(3, 4)
        H.assert_error(function() x:_index({L({3})}) end, 'index', 'index 3', 'size 3')
        H.assert_error(function() x:_index({false, L({-5})}) end, 'index -5', 'size 4')
        H.assert_error(function() x:_index({false, false, L({0})}) end, 'too many indices')
        H.assert_error(function() x:_index({false, false, false}) end, 'too many indices')
        H.assert_error(function() x:_index({ddpl.ones(3, 3):bool()}) end, 'shape of the mask')
        H.assert_error(function() x:_index({L({0, 1}), L({0, 1, 2})}) end, 'index')
        H.assert_error(function() x:_index({ddpl.tensor({0.5})}) end, 'int64 or int32')
        H.assert_error(function() x:index_put({L({0})}, ddpl.ones(5)) end, 'index_put',
                       'shape mismatch')
        H.assert_error(function() x:index_put({L({0})}, ddpl.ones(4):double()) end, 'dtypes')
    end)

    it('is differentiable: gradcheck in float64', function()
        local x = ddpl.randn(4, 3, 2, {dtype = 'float64', requires_grad = true})
        local v = ddpl.randn(3, 2, {dtype = 'float64', requires_grad = true})
        local gc = ddpl.autograd.gradcheck
        local m = ddpl.tensor({{true, false, true}, {false, false, true}, {true, true, true},
                               {false, false, false}})
        assert.is_true(gc(function(a) return a:_index({L({0, -1, 0})}) end, {x}))
        assert.is_true(gc(function(a) return a:_index({m}) end, {x}))
        assert.is_true(gc(function(a) return a:_index({L({1, 2}), false, L({1, 0})}) end, {x}))
        assert.is_true(gc(function(a, b)
            return a:index_put({L({0, 0, 3})}, b, {accumulate = true})
        end, {x, v}))
        assert.is_true(gc(function(a, b) return a:index_put({L({2, 0, 3})}, b) end, {x, v}))
    end)
end)

describe('index_put_', function()
    it('writes in place, accumulates duplicates, returns x; errors leave x untouched', function()
        local x = ddpl.zeros(3, 3)
        assert.are.equal(x, x:index_put_({L({0, 0, 2}), L({1, 1, -1})}, ddpl.tensor({1., 2., 3.}),
                                         {accumulate = true}))
        assert.are.same({{0, 3, 0}, {0, 0, 0}, {0, 0, 3}}, x:tolist())
        x:index_put_({x:gt(2)}, -1)
        assert.are.same({{0, -1, 0}, {0, 0, 0}, {0, 0, -1}}, x:tolist())
        H.assert_error(function() x:index_put_({L({0, 5})}, 1) end, 'index_put', 'index 5')
        assert.are.same({{0, -1, 0}, {0, 0, 0}, {0, 0, -1}}, x:tolist())
        H.assert_error(function() x:index_put_({L({0})}, 1, {accumulate = 1, foo = 2}) end,
                       'unknown option')
    end)

    it('records in place on a non-leaf; refuses a leaf that requires grad', function()
        local w = ddpl.randn(3, 2, {dtype = 'float64', requires_grad = true})
        local v = ddpl.randn(2, {dtype = 'float64', requires_grad = true})
        local h = w * 3
        h:index_put_({L({1})}, v)
        h:sum():backward()
        H.assert_close(w.grad, ddpl.tensor({{3., 3.}, {0., 0.}, {3., 3.}}, {dtype = 'float64'}))
        H.assert_close(v.grad, ddpl.ones(2, {dtype = 'float64'}))
        H.assert_error(function() w:index_put_({L({0})}, 1) end, 'leaf')
    end)
end)

describe('cuda advanced indexing matches the cpu', function()
    it('index, index_put, bad indices', function()
        if not ddpl.cuda.is_available() then
            pending('no CUDA device')
            return
        end
        local x = ddpl.randn(5, 4, 3)
        local m = x:select(2, 0):gt(0)
        local i, j = L({4, 0, -1}), L({3, 3, 0})
        H.assert_close(x:cuda():_index({i:cuda(), false, L({2, 1, 0}):cuda()}):cpu(),
                       x:_index({i, false, L({2, 1, 0})}), 0, 0, 'separated')
        H.assert_close(x:cuda():_index({m:cuda()}):cpu(), x:_index({m}), 0, 0, 'mask')
        H.assert_close(x:cuda():index_put({i:cuda(), j:cuda()}, ddpl.ones(3):cuda(),
                                          {accumulate = true}):cpu(),
                       x:index_put({i, j}, ddpl.ones(3), {accumulate = true}), 1e-6, 1e-6, 'put')
        H.assert_error(function() x:cuda():_index({L({0, 5}):cuda()}):cpu() end, 'index 5')
    end)
end)
