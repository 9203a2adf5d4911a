-- spec/tensor/int_dtypes_spec.lua: the int8 and int16 dtypes: creation, element_size, printing,
-- safetensors round trips (I8/I16) and the object wire format, the :char()/:short()/:type()
-- casts, and PyTorch's values (spec/fixtures/int_dtypes.lua, tools/gen_dtype_fixtures.py) for
-- wraparound arithmetic, promotion with every other dtype, comparisons, reductions and
-- conversions.
local H = require 'helpers'
local ddpl = H.ddpl

local function dt(t) return H.dtype_name(t.dtype) end

local runners = {
    add = function(ins) return ins[1] + ins[2] end,
    sub = function(ins) return ins[1] - ins[2] end,
    mul = function(ins) return ins[1] * ins[2] end,
    div = function(ins) return ins[1] / ins[2] end,
    neg = function(ins) return -ins[1] end,
    abs = function(ins) return ins[1]:abs() end,
    maximum = function(ins) return ddpl.maximum(ins[1], ins[2]) end,
    minimum = function(ins) return ddpl.minimum(ins[1], ins[2]) end,
    eq = function(ins) return ins[1]:eq(ins[2]) end,
    lt = function(ins) return ins[1]:lt(ins[2]) end,
    ge = function(ins) return ins[1]:ge(ins[2]) end,
    sum = function(ins, o) return o.dim and ins[1]:sum(o.dim) or ins[1]:sum() end,
    prod = function(ins, o) return ins[1]:prod(o.dim) end,
    max = function(ins) return ins[1]:max() end,
    min = function(ins, o) return (ins[1]:min(o.dim)) end,
    argmax = function(ins, o) return ins[1]:argmax(o.dim) end,
    to = function(ins, o) return ins[1]:to(o.dtype) end,
}

describe('int8 and int16 against PyTorch', function()
    H.run_cases(H.fixture('int_dtypes'), runners, it)
end)

