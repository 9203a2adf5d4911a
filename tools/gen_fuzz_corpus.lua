-- tools/gen_fuzz_corpus.lua: writes the seed corpora of the fuzz targets (spec/fuzz/corpus/*):
-- small valid inputs of each format, from which libFuzzer mutates. Run from the repository root
-- with a built ddplua:
--     build/ddplua tools/gen_fuzz_corpus.lua
-- The seeds are committed; inputs that once crashed a target are added next to them by hand
-- (named crash-<what>), so they replay in every build (ctest fuzz_<target>_corpus).
local ddpl = require 'ddplua'

local root = 'spec/fuzz/corpus'

local function write(dir, name, bytes)
    os.execute(('mkdir -p %s/%s'):format(root, dir))
    local path = ('%s/%s/%s'):format(root, dir, name)
    local f = assert(io.open(path, 'wb'))
    f:write(bytes)
    f:close()
    return path
end

-- safetensors: what ddpl.save writes (every dtype, views, a metadata tree), and corner cases
do
    local tmp = os.tmpname()
    local function saved(name, t)
        ddpl.save(t, tmp)
        local f = assert(io.open(tmp, 'rb'))
        write('safetensors', name, f:read('a'))
        f:close()
    end
    saved('floats', { w = ddpl.arange(6, { dtype = 'float32' }):view(2, 3),
                      d = ddpl.tensor({ 1.5, -2 }, { dtype = 'float64' }) })
    saved('ints', { i = ddpl.tensor({ 1, -2, 3 }, { dtype = 'int64' }),
                    j = ddpl.tensor({ 7 }, { dtype = 'int32' }),
                    u = ddpl.tensor({ 0, 255 }, { dtype = 'uint8' }),
                    b = ddpl.tensor({ true, false }) })
    saved('halves', { h = ddpl.ones(2, { dtype = 'float16' }), bf = ddpl.ones(3, { dtype = 'bfloat16' }) })
    saved('empty_and_scalar', { e = ddpl.empty(0, 3), s = ddpl.tensor(3.0) })
    saved('tree', { model = { ['layer.weight'] = ddpl.ones(2, 2) },
                    optimizer = { state = { { step = 3, exp_avg = ddpl.zeros(2) } },
                                  param_groups = { { lr = 0.1, betas = { 0.9, 0.999 } } } },
                    epoch = 2, name = 'run' })
    os.remove(tmp)
    -- a header that declares nothing, and one whose JSON is cut
    write('safetensors', 'no_tensors', string.pack('<I8', 8) .. '{}      ')
    write('safetensors', 'cut_json', string.pack('<I8', 40) .. '{"a": {"dtype": "F32", "sha')
end

-- IDX: each element type, rank 1 to 3, plain and gzip
do
    local function idx(code, sizes, data)
        local head = string.char(0, 0, code, #sizes)
        for _, n in ipairs(sizes) do head = head .. string.pack('>I4', n) end
        return head .. data
    end
    write('idx', 'u8_2x3', idx(0x08, { 2, 3 }, '\1\2\3\4\5\6'))
    write('idx', 'i8_4', idx(0x09, { 4 }, '\255\1\128\127'))
    write('idx', 'i16_2', idx(0x0B, { 2 }, string.pack('>i2>i2', -300, 300)))
    write('idx', 'i32_1x2', idx(0x0C, { 1, 2 }, string.pack('>i4>i4', -1, 70000)))
    write('idx', 'f32_2x1x2', idx(0x0D, { 2, 1, 2 }, string.pack('>f>f>f>f', 1.5, -2, 0, 3)))
    write('idx', 'f64_1', idx(0x0E, { 1 }, string.pack('>d', math.pi)))
    write('idx', 'empty', idx(0x08, { 0, 5 }, ''))
    local plain = write('idx', 'labels_10', idx(0x08, { 10 }, '\0\1\2\3\4\5\6\7\8\9'))
    assert(os.execute(('gzip -n -c %s > %s/idx/labels_10.gz'):format(plain, root)))
end

-- store: frames as engine/distributed/store_proto.h defines them (u32 length, u8 op, u32 timeout,
-- u32 nfields, fields as u32 length + bytes), a hello first
do
    local function frame(op, timeout_ms, fields)
        local body = string.pack('>B>I4>I4', op, timeout_ms, #fields)
        for _, f in ipairs(fields) do body = body .. string.pack('>s4', f) end
        return string.pack('>s4', body)
    end
    local HELLO, SET, GET, ADD, CHECK, WAIT, DELETE, NUM_KEYS = 1, 2, 3, 4, 5, 6, 7, 8
    local hello = frame(HELLO, 0, { 'ddplua-store-1', '' })
    write('store', 'hello', hello)
    write('store', 'set_get', hello .. frame(SET, 0, { 'k', 'value' }) .. frame(GET, 100, { 'k' }))
    write('store', 'add', hello .. frame(ADD, 0, { 'n', string.pack('>i8', 5) })
                          .. frame(ADD, 0, { 'n', string.pack('>i8', -2) }))
    write('store', 'check_wait', hello .. frame(SET, 0, { 'a', '1' }) .. frame(CHECK, 0, { 'a', 'b' })
                                 .. frame(WAIT, 50, { 'a' }))
    write('store', 'delete_num_keys', hello .. frame(SET, 0, { 'x', '' }) .. frame(DELETE, 0, { 'x' })
                                      .. frame(NUM_KEYS, 0, {}))
    write('store', 'get_missing', hello .. frame(GET, 20, { 'never-set' }))
    write('store', 'no_hello', frame(GET, 0, { 'k' }))
end
print('gen_fuzz_corpus: wrote ' .. root)
