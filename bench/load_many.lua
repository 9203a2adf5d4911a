-- bench/load_many.lua: ddpl.load of a safetensors file with many tiny tensors (the shape of a
-- hostile file, and of a state dict with very many small parameters): seconds for the whole
-- load, the table of 200,000 tensors built, median of --rounds, and the same for 20,000 (linear
-- means 10x less).
--
-- usage: build/ddplua bench/load_many.lua [--rounds 5] [--n 200000]
local ddpl = require 'ddplua'

local opts = {rounds = 5, n = 200000}
for i = 1, #arg, 2 do
    local k = arg[i]:match('^%-%-(%w+)$')
    assert(k and opts[k], 'bench/load_many.lua: unknown argument ' .. tostring(arg[i]))
    opts[k] = assert(math.tointeger(tonumber(arg[i + 1])), arg[i] .. ' takes an integer')
end

-- A file of n one-byte tensors t1..tn, written by hand (the header as any writer lays it out).
local function write_file(path, n)
    local parts = {'{'}
    for i = 1, n do
        parts[#parts + 1] = ('%s"t%d":{"dtype":"U8","shape":[1],"data_offsets":[%d,%d]}')
            :format(i > 1 and ',' or '', i, i - 1, i)
    end
    parts[#parts + 1] = '}'
    local header = table.concat(parts)
    header = header .. (' '):rep((8 - #header % 8) % 8)
    local data = {}
    for i = 1, n do data[i] = string.char(i % 256) end
    local f = assert(io.open(path, 'wb'))
    f:write(string.pack('<I8', #header), header, table.concat(data))
    f:close()
end

local function median(t)
    table.sort(t)
    return t[(#t + 1) // 2]
end

local function measure(n)
    local path = os.tmpname()
    write_file(path, n)
    local times = {}
    for r = 1, opts.rounds do
        collectgarbage()
        local t0 = ddpl.time()
        local t = ddpl.load(path)
        times[r] = ddpl.time() - t0
        assert(t['t' .. n]:item() == n % 256)
    end
    os.remove(path)
    return median(times)
end

local small, large = measure(opts.n // 10), measure(opts.n)
print(('load of %d tiny tensors: %.3f s; of %d: %.3f s (ratio %.1f; linear is 10); median of %d')
    :format(opts.n, large, opts.n // 10, small, large / small, opts.rounds))
