-- spec/tensor/indexing_spec.lua: x[key] and x[key] = v beyond one integer (engine/lua/bind_index.c;
-- issue 29, item 2) against PyTorch (spec/fixtures/indexing.lua, tools/gen_indexing_fixtures.py):
-- index tensors, masks, integers and slices mixed per dim, on both sides of an assignment, with
-- gradients, on the CPU and (where there is one, or on the emulation build) CUDA; then the rules
-- PyTorch's fixtures cannot show (views, int32 indices, in-place autograd) and the errors.
local H = require 'helpers'
local ddpl = H.ddpl

-- The Lua key of a fixture key: entries {i = n}, {s = {a, b, step}}, {t = k} (input k).
local function lua_key(o, ins)
    if o.tensor_key then return ins[o.tensor_key] end
    local key = {}
    for i, e in ipairs(o.key) do
        if e.i then
            key[i] = e.i
        elseif e.s then
            key[i] = {e.s[1], e.s[2], e.s[3]}
        else
            key[i] = ins[e.t]
        end
    end
    return key
end

local function runners(device)
    local function on(t) return device == 'cpu' and t or t:to(device) end
    local function moved(ins)
        local out = {}
        for i, t in ipairs(ins) do out[i] = on(t) end
        return out
    end
    return {
        index = function(ins, o)
            local m = moved(ins)
            return m[1][lua_key(o, m)]:cpu()
        end,
        index_set = function(ins, o)
            local m = moved(ins)
            local y = m[1]:clone()
            y[lua_key(o, m)] = o.number or m[2]
            return y:cpu()
        end,
    }
end

describe('indexing matches PyTorch (cpu)', function()
    H.run_cases(H.fixture('indexing'), runners('cpu'), it)
end)

if ddpl.cuda.is_available() then
    describe('indexing matches PyTorch (cuda)', function()
        H.run_cases(H.fixture('indexing'), runners('cuda'), it)
    end)
end

describe('indexing rules', function()
    it('integers and slices alone give views; tensors give copies', function()
        local x = ddpl.arange(12):view(3, 4)
        local v = x[{{1, 3}, {0, nil, 2}}]
        assert.are.same({{4, 6}, {8, 10}}, v:tolist())
        assert.is_true(v:_is_view())
        v:fill_(-1)
        assert.are.same({{0, 1, 2, 3}, {-1, 5, -1, 7}, {-1, 9, -1, 11}}, x:tolist())
        local c = x[ddpl.tensor({0}, {dtype = 'int64'})]
        c:fill_(9)
        assert.are.same({0, 1, 2, 3}, x[0]:tolist())
    end)

    it('an empty index gives an empty result of the right shape', function()
        local x = ddpl.ones(3, 4, 5)
        local e = x[ddpl.tensor({}, {dtype = 'int64'})]
        assert.are.same({0, 4, 5}, e:shape())
        assert.are.same({3, 4, 0}, x[{{}, {}, ddpl.tensor({}, {dtype = 'int64'})}]:shape())
    end)

    it('int32 indices index as int64 ones (PyTorch 1.13 refuses them, later ones do not)',
       function()
        local x = ddpl.arange(10) * 3
        local i64 = ddpl.tensor({4, -1, 0}, {dtype = 'int64'})
        assert.are.same(x[i64]:tolist(), x[i64:int()]:tolist())
    end)

    it("x[mask] = v on a tensor that requires grad is recorded (PyTorch's example)", function()
        local w = ddpl.tensor({-1, 2, -3, 4}, {dtype = 'float64', requires_grad = true})
        local h = w * 2
        h[h:lt(0)] = 0 -- a hand-written relu
        h:sum():backward()
        assert.are.same({0, 2, 0, 2}, w.grad:tolist())
        assert.are.same({0, 4, 0, 8}, h:detach():tolist())
    end)

    it('writing into a view of a leaf that requires grad is refused, as PyTorch', function()
        local w = ddpl.ones(3, {requires_grad = true})
        H.assert_error(function() w[{{0, 2}}] = 0 end, 'leaf')
        H.assert_error(function() w[ddpl.tensor({0}, {dtype = 'int64'})] = 0 end, 'leaf')
        assert.are.same({1, 1, 1}, w:detach():tolist())
    end)

    it('bad keys are errors naming the problem', function()
        local x = ddpl.zeros(2, 3)
        H.assert_error(function() return x[{0, 0, 0}] end, 'too many indices', 'dimension 2')
        H.assert_error(function() return x[{'a'}] end, 'entry 1', 'string')
        H.assert_error(function() return x[{{0, 1.5}}] end, 'slice', 'integers')
        H.assert_error(function() return x[{{0, 2, 0}}] end, 'step must be positive')
        H.assert_error(function() return x[ddpl.ones(2)] end, 'long, int, byte or bool')
        H.assert_error(function() return x[ddpl.tensor({5}, {dtype = 'int64'})] end, 'index')
        H.assert_error(function() return x[0.5] end, 'expected an integer')
        H.assert_error(function() x[{0}] = 'v' end, 'setindex')
        H.assert_error(function() x[ddpl.tensor({0}, {dtype = 'int64'})] = ddpl.ones(2) end,
                       'setindex')
        assert.are.same({{0, 0, 0}, {0, 0, 0}}, x:tolist())
    end)

    it('a boolean value assigns 1 or 0, as Python\'s bool (x[mask] = False)', function()
        local x = ddpl.tensor({1.5, 2.5, 3.5})
        x[x:gt(2)] = true
        x[0] = false
        assert.are.same({0, 1, 1}, x:tolist())
        local b = ddpl.tensor({true, true, false})
        b[b] = false -- the mask is b itself: PyTorch's masked_fill_, allowed
        b[{{2}}] = true
        assert.are.same({false, false, true}, b:tolist())
        x.requires_grad = true -- a field, not an element: stays a boolean
        assert.is_true(x.requires_grad)
    end)
end)
