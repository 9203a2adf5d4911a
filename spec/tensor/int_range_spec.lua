-- spec/tensor/int_range_spec.lua: a Lua number that an integer dtype cannot hold is refused where
-- PyTorch refuses it (torch.tensor, full, full_like, fill_, x[i] = v, masked_fill, clamp with
-- integer bounds, where with an integer number) and wraps where PyTorch wraps (arithmetic with
-- a number: int8 0 + 300 is 44). Each expectation below is what torch 1.13 gives for the same
-- call (c10::overflows: uint8 takes negatives down to -255, which wrap; a float must lie in the
-- range before truncation, so 127.9 does not fit int8 and 3.7 does). The floating dtypes are
-- checked the same way where PyTorch checks them (full, fill_, x[i] = v, masked_fill, where): a
-- finite number beyond the largest finite value is refused (float16: 65504.5, 1e10), infinities
-- and NaN are stored; torch.tensor rounds such a number to inf instead.
local ddpl = require 'ddplua'

local function values(t) return t:tolist() end

-- asserts that fn raises "<fname>: value <shown> cannot be converted to dtype <dtype> ..."
local function refuses(fname, shown, dtype, fn)
    local ok, err = pcall(fn)
    assert.is_false(ok, fname .. ' accepted ' .. shown .. ' for ' .. dtype)
    local want = ('%s: value %s cannot be converted to dtype %s without overflow'):format(
        fname, shown, dtype)
    assert.is_truthy(tostring(err):find(want, 1, true), 'got: ' .. tostring(err))
end

-- asserts that full, full_like, fill_, x[i] = v and masked_fill all refuse v for dtype (shown
-- as s), and that the refusals wrote nothing into x; returns x (two zeros)
local function refuses_fills(s, v, dtype)
    refuses('full', s, dtype, function() return ddpl.full({2}, v, {dtype = dtype}) end)
    local x = ddpl.zeros(2, {dtype = dtype})
    refuses('full_like', s, dtype, function() return ddpl.full_like(x, v) end)
    refuses('fill_', s, dtype, function() return x:fill_(v) end)
    refuses('setindex', s, dtype, function() x[0] = v end)
    refuses('masked_fill', s, dtype, function()
        return x:masked_fill(ddpl.tensor({true, false}), v)
    end)
    assert.are.same({0, 0}, values(x:double()))
    return x
end

describe('integer dtype ranges', function()
    -- {dtype, value, fits (as PyTorch: nil = refused), stored value}
    local cases = {
        {'int8', 127, 127}, {'int8', -128, -128}, {'int8', 128}, {'int8', -129}, {'int8', 300},
        {'int8', 3.7, 3}, {'int8', 127.9}, {'int8', -128.9}, {'int8', 128.0},
        {'uint8', 255, 255}, {'uint8', 256}, {'uint8', -1, 255}, {'uint8', -255, 1},
        {'uint8', -256}, {'uint8', -0.5}, {'uint8', 255.5},
        {'int16', 32767, 32767}, {'int16', 32768}, {'int16', -32769},
        {'int32', 2147483647, 2147483647}, {'int32', 2147483648}, {'int32', -2147483649},
        {'int32', 1.5e10}, {'int64', 1e20}, {'int64', math.maxinteger, math.maxinteger},
    }
    local shown = tostring -- as the message shows it: 300, 128.0, 1e+20

    for _, c in ipairs(cases) do
        local dtype, v, stored = c[1], c[2], c[3]
        local what = ('%s %s'):format(dtype, shown(v))
        if stored ~= nil then
            it('ddpl.tensor, full and fill_ store ' .. what .. ' as ' .. stored, function()
                assert.are.same({stored}, values(ddpl.tensor({v}, {dtype = dtype})))
                assert.are.same({stored, stored}, values(ddpl.full({2}, v, {dtype = dtype})))
                assert.are.same({stored}, values(ddpl.zeros(1, {dtype = dtype}):fill_(v)))
            end)
        else
            it('refuses ' .. what .. ' in ddpl.tensor, full, full_like, fill_, x[i] = v and '
                   .. 'masked_fill', function()
                local s = shown(v)
                refuses('tensor', s, dtype, function() return ddpl.tensor({1, v}, {dtype = dtype}) end)
                refuses('tensor', s, dtype, function() return ddpl.tensor(v, {dtype = dtype}) end)
                refuses_fills(s, v, dtype)
            end)
        end
    end

    it('refuses NaN and infinities for every integer dtype', function()
        for _, dtype in ipairs({'int8', 'uint8', 'int16', 'int32', 'int64'}) do
            for _, v in ipairs({0 / 0, 1 / 0, -1 / 0}) do
                assert.has_error(function() ddpl.tensor({v}, {dtype = dtype}) end)
                assert.has_error(function() ddpl.zeros(1, {dtype = dtype}):fill_(v) end)
            end
        end
    end)

    it('checks a one-element tensor given as a fill value', function()
        refuses('fill_', '300.0', 'int8',
                function() return ddpl.zeros(1, {dtype = 'int8'}):fill_(ddpl.tensor(300)) end)
        refuses('masked_fill', '300.0', 'int8', function()
            return ddpl.zeros(1, {dtype = 'int8'}):masked_fill(ddpl.tensor({true}), ddpl.tensor(300))
        end)
    end)

    it('refuses an integer clamp bound out of range, promotes for a float bound', function()
        local x = ddpl.tensor({-5, 5}, {dtype = 'int8'})
        refuses('clamp', '300', 'int8', function() return x:clamp(0, 300) end)
        refuses('clamp', '-300', 'int8', function() return x:clamp({min = -300}) end)
        refuses('clamp_', '300', 'int8', function() return x:clamp_(0, 300) end)
        assert.are.same({-5, 5}, values(x))
        assert.are.same({0, 5}, values(x:clamp(0, 100)))
        local y = x:clamp(0, 1.5) -- PyTorch: float32 [0., 1.5]
        assert.are.equal('float32', y.dtype)
        assert.are.same({0, 1.5}, values(y))
    end)

    it('refuses an integer number beside an integer tensor in where, promotes a float', function()
        local c, x = ddpl.tensor({true, false}), ddpl.zeros(2, {dtype = 'int8'})
        refuses('where', '300', 'int8', function() return ddpl.where(c, x, 300) end)
        refuses('where', '300', 'int8', function() return ddpl.where(c, 300, x) end)
        local u = ddpl.where(c, -1, ddpl.zeros(2, {dtype = 'uint8'}))
        assert.are.equal('uint8', u.dtype)
        assert.are.same({255, 0}, values(u))
        local f = ddpl.where(c, x, 300.0)
        assert.are.equal('float32', f.dtype)
        assert.are.same({0, 300}, values(f))
    end)

    it('wraps in arithmetic with a number, as PyTorch does', function()
        assert.are.same({44, 44}, values(ddpl.zeros(2, {dtype = 'int8'}) + 300))
        assert.are.same({44}, values(ddpl.ones(1, {dtype = 'uint8'}) * 300))
        assert.are.same({44}, values(ddpl.zeros(1, {dtype = 'int8'}):add_(300)))
        assert.are.same({false}, values(ddpl.zeros(1, {dtype = 'int8'}):eq(300)))
    end)

    it('takes any number for bool (nonzero is true)', function()
        assert.are.same({true, false}, values(ddpl.tensor({5, 0}, {dtype = 'bool'})))
        assert.are.same({true}, values(ddpl.zeros(1, {dtype = 'bool'}):fill_(300)))
    end)
end)

