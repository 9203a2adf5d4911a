-- spec/json_spec.lua: lua/ddplua/json.lua, the strict JSON reader of the tools: values of every
-- kind (escapes and surrogate pairs, integers and floats, null as json.null), and malformed
-- input refused with the line, the column and what was expected; the writer (json.encode):
-- round trips, sorted keys, shortest doubles, errors naming the path of the bad value.
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
    end)
end)
