-- spec/data/cifar10_spec.lua: data.datasets.CIFAR10 on small files in the binary version's format
-- (spec/support/cifar_files.lua writes them), and the transform options of the image data sets.
local S = require 'shell_util'
local H = require 'helpers'
local files = require 'cifar_files'
local ddpl = H.ddpl
local data = ddpl.data
local T = data.transforms

local bin = os.getenv('DDPLUA_BIN') or ((os.getenv('DDPLUA_BUILD_DIR') or 'build') .. '/ddplua')
local TRAIN, TEST = { 3, 2, 2, 1, 2 }, 4 -- records per training file, test records

local tmpdir
local function q(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end

setup(function()
    tmpdir = os.tmpname()
    os.remove(tmpdir)
    files.write(tmpdir .. '/flat', { train = TRAIN, test = TEST })
    files.write(tmpdir .. '/nested/cifar-10-batches-bin', { train = TRAIN, test = TEST })
end)

teardown(function()
    if tmpdir and tmpdir:match('^/tmp/') then os.execute('rm -rf ' .. q(tmpdir)) end
end)

-- (file, record) of each item of a split, in order
local function split_records(train)
    local list = {}
    if not train then
        for r = 0, TEST - 1 do list[#list + 1] = { 0, r } end
        return list
    end
    for f, n in ipairs(TRAIN) do
        for r = 0, n - 1 do list[#list + 1] = { f, r } end
    end
    return list
end

-- The float image of record r of file f: pixel byte c*1024 + y*32 + x at [c][y][x], / 255
local function expected_image(f, r)
    local v = {}
    for p = 0, 3071 do v[p + 1] = files.pixel(f, r, p) / 255 end
    return v
end

-- Copies the flat folder with one file replaced by `bytes` (or removed when bytes is nil).
local function variant(name, file, bytes)
    local dir = tmpdir .. '/' .. name
    os.execute(('rm -rf %s && cp -r %s %s'):format(q(dir), q(tmpdir .. '/flat'), q(dir)))
    os.remove(dir .. '/' .. file)
    if bytes then
        local f = assert(io.open(dir .. '/' .. file, 'wb'))
        f:write(bytes)
        f:close()
    end
    return dir
end

local read_file = S.read

describe('CIFAR10', function()
    it('reads the training and test splits: images CHW in [0, 1], int64 labels', function()
        for _, train in ipairs({ true, false }) do
            local ds = data.datasets.CIFAR10({ root = tmpdir .. '/flat', train = train })
            local recs = split_records(train)
            assert.equals(#recs, #ds)
            assert.same({ #recs, 3, 32, 32 }, H.shape(ds.data))
            assert.equals('uint8', H.dtype_name(ds.data.dtype))
            assert.equals('int64', H.dtype_name(ds.targets.dtype))
            for i, fr in ipairs(recs) do
                local img, label = ds:get(i - 1)
                assert.equals('float32', H.dtype_name(img.dtype))
                assert.equals('int64', H.dtype_name(label.dtype))
                assert.equals(files.label(fr[1], fr[2]), label:item())
                H.assert_close(img, { shape = { 3, 32, 32 }, dtype = 'float32',
                    values = expected_image(fr[1], fr[2]) })
            end
        end
        -- hand-picked pixels of record 1 of data_batch_1.bin (item 1): red (0,0), green
        -- (row 2, column 5), blue (31, 31)
        local img = data.datasets.CIFAR10({ root = tmpdir .. '/flat' }):get(1)
        local function f32(byte) return ddpl.tensor({ byte / 255 }, { dtype = 'float32' }):item() end
        assert.equals(f32(files.pixel(1, 1, 0)), img[0][0][0]:item())
        assert.equals(f32(files.pixel(1, 1, 1024 + 2 * 32 + 5)), img[1][2][5]:item())
        assert.equals(f32(files.pixel(1, 1, 3071)), img[2][31][31]:item())
        assert.equals('airplane', data.datasets.CIFAR10.classes[1])
        assert.equals(10, #data.datasets.CIFAR10.classes)
    end)

    it('finds the files inside cifar-10-batches-bin and in $CIFAR10_DIR', function()
        local ds = data.datasets.CIFAR10({ root = tmpdir .. '/nested', train = false })
        assert.equals(TEST, #ds)
        local p = assert(io.popen(('CIFAR10_DIR=%s %s -e %s 2>&1'):format(q(tmpdir .. '/nested'),
            q(bin), q("print('len', #require('ddplua').data.datasets.CIFAR10())"))))
        local out = p:read('a')
        p:close()
        assert.truthy(out:find('len\t10', 1, true), out)
        p = assert(io.popen(('env -u CIFAR10_DIR %s -e %s 2>&1'):format(q(bin),
            q("require('ddplua').data.datasets.CIFAR10()"))))
        out = p:read('a')
        p:close()
        assert.truthy(out:find('CIFAR10: no root given and CIFAR10_DIR is not set', 1, true), out)
    end)

    it('batches natively without a transform, item by item with one', function()
        local plain = data.datasets.CIFAR10({ root = tmpdir .. '/flat' })
        local idx = ddpl.tensor({ 4, 0, 9 }, { dtype = 'int64' })
        local xb, yb = plain:get_batch(idx)
        assert.same({ 3, 3, 32, 32 }, H.shape(xb))
        for k, i in ipairs({ 4, 0, 9 }) do
            local x, y = plain:get(i)
            H.assert_close(xb[k - 1], x)
            assert.equals(y:item(), yb[k - 1]:item())
        end
        -- transform on the image, target_transform on the label, in get and in batches
        local norm = T.Normalize({ 0.5, 0.5, 0.5 }, { 0.25, 0.25, 0.25 })
        local ds = data.datasets.CIFAR10({ root = tmpdir .. '/flat', transform = T.Compose({ norm }),
            target_transform = function(y) return y:item() + 100 end })
        local x, y = ds:get(4)
        H.assert_close(x, (plain:get(4) - 0.5) / 0.25)
        assert.equals(plain.targets[4]:item() + 100, y)
        local tb, lb = data.DataLoader(ds, { batch_size = 4 }):iter()()
        assert.same({ 4, 3, 32, 32 }, H.shape(tb))
        for k = 0, 3 do
            H.assert_close(tb[k], (plain:get(k) - 0.5) / 0.25)
            assert.equals(plain.targets[k]:item() + 100, lb[k]:item())
        end
        -- random transforms crop each item on its own
        local aug = data.datasets.CIFAR10({ root = tmpdir .. '/flat', train = false,
            transform = T.RandomCrop(24) })
        assert.same({ 4, 3, 24, 24 }, H.shape(aug:get_batch(ddpl.arange(4))))
        -- MNIST's family takes transform objects too: two 4x4 images in plain IDX files
        local mnist = tmpdir .. '/mnist'
        os.execute('mkdir -p ' .. q(mnist))
        local px = {}
        for k = 0, 31 do px[#px + 1] = k * 8 end
        local f = assert(io.open(mnist .. '/train-images-idx3-ubyte', 'wb'))
        f:write(string.pack('>BBBBI4I4I4', 0, 0, 8, 3, 2, 4, 4) .. string.char(table.unpack(px)))
        f:close()
        f = assert(io.open(mnist .. '/train-labels-idx1-ubyte', 'wb'))
        f:write(string.pack('>BBBBI4BB', 0, 0, 8, 1, 2, 7, 3))
        f:close()
        local m = data.datasets.MNIST({ root = mnist, transform = T.Compose({ T.RandomHorizontalFlip(1),
            T.Normalize(0, 1 / 255) }), target_transform = T.Lambda(function(y) return y * 2 end) })
        local img, label = m:get(1)
        assert.equals(6, label:item())
        H.assert_close(img, { { { 152, 144, 136, 128 }, { 184, 176, 168, 160 }, { 216, 208, 200, 192 },
            { 248, 240, 232, 224 } } }, 1e-5)
        local mb = m:get_batch(ddpl.tensor({ 1, 0 }, { dtype = 'int64' }))
        assert.same({ 2, 1, 4, 4 }, H.shape(mb))
        H.assert_close(mb[0], img)
    end)

    it('names the missing, truncated or foreign file', function()
        local flat = tmpdir .. '/flat'
        H.assert_error(function() data.datasets.CIFAR10({ root = tmpdir .. '/none' }) end,
            'CIFAR10', tmpdir .. '/none/data_batch_1.bin not found',
            'cifar-10-batches-bin/data_batch_1.bin', 'cifar-10-binary.tar.gz', 'CIFAR10_DIR')
        local no4 = variant('no4', 'data_batch_4.bin')
        H.assert_error(function() data.datasets.CIFAR10({ root = no4 }) end,
            'CIFAR10: ' .. no4 .. '/data_batch_4.bin: cannot open: No such file', 'cifar-10-binary')
        local third = read_file(flat .. '/data_batch_3.bin') -- 2 records
        local cut = variant('cut', 'data_batch_3.bin', third:sub(1, #third - 1))
        H.assert_error(function() data.datasets.CIFAR10({ root = cut }) end,
            'CIFAR10: ' .. cut .. '/data_batch_3.bin: 6145 bytes is not a whole number of 3073-byte '
            .. 'records', 'truncated')
        local empty = variant('empty', 'test_batch.bin', '')
        H.assert_error(function() data.datasets.CIFAR10({ root = empty, train = false }) end,
            'test_batch.bin: 0 bytes')
        -- the training split still loads: only the test file is broken
        assert.equals(10, #data.datasets.CIFAR10({ root = empty }))
        local bad_label = third:sub(1, 3073) .. '\12' .. third:sub(3075)
        local foreign = variant('label', 'data_batch_3.bin', bad_label)
        H.assert_error(function() data.datasets.CIFAR10({ root = foreign }) end,
            'data_batch_3.bin: record 1 has label 12', 'labels are 0 to 9')
        -- the reader itself
        H.assert_error(function() ddpl.read_cifar10(flat) end, 'read_cifar10', 'a list of paths')
        H.assert_error(function() ddpl.read_cifar10({}) end, 'read_cifar10', '1 to 1024 paths')
        H.assert_error(function() ddpl.read_cifar10({ flat .. '/test_batch.bin', 7 }) end,
            'read_cifar10: path 2 is a number')
        H.assert_error(function() ddpl.read_cifar10({ flat }) end, 'read_cifar10: ' .. flat,
            'is a directory')
        local x, y = ddpl.read_cifar10({ flat .. '/test_batch.bin', flat .. '/data_batch_1.bin' })
        assert.same({ TEST + TRAIN[1], 3, 32, 32 }, H.shape(x))
        assert.same({ files.label(0, 3), files.label(1, 0) }, H.values(y:narrow(0, TEST - 1, 2)))
        assert.equals(files.pixel(1, 2, 3071), x[TEST + 2][2][31][31]:item())
        H.assert_error(function() data.datasets.CIFAR10({ root = flat, download = true }) end,
            "CIFAR10: unknown option 'download'")
        H.assert_error(function() data.datasets.CIFAR10({ root = flat, transform = 3 }) end,
            'CIFAR10', 'transform must be a function or a callable object', 'number')
    end)
end)
