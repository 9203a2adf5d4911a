-- lua/ddplua/utils/protobuf.lua: the protocol-buffers wire format, encoding side, for the few
-- messages that TensorBoard event files hold (lua/ddplua/utils/tensorboard.lua builds them).
-- defines: pb.varint(n), pb.uint(field, n), pb.double(field, x), pb.float(field, x),
--          pb.bytes(field, s), pb.message(field, ...), pb.packed_doubles(field, list).
--
-- Each function returns the bytes of one field: its key (field number << 3 | wire type) as a
-- varint, then the value: varints (wire type 0) for integers and enums, 8 little-endian bytes
-- (type 1) for doubles, 4 (type 5) for floats, a varint length then the bytes (type 2) for
-- strings, nested messages and packed repeated numbers. A message is the concatenation of its
-- fields; the caller leaves out what proto3 would leave out (zero numbers, empty strings), so
-- the bytes are what protobuf's own serializer writes for the same message.
local pb = {}

local pack, char = string.pack, string.char

-- n as a base-128 varint, 7 bits a byte, low group first. Negative integers are their 64-bit
-- two's complement (10 bytes), as protobuf writes an int64.
function pb.varint(n)
    if n >= 0 and n < 0x80 then return char(n) end
    local out = {}
    while n & ~0x7F ~= 0 do -- unsigned: Lua's >> shifts in zeros
        out[#out + 1] = char((n & 0x7F) | 0x80)
        n = n >> 7
    end
    out[#out + 1] = char(n)
    return table.concat(out)
end

local varint = pb.varint
local function key(field, wire) return varint(field << 3 | wire) end

function pb.uint(field, n) return key(field, 0) .. varint(n) end
function pb.double(field, x) return key(field, 1) .. pack('<d', x) end
function pb.float(field, x) return key(field, 5) .. pack('<f', x) end
function pb.bytes(field, s) return key(field, 2) .. varint(#s) .. s end

-- A nested message made of the given fields (strings), in order.
function pb.message(field, ...) return pb.bytes(field, table.concat({...})) end

-- A packed repeated double: the values back to back in one length-delimited field.
function pb.packed_doubles(field, list)
    local parts, CHUNK = {}, 512 -- string.pack takes its values as arguments: in slices
    for i = 1, #list, CHUNK do
        local j = math.min(i + CHUNK - 1, #list)
        parts[#parts + 1] = pack('<' .. ('d'):rep(j - i + 1), table.unpack(list, i, j))
    end
    return pb.bytes(field, table.concat(parts))
end

return pb
