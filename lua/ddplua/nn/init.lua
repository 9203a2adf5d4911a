-- lua/ddplua/nn/init.lua: the ddpl.nn namespace.
-- defines: nn.functional (the F.* functions), and lazy access to nn classes and helpers: nn.X
--          loads lua/ddplua/nn/X.lua on first use.
--
-- The module classes (nn.Module, nn.Linear, ...) come with a later issue; until their files
-- exist, using one raises "ddplua.nn.Module is not available yet".
local nn = { functional = require 'ddplua.nn.functional' }

-- The names API.md promises under nn.
local api_names = {}
for name in ([[Module Parameter Linear Conv2d MaxPool2d AvgPool2d AdaptiveAvgPool2d BatchNorm1d
    BatchNorm2d LayerNorm Embedding Dropout ReLU GELU SiLU Tanh Sigmoid Flatten Identity Sequential
    ModuleList CrossEntropyLoss MSELoss NLLLoss utils init parallel DDP]]):gmatch('%S+') do
    api_names[name] = true
end

return setmetatable(nn, {
    __index = function(t, key)
        if type(key) ~= 'string' then return nil end
        local name = 'ddplua.nn.' .. key
        if package.preload[name] or package.searchpath(name, package.path) then
            local mod = require(name)
            rawset(t, key, mod)
            return mod
        end
        if api_names[key] then error(name .. ' is not available yet', 2) end
        return nil
    end,
})
