-- spec/data/data_spec.lua: ddpl.data: datasets, the DataLoader, samplers, the IDX reader,
-- FashionMNIST. IDX test files (plain, gzip and broken ones) are written at run time into a
-- temporary folder.
local H = require 'helpers'
local ddpl = H.ddpl
local data = ddpl.data

-- ---- helpers ----

local function list(t) return H.values(t) end

local function range(a, b) -- {a, ..., b}
    local out = {}
    for i = a, b do out[#out + 1] = i end
    return out
end

local function sorted(t)
    local c = table.move(t, 1, #t, 1, {})
    table.sort(c)
    return c
end

local function same(a, b) -- list equality
    if #a ~= #b then return false end
    for i = 1, #a do if a[i] ~= b[i] then return false end end
    return true
end

local tmpdir
local function tmp(name) return tmpdir .. '/' .. name end

local function write(path, bytes)
    local f = assert(io.open(path, 'wb'))
    f:write(bytes)
    f:close()
    return path
end

local function gzip(src, dst)
    assert(os.execute(string.format("gzip -c '%s' > '%s'", src, dst)), 'gzip failed')
    return dst
end

-- An IDX file's bytes: type byte, sizes, then the elements packed big-endian with fmt.
local function idx_bytes(type_byte, sizes, fmt, values)
    local parts = { string.pack('>BBBB', 0, 0, type_byte, #sizes) }
    for _, s in ipairs(sizes) do parts[#parts + 1] = string.pack('>I4', s) end
    for _, v in ipairs(values) do
        parts[#parts + 1] = string.pack(fmt, fmt == 'B' and v % 256 or v)
    end
    return table.concat(parts)
end

setup(function()
    tmpdir = os.tmpname()
    os.remove(tmpdir)
    assert(os.execute("mkdir -p '" .. tmpdir .. "'"))
end)

teardown(function()
    if tmpdir and tmpdir:match('^/tmp/') then os.execute("rm -rf '" .. tmpdir .. "'") end
end)

-- ---- datasets ----

describe('TensorDataset', function()
    it('returns row i of each tensor and checks its arguments', function()
        local x = ddpl.arange(12):view(6, 2)
        local y = ddpl.arange(6, { dtype = 'int64' })
        local ds = data.TensorDataset(x, y)
        assert.equals(6, ds:len())
        assert.equals(6, #ds)
        local xi, yi = ds:get(4)
        assert.same({ 8, 9 }, list(xi))
        assert.equals(4, yi:item())
        assert.equals(5, (select(2, ds:get(-1))):item())
        H.assert_error(function() ds:get(6) end, 'TensorDataset', 'index 6 is out of range for 6')
        H.assert_error(function() data.TensorDataset(x, ddpl.zeros(5)) end, 'size mismatch',
            '6 rows', 'tensor 2 has 5')
        H.assert_error(function() data.TensorDataset(x, 3) end, 'expected a tensor as argument 2')
    end)
end)

describe('Dataset', function()
    it('is subclassed with extend and reports missing methods', function()
        local Squares = data.Dataset:extend('Squares')
        function Squares:init(n) self.n = n end
        function Squares:len() return self.n end
        function Squares:get(i) return ddpl.full({ 2 }, i), i * i end
        local ds = Squares(5)
        assert.equals(5, #ds)
        assert.is_true(ds:is_instance_of(data.Dataset))
        local x, sq = ds:get(3)
        assert.same({ 3, 3 }, list(x))
        assert.equals(9, sq)
        local Empty = data.Dataset:extend('Empty')
        H.assert_error(function() return #Empty() end, 'Empty: len() is not implemented')
        H.assert_error(function() Empty():get(0) end, 'Empty: get(i) is not implemented')
    end)
end)

describe('Subset', function()
    it('picks items of another data set and keeps its batch fast path', function()
        local base = data.TensorDataset(ddpl.arange(10) * 10)
        local sub = data.Subset(base, { 7, 2, 9 })
        assert.equals(3, #sub)
        assert.equals(20, sub:get(1):item())
        local got = {}
        for xb in data.DataLoader(sub, { batch_size = 2 }):iter() do
            for _, v in ipairs(list(xb)) do got[#got + 1] = v end
        end
        assert.same({ 70, 20, 90 }, got)
        H.assert_error(function() data.Subset(base, { 10 }) end, 'Subset', '[0, 10)')
    end)
end)

-- ---- DataLoader ----

describe('DataLoader', function()
    local x = ddpl.arange(20):view(10, 2)
    local y = ddpl.arange(10, { dtype = 'int64' })
    local ds = data.TensorDataset(x, y)

    local function collect(loader)
        local sizes, labels = {}, {}
        for xb, yb in loader:iter() do
            sizes[#sizes + 1] = xb:size(0)
            assert.equals(xb:size(0), yb:size(0))
            for k, v in ipairs(list(yb)) do
                -- rows stay paired with their labels
                assert.same({ 2 * v, 2 * v + 1 }, list(xb[k - 1]))
                labels[#labels + 1] = v
            end
        end
        return sizes, labels
    end

    it('iterates as `for x, y in loader do`, a new pass each loop, breaks included', function()
        for _, workers in ipairs({ 0, 1 }) do
            local loader = data.DataLoader(ds, { batch_size = 4, num_workers = workers })
            local labels = {}
            for xb, yb in loader do
                assert.equals(xb:size(0), yb:size(0))
                for _, v in ipairs(list(yb)) do labels[#labels + 1] = v end
            end
            assert.same({ 0, 1, 2, 3, 4, 5, 6, 7, 8, 9 }, labels)
            for _, yb in loader do
                assert.same({ 0, 1, 2, 3 }, list(yb))
                break -- the next loop starts a pass of its own
            end
            local firsts = {}
            for _, yb in loader do firsts[#firsts + 1] = list(yb)[1] end
            assert.same({ 0, 4, 8 }, firsts)
            H.assert_error(function() return loader(nil, 1) end, 'no pass in progress')
            loader:close()
        end
    end)

    it('batches in order, with and without drop_last', function()
        local loader = data.DataLoader(ds, { batch_size = 4 })
        assert.equals(3, #loader)
        local sizes, labels = collect(loader)
        assert.same({ 4, 4, 2 }, sizes)
        assert.same(range(0, 9), labels)
        local dl = data.DataLoader(ds, { batch_size = 4, drop_last = true })
        assert.equals(2, #dl)
        sizes, labels = collect(dl)
        assert.same({ 4, 4 }, sizes)
        assert.same(range(0, 7), labels)
        assert.equals(10, #data.DataLoader(ds)) -- batch_size defaults to 1
    end)

    it('gathers TensorDataset batches natively, never item by item', function()
        local NoGet = data.TensorDataset:extend('NoGet')
        function NoGet:get() error('get must not be called') end
        local loader = data.DataLoader(NoGet(x, y), { batch_size = 3, shuffle = true })
        local sizes, labels = collect(loader)
        assert.same({ 3, 3, 3, 1 }, sizes)
        assert.same(range(0, 9), sorted(labels))
    end)

    it('shuffles reproducibly with a seed and anew on every pass', function()
        local a = data.DataLoader(ds, { batch_size = 3, shuffle = true, seed = 7 })
        local b = data.DataLoader(ds, { batch_size = 3, shuffle = true, seed = 7 })
        local _, a1 = collect(a)
        local _, a2 = collect(a)
        local _, b1 = collect(b)
        local _, b2 = collect(b)
        assert.same(range(0, 9), sorted(a1))
        assert.same(a1, b1)
        assert.same(a2, b2)
        assert.is_false(same(a1, a2))
        assert.is_false(same(a1, range(0, 9)))
        -- the engine RNG does not change a seeded order, and is not consumed by it
        ddpl.manual_seed(3)
        local r1 = ddpl.rand(4)
        ddpl.manual_seed(3)
        local _, c1 = collect(data.DataLoader(ds, { batch_size = 3, shuffle = true, seed = 7 }))
        H.assert_close(ddpl.rand(4), r1)
        assert.same(a1, c1)
        -- without a seed, ddpl.manual_seed makes the order reproducible
        ddpl.manual_seed(11)
        local _, u1 = collect(data.DataLoader(ds, { batch_size = 3, shuffle = true }))
        ddpl.manual_seed(11)
        local _, u2 = collect(data.DataLoader(ds, { batch_size = 3, shuffle = true }))
        assert.same(u1, u2)
        assert.same(range(0, 9), sorted(u1))
    end)

    it('collates custom data sets by stacking, or with collate_fn', function()
        local Pairs = data.Dataset:extend('Pairs')
        function Pairs:len() return 5 end
        function Pairs:get(i) return ddpl.full({ 1, 3 }, i), i, i / 2 end
        local loader = data.DataLoader(Pairs(), { batch_size = 2 })
        assert.equals(3, #loader)
        local it = loader:iter()
        local xb, ib, hb = it()
        assert.same({ 2, 1, 3 }, H.shape(xb))
        assert.same({ 0, 0, 0, 1, 1, 1 }, list(xb))
        assert.equals('int64', H.dtype_name(ib.dtype))
        assert.same({ 0, 1 }, list(ib))
        assert.equals('float64', H.dtype_name(hb.dtype))
        assert.same({ 0, 0.5 }, list(hb))
        local seen = {}
        local custom = data.DataLoader(Pairs(), {
            batch_size = 2,
            collate_fn = function(items)
                seen[#seen + 1] = #items
                local s = 0
                for _, item in ipairs(items) do s = s + item[2] end
                return s, #items
            end,
        })
        local sums = {}
        for s, n in custom:iter() do sums[#sums + 1] = s .. '/' .. n end
        assert.same({ '1/2', '5/2', '4/1' }, sums)
        assert.same({ 2, 2, 1 }, seen)
        -- a TensorDataset with a collate_fn gets its items row by row
        local firsts = {}
        for v in data.DataLoader(ds, { batch_size = 4, collate_fn = function(items)
            return items[1][2]:item()
        end }):iter() do firsts[#firsts + 1] = v end
        assert.same({ 0, 4, 8 }, firsts)
    end)

    it('accepts a sampler, and rejects contradicting options as PyTorch does', function()
        local s = data.DistributedSampler(ds, { num_replicas = 2, rank = 1, shuffle = false })
        local loader = data.DataLoader(ds, { batch_size = 2, sampler = s })
        assert.equals(3, #loader)
        local _, labels = collect(loader)
        assert.same({ 1, 3, 5, 7, 9 }, labels)
        local _, fixed = collect(data.DataLoader(ds, { batch_size = 2, sampler = { 9, 0, 4 } }))
        assert.same({ 9, 0, 4 }, fixed)
        H.assert_error(function() data.DataLoader(ds, { sampler = s, shuffle = true }) end,
            'sampler option is mutually exclusive with shuffle')
        local bs = data.BatchSampler(data.SequentialSampler(ds), 5, false)
        assert.equals(2, #data.DataLoader(ds, { batch_sampler = bs }))
        H.assert_error(function() data.DataLoader(ds, { batch_sampler = bs, batch_size = 2 }) end,
            'batch_sampler option is mutually exclusive')
        H.assert_error(function() data.DataLoader(ds, { batch_size = 0 }) end,
            'batch_size should be a positive integer')
        H.assert_error(function() data.DataLoader(ds, { batchsize = 2 }) end, "unknown option 'batchsize'")
        H.assert_error(function() data.DataLoader({}, {}) end, 'expected a data set')
    end)
end)

-- ---- DistributedSampler ----

describe('DistributedSampler', function()
    local n = 10

    local function per_rank(R, opts)
        local out = {}
        for r = 0, R - 1 do
            local o = { num_replicas = R, rank = r }
            for k, v in pairs(opts or {}) do o[k] = v end
            local s = data.DistributedSampler(n, o)
            out[r + 1] = list(s:indices())
            assert.equals(#s, #out[r + 1])
            assert.equals('int64', H.dtype_name(s:indices().dtype))
        end
        return out
    end

    -- the global list the ranks' strided shares come from: global[k*R + r] = ranks[r][k]
    local function interleave(ranks)
        local R, g = #ranks, {}
        for r = 1, R do
            for k, v in ipairs(ranks[r]) do g[(k - 1) * R + r] = v end
        end
        return g
    end

    it('splits without shuffling exactly as PyTorch', function()
        assert.same({ { 0, 3, 6, 9 }, { 1, 4, 7, 0 }, { 2, 5, 8, 1 } }, per_rank(3, { shuffle = false }))
        assert.same({ { 0, 4, 8 }, { 1, 5, 9 }, { 2, 6, 0 }, { 3, 7, 1 } }, per_rank(4, { shuffle = false }))
        assert.same({ { 0, 3, 6 }, { 1, 4, 7 }, { 2, 5, 8 } },
            per_rank(3, { shuffle = false, drop_last = true }))
        assert.same({ { 0, 4 }, { 1, 5 }, { 2, 6 }, { 3, 7 } },
            per_rank(4, { shuffle = false, drop_last = true }))
        -- fewer items than ranks: the list repeats as often as needed
        local s = data.DistributedSampler(2, { num_replicas = 5, rank = 4, shuffle = false })
        assert.same({ 0 }, list(s:indices()))
    end)

    for _, R in ipairs({ 3, 4 }) do
        for _, drop_last in ipairs({ false, true }) do
            it(string.format('shuffles one permutation for all ranks (R=%d, drop_last=%s)', R,
                tostring(drop_last)), function()
                local ranks = per_rank(R, { seed = 5, drop_last = drop_last })
                local per = drop_last and n // R or (n + R - 1) // R
                for r = 1, R do assert.equals(per, #ranks[r]) end
                local g = interleave(ranks)
                assert.equals(per * R, #g)
                if drop_last then
                    -- distinct indices, n - (n % R) of them
                    local seen = {}
                    for _, v in ipairs(g) do
                        assert.is_nil(seen[v])
                        seen[v] = true
                    end
                else
                    -- the first n are a permutation (the union covers every index) ...
                    assert.same(range(0, n - 1), sorted(table.move(g, 1, n, 1, {})))
                    -- ... and the padding repeats the first indices
                    for j = n + 1, #g do assert.equals(g[j - n], g[j]) end
                end
                assert.is_false(same(table.move(g, 1, per, 1, {}), range(0, per - 1)))
            end)
        end
    end

    it('changes the order with set_epoch and the seed, and leaves the engine RNG alone', function()
        local s = data.DistributedSampler(n, { num_replicas = 2, rank = 0 })
        local e0 = list(s:indices())
        assert.same(e0, list(s:indices()))
        s:set_epoch(1)
        local e1 = list(s:indices())
        assert.is_false(same(e0, e1))
        local other = data.DistributedSampler(n, { num_replicas = 2, rank = 0, seed = 1 })
        assert.is_false(same(e0, list(other:indices())))
        -- seed 0 epoch 1 is seed 1 epoch 0, as PyTorch's generator seed is seed + epoch
        assert.same(e1, list(other:indices()))
        ddpl.manual_seed(1)
        local r1 = ddpl.rand(3)
        ddpl.manual_seed(1)
        s:set_epoch(0)
        assert.same(e0, list(s:indices()))
        H.assert_close(ddpl.rand(3), r1)
    end)

    it('checks rank and needs a process group for the defaults', function()
        H.assert_error(function() data.DistributedSampler(n, { num_replicas = 4, rank = 4 }) end,
            'Invalid rank 4', '[0, 3]')
        H.assert_error(function() data.DistributedSampler(n, { num_replicas = 2, rank = -1 }) end,
            'Invalid rank -1')
        local ok, dist = pcall(require, 'ddplua.distributed')
        if not (ok and type(dist) == 'table' and dist.is_initialized and dist.is_initialized()) then
            H.assert_error(function() data.DistributedSampler(n) end,
                'default process group has not been initialized', 'num_replicas and rank')
        end
    end)
end)

-- ---- IDX reader ----

describe('read_idx', function()
    local images = {} -- 2 x 3 x 4 uint8
    for i = 0, 23 do images[#images + 1] = (i * 11) % 256 end

    it('reads plain and gzip files into a tensor of the file shape', function()
        local plain = write(tmp('img-idx3-ubyte'), idx_bytes(0x08, { 2, 3, 4 }, 'B', images))
        local gz = gzip(plain, tmp('img-idx3-ubyte.gz'))
        for _, path in ipairs({ plain, gz }) do
            local t = data.read_idx(path)
            assert.equals('uint8', H.dtype_name(t.dtype))
            assert.same({ 2, 3, 4 }, H.shape(t))
            assert.same(images, list(t))
        end
        local labels = data.read_idx(write(tmp('lab-idx1-ubyte'), idx_bytes(0x08, { 3 }, 'B', { 7, 0, 9 })))
        assert.same({ 7, 0, 9 }, list(labels))
    end)

    it('reads the other IDX element types, big-endian', function()
        local cases = {
            { 0x09, '>i1', { -128, -1, 0, 127 }, 'int8' }, -- torchvision's types for 0x09, 0x0B
            { 0x0B, '>i2', { -32768, -2, 300, 32767 }, 'int16' },
            { 0x0C, '>i4', { -2147483648, -70000, 5, 2147483647 }, 'int32' },
            { 0x0D, '>f', { -1.5, 0, 0.25, 3e38 }, 'float32' },
            { 0x0E, '>d', { -1.5, 1e-300, 0.1, 1e300 }, 'float64' },
        }
        for _, c in ipairs(cases) do
            local path = write(tmp(string.format('t%02x-idx2', c[1])), idx_bytes(c[1], { 2, 2 }, c[2], c[3]))
            local t = data.read_idx(gzip(path, path .. '.gz'))
            assert.equals(c[4], H.dtype_name(t.dtype))
            assert.same({ 2, 2 }, H.shape(t))
            if c[4] == 'float32' then H.assert_close(t, c[3], 1e-7, 0) else assert.same(c[3], list(t)) end
        end
    end)

    it('rejects broken files with errors naming the file and the problem', function()
        local good = idx_bytes(0x08, { 2, 3, 4 }, 'B', images)
        local function expect(path, ...) H.assert_error(function() data.read_idx(path) end, path, ...) end
        expect(tmp('missing-idx'), 'cannot open', 'No such file')
        expect(write(tmp('bad-magic'), '\x12\x34' .. good:sub(3)), 'bad magic number 0x12340803',
            'not an IDX file')
        expect(write(tmp('bad-type'), '\0\0\x07\3' .. good:sub(5)), 'bad magic number 0x00000703')
        expect(write(tmp('rank0'), '\0\0\x08\0'), 'rank 0')
        expect(write(tmp('short'), '\0\0'), 'too short for an IDX header')
        expect(write(tmp('short-header'), good:sub(1, 10)), 'truncated header')
        expect(write(tmp('truncated'), good:sub(1, #good - 4)), 'truncated: expected 24 bytes of data, got 20')
        expect(write(tmp('trailing'), good .. 'xyz'), '3 bytes after the 24 bytes of data')
        -- a gzip stream cut short, and one whose content is garbage
        local gz = gzip(write(tmp('big-idx'), idx_bytes(0x08, { 4000 }, 'B', range(1, 4000))), tmp('big-idx.gz'))
        local f = assert(io.open(gz, 'rb'))
        local bytes = f:read('a')
        f:close()
        expect(write(tmp('cut.gz'), bytes:sub(1, #bytes // 2)), 'truncated: expected 4000 bytes of data')
        -- the 8-byte trailer: CRC-32 and length
        expect(write(tmp('no-trailer.gz'), bytes:sub(1, #bytes - 8)), 'truncated gzip stream')
        expect(write(tmp('bad-crc.gz'), bytes:sub(1, #bytes - 8) .. string.rep('\0', 8)),
            'corrupt gzip data', 'incorrect data check')
        expect(write(tmp('garbage.gz'), '\x1f\x8b\x08\0\0\0\0\0\0\3' .. string.rep('\xff', 64)), 'gzip')
        -- bytes after the gzip stream: junk is refused (zlib's gzread ignored it), zero padding
        -- and a second member are a whole gzip file (as gzip(1) and Python's gzip read them)
        expect(write(tmp('junk.gz'), bytes .. 'junk'), 'corrupt gzip data',
            '4 bytes after the gzip stream that are not a gzip member')
        expect(write(tmp('junk1.gz'), bytes .. '\x1f'), '1 bytes after the gzip stream')
        assert.are.equal(4000, data.read_idx(write(tmp('padded.gz'), bytes .. string.rep('\0', 10))):numel())
        local whole = idx_bytes(0x08, { 6 }, 'B', { 1, 2, 3, 4, 5, 6 })
        local part1 = gzip(write(tmp('part1'), whole:sub(1, 9)), tmp('part1.gz'))
        local part2 = gzip(write(tmp('part2'), whole:sub(10)), tmp('part2.gz'))
        local f1, f2 = assert(io.open(part1, 'rb')), assert(io.open(part2, 'rb'))
        local two = write(tmp('two-members.gz'), f1:read('a') .. f2:read('a'))
        f1:close()
        f2:close()
        assert.are.same({ 1, 2, 3, 4, 5, 6 }, data.read_idx(two):tolist())
        -- a header announcing far more than the compressed file can hold
        local huge = gzip(write(tmp('huge-idx'), idx_bytes(0x08, { 60000, 60000, 60000 }, 'B', {})),
            tmp('huge-idx.gz'))
        expect(huge, 'announces', 'more than a gzip file')
        H.assert_error(function() data.read_idx(42) end, 'read_idx', 'a file path')
    end)
end)

-- ---- the real data sets ----

describe('FashionMNIST', function()
    local root = os.getenv('FASHION_MNIST_DIR') or '/usr/share/datasets/fashion-mnist'

    it('loads the training and test sets', function()
        local train = data.datasets.FashionMNIST()
        local test = data.datasets.FashionMNIST({ train = false })
        assert.equals(60000, #train)
        assert.equals(10000, #test)
        assert.same({ 60000, 28, 28 }, H.shape(train.data))
        assert.equals('uint8', H.dtype_name(train.data.dtype))
        assert.equals('int64', H.dtype_name(train.targets.dtype))
        for _, ds in ipairs({ train, test }) do
            assert.equals(0, ds.targets:min():item())
            assert.equals(9, ds.targets:max():item())
            -- every class is present in equal numbers (6000 / 1000 each)
            assert.equals(#ds // 10, ds.targets:eq(3):sum():item())
        end
        local img, label = train:get(0)
        assert.same({ 1, 28, 28 }, H.shape(img))
        assert.equals('float32', H.dtype_name(img.dtype))
        assert.equals(9, label:item()) -- the first training image is an ankle boot
        assert.equals('int64', H.dtype_name(label.dtype))
        -- the test set matches an independent read (gzip -dc and frombytes, 8- and 16-byte headers)
        local function gunzip(name)
            local pipe = assert(io.popen("gzip -dc '" .. root .. '/' .. name .. "'", 'r'))
            local bytes = pipe:read('a')
            pipe:close()
            return bytes
        end
        local ref_labels = ddpl.frombytes(gunzip('t10k-labels-idx1-ubyte.gz'):sub(9), 'uint8'):long()
        assert.equals(10000, ref_labels:eq(test.targets):sum():item())
        local ref_images = ddpl.frombytes(gunzip('t10k-images-idx3-ubyte.gz'):sub(17), 'uint8', { 10000, 28, 28 })
        assert.equals(10000 * 28 * 28, ref_images:eq(test.data):sum():item())
        -- batches come out of the loader as float32 (B,1,28,28) in [0, 1] with int64 labels
        local loader = data.DataLoader(train, { batch_size = 256, shuffle = true, seed = 0 })
        assert.equals(235, #loader)
        local xb, yb = loader:iter()()
        assert.same({ 256, 1, 28, 28 }, H.shape(xb))
        assert.equals('float32', H.dtype_name(xb.dtype))
        assert.equals('int64', H.dtype_name(yb.dtype))
        assert.is_true(xb:min():item() >= 0 and xb:max():item() <= 1)
        assert.equals(1, xb:max():item())
        -- a batch holds the items it names
        local loader2 = data.DataLoader(train, { batch_size = 3 })
        local xs, ys = loader2:iter()()
        for k = 0, 2 do
            local xi, yi = train:get(k)
            H.assert_close(xs[k], xi)
            assert.equals(yi:item(), ys[k]:item())
        end
    end)

    it('applies a transform to items', function()
        local ds = data.datasets.FashionMNIST({ train = false, transform = function(img) return img:flatten() end })
        local x = ds:get(0)
        assert.same({ 784 }, H.shape(x))
        local xb = data.DataLoader(ds, { batch_size = 4 }):iter()()
        assert.same({ 4, 784 }, H.shape(xb))
    end)

    it('names the missing or broken file and how to get it', function()
        local empty = tmp('no-data')
        os.execute("mkdir -p '" .. empty .. "'")
        H.assert_error(function() data.datasets.FashionMNIST({ root = empty }) end,
            'FashionMNIST', empty .. '/train-images-idx3-ubyte.gz', 'dataset-fashion-mnist',
            'FASHION_MNIST_DIR')
        -- a truncated copy of the real test labels
        local broken = tmp('broken')
        os.execute("mkdir -p '" .. broken .. "'")
        os.execute(string.format("cp '%s/t10k-images-idx3-ubyte.gz' '%s/'", root, broken))
        write(broken .. '/t10k-labels-idx1-ubyte', idx_bytes(0x08, { 10000 }, 'B', range(1, 1200)))
        H.assert_error(function() data.datasets.FashionMNIST({ root = broken, train = false }) end,
            'FashionMNIST: ' .. broken .. '/t10k-labels-idx1-ubyte: truncated: expected 10000 bytes of data, got 1200')
        H.assert_error(function() data.datasets.MNIST({ root = empty }) end, 'MNIST', 'MNIST_DIR')
    end)
end)
