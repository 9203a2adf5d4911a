-- lua/ddplua/json.lua: ddplua's one JSON implementation (RFC 8259): a strict reader, for the
-- tools that read what ddplua writes as JSON (the DDPLUA_DDP_TIMELINE Chrome trace:
-- tools/ddp_predict.lua), and a writer, for the metrics files (ddpl.utils.MetricsLogger).
-- defines: json.decode(text [, name]) -> value, json.encode(value [, name]) -> text, json.null.
--
-- Objects become Lua tables with string keys, arrays sequences (1-based), numbers Lua numbers
-- (integers where the text has no fraction or exponent and fits in 64 bits), JSON null the
-- sentinel json.null (so that an array keeps its length). Anything else is an error naming the
-- line, the column and what was expected: "NAME: line 3, column 14: expected ',' or '}' in an
-- object, got ']'" (NAME defaults to "JSON"). Nesting deeper than 500 levels is refused rather
-- than overflowing the C stack.
local json = {}

json.null = setmetatable({}, {__tostring = function() return 'null' end})

local MAX_DEPTH = 500

local escapes = {['"'] = '"', ['\\'] = '\\', ['/'] = '/', b = '\b', f = '\f', n = '\n',
    r = '\r', t = '\t'}

function json.decode(text, name)
    if type(text) ~= 'string' then
        error(('%s: expected a string to decode, got %s'):format(name or 'JSON', type(text)), 2)
    end
    name = name or 'JSON'
    local pos = 1

    local function fail(what, at)
        at = at or pos
        local line, col = 1, at
        for nl in text:sub(1, at - 1):gmatch('()\n') do line, col = line + 1, at - nl end
        local got = at > #text and 'the end of the text'
            or ("'%s'"):format(text:sub(at, at):gsub('%c', function(c)
                return ('\\x%02x'):format(c:byte()) end))
        error(('%s: line %d, column %d: expected %s, got %s'):format(name, line, col, what, got), 0)
    end
    local function skip() pos = text:find('[^ \t\r\n]', pos) or #text + 1 end

    local value -- forward declaration: values nest

    local function string_()
        pos = pos + 1 -- the opening quote
        local parts = {}
        while true do
            local stop = text:find('["\\%c]', pos)
            if not stop then fail('a closing \'"\'', #text + 1) end
            parts[#parts + 1] = text:sub(pos, stop - 1)
            local c = text:sub(stop, stop)
            if c == '"' then
                pos = stop + 1
                return table.concat(parts)
            elseif c == '\\' then
                local e = text:sub(stop + 1, stop + 1)
                if escapes[e] then
                    parts[#parts + 1] = escapes[e]
                    pos = stop + 2
                elseif e == 'u' then
                    local hex = text:match('^%x%x%x%x', stop + 2)
                    if not hex then fail('4 hex digits after \\u', stop + 2) end
                    local cp = tonumber(hex, 16)
                    pos = stop + 6
                    if cp >= 0xD800 and cp <= 0xDBFF then -- a surrogate pair
                        local low = text:match('^\\u(%x%x%x%x)', pos)
                        local lo = low and tonumber(low, 16)
                        if not (lo and lo >= 0xDC00 and lo <= 0xDFFF) then
                            fail('a low surrogate \\uDC00-\\uDFFF after a high one')
                        end
                        cp = 0x10000 + (cp - 0xD800) * 0x400 + (lo - 0xDC00)
                        pos = pos + 6
                    elseif cp >= 0xDC00 and cp <= 0xDFFF then
                        fail('a high surrogate before a low one', stop)
                    end
                    parts[#parts + 1] = utf8.char(cp)
                else
                    fail('an escape (\\" \\\\ \\/ \\b \\f \\n \\r \\t \\uXXXX)', stop + 1)
                end
            else
                fail('a character (control characters must be escaped in a string)', stop)
            end
        end
    end

    -- -?(0|[1-9]digits)(.digits)?([eE][-+]?digits)?
    local function number()
        local int = text:match('^-?%d+', pos)
        if not int then fail('a digit after \'-\'', pos + 1) end
        if int:match('^-?0%d') then fail('a number without leading zeros') end
        local p = pos + #int
        local frac = ''
        if text:sub(p, p) == '.' then
            frac = text:match('^%.%d+', p) or fail('digits after the decimal point', p + 1)
            p = p + #frac
        end
        local exp = ''
        if text:find('^[eE]', p) then
            exp = text:match('^[eE][-+]?%d+', p) or fail('digits in the exponent', p + 1)
            p = p + #exp
        end
        pos = p
        local s = int .. frac .. exp
        if frac == '' and exp == '' then
            local i = math.tointeger(tonumber(s))
            if i then return i end
            return tonumber(s .. '.0') -- beyond 64 bits: a float
        end
        return tonumber(s)
    end

    local function container(depth, open)
        if depth > MAX_DEPTH then fail(('at most %d levels of nesting'):format(MAX_DEPTH)) end
        local is_object = open == '{'
        local close = is_object and '}' or ']'
        local out, n = {}, 0
        pos = pos + 1
        skip()
        if text:sub(pos, pos) == close then
            pos = pos + 1
            return out
        end
        while true do
            if is_object then
                if text:sub(pos, pos) ~= '"' then fail('a string key in an object') end
                local k = string_()
                skip()
                if text:sub(pos, pos) ~= ':' then fail("':' after an object key") end
                pos = pos + 1
                out[k] = value(depth + 1)
            else
                n = n + 1
                out[n] = value(depth + 1)
            end
            skip()
            local c = text:sub(pos, pos)
            pos = pos + 1
            if c == close then return out end
            if c ~= ',' then
                fail(("',' or '%s' in an %s"):format(close, is_object and 'object' or 'array'),
                    pos - 1)
            end
            skip()
        end
    end

    local literals = {['true'] = true, ['false'] = false, null = json.null}
    function value(depth)
        skip()
        local c = text:sub(pos, pos)
        if c == '{' or c == '[' then return container(depth, c) end
        if c == '"' then return string_() end
        if c == '-' or c:match('%d') then return number() end
        local word = text:match('^%a+', pos)
        if word and literals[word] ~= nil then
            pos = pos + #word
            return literals[word]
        end
        fail('a value (object, array, string, number, true, false or null)')
    end

    local v = value(1)
    skip()
    if pos <= #text then fail('the end of the text after the value') end
    return v
end

-- json.encode(value [, name]) -> one line of JSON text (no newline in it).
-- Tables with keys 1..n only (n >= 1) become arrays, other tables objects with their keys sorted
-- (so that a record always reads alike; the keys must be strings); json.null is null. Integers
-- are written as integers, floats with the fewest of 15 or 17 significant digits that read back
-- as the same double (a float that is whole keeps a ".0": JSON readers that tell integers from
-- floats see a float again); NaN and the infinities, which JSON cannot express, become null.
-- Strings are written as UTF-8 with '"', '\\' and the control characters escaped. Anything else
-- (functions, userdata, cycles, non-string keys) is an error naming NAME (default "json.encode")
-- and the path of the bad value: "json.encode: .loss: cannot encode a userdata".
local function encode_number(v)
    if math.type(v) == 'integer' then return tostring(v) end
    if v ~= v or v == math.huge or v == -math.huge then return 'null' end
    local s = ('%.15g'):format(v)
    if tonumber(s) ~= v then s = ('%.17g'):format(v) end
    if not s:find('[.eEn]') then s = s .. '.0' end -- whole floats stay floats
    return s
end

local string_escapes = {['"'] = '\\"', ['\\'] = '\\\\', ['\b'] = '\\b', ['\f'] = '\\f',
    ['\n'] = '\\n', ['\r'] = '\\r', ['\t'] = '\\t'}

local function encode_string(s)
    return '"' .. s:gsub('[%c"\\]', function(c)
        return string_escapes[c] or ('\\u%04x'):format(c:byte())
    end) .. '"'
end

function json.encode(value, name)
    name = name or 'json.encode'
    local out, n = {}, 0
    local open = {} -- tables being written: a table met again inside itself is a cycle
    local function put(s) n = n + 1; out[n] = s end
    local function fail(path, what) error(('%s: %s%s'):format(name, path, what), 0) end

    local function write(v, path, depth)
        local t = type(v)
        if t == 'number' then
            put(encode_number(v))
        elseif t == 'string' then
            put(encode_string(v))
        elseif t == 'boolean' then
            put(tostring(v))
        elseif v == json.null then
            put('null')
        elseif t == 'table' then
            local sep = path == '' and '' or ': '
            if open[v] then fail(path, sep .. 'the table contains itself') end
            if depth > MAX_DEPTH then
                fail(path, sep .. ('more than %d levels of nesting'):format(MAX_DEPTH))
            end
            open[v] = true
            local keys, count = {}, 0
            for k in pairs(v) do
                count = count + 1
                keys[count] = k
            end
            local len = #v
            if len > 0 and count == len then -- an array: keys 1..len exactly
                put('[')
                for i = 1, len do
                    if i > 1 then put(',') end
                    write(v[i], ('%s[%d]'):format(path, i), depth + 1)
                end
                put(']')
            else
                for _, k in ipairs(keys) do
                    if type(k) ~= 'string' then
                        fail(path, (path == '' and '' or ': ') ..
                            ('object keys must be strings, got the %s key %s'):format(type(k),
                                tostring(k)))
                    end
                end
                table.sort(keys)
                put('{')
                for i, k in ipairs(keys) do
                    if i > 1 then put(',') end
                    put(encode_string(k))
                    put(':')
                    write(v[k], path .. '.' .. k, depth + 1)
                end
                put('}')
            end
            open[v] = nil
        else
            fail(path, (path == '' and '' or ': ') .. 'cannot encode a ' .. t)
        end
    end

    write(value, '', 1)
    return table.concat(out)
end

return json
