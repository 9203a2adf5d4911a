-- spec/tensor/rng_state_spec.lua: the generator's state (ddpl.get_rng_state / set_rng_state, and
-- the same functions under ddpl.cuda) restores the draws that followed it, survives a checkpoint,
-- and is checked before it is taken; ddpl.load accepts PyTorch's map_location.
local H = require 'helpers'
local ddpl = H.ddpl

local function list_equal(x, y)
    if #x ~= #y then return false end
    for i = 1, #x do if x[i] ~= y[i] then return false end end
    return true
end

local function same(a, b) -- equal shapes and bit-equal values
    return list_equal(H.shape(a), H.shape(b)) and list_equal(H.values(a), H.values(b))
end

describe('rng state', function()
    it('is a uint8 cpu tensor of 16 bytes', function()
        local s = ddpl.get_rng_state()
        assert.are.equal('uint8', s.dtype)
        assert.are.same({16}, s:size())
        assert.are.equal('cpu', tostring(s.device))
    end)

    it('makes the draws that followed it repeat: rand, randn, randint, randperm, dropout', function()
        ddpl.manual_seed(7)
        ddpl.rand(3) -- move the counter off its start
        local s = ddpl.get_rng_state()
        local a = {ddpl.rand(5), ddpl.randn(4, 2), ddpl.randint(0, 10, {6}), ddpl.randperm(9),
                   ddpl.F.dropout(ddpl.ones(8), 0.5, true)}
        ddpl.set_rng_state(s)
        local b = {ddpl.rand(5), ddpl.randn(4, 2), ddpl.randint(0, 10, {6}), ddpl.randperm(9),
                   ddpl.F.dropout(ddpl.ones(8), 0.5, true)}
        for i = 1, #a do assert.is_true(same(a[i], b[i]), 'draw ' .. i) end
        -- and differs from a state taken elsewhere in the stream
        assert.is_false(same(ddpl.rand(5), a[1]))
    end)

    it('keeps the seed: a state taken after manual_seed(n) equals the start of seed n', function()
        ddpl.manual_seed(123)
        local s = ddpl.get_rng_state()
        local a = ddpl.rand(4)
        ddpl.manual_seed(99)
        ddpl.rand(10)
        ddpl.set_rng_state(s)
        assert.is_true(same(a, ddpl.rand(4)))
    end)

    it('survives a checkpoint (ddpl.save / ddpl.load, with map_location)', function()
        local p = os.tmpname()
        ddpl.manual_seed(5)
        ddpl.randn(7)
        ddpl.save({rng = ddpl.get_rng_state(), step = 3}, p)
        local want = ddpl.randn(6)
        ddpl.manual_seed(0)
        local ck = ddpl.load(p, {map_location = 'cpu'})
        ddpl.set_rng_state(ck.rng)
        assert.is_true(same(want, ddpl.randn(6)))
        assert.are.equal(3, ck.step)
        os.remove(p)
    end)

    it('is one generator for cpu and cuda: ddpl.cuda has the same functions', function()
        ddpl.cuda.manual_seed(21)
        local s = ddpl.cuda.get_rng_state()
        assert.is_true(same(s, ddpl.get_rng_state()))
        local a = ddpl.rand(4)
        ddpl.rand(9)
        ddpl.cuda.set_rng_state(s)
        assert.is_true(same(a, ddpl.rand(4)))
    end)

    it('reads a strided view of the state bytes', function()
        ddpl.manual_seed(11)
        local s = ddpl.get_rng_state()
        local a = ddpl.rand(3)
        local wide = ddpl.zeros(16, 2, {dtype = 'uint8'})
        wide:select(1, 0):copy_(s)
        ddpl.rand(5)
        ddpl.set_rng_state(wide:select(1, 0))
        assert.is_true(same(a, ddpl.rand(3)))
    end)

    it('refuses anything but a state, naming what it got, and keeps the generator', function()
        ddpl.manual_seed(3)
        local before = ddpl.get_rng_state()
        H.assert_error(function() ddpl.set_rng_state(ddpl.zeros(16)) end,
                       'set_rng_state: expected the uint8 cpu tensor of 16 elements', 'float32')
        H.assert_error(function() ddpl.set_rng_state(ddpl.zeros(15, {dtype = 'uint8'})) end,
                       '15 elements')
        H.assert_error(function() ddpl.set_rng_state(ddpl.zeros(2, 8, {dtype = 'uint8'})) end,
                       '2 dims')
        H.assert_error(function() ddpl.set_rng_state('abc') end, 'set_rng_state')
        assert.is_true(same(before, ddpl.get_rng_state()))
    end)
end)

describe('load options', function()
    it('map_location names the device, as device does; both at once is an error', function()
        local p = os.tmpname()
        ddpl.save({w = ddpl.ones(2)}, p)
        assert.are.equal('cpu', tostring(ddpl.load(p, {map_location = 'cpu'}).w.device))
        H.assert_error(function() ddpl.load(p, {device = 'cpu', map_location = 'cpu'}) end,
                       'load: give device or map_location, not both')
        H.assert_error(function() ddpl.load(p, {map_location = 'gpu'}) end, "unknown device 'gpu'")
        os.remove(p)
    end)
end)
