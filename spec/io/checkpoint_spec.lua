-- spec/io/checkpoint_spec.lua: ddpl.save / ddpl.load (safetensors): round trips of every dtype and
-- of nested state dicts, the bytes checked against the format by an independent pure-Lua
-- reader, clean errors for damaged files, and atomic writes.
local S = require 'shell_util'
local H = require 'helpers'
local ddpl = H.ddpl

-- A fresh directory for this run's files.
local dir = os.tmpname()
os.remove(dir)
assert(os.execute('mkdir -p ' .. dir))
local function path(name) return dir .. '/' .. name end

local read_file, write_file = S.read, S.write

local function list_dir()
    local out = {}
    local pipe = assert(io.popen('ls -A ' .. dir))
    for line in pipe:lines() do out[#out + 1] = line end
    pipe:close()
    table.sort(out)
    return out
end

teardown(function() os.execute('rm -rf ' .. dir) end)

-- ---- an independent reader of the format (the spec at huggingface/safetensors) ----

-- Minimal JSON decoder: objects (keys kept in order in `__order`), arrays, strings (with
-- escapes), numbers, true/false/null.
local function json_decode(s)
    local pos = 1
    local function ws() pos = s:find('[^ \t\r\n]', pos) or #s + 1 end
    local value
    local function str()
        assert(s:sub(pos, pos) == '"', 'string expected at ' .. pos)
        local out, i = {}, pos + 1
        while true do
            local c = s:sub(i, i)
            assert(c ~= '', 'unterminated string')
            if c == '"' then break end
            if c == '\\' then
                local e = s:sub(i + 1, i + 1)
                local map = {['"'] = '"', ['\\'] = '\\', ['/'] = '/', b = '\b', f = '\f',
                             n = '\n', r = '\r', t = '\t'}
                if e == 'u' then
                    out[#out + 1] = utf8.char(tonumber(s:sub(i + 2, i + 5), 16))
                    i = i + 6
                else
                    out[#out + 1] = assert(map[e], 'bad escape')
                    i = i + 2
                end
            else
                out[#out + 1] = c
                i = i + 1
            end
        end
        pos = i + 1
        return table.concat(out)
    end
    function value()
        ws()
        local c = s:sub(pos, pos)
        if c == '{' then
            local obj, order = {}, {}
            pos = pos + 1
            ws()
            if s:sub(pos, pos) == '}' then pos = pos + 1 return obj end
            while true do
                ws()
                local k = str()
                ws()
                assert(s:sub(pos, pos) == ':', 'colon expected')
                pos = pos + 1
                obj[k] = value()
                order[#order + 1] = k
                ws()
                local d = s:sub(pos, pos)
                pos = pos + 1
                if d == '}' then break end
                assert(d == ',', 'comma expected')
            end
            return setmetatable(obj, {__order = order})
        elseif c == '[' then
            local arr = {}
            pos = pos + 1
            ws()
            if s:sub(pos, pos) == ']' then pos = pos + 1 return arr end
            while true do
                arr[#arr + 1] = value()
                ws()
                local d = s:sub(pos, pos)
                pos = pos + 1
                if d == ']' then break end
                assert(d == ',', 'comma expected')
            end
            return arr
        elseif c == '"' then
            return str()
        elseif s:sub(pos, pos + 3) == 'true' then pos = pos + 4 return true
        elseif s:sub(pos, pos + 4) == 'false' then pos = pos + 5 return false
        elseif s:sub(pos, pos + 3) == 'null' then pos = pos + 4 return nil
        end
        local num = s:match('^-?%d+%.?%d*[eE]?[-+]?%d*', pos)
        assert(num and #num > 0, 'value expected at ' .. pos)
        pos = pos + #num
        return math.tointeger(tonumber(num)) or tonumber(num)
    end
    local v = value()
    ws()
    assert(pos == #s + 1, 'trailing text')
    return v
end

local SIZES = {F32 = 4, F64 = 8, F16 = 2, BF16 = 2, I64 = 8, I32 = 4, U8 = 1, BOOL = 1}

-- Parses a file's bytes as the format says; checks every structural rule and returns
-- {header = decoded JSON, data = data section bytes}.
local function st_parse(bytes)
    assert(#bytes >= 8, 'file shorter than 8 bytes')
    local n = string.unpack('<I8', bytes)
    assert(8 + n <= #bytes, 'header length beyond the file')
    local text = bytes:sub(9, 8 + n)
    assert(n % 8 == 0, 'header length is not a multiple of 8')
    assert(text:sub(1, 1) == '{', 'header does not start with {')
    assert(text:match('^[^\0]*}( *)$'), 'header padding is not spaces after the JSON')
    local header = json_decode(text)
    local data = bytes:sub(9 + n)
    -- the reference implementation's rule: tensors tile the data section exactly
    local entries = {}
    for name, e in pairs(header) do
        if name ~= '__metadata__' then
            assert(SIZES[e.dtype], 'unknown dtype ' .. tostring(e.dtype))
            local numel = 1
            for _, s in ipairs(e.shape) do numel = numel * s end
            assert(e.data_offsets[2] - e.data_offsets[1] == numel * SIZES[e.dtype],
                   name .. ': offsets do not match the shape')
            entries[#entries + 1] = e
        else
            for k, v in pairs(e) do
                assert(type(k) == 'string' and type(v) == 'string', 'metadata is not str: str')
            end
        end
    end
    table.sort(entries, function(a, b)
        local x, y = a.data_offsets, b.data_offsets
        return x[1] < y[1] or (x[1] == y[1] and x[2] < y[2])
    end)
    local at = 0
    for _, e in ipairs(entries) do
        assert(e.data_offsets[1] == at, 'gap or overlap in the data section')
        at = e.data_offsets[2]
    end
    assert(at == #data, 'data section has ' .. #data .. ' bytes, tensors cover ' .. at)
    return {header = header, data = data}
end

-- The values of tensor `name` decoded from the bytes.
local FORMATS = {F32 = '<f', F64 = '<d', I64 = '<i8', I32 = '<i4', U8 = 'B', BOOL = 'B',
                 F16 = '<I2', BF16 = '<I2'}
local function st_values(st, name)
    local e = st.header[name]
    local out = {}
    local size = SIZES[e.dtype]
    for off = e.data_offsets[1], e.data_offsets[2] - 1, size do
        local v = string.unpack(FORMATS[e.dtype], st.data, off + 1)
        if e.dtype == 'BF16' then
            v = string.unpack('<f', string.pack('<I4', v << 16))
        elseif e.dtype == 'F16' then -- normal numbers and zero are enough here
            local sign = (v >> 15) == 1 and -1 or 1
            local exp, frac = (v >> 10) & 31, v & 1023
            v = exp == 0 and sign * frac * 2.0 ^ -24 or sign * (1 + frac / 1024) * 2.0 ^ (exp - 15)
        elseif e.dtype == 'BOOL' then
            v = v ~= 0
        end
        out[#out + 1] = v
    end
    return out
end

-- Builds a file by hand: entries {name, dtype, shape, bytes}, in this order in the data.
local function st_build(entries, metadata, header_override)
    local parts, data, off = {}, {}, 0
    if metadata then
        local m = {}
        for k, v in pairs(metadata) do m[#m + 1] = string.format('%q:%q', k, v) end
        parts[#parts + 1] = '"__metadata__":{' .. table.concat(m, ',') .. '}'
    end
    for _, e in ipairs(entries) do
        parts[#parts + 1] = string.format('"%s":{"dtype":"%s","shape":[%s],"data_offsets":[%d,%d]}',
                                          e[1], e[2], table.concat(e[3], ','), off, off + #e[4])
        data[#data + 1] = e[4]
        off = off + #e[4]
    end
    local header = header_override or ('{' .. table.concat(parts, ',') .. '}')
    return string.pack('<I8', #header) .. header .. table.concat(data)
end

-- ---- round trips ----

describe('save/load round trip', function()
    it('keeps every dtype, shape and value, and the bytes follow the format', function()
        local t = {
            f32 = ddpl.tensor({{1.5, -2.25, 3}, {4, 5e-3, -6e10}}),
            f64 = ddpl.tensor({math.pi, -1 / 3}, {dtype = 'float64'}),
            f16 = ddpl.tensor({0.5, -2, 1024, 0}, {dtype = 'float16'}),
            bf16 = ddpl.tensor({1.5, -3, 256}, {dtype = 'bfloat16'}),
            i64 = ddpl.tensor({-(1 << 62), 0, 7}, {dtype = 'int64'}),
            i32 = ddpl.tensor({{-5}, {2147483647}}, {dtype = 'int32'}),
            u8 = ddpl.tensor({0, 255, 17}, {dtype = 'uint8'}),
            bool = ddpl.tensor({true, false, true}, {dtype = 'bool'}),
            scalar = ddpl.tensor(2.5),
            empty = ddpl.zeros(0, 3),
            transposed = ddpl.arange(6, {dtype = 'float32'}):reshape({2, 3}):t(),
        }
        local p = path('all.safetensors')
        ddpl.save(t, p)
        local st = st_parse(read_file(p))
        local codes = {f32 = 'F32', f64 = 'F64', f16 = 'F16', bf16 = 'BF16', i64 = 'I64',
                       i32 = 'I32', u8 = 'U8', bool = 'BOOL', scalar = 'F32', empty = 'F32',
                       transposed = 'F32'}
        assert.is_nil(st.header.__metadata__) -- a flat dict of tensors needs no structure
        local back = ddpl.load(p)
        for name, x in pairs(t) do
            assert.are.equal(codes[name], st.header[name].dtype, name)
            assert.are.same(H.shape(x), st.header[name].shape, name)
            local want = H.values(x)
            local raw = st_values(st, name)
            for i, v in ipairs(raw) do if type(v) == 'boolean' then raw[i] = v and 1 or 0 end end
            H.assert_values(raw, want, nil, 0, 0, name .. ' (file bytes)')
            local y = back[name]
            assert.are.equal(H.dtype_name(x.dtype), H.dtype_name(y.dtype), name)
            assert.are.same(H.shape(x), H.shape(y), name)
            H.assert_values(H.values(y), want, nil, 0, 0, name .. ' (loaded)')
        end
    end)

    it('rebuilds a nested state dict: optimizer state, numbers, strings, booleans', function()
        local w = ddpl.tensor({{0.5, -1}, {2, 3}}, {requires_grad = true})
        local opt = ddpl.optim.Adam({w}, {lr = 0.1})
        w.grad = ddpl.ones(2, 2)
        opt:step()
        local ckpt = {
            model = {weight = w:detach()},
            optimizer = opt:state_dict(),
            epoch = 7, loss = 0.125, name = 'run "a"\n', done = false,
            big = 1e300, tiny = 5e-324, inf = math.huge, ninf = -math.huge, nan = 0 / 0,
            whole = 3.0, list = {1, 'two', {3}}, empty = {},
            ['#odd'] = 1, ['$odd'] = 2, [-4] = 'neg', [10] = 'sparse',
        }
        local p = path('nested.safetensors')
        ddpl.save(ckpt, p)
        local saved_w = H.values(w)
        local st = st_parse(read_file(p))
        assert.are.equal('F32', st.header['optimizer.state.0.exp_avg'].dtype)
        assert.is_string(st.header.__metadata__['ddplua.tree'])
        local r = ddpl.load(p)
        assert.are.equal(7, r.epoch)
        assert.are.equal('integer', math.type(r.epoch))
        assert.are.equal('float', math.type(r.whole))
        assert.are.equal(0.125, r.loss)
        assert.are.equal('run "a"\n', r.name)
        assert.is_false(r.done)
        assert.are.equal(1e300, r.big)
        assert.are.equal(5e-324, r.tiny)
        assert.are.equal(math.huge, r.inf)
        assert.are.equal(-math.huge, r.ninf)
        assert.is_true(r.nan ~= r.nan)
        assert.are.same({1, 'two', {3}}, r.list)
        assert.are.same({}, r.empty)
        assert.are.equal(1, r['#odd'])
        assert.are.equal(2, r['$odd'])
        assert.are.equal('neg', r[-4])
        assert.are.equal('sparse', r[10])
        H.assert_values(H.values(r.model.weight), saved_w, {2, 2}, 0, 0)
        local s = r.optimizer.state[0]
        assert.are.equal(1, s.step)
        H.assert_values(H.values(s.exp_avg), H.values(opt.state[w].exp_avg), nil, 0, 0)
        assert.are.same({0}, r.optimizer.param_groups[1].params)
        assert.are.same({0.9, 0.999}, r.optimizer.param_groups[1].betas)
        -- a restored optimizer continues exactly as the original
        local w2 = r.model.weight:clone()
        w2.requires_grad = true
        local opt2 = ddpl.optim.Adam({w2}, {})
        opt2:load_state_dict(r.optimizer)
        for _ = 1, 2 do
            w.grad = ddpl.full({2, 2}, 0.3)
            w2.grad = ddpl.full({2, 2}, 0.3)
            opt:step()
            opt2:step()
        end
        H.assert_values(H.values(w2), H.values(w), nil, 0, 0)
    end)

    it('reads a file written by another writer, with its metadata', function()
        local p = path('foreign.safetensors')
        -- data in an order other than the header's, metadata of its own
        write_file(p, st_build({{'b', 'I32', {2}, string.pack('<i4<i4', 5, -6)},
                                {'a', 'F64', {}, string.pack('<d', 0.25)}},
                               {format = 'pt'}))
        local r, meta = ddpl.load(p, {device = 'cpu'})
        assert.are.same({5, -6}, r.b:tolist())
        assert.are.equal(0.25, r.a:item())
        assert.are.equal(0, r.a:dim())
        assert.are.equal('pt', meta.format)
    end)

    it('overwrites an existing file', function()
        local p = path('over.safetensors')
        ddpl.save({x = ddpl.ones(3)}, p)
        ddpl.save({y = ddpl.zeros(2)}, p)
        local r = ddpl.load(p)
        assert.is_nil(r.x)
        assert.are.same({0, 0}, H.values(r.y))
    end)
end)

-- ---- damaged files ----

describe('load rejects damaged files with an error naming the file', function()
    local good = st_build({{'w', 'F32', {2}, string.pack('<f<f', 1, 2)}})
    local function check(name, bytes, ...)
        local p = path(name)
        write_file(p, bytes)
        H.assert_error(function() ddpl.load(p) end, 'load: ' .. p .. ':', ...)
    end

    it('missing file', function()
        H.assert_error(function() ddpl.load(path('nope.safetensors')) end, 'load:',
                       'nope.safetensors', 'no such file')
    end)
    it('shorter than the length field', function() check('short', 'abc', 'too short') end)
    it('truncated data', function()
        check('trunc', good:sub(1, #good - 3), "tensor 'w'", 'beyond the data section')
    end)
    it('header length larger than the file', function()
        check('hlen', string.pack('<I8', 1000000000000) .. good:sub(9),
              'header length 1000000000000 exceeds the file size ' .. #good)
    end)
    it('malformed JSON', function()
        check('json', st_build({}, nil, '{"w": {"dtype": "F32",'), 'not valid JSON')
        check('json2', st_build({}, nil, '[1, 2]  '), 'not a JSON object')
    end)
    it('unknown dtype', function()
        check('dtype', st_build({{'w', 'F8_E4M3', {2}, 'ab'}}), "tensor 'w'", "'F8_E4M3'")
    end)
    it('shape that does not match the offsets', function()
        check('shape', st_build({{'w', 'F32', {3}, string.pack('<f<f', 1, 2)}}),
              "tensor 'w'", 'needs 12 bytes', 'hold 8')
    end)
    it('offsets out of range', function()
        local h = '{"w":{"dtype":"U8","shape":[4],"data_offsets":[2,6]}}'
        check('range', string.pack('<I8', #h) .. h .. 'abcd', 'beyond the data section of 4')
        local h2 = '{"w":{"dtype":"U8","shape":[0],"data_offsets":[3,2]}}'
        check('backwards', string.pack('<I8', #h2) .. h2 .. 'abcd', 'end before they begin')
    end)
    it('overlapping tensors', function()
        local h = '{"a":{"dtype":"U8","shape":[3],"data_offsets":[0,3]},'
                  .. '"b":{"dtype":"U8","shape":[3],"data_offsets":[1,4]}}'
        check('overlap', string.pack('<I8', #h) .. h .. 'abcd', "'a'", "'b'", 'overlap')
    end)
    it('bad metadata', function()
        check('meta', st_build({}, nil, '{"__metadata__":{"k":3}}'), '__metadata__')
    end)
    it('every truncation and many corruptions of a nested file fail cleanly', function()
        local src = path('fuzz_src.safetensors')
        ddpl.save({a = ddpl.ones(2, 3), s = {step = 3, lr = 0.5, t = ddpl.zeros(4)}, n = 'x'}, src)
        local bytes = read_file(src)
        local p = path('fuzz.safetensors')
        for len = 0, #bytes - 1 do
            write_file(p, bytes:sub(1, len))
            local ok, err = pcall(ddpl.load, p)
            assert(not ok, 'a truncation to ' .. len .. ' bytes loaded')
            assert(tostring(err):find('load: ' .. p .. ': ', 1, true), err)
        end
        local hlen = string.unpack('<I8', bytes)
        for i = 9, 8 + hlen, 3 do -- replace one header byte at a time
            for _, c in ipairs({'"', '{', ']', '9', '\\', '\0', '\255'}) do
                write_file(p, bytes:sub(1, i - 1) .. c .. bytes:sub(i + 1))
                local ok, err = pcall(ddpl.load, p)
                if not ok then assert(tostring(err):find('load: ', 1, true), err) end
            end
        end
    end)

    it('unknown options', function()
        H.assert_error(function() ddpl.load(path('x'), {devise = 'cpu'}) end,
                       "load: unknown option 'devise'")
    end)

    -- a file whose ddplua.tree metadata is `tree` (JSON text), with one tensor 'w'
    local function with_tree(tree)
        local meta = '{"__metadata__":{"ddplua.tree":' .. string.format('%q', tree) .. '},'
            .. '"w":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}}'
        return string.pack('<I8', #meta) .. meta .. 'ab'
    end

    it('names with a NUL byte (a JSON \\u0000), which C strings would cut short', function()
        local h = '{"w\\u0000x":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}}'
        check('nul_name', string.pack('<I8', #h) .. h .. 'ab', 'tensor name contains a NUL byte')
        local m = '{"__metadata__":{"k\\u0000":"v"}}'
        check('nul_meta', string.pack('<I8', #m) .. m, '__metadata__ key contains a NUL byte')
        check('nul_key', with_tree('{"a\\u0000b":1}'), 'contains a NUL byte')
    end)
    it('integer keys in any but the canonical form save writes ("#1" and "#01" would collide)',
        function()
            check('key01', with_tree('{"#1":1,"#01":2}'), "bad integer key '#01'")
            check('keyplus', with_tree('{"#+1":1}'), "bad integer key '#+1'")
            check('keybig', with_tree('{"#99999999999999999999":1}'), 'bad integer key')
            local p = path('key_ok.safetensors')
            write_file(p, with_tree('{"#1":1,"#-2":2,"#0":3,"##1":4}'))
            local t = ddpl.load(p)
            assert.are.same({[1] = 1, [-2] = 2, [0] = 3, ['#1'] = 4}, t)
        end)
    it('a tree that is not a table', function()
        check('tree_num', with_tree('5'), 'the ddplua.tree metadata is not a table')
        check('tree_tensor', with_tree('{"$tensor":"w"}'), 'is not a table')
        check('tree_float', with_tree('{"$float":"nan"}'), 'is not a table')
    end)
    it('nesting as deep as save writes, and no deeper', function()
        local t = {}
        local inner = t
        for _ = 1, 64 do inner.x = {}; inner = inner.x end -- 65 tables: save's limit
        local p = path('deep.safetensors')
        ddpl.save(t, p)
        local back = ddpl.load(p)
        for _ = 1, 64 do back = back.x end
        assert.are.same({}, back)
        inner.x = {}
        H.assert_error(function() ddpl.save(t, path('deeper.safetensors')) end,
            'nested deeper than 64')
        check('deeper', with_tree(string.rep('{"x":', 65) .. '{}' .. string.rep('}', 65)),
            'tables nested deeper than 64')
    end)
end)

-- ---- large and odd files (issue 32) ----

describe('load of large and odd files', function()
    it('takes 200k tiny tensors, finds each by name, and names a name given twice', function()
        local n = 200000
        local entries = {}
        for i = 1, n do entries[i] = {('t%d'):format(i), 'U8', {1}, string.char(i % 256)} end
        local p = path('many.safetensors')
        write_file(p, st_build(entries))
        local t = ddpl.load(p)
        local count = 0
        for _ in pairs(t) do count = count + 1 end
        assert.are.equal(n, count)
        assert.are.equal(1, t.t1:item())
        assert.are.equal(n % 256, t['t' .. n]:item())
        assert.are.equal(12345 % 256, t.t12345:item())
        -- the first and last names alike: the check that once compared every pair still holds
        entries[n] = {'t1', 'U8', {1}, 'x'}
        write_file(p, st_build(entries))
        H.assert_error(function() ddpl.load(p) end, 'load: ' .. p, "the header names 't1' twice")
        -- and a saved tree of many tensors comes back through its references
        local tree = {}
        for i = 1, 2000 do tree[i] = ddpl.full({1}, i) end
        ddpl.save(tree, p)
        local back = ddpl.load(p)
        assert.are.equal(2000, #back)
        assert.are.equal(1234, back[1234]:item())
    end)

    it('refuses a FIFO at once rather than waiting for a writer', function()
        local p = path('fifo.safetensors')
        assert(os.execute('mkfifo ' .. p))
        local bin = os.getenv('DDPLUA_BIN') or 'build/ddplua'
        local cmd = ("timeout 20 %s -e \"ddpl.load('%s')\" 2>&1; echo EXIT $?"):format(bin, p)
        local f = assert(io.popen(cmd))
        local out = f:read('a')
        f:close()
        os.remove(p)
        assert.truthy(out:find('load: ' .. p .. ': not a regular file', 1, true), out)
        assert.truthy(out:find('EXIT 1', 1, true), out) -- an error, not the timeout's 124
    end)
end)

-- ---- atomic writes ----

describe('a failed save leaves the target unchanged', function()
    it('when the value cannot be saved', function()
        local p = path('keep.safetensors')
        ddpl.save({x = ddpl.ones(2)}, p)
        local before = read_file(p)
        local files = list_dir()
        H.assert_error(function() ddpl.save({x = ddpl.ones(3), f = print}, p) end,
                       'save:', 'function', "'f'")
        H.assert_error(function() ddpl.save({x = ddpl.ones(3), [1.5] = 1}, p) end,
                       'save:', 'number key')
        assert.are.equal(before, read_file(p))
        assert.are.same(files, list_dir()) -- and no temporary file is left
    end)

    -- A writer killed (SIGKILL) at random moments of its saves: the file is always the old or
    -- the new one whole, and no temporary outlives the next save. With O_TMPFILE a temporary
    -- has a name only from its link to its rename, back to back once it is whole: a kill can
    -- land there (rarely), and what it leaves is then a whole file. Both ways are killed.
    for _, named in ipairs({false, true}) do
        it(('leaves no debris when the writer is killed mid-save (%s temporary)'):format(
            named and 'named' or 'unnamed'), function()
            local P = require 'ddplua.core.process'
            local p = path(named and 'killed_named.safetensors' or 'killed.safetensors')
            local n = 2 * 1024 * 1024 -- 8 MB a save: long enough to be killed inside
            ddpl.save({w = ddpl.full({n}, 0.0)}, p)
            local function debris()
                local count = 0
                for _, f in ipairs(list_dir()) do
                    if f:find(p:match('[^/]+$') .. '.tmp.', 1, true) == 1 then
                        count = count + 1
                        if not named then -- named only once whole: it loads, one save's value
                            local w = ddpl.load(dir .. '/' .. f).w
                            assert.are.equal(n, w:numel())
                            assert.are.equal(w:min():item(), w:max():item(), f)
                        end
                    end
                end
                return count
            end
            local left_before_next_save = 0
            math.randomseed(7)
            for kill = 1, 12 do
                local pid = P.fork()
                if pid == 0 then
                    if named then P.setenv('DDPLUA_SAVE_NAMED_TEMP', '1') end
                    local v = 0
                    while true do
                        v = v + 1
                        ddpl.save({w = ddpl.full({n}, v)}, p)
                    end
                end
                P.sleep(0.02 + math.random() * 0.15)
                P.kill(pid, 'KILL')
                while not P.waitpid(pid) do P.sleep(0.01) end
                local w = ddpl.load(p).w -- whole: every element is the value of one save
                assert.are.equal(n, w:numel())
                assert.are.equal(w:min():item(), w:max():item(), 'kill ' .. kill)
                left_before_next_save = left_before_next_save + debris()
            end
            if named then
                assert.is_true(left_before_next_save > 0, 'the kills never hit a named save')
            else -- a kill in the instant between link and rename: not more than now and then
                assert.is_true(left_before_next_save <= 2, left_before_next_save .. ' of 12 kills')
            end
            -- the next save of the same file removes what dead writers of this host left
            if named then P.setenv('DDPLUA_SAVE_NAMED_TEMP', '1') end
            ddpl.save({w = ddpl.ones(1)}, p)
            if named then P.setenv('DDPLUA_SAVE_NAMED_TEMP', '0') end
            assert.are.equal(0, debris())
        end)
    end

    it('when the directory does not exist', function()
        local p = path('missing/dir/x.safetensors')
        H.assert_error(function() ddpl.save({x = ddpl.ones(1)}, p) end,
                       'save: ' .. p, 'no such file')
    end)

    it('when two tensors would get the same name', function()
        local p = path('dup.safetensors')
        write_file(p, 'old')
        H.assert_error(function()
            ddpl.save({['a.b'] = ddpl.ones(1), a = {b = ddpl.ones(1)}}, p)
        end, 'save: ' .. p, "two tensors are named 'a.b'")
        assert.are.equal('old', read_file(p))
    end)

    it('refuses a table that contains itself', function()
        local t = {x = ddpl.ones(1)}
        t.self = t
        H.assert_error(function() ddpl.save(t, path('cycle')) end, 'save:', 'a cycle?')
        H.assert_error(function() ddpl.load(path('cycle')) end, 'no such file')
    end)

    it('rejects a non-table argument', function()
        H.assert_error(function() ddpl.save(ddpl.ones(1), path('t')) end, 'save:', 'table')
    end)
end)
