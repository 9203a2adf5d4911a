-- lua/ddplua/nn/Sequential.lua: nn.Sequential(m1, m2, ...) (or nn.Sequential({m1, m2, ...})).
-- defines: Sequential: runs its children in order, each on the previous one's output;
--          children are named '0', '1', ... as in PyTorch; seq[i] (0-based, negative from
--          the end), #seq, seq:append(m), seq:iter().
--
-- Children are called through their __call, so an error inside one comes back as
-- "In module 2 (Linear) of Sequential: ..." (nn.Module's call wrapper adds the location).
-- A plain ReLU followed by a plain MaxPool2d runs as the pool first: the same bits, forward and
-- backward, with a quarter of the relu's work (pool_first below, docs/internals/cpu-conv.md).
local Module = require 'ddplua.nn.Module'
local ReLU = require 'ddplua.nn.ReLU'
local MaxPool2d = require 'ddplua.nn.MaxPool2d'
local is_tensor = require('ddplua.core').is_tensor

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

-- A ReLU followed by a MaxPool2d may run as the max-pool first: max commutes with relu (a
-- monotone map that keeps NaN), so the output is the same bits, and so is every gradient (the
-- pool's argmax is the same window element where the maximum is positive; elsewhere relu's
-- backward gives zeros either way). The relu then touches a quarter of the data, forward and
-- backward (docs/internals/cpu-conv.md, "Session 26": "ReLU after the max-pool"). Only for plain
-- children (exactly these classes, no hooks, no forward of their own) and floating-point
-- tensors, where nothing can observe the order.
local function pool_first(m, nxt, x)
    return Module._runs_class_forward(m, ReLU) and Module._runs_class_forward(nxt, MaxPool2d) and
               is_tensor(x) and x:is_floating_point()
end

function Sequential:forward(x, ...)
    local out = table.pack(x, ...)
    local all = self:named_children_all()
    local i = 1
    while i <= #all do
        local m, nxt = all[i][2], all[i + 1] and all[i + 1][2]
        if nxt and out.n == 1 and pool_first(m, nxt, out[1]) then
            out, i = table.pack(m(nxt(out[1]))), i + 2
        else
            out, i = table.pack(m(table.unpack(out, 1, out.n))), i + 1
        end
    end
    return table.unpack(out, 1, out.n)
end

return Sequential
