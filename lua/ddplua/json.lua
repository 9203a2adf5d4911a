-- lua/ddplua/json.lua: JSON (RFC 8259) for Lua code, over the engine's one JSON codec
-- (engine/io/json.c, bound in engine/lua/bind_json.c): the tools read what ddplua writes as JSON
-- (the DDPLUA_DDP_TIMELINE Chrome trace: tools/ddp_predict.lua) and the metrics files are
-- written with it (ddpl.utils.MetricsLogger). It is the codec safetensors headers and ddpl.load's
-- metadata go through, so every JSON text ddplua reads is held to the same rules.
-- defines: json.decode(text [, name]) -> value, json.encode(value [, name]) -> text, json.null.
--
-- decode: objects become Lua tables with string keys, arrays sequences (1-based), numbers Lua
-- numbers (integers where the text has no fraction or exponent and fits in 64 bits), JSON null
-- the sentinel json.null (so that an array keeps its length). Anything else is an error naming
-- the line, the column, what was expected and what was there: "NAME: line 3, column 14:
-- expected ',' or '}' in an object, got ']'" (NAME defaults to "JSON"). Nesting deeper than 500
-- levels is refused rather than overflowing the C stack.
--
-- encode: one line of JSON text. Tables with keys 1..n only (n >= 1) become arrays, other tables
-- objects with their keys sorted (a record always reads alike; keys must be strings); json.null
-- is null. Integers are written as integers, floats as the shortest decimal that reads back as
-- the same double (".0" kept on whole floats, so readers that tell integers from floats see a
-- float again); NaN and the infinities, which JSON cannot express, become null. Strings must be
-- UTF-8. Anything else (functions, userdata, cycles, non-string keys) is an error naming NAME
-- (default "json.encode") and the path of the bad value: "json.encode: .loss: cannot encode a
-- userdata".
--
-- Why C: bench/json.lua measured the codec both ways (the Lua one this file held until issue
-- 33): see bench/README.md, "JSON".
require 'ddplua.core'
local codec = package.loaded['ddplua.core.json']

local json = {}

json.null = setmetatable({}, {__tostring = function() return 'null' end})

function json.decode(text, name)
    if type(text) ~= 'string' then
        error(('%s: expected a string to decode, got %s'):format(name or 'JSON', type(text)), 2)
    end
    return codec.decode(text, name or 'JSON', json.null)
end

function json.encode(value, name)
    return codec.encode(value, name or 'json.encode', json.null)
end

return json
