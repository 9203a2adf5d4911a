-- lua/ddplua/data/transforms/Compose.lua: several transforms applied one after the other.
-- defines: Compose({t1, t2, ...}): Compose(...)(x) = ...t2(t1(x)); field transforms (the list).
--
-- An error inside one is raised again prefixed with its position and name ("Compose: in
-- transform 2 (RandomCrop): ..."), as torch/nn's containers do, so a long pipeline says where
-- it failed.
local Transform = require 'ddplua.data.transforms.Transform'

local Compose = Transform:extend('Compose')

local function name_of(t)
    local mt = getmetatable(t)
    return type(mt) == 'table' and type(mt.__name) == 'string' and mt.__name or type(t)
end

function Compose:init(transforms)
    if type(transforms) ~= 'table' or getmetatable(transforms) ~= nil then
        error('Compose: expected a list of transforms, got ' .. type(transforms), 3)
    end
    local n = #transforms
    for k in pairs(transforms) do
        if math.type(k) ~= 'integer' or k < 1 or k > n then
            error('Compose: expected a list of transforms (keys 1..n), found key ' .. tostring(k), 3)
        end
    end
    for k = 1, n do
        Transform.check_callable('Compose', 'transform ' .. k, transforms[k], 3)
    end
    self.transforms = table.move(transforms, 1, n, 1, {})
end

function Compose:forward(x)
    for k, t in ipairs(self.transforms) do
        local ok, out = pcall(t, x)
        if not ok then
            if type(out) ~= 'string' then error(out, 0) end
            error(string.format('Compose: in transform %d (%s): %s', k, name_of(t), out), 0)
        end
        x = out
    end
    return x
end

function Compose:__tostring()
    local lines = { 'Compose(' }
    for _, t in ipairs(self.transforms) do
        lines[#lines + 1] = '    ' .. (type(t) == 'function' and 'function' or tostring(t))
    end
    lines[#lines + 1] = ')'
    return table.concat(lines, '\n')
end

return Compose