describe('int8 and int16 tensors', function()
    for _, name in ipairs({'int8', 'int16'}) do
        local size = name == 'int8' and 1 or 2
        it(name .. ' creation functions keep the dtype', function()
            local made = {
                ddpl.zeros(2, 3, {dtype = name}), ddpl.ones(2, 3, {dtype = name}),
                ddpl.empty(2, 3, {dtype = name}), ddpl.full({2, 3}, 7, {dtype = name}),
                ddpl.tensor({{1, 2, 3}, {4, 5, 6}}, {dtype = name}),
                ddpl.arange(6, {dtype = name}):view(2, 3),
                ddpl.randint(-5, 5, {2, 3}, {dtype = name}),
            }
            for i, t in ipairs(made) do
                assert.are.equal(name, dt(t), 'creation #' .. i)
                assert.are.same({2, 3}, H.shape(t), 'creation #' .. i)
                assert.are.equal(size, t:element_size(), 'creation #' .. i)
            end
            H.assert_close(made[1], {0, 0, 0, 0, 0, 0})
            H.assert_close(made[2], {1, 1, 1, 1, 1, 1})
            H.assert_close(made[4], {7, 7, 7, 7, 7, 7})
            H.assert_close(made[6], {0, 1, 2, 3, 4, 5})
            for _, v in ipairs(H.values(made[7])) do
                assert.is_true(v >= -5 and v < 5, 'randint value ' .. v)
            end
        end)
    end

    it('has the PyTorch cast methods :char() and :short()', function()
        local x = ddpl.tensor({1.5, -2.5, 300})
        assert.are.equal('int8', dt(x:char()))
        assert.are.equal('int16', dt(x:short()))
        H.assert_close(x:short(), {1, -2, 300})
        assert.are.equal('int16', dt(x:to('short'))) -- torch.short
        assert.are.equal('int8', dt(x:to({dtype = 'int8'})))
        assert.are.equal('int16', dt(ddpl.zeros(2, {dtype = 'int8'}):type_as(x:short())))
    end)

    it('has x:type() with PyTorch\'s type names', function()
        local x = ddpl.tensor({1.5, -2.5, 300})
        assert.are.equal('torch.FloatTensor', x:type())
        assert.are.equal('torch.CharTensor', x:char():type())
        assert.are.equal('torch.ShortTensor', x:type('int16'):type())
        local c = x:type('torch.CharTensor')
        assert.are.equal('int8', dt(c))
        H.assert_close(c, {1, -2, 44}) -- 300 wraps modulo 256, as PyTorch on x86-64
        assert.are.equal('torch.DoubleTensor', c:type('torch.DoubleTensor'):type())
        H.assert_error(function() return x:type('torch.QuadTensor') end, 'type', 'torch.QuadTensor')
        H.assert_error(function() return x:type(3) end, 'type')
    end)

    it('reads back exact values with item and tolist', function()
        local x = ddpl.tensor({-128, 127}, {dtype = 'int8'})
        assert.are.same({-128, 127}, x:tolist())
        assert.are.equal(-128, x[0]:item()) -- indexing is 0-based, as in PyTorch
        assert.are.equal('integer', math.type(x[0]:item()))
        local y = ddpl.tensor({-32768, 32767}, {dtype = 'int16'})
        assert.are.same({-32768, 32767}, y:tolist())
    end)

    it('prints like PyTorch, with the dtype', function()
        assert.are.equal('tensor([ 127, -128,    5], dtype=int8)',
                         tostring(ddpl.tensor({127, -128, 5}, {dtype = 'int8'})))
        assert.are.equal('tensor([[    1, -2000],\n        [32767,     0]], dtype=int16)',
                         tostring(ddpl.tensor({{1, -2000}, {32767, 0}}, {dtype = 'int16'})))
        assert.are.equal('tensor([], dtype=int8)', tostring(ddpl.zeros(0, {dtype = 'int8'})))
    end)

    it('round-trips through safetensors as I8 and I16', function()
        local path = os.tmpname()
        local a = ddpl.tensor({{-128, 0, 127}}, {dtype = 'int8'})
        local b = ddpl.tensor({-32768, 1, 32767}, {dtype = 'int16'})
        ddpl.save({a = a, b = b}, path)
        local f = assert(io.open(path, 'rb'))
        local bytes = f:read('a')
        f:close()
        assert.truthy(bytes:find('"dtype":"I8"', 1, true), 'header names I8')
        assert.truthy(bytes:find('"dtype":"I16"', 1, true), 'header names I16')
        local back = ddpl.load(path)
        os.remove(path)
        assert.are.equal('int8', dt(back.a))
        assert.are.equal('int16', dt(back.b))
        assert.are.same({{-128, 0, 127}}, back.a:tolist())
        assert.are.same({-32768, 1, 32767}, back.b:tolist())
    end)

    it('crosses the object collectives\' wire format', function()
        local S = require 'ddplua.core.serialize'
        local back = S.loads(S.dumps({a = ddpl.tensor({-128, 127}, {dtype = 'int8'}),
                                      b = ddpl.tensor({-32768, 7}, {dtype = 'int16'})}))
        assert.are.equal('int8', dt(back.a))
        assert.are.equal('int16', dt(back.b))
        assert.are.same({-128, 127}, back.a:tolist())
        assert.are.same({-32768, 7}, back.b:tolist())
    end)

    it('sums into int64 without wrapping, as PyTorch', function()
        local x = ddpl.full({1000}, 127, {dtype = 'int8'})
        local s = x:sum()
        assert.are.equal('int64', dt(s))
        assert.are.equal(127000, s:item())
        assert.are.equal('int64', dt(ddpl.ones(3, {dtype = 'int16'}):sum(0)))
    end)

    it('refuses float-only operations with a clear error', function()
        local x = ddpl.ones(2, 3, {dtype = 'int8'})
        H.assert_error(function() return x:mean() end, 'mean', 'int8')
        H.assert_error(function() return ddpl.ones(2, {dtype = 'int16', requires_grad = true}) end,
                       'int16')
        H.assert_error(function() return ddpl.zeros(2, {dtype = 'int4'}) end, "unknown dtype 'int4'",
                       'int16, int8')
        -- as PyTorch: a range or fill value the dtype cannot hold is an error, not a wrap
        H.assert_error(function() return ddpl.randint(0, 1000, {3}, {dtype = 'int8'}) end,
                       'randint', '[0, 1000)', 'int8', '[-128, 127]')
        H.assert_error(function() return ddpl.randint(-40000, 0, {3}, {dtype = 'int16'}) end,
                       'randint', 'int16')
        H.assert_error(function() return ddpl.full({2}, 300, {dtype = 'int8'}) end, 'full', '300',
                       'int8', 'overflow')
        H.assert_error(function() return ddpl.full_like(x, -129) end, 'full_like', 'int8')
        assert.are.equal('int8', dt(ddpl.randint(-128, 128, {64}, {dtype = 'int8'}))) -- the full range
    end)

    it('module:to(dtype) leaves int8 buffers alone, as floating conversions do', function()
        local net = ddpl.nn.Linear(2, 2)
        net:register_buffer('codes', ddpl.tensor({1, 2}, {dtype = 'int8'}))
        net:to('float64')
        assert.are.equal('float64', dt(net.weight))
        assert.are.equal('int8', dt(net.codes))
    end)
end)
