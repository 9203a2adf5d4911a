-- spec/io/json_spec.lua: lua/ddplua/json.lua over the engine's one JSON codec (engine/io/json.c,
-- which also reads safetensors headers): values of every kind (escapes and surrogate pairs,
-- integers and floats, numbers of any length, null as json.null), and malformed input (bad
-- UTF-8 included) refused with the line, the column and what was expected; the writer
-- (json.encode): round trips, sorted keys, shortest doubles, errors naming the path of the bad
-- value, nesting up to the reader's limit and no deeper.
local json = require 'ddplua.json'

describe('ddplua.json.decode', function()
    it('reads every kind of value', function()
        local v = json.decode(' {"a": [1, 2.5, -3e2, 0, -0.125, 1E+2, true, false, null],\n'
            .. '"s": "q\\"\\\\\\/\\b\\f\\n\\r\\t \\u00e9\\ud83d\\ude00", "o": {"k": {}}, "e": []} ')
        assert.are.equal(1, v.a[1])
        assert.are.equal('integer', math.type(v.a[1]))
        assert.are.equal(2.5, v.a[2])
        assert.are.equal(-300.0, v.a[3])
        assert.are.equal('float', math.type(v.a[3]))
        assert.are.equal(0, v.a[4])
        assert.are.equal(-0.125, v.a[5])
        assert.are.equal(100.0, v.a[6])
        assert.are.equal(true, v.a[7])
        assert.are.equal(false, v.a[8])
        assert.are.equal(json.null, v.a[9])
        assert.are.equal(9, #v.a)
        assert.are.equal('q"\\/\b\f\n\r\t é😀', v.s)
        assert.are.same({k = {}}, v.o)
        assert.are.same({}, v.e)
        -- beyond 64 bits: a float
        assert.are.equal('float', math.type(json.decode('123456789012345678901234')))
        assert.are.equal(math.maxinteger, json.decode(tostring(math.maxinteger)))
        -- any length is valid JSON: 0.1 written out to its exact binary value (57 characters)
        -- and a 300-digit integer (a float: beyond 64 bits)
        assert.are.equal(0.1, json.decode('0.1000000000000000055511151231257827021181583404541015625'))
        assert.are.equal(1e299, json.decode('1' .. ('0'):rep(299)))
        -- a repeated key: the last wins, as in Lua's own table constructor
        assert.are.equal(2, json.decode('{"k": 1, "k": 2}').k)
        -- NUL inside a string and as a key survive
        assert.are.same({['a\0b'] = 'c\0d'}, json.decode('{"a\\u0000b": "c\\u0000d"}'))
    end)

    it('reads 500 levels of nesting and refuses 501', function()
        local v = json.decode(('['):rep(500) .. (']'):rep(500))
        for _ = 1, 499 do v = v[1] end
        assert.are.same({}, v)
        assert.has_error(function() json.decode(('['):rep(501) .. (']'):rep(501), 'T') end,
            "T: line 1, column 501: expected at most 500 levels of nesting, got '['")
    end)

    it('refuses text that is not UTF-8, naming where', function()
        local ok, err = pcall(json.decode, '["ok", "\xff"]', 'T')
        assert.is_false(ok)
        assert.truthy(err:find('T: line 1, column 8: expected valid UTF-8 in a string', 1, true), err)
        ok, err = pcall(json.decode, '"\xc0\xaf"', 'T') -- an overlong '/'
        assert.is_false(ok)
        assert.truthy(err:find('expected valid UTF-8', 1, true), err)
    end)

    it('refuses malformed input naming the line, the column and what was expected', function()
        local cases = {
            {'', 'line 1, column 1: expected a value .*, got the end of the text'},
            {'[1,]', 'line 1, column 4: expected a value .*, got \']\''},
            {'{"a" 1}', "line 1, column 6: expected ':' after an object key, got '1'"},
            {'{"a":1,}', 'line 1, column 8: expected a string key in an object'},
            {'[1 2]', "line 1, column 4: expected ',' or ']' in an array, got '2'"},
            {'01', 'expected a number without leading zeros'},
            {'1.', 'line 1, column 3: expected digits after the decimal point'},
            {'1e+', 'expected digits in the exponent'},
            {'-', "expected a digit after '%-'"},
            {'"abc', 'expected a closing \'"\', got the end of the text'},
            {'"a\nb"', 'control characters must be escaped in a string%), got \'\\x0a\''},
            {'"\\x"', 'expected an escape'},
            {'"\\ud800"', 'expected a low surrogate'},
            {'"\\u12"', 'expected 4 hex digits after \\u'},
            {'[1]\n x', 'line 2, column 2: expected the end of the text after the value'},
            {'tru', 'expected a value'},
            {('['):rep(600), 'at most 500 levels of nesting'},
        }
        for _, c in ipairs(cases) do
            local ok, err = pcall(json.decode, c[1], 'T')
            assert.is_false(ok, c[1])
            assert.truthy(err:find('^T: ' .. (c[2]:sub(1, 4) == 'line' and '' or '.*') .. c[2]),
                ('%q: %s'):format(c[1], err))
        end
        local ok, err = pcall(json.decode, 42)
        assert.is_false(ok)
        assert.truthy(err:find('expected a string to decode, got number', 1, true), err)
    end)
end)

describe('ddplua.json.encode', function()
    it('writes what decode reads back: sorted keys, arrays, escapes, integers and floats', function()
        local v = {b = {1, 2.5, -3, 'x'}, a = 'q"\\\n\t\1é', c = {d = true, e = false,
            f = json.null}, g = 0.1, h = 1e300, i = 2.0, j = math.mininteger}
        local text = json.encode(v)
        assert.are.equal('{"a":"q\\"\\\\\\n\\t\\u0001é","b":[1,2.5,-3,"x"],"c":{"d":true,'
            .. '"e":false,"f":null},"g":0.1,"h":1e+300,"i":2.0,"j":-9223372036854775808}', text)
        assert.are.same(v, json.decode(text))
        assert.are.equal('float', math.type(json.decode(json.encode(2.0))))
        -- the fewest digits that give back the same double
        for _, x in ipairs({1 / 3, 0.1 + 0.2, 123456.789, 5e-324, -2 ^ 60}) do
            assert.are.equal(x, json.decode(json.encode(x)))
        end
        assert.are.equal('[null,null,null]', json.encode({0 / 0, math.huge, -math.huge}))
        assert.are.equal('{}', json.encode({}))
    end)

    it('refuses what JSON cannot hold, naming the path', function()
        assert.has_error(function() json.encode({a = {b = print}}) end,
            'json.encode: .a.b: cannot encode a function')
        assert.has_error(function() json.encode({[1] = 1, x = 3}) end,
            'json.encode: object keys must be strings, got the number key 1')
        local t = {}
        t.self = t
        assert.has_error(function() json.encode(t) end, 'json.encode: .self: the table contains itself')
        assert.has_error(function() json.encode({x = {print}}, 'log') end,
            'log: .x[1]: cannot encode a function')
        -- what the reader would refuse is not written
        assert.has_error(function() json.encode({name = 'caf\xe9'}) end,
            'json.encode: .name: a string that is not valid UTF-8 (JSON text is UTF-8)')
        assert.has_error(function() json.encode({['\xff'] = 1}) end,
            'json.encode: an object key that is not valid UTF-8 (JSON text is UTF-8)')
        local deep = {}
        for _ = 1, 499 do deep = {deep} end
        assert.are.same(('['):rep(499) .. '{}' .. (']'):rep(499), json.encode(deep))
        assert.has_error(function() json.encode({deep}) end,
            'json.encode: ' .. ('[1]'):rep(500) .. ': more than 500 levels of nesting')
        assert.has_error(function() json.encode({loss = io.stdout}) end,
            'json.encode: .loss: cannot encode a userdata')
    end)
end)
