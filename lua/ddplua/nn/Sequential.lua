-- lua/ddplua/nn/Sequential.lua: nn.Sequential(m1, m2, ...) (or nn.Sequential({m1, m2, ...})).
-- defines: Sequential: runs its children in order, each on the previous one's output;
--          children are named '0', '1', ... as in PyTorch; seq[i] (0-based, negative from
--          the end), #seq, seq:append(m), seq:iter().
--
-- Children are called through their __call, so an error inside one comes back as
-- "In module 2 (Linear) of Sequential: ..." (nn.Module's call wrapper adds the location).
local Module = require 'ddplua.nn.Module'

local Sequential = Module:extend('Sequential')

function Sequential:init(...)
    local mods = table.pack(...)
    if mods.n == 1 and type(mods[1]) == 'table' and not Module.is(mods[1]) then
        mods = mods[1]
        mods.n = #mods
    end
    for i = 1, mods.n do
        if not Module.is(mods[i]) then
            error(string.format('Sequential: argument %d is a %s, not a Module', i,
                                type(mods[i])), 2)
        end
        self:add_module(tostring(i - 1), mods[i])
    end
end

function Sequential:len()
    return #self:named_children_all()
end

-- Children in order, duplicates included (the same module may run twice).
function Sequential:named_children_all()
    local out = {}
    for _, pair in ipairs(self:_child_slots()) do
        if pair[2] then out[#out + 1] = pair end
    end
    return out
end

function Sequential:getitem(i)
    local all = self:named_children_all()
    local j = i < 0 and #all + i or i
    local pair = all[j + 1]
    if not pair then
        error(string.format('%s: index %d is out of range for %d modules', self.__name, i, #all), 3)
    end
    return pair[2]
end

function Sequential:append(m)
    if not Module.is(m) then
        error(self.__name .. ':append: expected a Module, got ' .. type(m), 2)
    end
    self:add_module(tostring(self:len()), m)
    return self
end

-- for i, m in seq:iter() do ... end (i 0-based)
function Sequential:iter()
    local all, k = self:named_children_all(), 0
    return function()
        k = k + 1
        if all[k] then return k - 1, all[k][2] end
    end
end

function Sequential:forward(x, ...)
    local out = table.pack(x, ...)
    for _, pair in ipairs(self:named_children_all()) do
        out = table.pack(pair[2](table.unpack(out, 1, out.n)))
    end
    return table.unpack(out, 1, out.n)
end

return Sequential
