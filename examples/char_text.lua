-- examples/char_text.lua: the character-level text data the language-model examples share
-- (gpt_tiny.lua, char_lstm.lua); loaded with dofile from their folder.
-- defines: char_text(path, T, B, prog, min_windows) -> data with
--          text, chars (the vocabulary: the distinct bytes, sorted), id_of (byte -> id byte),
--          get_batch(split) ('train' or 'val') -> inputs (B, T), targets (B, T) int64.
--
-- Token ids are the bytes' ranks among the distinct bytes (0-based); the first 90% of the text
-- trains, the last 10% validates. get_batch draws B random windows of T characters (ddpl.randint,
-- so ddpl.manual_seed fixes them) and returns them with the same windows shifted by one.
-- A text shorter than min_windows * (T + 1) bytes is an error naming prog.
local ddpl = require 'ddplua'

return function(path, T, B, prog, min_windows)
    local f = io.open(path, 'rb') or error(prog .. ': cannot open ' .. path, 0)
    local text = f:read('a')
    f:close()
    if #text < min_windows * (T + 1) then
        error(('%s: %s has %d bytes, too short for windows of %d'):format(prog, path, #text, T), 0)
    end
    local seen = {}
    for c in text:gmatch('.') do seen[c] = true end
    local chars = {}
    for c in pairs(seen) do chars[#chars + 1] = c end
    table.sort(chars)
    local id_of = {}
    for i, c in ipairs(chars) do id_of[c] = string.char(i - 1) end -- ids are 0-based
    -- gsub maps every byte to its id byte at C speed; frombytes turns the result into a tensor
    local tokens = ddpl.frombytes(text:gsub('.', id_of), 'uint8'):long()
    local n_train = math.floor(#text * 0.9)
    local splits = { train = tokens:narrow(0, 0, n_train),
                     val = tokens:narrow(0, n_train, #text - n_train) }
    local offsets_T = ddpl.arange(T, { dtype = 'int64' }):view(1, T)

    local function get_batch(split)
        local d = splits[split]
        local starts = ddpl.randint(0, d:size(0) - T - 1, { B, 1 }, { dtype = 'int64' })
        local idx = (starts + offsets_T):view(B * T)
        return d:index_select(0, idx):view(B, T), d:index_select(0, idx + 1):view(B, T)
    end

    return { text = text, chars = chars, id_of = id_of, get_batch = get_batch }
end