describe('floating dtype ranges', function()
    -- {dtype, value, fits}: torch 1.13's answers for full/fill_ (c10::overflows)
    local cases = {
        {'float16', 65504, true}, {'float16', 65504.0, true}, {'float16', -65504.0, true},
        {'float16', 65504.5, false}, {'float16', 65505, false}, {'float16', 1e10, false},
        {'float16', -1e10, false}, {'float16', 70000, false},
        {'bfloat16', 0x1.fep127, true}, {'bfloat16', 3.39e38, false}, {'bfloat16', 1e39, false},
        {'float32', 3.4028234663852886e38, true}, {'float32', 3.4028235e38, false},
        {'float32', -1e39, false}, {'float64', 1e308, true},
    }
    for _, c in ipairs(cases) do
        local dtype, v, fits = c[1], c[2], c[3]
        local s = tostring(v)
        if fits then
            it(('full and fill_ store %s %s'):format(dtype, s), function()
                local x = ddpl.full({2}, v, {dtype = dtype})
                assert.are.same({v, v}, values(x:double()))
                assert.are.same({v}, values(ddpl.zeros(1, {dtype = dtype}):fill_(v):double()))
            end)
        else
            it(('refuses %s %s in full, full_like, fill_, x[i] = v, masked_fill and where')
                   :format(dtype, s), function()
                local x = refuses_fills(s, v, dtype)
                refuses('where', s, dtype, function()
                    return ddpl.where(ddpl.tensor({true, false}), x, v)
                end)
            end)
        end
    end

    it('stores infinities and NaN, and rounds an overflowing ddpl.tensor element to inf', function()
        for _, dtype in ipairs({'float16', 'bfloat16', 'float32'}) do
            local x = ddpl.zeros(3, {dtype = dtype})
            x:narrow(0, 0, 1):fill_(1 / 0)
            x:narrow(0, 1, 1):fill_(-1 / 0)
            x:narrow(0, 2, 1):fill_(0 / 0)
            local v = values(x:double())
            assert.are.same({1 / 0, -1 / 0}, {v[1], v[2]})
            assert.is_true(v[3] ~= v[3])
            assert.are.same({1 / 0, -1 / 0}, values(ddpl.tensor({1e39, -1e39}, {dtype = dtype}):double()))
        end
        assert.are.same({1 / 0}, values(ddpl.tensor({1e10}, {dtype = 'float16'}):double()))
    end)

    it('promotes a float number beside an integer tensor in where, as before', function()
        local f = ddpl.where(ddpl.tensor({true, false}), ddpl.zeros(2, {dtype = 'int8'}), 1e10)
        assert.are.equal('float32', f.dtype)
        assert.are.same({0, 1e10}, values(f:double()))
    end)
end)

