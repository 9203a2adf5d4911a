-- spec/io/serialize_spec.lua: the object collectives' wire format (engine/lua/bind_serialize.c,
-- package.loaded['ddplua.core.serialize']) in one process: a round trip of every kind of value
-- (integer and float subtypes, strings with zeros, every dtype, empty and 0-dim tensors,
-- requires_grad, array and hash parts, holes, shared subtables, cycles), the byte layout of
-- format version 1 written out by hand, values that cannot be sent (rejected naming the path),
-- and hostile input to loads: every truncation, every single-bit flip, random bytes and crafted
-- lengths that would allocate too much, each a clean "loads: ..." error (never a crash).
local H = require 'helpers'
local ddpl = H.ddpl
local S = require 'ddplua.core.serialize'

local function roundtrip(v) return S.loads(S.dumps(v)) end

-- the bytes of a uint8 tensor as a Lua string
local function bytes_of(t)
    local parts = {}
    for i = 0, t:numel() - 1 do parts[#parts + 1] = string.char(t[i]:item()) end
    return table.concat(parts)
end

local function assert_error(f, want, ...)
    local ok, err = pcall(f, ...)
    assert(not ok, 'expected an error containing ' .. want)
    assert(tostring(err):find(want, 1, true), ('%q not in %q'):format(want, tostring(err)))
    return err
end

describe('serialize round trip', function()
    it('keeps nil, booleans and the integer/float subtypes', function()
        for _, v in ipairs({0, 1, -1, math.maxinteger, math.mininteger, 0.0, -0.0, 1.5, 1e308,
            -1e-308, math.huge, -math.huge, 2^53 + 0.0}) do
            local w = roundtrip(v)
            assert.are.equal(math.type(v), math.type(w))
            assert.are.equal(v, w)
        end
        assert.are.equal('float', math.type(roundtrip(1.0)))
        assert.are.equal('integer', math.type(roundtrip(1)))
        local nan = roundtrip(0 / 0)
        assert.is_true(nan ~= nan)
        assert.is_nil(roundtrip(nil))
        assert.is_true(roundtrip(true))
        assert.is_false(roundtrip(false))
        assert.are.equal(1 / -0.0, 1 / roundtrip(-0.0)) -- the sign of zero survives
    end)

    it('keeps strings byte for byte, embedded zeros included', function()
        local all = {}
        for i = 0, 255 do all[#all + 1] = string.char(i) end
        for _, s in ipairs({'', 'a', 'a\0b\0', table.concat(all), string.rep('xyz', 10000)}) do
            assert.are.equal(s, roundtrip(s))
        end
    end)

    it('keeps tensors of every dtype: shape, values, requires_grad', function()
        for _, dt in ipairs({'float32', 'float64', 'float16', 'bfloat16', 'int64', 'int32',
            'uint8', 'bool'}) do
            local x = ddpl.arange(0, 24):reshape(2, 3, 4):to(dt)
            local y = roundtrip(x)
            assert.are.equal(dt, y.dtype)
            assert.are.same({2, 3, 4}, y:shape())
            assert.are.same(x:double():tolist(), y:double():tolist())
        end
        local w = ddpl.randn(3, 2, {requires_grad = true})
        local w2 = roundtrip(w)
        assert.is_true(w2.requires_grad)
        assert.are.same(w:tolist(), w2:tolist())
        assert.is_false(roundtrip(ddpl.ones(2)).requires_grad)
        local s = roundtrip(ddpl.tensor(3.5, {dtype = 'float64'})) -- 0-dim
        assert.are.equal(0, s:dim())
        assert.are.equal(3.5, s:item())
        assert.are.same({0, 5}, roundtrip(ddpl.zeros(0, 5)):shape())
        -- a non-contiguous view travels as its values, row-major
        local m = ddpl.arange(0, 6, {dtype = 'float64'}):reshape(2, 3)
        assert.are.same(m:t():tolist(), roundtrip(m:t()):tolist())
        -- a copy: changing the original does not change what was received
        local sent = ddpl.ones(3)
        local got = roundtrip(sent)
        sent:fill_(7)
        assert.are.equal(3, got:sum():item())
    end)

    it('keeps tables: array part with holes, hash part, every key type, nesting', function()
        local t = {1, 'two', nil, 4.0, a = {b = {c = {d = 'deep'}}}, [-1] = 'neg', [0] = 'zero',
            [2.5] = 'float', [true] = 'yes', [false] = 'no', ['with space'] = 1, [100] = 'far'}
        local u = roundtrip(t)
        assert.are.equal(1, u[1])
        assert.are.equal('two', u[2])
        assert.is_nil(u[3])
        assert.are.equal('float', math.type(u[4]))
        assert.are.equal('deep', u.a.b.c.d)
        for _, k in ipairs({-1, 0, 2.5, true, false, 'with space', 100}) do
            assert.are.equal(t[k], u[k])
        end
        assert.are.same({}, roundtrip({}))
    end)

    it('keeps shared subtables shared and cycles as cycles', function()
        local shared = {x = 1}
        local t = {a = shared, b = shared, list = {shared, shared}}
        t.self = t
        t.list.up = t
        local u = roundtrip(t)
        assert.are.equal(u.a, u.b)
        assert.are.equal(u.a, u.list[1])
        assert.are.equal(u.a, u.list[2])
        assert.are.equal(u, u.self)
        assert.are.equal(u, u.list.up)
        assert.are_not.equal(shared, u.a) -- a new table, not the sender's
    end)

    it('reads format version 1 as documented (bytes written out by hand)', function()
        local function u64(n) return string.pack('<I8', n) end
        local data = 'DLO\1' .. '\6' .. u64(2) .. u64(1)     -- table, 2 array values, 1 pair
            .. '\3' .. string.pack('<i8', -5)                -- [1] = -5 (integer)
            .. '\4' .. string.pack('<d', 0.25)               -- [2] = 0.25 (float)
            .. '\5' .. u64(1) .. 'k'                         -- key 'k'
            .. '\8' .. '\1\0\0\0\0\1' .. u64(2) .. string.pack('<d<d', 1.5, -2) -- float64 [2]
        local v = S.loads(data)
        assert.are.equal(-5, v[1])
        assert.are.equal('integer', math.type(v[1]))
        assert.are.equal(0.25, v[2])
        assert.are.equal('float64', v.k.dtype)
        assert.are.same({1.5, -2}, v.k:tolist())
        -- and dumps writes exactly these bytes for the same value
        assert.are.equal(data, bytes_of(S.dumps({-5, 0.25, k = ddpl.tensor({1.5, -2},
            {dtype = 'float64'})})))
        -- the reference tag: a table holding itself
        local cyc = S.loads('DLO\1\6' .. u64(1) .. u64(0) .. '\7' .. u64(0))
        assert.are.equal(cyc, cyc[1])
    end)

    it('gives a uint8 tensor; loads takes it, a narrowed view of it, or a string', function()
        local b = S.dumps({1, 2})
        assert.are.equal('uint8', b.dtype)
        assert.are.equal(1, b:dim())
        assert.are.same({1, 2}, S.loads(b))
        assert.are.same({1, 2}, S.loads(bytes_of(b)))
        local padded = ddpl.zeros(b:numel() + 10, {dtype = 'uint8'})
        padded:narrow(0, 0, b:numel()):copy_(b)
        assert.are.same({1, 2}, S.loads(padded:narrow(0, 0, b:numel())))
        assert_error(S.loads, '10 trailing bytes', padded)
        assert_error(S.loads, 'expected a 1-D contiguous uint8 CPU tensor', ddpl.ones(3))
    end)
end)

describe('serialize rejects what cannot be sent', function()
    it('names the kind and the path', function()
        assert_error(S.dumps, 'all_gather_object: cannot send a function (at value.opt.step)',
            {opt = {step = print}}, 'all_gather_object')
        assert_error(S.dumps, 'dumps: cannot send a thread (coroutine) (at value[2])',
            {1, coroutine.create(print)})
        assert_error(S.dumps, 'cannot send a userdata (at value["a b"][1])',
            {['a b'] = {io.stdout}})
        assert_error(S.dumps, 'cannot send a table with a metatable (at object_list[1].m)',
            {{m = setmetatable({}, {})}}, 'broadcast_object_list', 'object_list')
        assert_error(S.dumps, 'cannot send a table as a table key (at value.t)', {t = {[{}] = 1}})
        assert_error(S.dumps, 'cannot send a function (at value)', print)
        local closed = ddpl.ones(2)
        getmetatable(closed).__close(closed)
        assert_error(S.dumps, 'cannot send a closed tensor (at value.x)', {x = closed})
    end)

    it('limits nesting to 200 tables on both sides', function()
        local deep = {}
        local t = deep
        for _ = 1, 199 do t.next = {}; t = t.next end
        assert.is_table(roundtrip(deep)) -- 200 levels
        t.next = {}
        assert_error(S.dumps, 'tables nested deeper than 200 levels', deep)
        -- crafted input nesting deeper than dumps would write
        local u64 = function(n) return string.pack('<I8', n) end
        local data = 'DLO\1' .. string.rep('\6' .. u64(1) .. u64(0), 300) .. '\0'
        assert_error(S.loads, 'tables nested deeper than 200 levels', data)
    end)
end)

describe('serialize loads hostile input', function()
    local sample = S.dumps({1, -2.5, 'str\0ing', true, nil, {nested = {x = 'y'}},
        t = ddpl.arange(0, 6, {dtype = 'float32'}):reshape(2, 3),
        b = ddpl.ones(2, {dtype = 'bool'}),
        [3.5] = false})
    local data = bytes_of(sample)
    local function clean(s)
        local ok, err = pcall(S.loads, s)
        if not ok then
            assert(type(err) == 'string' and err:find('^loads: '), tostring(err))
        end
        return ok, err
    end

    it('fails cleanly on every truncation', function()
        for n = 0, #data - 1 do
            local ok, err = clean(data:sub(1, n))
            assert(not ok, 'a truncation to ' .. n .. ' bytes must fail')
            assert(err:find('malformed object data', 1, true), err)
        end
    end)

    it('fails cleanly or decodes on every single-bit flip', function()
        local failed = 0
        for i = 1, #data do
            for bit = 0, 7 do
                local flipped = data:sub(1, i - 1) .. string.char(data:byte(i) ~ (1 << bit))
                    .. data:sub(i + 1)
                if not clean(flipped) then failed = failed + 1 end
            end
        end
        assert.is_true(failed > 0)
    end)

    it('fails cleanly on random bytes, with and without a valid header', function()
        math.randomseed(1234)
        for _ = 1, 2000 do
            local n = math.random(0, 64)
            local parts = {}
            for j = 1, n do parts[j] = string.char(math.random(0, 255)) end
            local junk = table.concat(parts)
            clean(junk)
            clean('DLO\1' .. junk)
            clean('DLO\1' .. string.char(math.random(0, 8)) .. junk)
        end
    end)

    it('checks every length before allocating', function()
        local u64 = function(n) return string.pack('<I8', n) end
        local H1 = 'DLO\1'
        assert_error(S.loads, 'string longer than the data', H1 .. '\5' .. u64(1 << 62) .. 'ab')
        assert_error(S.loads, 'string longer than the data', H1 .. '\5' .. u64(-1))
        assert_error(S.loads, 'table array size exceeds the data',
            H1 .. '\6' .. u64(1 << 60) .. u64(0))
        assert_error(S.loads, 'table hash size exceeds the data',
            H1 .. '\6' .. u64(0) .. u64(-1) .. '\0\0')
        assert_error(S.loads, 'tensor size overflows',
            H1 .. '\8\0\0\0\0\0\3' .. u64(1 << 40) .. u64(1 << 40) .. u64(1 << 40))
        assert_error(S.loads, 'unknown tensor flags', H1 .. '\8\0\0\0\0\2\0')
        assert_error(S.loads, 'tensor data truncated', H1 .. '\8\0\0\0\0\0\1' .. u64(1 << 30))
        assert_error(S.loads, 'negative tensor size', H1 .. '\8\0\0\0\0\0\1' .. u64(-1))
        assert_error(S.loads, 'unknown tensor dtype code', H1 .. '\8\10\0\0\0\0\0')
        assert_error(S.loads, 'unknown tensor device type', H1 .. '\8\0\7\0\0\0\0')
        assert_error(S.loads, 'tensor with more than 8 dimensions', H1 .. '\8\0\0\0\0\0\9')
        assert_error(S.loads, 'requires_grad on a tensor of a non-floating dtype',
            H1 .. '\8\4\0\0\0\1\1' .. u64(0))
        assert_error(S.loads, 'reference to a table not seen yet', H1 .. '\7' .. u64(0))
        assert_error(S.loads, 'NaN table key',
            H1 .. '\6' .. u64(0) .. u64(1) .. '\4' .. string.pack('<d', 0 / 0) .. '\0')
        assert_error(S.loads, 'table key that is not a boolean, number or string',
            H1 .. '\6' .. u64(0) .. u64(1) .. '\0\0')
        assert_error(S.loads, 'unknown value tag at byte 4', H1 .. '\9')
        assert_error(S.loads, 'format version 2 (this build reads version 1)', 'DLO\2\0')
        assert_error(S.loads, 'not ddplua object data (bad magic)', 'XYZ\1\0')
    end)

    it('names CUDA when a CUDA tensor arrives in a process without it', function()
        local data = 'DLO\1\8\0\1\0\0\0\1' .. string.pack('<I8', 1) .. string.pack('<f', 2)
        if ddpl.cuda.is_available() then
            local x = S.loads(data)
            assert.are.equal('cuda:0', x.device)
            assert.are.equal(2, x:item())
            local y = roundtrip(ddpl.ones(3, {device = 'cuda'}))
            assert.truthy(tostring(y.device):find('^cuda'))
        else
            assert_error(S.loads, 'the data holds a CUDA tensor (cuda:0) but CUDA is not available',
                data)
        end
    end)
end)
