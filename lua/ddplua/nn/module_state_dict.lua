-- lua/ddplua/nn/module_state_dict.lua: nn.Module's state_dict and load_state_dict.
-- defines: (added to nn.Module) m:state_dict([prefix]), m:load_state_dict(sd [, {strict}]),
--          Module.state_dict_keys(sd).
--
-- A state dict is a plain Lua table name -> tensor (so ddpl.save and user code can treat it
-- as one) whose metatable remembers the key order: pairs(sd) visits the keys in PyTorch's
-- order (each module's parameters, then its persistent buffers, then its children's, depth
-- first) and then any key added later. Values are detached tensors sharing the module's
-- storage, as PyTorch's are.
--
-- load_state_dict checks everything before copying anything (a failed load leaves the model
-- as it was) and copies values into the existing tensors, so parameters keep their identity.
local ddpl = require 'ddplua'

local function ordered_pairs(t)
    local mt = getmetatable(t)
    local keys, listed = mt.keys, mt.listed
    local i, after = 0, nil
    return function()
        while i < #keys do
            i = i + 1
            local v = rawget(t, keys[i])
            if v ~= nil then return keys[i], v end
        end
        while true do
            local v
            after, v = next(t, after)
            if after == nil then return nil end
            if not listed[after] then return after, v end
        end
    end, t, nil
end

local function ordered(keys, map)
    local listed = {}
    for _, k in ipairs(keys) do listed[k] = true end
    return setmetatable(map, {__pairs = ordered_pairs, __name = 'ddplua.StateDict', keys = keys,
                              listed = listed})
end

local function shape_str(t) return '[' .. table.concat(t:shape(), ',') .. ']' end

return function(Module, State)
    -- {key, live tensor} for every entry of the state dict, in order.
    local function entries(self, prefix, out)
        for _, e in ipairs(State.entries(self, 'params')) do
            if e[2] ~= nil then out[#out + 1] = {prefix .. e[1], e[2]} end
        end
        for _, e in ipairs(State.entries(self, 'buffers')) do
            if e[2] ~= nil and State.persistent(self, e[1]) then
                out[#out + 1] = {prefix .. e[1], e[2]}
            end
        end
        for _, e in ipairs(State.entries(self, 'modules')) do
            if e[2] then entries(e[2], prefix .. e[1] .. '.', out) end
        end
        return out
    end

    -- state_dict([prefix]): 'fc1.weight' -> detached tensor, ordered (see the file header).
    function Module:state_dict(prefix)
        local keys, map = {}, {}
        for _, e in ipairs(entries(self, prefix or '', {})) do
            if map[e[1]] == nil then keys[#keys + 1] = e[1] end
            map[e[1]] = e[2]:detach()
        end
        return ordered(keys, map)
    end

    -- The keys of a state dict in order (for a plain table: sorted, to be deterministic).
    function Module.state_dict_keys(sd)
        local keys = {}
        local mt = getmetatable(sd)
        if mt and mt.__pairs then
            for k in pairs(sd) do keys[#keys + 1] = k end
        else
            for k in next, sd do keys[#keys + 1] = k end
            table.sort(keys, function(a, b) return tostring(a) < tostring(b) end)
        end
        return keys
    end

    -- load_state_dict(sd [, {strict=true}] or strict): copies sd's values into this module's
    -- parameters and buffers. Returns {missing_keys=..., unexpected_keys=...}; with strict,
    -- missing or unexpected keys are an error that lists them all. A shape mismatch is always
    -- an error naming the key and both shapes.
    function Module:load_state_dict(sd, opts)
        local strict = true
        if type(opts) == 'boolean' then strict = opts end
        if type(opts) == 'table' and opts.strict ~= nil then strict = opts.strict end
        if type(sd) ~= 'table' then
            error(self.__name .. ':load_state_dict: expected a table of tensors, got '
                  .. type(sd), 2)
        end
        local own, own_keys = {}, {}
        for _, e in ipairs(entries(self, '', {})) do
            if not own[e[1]] then own_keys[#own_keys + 1] = e[1] end
            own[e[1]] = e[2]
        end
        local missing, unexpected, problems, copies = {}, {}, {}, {}
        for _, k in ipairs(own_keys) do
            local v = sd[k]
            if v == nil then
                missing[#missing + 1] = k
            elseif not ddpl.is_tensor(v) then
                problems[#problems + 1] = string.format('value for %s is a %s, not a tensor', k,
                                                        type(v))
            elseif shape_str(v) ~= shape_str(own[k]) then
                problems[#problems + 1] = string.format(
                    'size mismatch for %s: copying a tensor of shape %s from the state dict, the '
                    .. 'shape in the current model is %s', k, shape_str(v), shape_str(own[k]))
            else
                copies[#copies + 1] = {own[k], v}
            end
        end
        for _, k in ipairs(Module.state_dict_keys(sd)) do
            if own[k] == nil then unexpected[#unexpected + 1] = k end
        end
        local function quoted(list)
            local out = {}
            for i, k in ipairs(list) do out[i] = string.format('%q', tostring(k)) end
            return table.concat(out, ', ')
        end
        if strict and #unexpected > 0 then
            table.insert(problems, 1, 'unexpected key(s): ' .. quoted(unexpected))
        end
        if strict and #missing > 0 then
            table.insert(problems, 1, 'missing key(s): ' .. quoted(missing))
        end
        if #problems > 0 then
            error(string.format('%s:load_state_dict: error(s) in loading the state dict: %s',
                                self.__name, table.concat(problems, '; ')), 2)
        end
        ddpl.no_grad(function()
            for _, c in ipairs(copies) do c[1]:copy_(c[2]) end
        end)
        return {missing_keys = missing, unexpected_keys = unexpected}
    end
end
