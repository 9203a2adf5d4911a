-- lua/ddplua/utils/crc32c.lua: CRC-32C (Castagnoli), the checksum of TFRecord framing (TensorBoard
-- event files, lua/ddplua/utils/event_file.lua).
-- defines: crc32c.checksum(s [, crc]) -> the CRC-32C of s (continuing crc, a previous result),
--          crc32c.masked(s) -> the masked CRC that TFRecord stores.
--
-- The reflected polynomial 0x82F63B78, initial value and final xor 0xFFFFFFFF (the check value of
-- "123456789" is 0xE3069283), one 256-entry table, eight bytes per string.byte call. Pure Lua:
-- event records are a few bytes to a few KB (a histogram of PyTorch's default bins is at most
-- about 25 KB), and this runs at tens of MB/s, so a C function would save microseconds per
-- record (docs/internals/utils.md has the figure).
local crc32c = {}

local POLY = 0x82F63B78 -- 0x1EDC6F41 bit-reversed
local MASK_DELTA = 0xa282ead8

local T = {}
for i = 0, 255 do
    local c = i
    for _ = 1, 8 do c = (c & 1 ~= 0) and ((c >> 1) ~ POLY) or (c >> 1) end
    T[i] = c
end

function crc32c.checksum(s, crc)
    local c = ~(crc or 0) & 0xFFFFFFFF
    local n = #s
    local i = 1
    while i + 7 <= n do
        local b1, b2, b3, b4, b5, b6, b7, b8 = s:byte(i, i + 7)
        c = T[(c ~ b1) & 0xFF] ~ (c >> 8)
        c = T[(c ~ b2) & 0xFF] ~ (c >> 8)
        c = T[(c ~ b3) & 0xFF] ~ (c >> 8)
        c = T[(c ~ b4) & 0xFF] ~ (c >> 8)
        c = T[(c ~ b5) & 0xFF] ~ (c >> 8)
        c = T[(c ~ b6) & 0xFF] ~ (c >> 8)
        c = T[(c ~ b7) & 0xFF] ~ (c >> 8)
        c = T[(c ~ b8) & 0xFF] ~ (c >> 8)
        i = i + 8
    end
    for j = i, n do c = T[(c ~ s:byte(j)) & 0xFF] ~ (c >> 8) end
    return ~c & 0xFFFFFFFF
end

-- TFRecord stores the CRC rotated right by 15 bits plus a constant, because a CRC of data that
-- itself holds CRCs is weak (TensorFlow's crc32c::Mask).
function crc32c.masked(s)
    local c = crc32c.checksum(s)
    return (((c >> 15) | (c << 17)) + MASK_DELTA) & 0xFFFFFFFF
end

return crc32c
