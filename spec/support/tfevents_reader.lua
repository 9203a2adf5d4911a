-- spec/support/tfevents_reader.lua: an independent reader of TensorBoard event files, for the specs
-- that check what lua/ddplua/utils/tensorboard.lua writes. It shares no code with the writer: its
-- CRC-32C is the bitwise algorithm (the writer uses a table), its protobuf parser is its own.
-- defines: R.crc32c(s), R.masked_crc(s), R.records(path) -> list of data strings (each frame's
--          length and both CRCs checked), R.fields(msg) -> list of {num, wire, value},
--          R.field_map(msg) -> num -> list of values, R.event(data) -> {wall_time, step,
--          file_version, summary}, R.summary_values(summary) -> list of decoded Values,
--          R.event_files(dir) -> the event files in dir, R.read_dir(dir) -> the events of its
--          event files (first record checked), R.scalars(dir, tag) -> {step = value}.
local R = {}

-- CRC-32C bit by bit: reflected Castagnoli polynomial, init and final xor all ones.
function R.crc32c(s)
    local crc = 0xFFFFFFFF
    for i = 1, #s do
        crc = crc ~ s:byte(i)
        for _ = 1, 8 do
            if crc & 1 == 1 then crc = (crc >> 1) ~ 0x82F63B78 else crc = crc >> 1 end
        end
    end
    return crc ~ 0xFFFFFFFF
end

-- TFRecord's mask: rotate right by 15 bits, add 0xa282ead8 (mod 2^32).
function R.masked_crc(s)
    local c = R.crc32c(s)
    local rotated = ((c >> 15) | (c << 17)) & 0xFFFFFFFF
    return (rotated + 0xa282ead8) % 0x100000000
end

