-- spec/support/cifar_files.lua: small CIFAR-10 binary files for the specs, with known pixels and
-- labels.
-- defines: cifar_files.label(file, r), cifar_files.pixel(file, r, p), cifar_files.write(dir,
--          {train = {n1, ..., n5}, test = n}) -> the list of paths written.
--
-- The format of the real files (the binary version): per record 1 label byte then 3072 pixel
-- bytes, the red 32x32 plane, then green, then blue, row-major. file is 1..5 for
-- data_batch_<file>.bin and 0 for test_batch.bin; r is the 0-based record in that file and p
-- the 0-based pixel byte (p = c * 1024 + y * 32 + x).
local cifar_files = {}

function cifar_files.label(file, r) return (3 * file + r) % 10 end

function cifar_files.pixel(file, r, p) return (p * 7 + 13 * r + 31 * file) % 256 end

local function file_bytes(file, n)
    local records = {}
    for r = 0, n - 1 do
        local px = {}
        for p = 0, 3071 do px[p + 1] = cifar_files.pixel(file, r, p) end
        -- string.char takes at most a few thousand arguments: one plane at a time
        records[#records + 1] = string.char(cifar_files.label(file, r))
            .. string.char(table.unpack(px, 1, 1024)) .. string.char(table.unpack(px, 1025, 2048))
            .. string.char(table.unpack(px, 2049, 3072))
    end
    return table.concat(records)
end

function cifar_files.write(dir, counts)
    assert(os.execute("mkdir -p '" .. dir .. "'"))
    local paths = {}
    local function put(name, file, n)
        local path = dir .. '/' .. name
        local f = assert(io.open(path, 'wb'))
        f:write(file_bytes(file, n))
        f:close()
        paths[#paths + 1] = path
    end
    for k, n in ipairs(counts.train or {}) do put('data_batch_' .. k .. '.bin', k, n) end
    if counts.test then put('test_batch.bin', 0, counts.test) end
    return paths
end

return cifar_files
