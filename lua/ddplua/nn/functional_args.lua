-- lua/ddplua/nn/functional_args.lua: argument parsing for the nn.functional functions written in
--          Lua (functional_losses.lua, functional_activations.lua, functional_shape.lua,
--          functional_layers.lua).
-- defines: Args.parse(fname, spec, ...) -> a table of named values; Args.reduce(loss,
--          reduction) (PyTorch's apply_loss_reduction); Args.check_same_shape,
--          Args.check_broadcast.
--
-- The C functions (engine/lua/bind_functional.c) take PyTorch's arguments positionally or by name
-- in a trailing options table; these do the same:
--     F.smooth_l1_loss(x, y, 'sum', 0.5) == F.smooth_l1_loss(x, y, {reduction = 'sum', beta = 0.5})
-- A spec is a list of {name, kind [, default]}; kinds: 'tensor', 'tensor?' (nil allowed),
-- 'ftensor', 'ftensor?' (a floating point tensor),
-- 'number', 'number?', 'int', 'boolean', 'string', 'reduction', 'reduction+batchmean', 'list' (a
-- Lua sequence), 'any-shape' (an int or a list of ints -> a list), 'any' (unchecked). A trailing
-- table that is not a tensor and not a sequence (t[1] == nil) is the options table.
local ddpl = require 'ddplua'

local Args = {}

local REDUCTIONS = {mean = true, sum = true, none = true}

local function describe(v)
    if ddpl.is_tensor(v) then return 'a tensor' end
    if type(v) == 'string' then return "'" .. v .. "'" end
    return tostring(v) .. (type(v) == 'table' and '' or ' (' .. type(v) .. ')')
end

local function check(fname, name, kind, v)
    local ok
    if kind == 'tensor' then
        ok = ddpl.is_tensor(v)
    elseif kind == 'ftensor' or kind == 'ftensor?' then
        if ddpl.is_tensor(v) and not v:is_floating_point() then
            error(string.format('%s: %s must be a floating point tensor, got %s', fname, name,
                                v.dtype), 4)
        end
        ok = ddpl.is_tensor(v) or (kind == 'ftensor?' and v == nil)
    elseif kind == 'tensor?' then
        ok = v == nil or ddpl.is_tensor(v)
    elseif kind == 'number' or kind == 'number?' then
        ok = type(v) == 'number' or (kind == 'number?' and v == nil)
    elseif kind == 'any' then
        ok = true
    elseif kind == 'any-shape' then
        if type(v) == 'number' then v = {v} end
        ok = type(v) == 'table' and not ddpl.is_tensor(v) and #v > 0
        for i = 1, ok and #v or 0 do
            ok = ok and math.type(v[i]) == 'integer' and v[i] >= 1
        end
    elseif kind == 'int' then
        -- a float counts when it is a whole number that fits an integer (not inf, not 2^63)
        if type(v) == 'number' then v = math.tointeger(v) or v end
        ok = math.type(v) == 'integer'
    elseif kind == 'boolean' then
        ok = type(v) == 'boolean'
    elseif kind == 'string' then
        ok = type(v) == 'string'
    elseif kind == 'list' then
        ok = type(v) == 'table' and not ddpl.is_tensor(v)
    elseif kind == 'reduction' or kind == 'reduction+batchmean' then
        ok = REDUCTIONS[v] or (kind == 'reduction+batchmean' and v == 'batchmean')
        if not ok then
            error(string.format("%s: reduction must be 'mean', 'sum', 'none'%s, got %s", fname,
                                kind == 'reduction' and '' or " or 'batchmean'", describe(v)), 4)
        end
    else
        error('functional_args: unknown kind ' .. tostring(kind))
    end
    if not ok then
        local want = {['tensor?'] = 'a tensor or nil', tensor = 'a tensor', int = 'an integer',
                      ftensor = 'a tensor', ['ftensor?'] = 'a tensor or nil',
                      list = 'a list', ['number?'] = 'a number or nil',
                      ['any-shape'] = 'a positive integer or a list of them'}
        error(string.format('%s: %s must be %s, got %s', fname, name, want[kind] or 'a ' .. kind,
                            describe(v)), 4)
    end
    return v
end

-- Parses (...) against spec; returns {name = value}. Errors name fname and the argument.
function Args.parse(fname, spec, ...)
    local n = select('#', ...)
    local args = {...}
    local opts
    local last = args[n]
    if n > 0 and type(last) == 'table' and not ddpl.is_tensor(last) and last[1] == nil then
        opts, n = last, n - 1
    end
    if n > #spec then
        error(string.format('%s: expected at most %d arguments, got %d', fname, #spec, n), 3)
    end
    local out, given = {}, {}
    for i = 1, n do
        local s = spec[i]
        if args[i] ~= nil then out[s[1]], given[s[1]] = args[i], true end
    end
    if opts then
        local known = {}
        for _, s in ipairs(spec) do known[s[1]] = true end
        for k, v in pairs(opts) do
            if not known[k] then
                local names = {}
                for _, s in ipairs(spec) do names[#names + 1] = s[1] end
                error(string.format("%s: unknown option '%s' (known: %s)", fname, tostring(k),
                                    table.concat(names, ', ')), 3)
            end
            if given[k] then
                error(string.format('%s: %s given both positionally and by name', fname, k), 3)
            end
            out[k] = v
        end
    end
    for _, s in ipairs(spec) do
        local name, kind, default = s[1], s[2], s[3]
        if out[name] == nil then out[name] = default end
        if out[name] ~= nil or kind:sub(-1) ~= '?' then
            if out[name] == nil then
                error(string.format('%s: missing argument %s', fname, name), 3)
            end
            out[name] = check(fname, name, kind, out[name])
        end
    end
    return out
end

-- PyTorch's apply_loss_reduction: 'none' keeps the elementwise loss; 'mean' over all elements;
-- 'sum'.
function Args.reduce(loss, reduction)
    if reduction == 'mean' then return loss:mean() end
    if reduction == 'sum' then return loss:sum() end
    return loss
end

-- Errors unless a and b broadcast together (PyTorch's rule, trailing dimensions first), so a
-- loss names itself rather than the elementwise op inside it.
function Args.check_broadcast(fname, what_a, a, what_b, b)
    local sa, sb = a:shape(), b:shape()
    for i = 1, math.min(#sa, #sb) do
        local x, y = sa[#sa + 1 - i], sb[#sb + 1 - i]
        if x ~= y and x ~= 1 and y ~= 1 then
            error(string.format('%s: %s [%s] and %s [%s] cannot be broadcast together', fname,
                                what_a, table.concat(sa, ','), what_b, table.concat(sb, ',')),
                  3)
        end
    end
end

-- Errors unless a and b have the same shape (PyTorch's BCE losses refuse to broadcast target).
function Args.check_same_shape(fname, what_a, a, what_b, b)
    local sa, sb = a:shape(), b:shape()
    local same = #sa == #sb
    for i = 1, #sa do same = same and sa[i] == sb[i] end
    if not same then
        error(string.format('%s: %s size [%s] must be the same as %s size [%s]', fname, what_b,
                            table.concat(sb, ','), what_a, table.concat(sa, ',')), 3)
    end
end

return Args