function R.records(path)
    local f = assert(io.open(path, 'rb'))
    local bytes = f:read('a')
    f:close()
    local list, pos = {}, 1
    while pos <= #bytes do
        assert(pos + 12 - 1 <= #bytes, ('%s: a truncated header at byte %d'):format(path, pos))
        local len_bytes = bytes:sub(pos, pos + 7)
        local len = string.unpack('<I8', len_bytes)
        local len_crc = string.unpack('<I4', bytes, pos + 8)
        assert(len_crc == R.masked_crc(len_bytes),
            ('%s: record %d: the length CRC is wrong'):format(path, #list + 1))
        local data_at = pos + 12
        assert(data_at + len + 4 - 1 <= #bytes, ('%s: record %d is truncated'):format(path,
            #list + 1))
        local data = bytes:sub(data_at, data_at + len - 1)
        local data_crc = string.unpack('<I4', bytes, data_at + len)
        assert(data_crc == R.masked_crc(data), ('%s: record %d: the data CRC is wrong'):format(
            path, #list + 1))
        list[#list + 1] = data
        pos = data_at + len + 4
    end
    return list
end

local function read_varint(s, pos)
    local result, shift = 0, 0
    while true do
        assert(pos <= #s, 'protobuf: a varint runs past the end')
        local b = s:byte(pos)
        pos = pos + 1
        result = result | ((b & 0x7F) << shift)
        if b < 0x80 then return result, pos end
        shift = shift + 7
        assert(shift < 70, 'protobuf: a varint longer than 10 bytes')
    end
end

-- Every field of a message in order: varints as integers, fixed64/fixed32 as their raw bytes,
-- length-delimited fields as strings.
function R.fields(msg)
    local out, pos = {}, 1
    while pos <= #msg do
        local key
        key, pos = read_varint(msg, pos)
        local num, wire = key >> 3, key & 7
        local value
        if wire == 0 then
            value, pos = read_varint(msg, pos)
        elseif wire == 1 then
            value = msg:sub(pos, pos + 7)
            assert(#value == 8, 'protobuf: a truncated fixed64')
            pos = pos + 8
        elseif wire == 5 then
            value = msg:sub(pos, pos + 3)
            assert(#value == 4, 'protobuf: a truncated fixed32')
            pos = pos + 4
        elseif wire == 2 then
            local len
            len, pos = read_varint(msg, pos)
            value = msg:sub(pos, pos + len - 1)
            assert(#value == len, 'protobuf: a truncated length-delimited field')
            pos = pos + len
        else
            error('protobuf: unexpected wire type ' .. wire)
        end
        out[#out + 1] = {num = num, wire = wire, value = value}
    end
    return out
end

function R.field_map(msg)
    local m = {}
    for _, f in ipairs(R.fields(msg)) do
        m[f.num] = m[f.num] or {}
        table.insert(m[f.num], f)
    end
    return m
end

-- The one field num of a message, checking its wire type; nil when absent.
local function one(m, num, wire)
    local list = m[num]
    if not list then return nil end
    assert(#list == 1, ('field %d appears %d times'):format(num, #list))
    assert(list[1].wire == wire, ('field %d has wire type %d, expected %d'):format(num,
        list[1].wire, wire))
    return list[1].value
end

local function as_double(raw) return raw and string.unpack('<d', raw) end

local KNOWN_EVENT = {[1] = true, [2] = true, [3] = true, [5] = true}

function R.event(data)
    local m = R.field_map(data)
    for num in pairs(m) do assert(KNOWN_EVENT[num], 'Event: unexpected field ' .. num) end
    return {wall_time = as_double(one(m, 1, 1)), step = one(m, 2, 0) or 0,
        file_version = one(m, 3, 2), summary = one(m, 5, 2)}
end

local function packed_doubles(raw)
    local list = {}
    if not raw then return list end
    assert(#raw % 8 == 0, 'packed doubles: a length not a multiple of 8')
    for i = 1, #raw, 8 do list[#list + 1] = string.unpack('<d', raw, i) end
    return list
end

-- A Value: {tag, simple_value} | {tag, histo = {min, max, num, sum, sum_squares, bucket_limit,
-- bucket}} | {tag, tensor = {dtype, dims, string_val}, plugin_name}
local function value(msg)
    local m = R.field_map(msg)
    local v = {tag = one(m, 1, 2)}
    local simple = one(m, 2, 5)
    if simple then v.simple_value = string.unpack('<f', simple) end
    local histo = one(m, 5, 2)
    if histo then
        local h = R.field_map(histo)
        v.histo = {min = as_double(one(h, 1, 1)) or 0, max = as_double(one(h, 2, 1)) or 0,
            num = as_double(one(h, 3, 1)) or 0, sum = as_double(one(h, 4, 1)) or 0,
            sum_squares = as_double(one(h, 5, 1)) or 0,
            bucket_limit = packed_doubles(one(h, 6, 2)), bucket = packed_doubles(one(h, 7, 2))}
    end
    local tensor = one(m, 8, 2)
    if tensor then
        local t = R.field_map(tensor)
        local dims = {}
        local shape = one(t, 2, 2)
        if shape then
            for _, d in ipairs(R.field_map(shape)[2] or {}) do
                assert(d.wire == 2)
                dims[#dims + 1] = one(R.field_map(d.value), 1, 0)
            end
        end
        local strings = {}
        for _, s in ipairs(t[8] or {}) do
            assert(s.wire == 2)
            strings[#strings + 1] = s.value
        end
        v.tensor = {dtype = one(t, 1, 0), dims = dims, string_val = strings}
    end
    local metadata = one(m, 9, 2)
    if metadata then
        local plugin = one(R.field_map(metadata), 1, 2)
        v.plugin_name = plugin and one(R.field_map(plugin), 1, 2)
    end
    return v
end

function R.summary_values(summary)
    local list = {}
    for _, f in ipairs(R.fields(summary)) do
        assert(f.num == 1 and f.wire == 2, 'Summary: unexpected field ' .. f.num)
        list[#list + 1] = value(f.value)
    end
    return list
end

local function q(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end

function R.event_files(dir)
    local list = {}
    local p = assert(io.popen('ls -1 ' .. q(dir) .. ' 2>/dev/null'))
    for name in p:lines() do
        if name:find('^events%.out%.tfevents%.') then list[#list + 1] = dir .. '/' .. name end
    end
    p:close()
    table.sort(list)
    return list
end

-- All events of the event files in dir, after checking that each file starts with the
-- file_version record; each event gets .values (its decoded summary values).
function R.read_dir(dir)
    local events = {}
    local files = R.event_files(dir)
    assert(#files > 0, 'no event file in ' .. dir)
    for _, path in ipairs(files) do
        local recs = R.records(path)
        local first = R.event(recs[1])
        assert(first.file_version == 'brain.Event:2', path .. ': the first record is no '
            .. 'file_version brain.Event:2')
        for i = 2, #recs do
            local e = R.event(recs[i])
            e.values = e.summary and R.summary_values(e.summary) or {}
            events[#events + 1] = e
        end
    end
    return events
end

-- step -> simple_value of the scalar tag in dir's event files
function R.scalars(dir, tag)
    local out = {}
    for _, e in ipairs(R.read_dir(dir)) do
        for _, v in ipairs(e.values) do
            if v.tag == tag and v.simple_value then out[e.step] = v.simple_value end
        end
    end
    return out
end

return R
