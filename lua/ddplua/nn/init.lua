-- lua/ddplua/nn/init.lua: the ddpl.nn namespace.
-- defines: nn.functional (the F.* functions), and lazy access to nn classes and helpers:
--          nn.<Name> loads lua/ddplua/nn/<Name>.lua on first use (nn.Module, nn.Linear,
--          nn.utils, ...).
--
-- A few names live in a file of another name: nn.init is init_functions.lua (init.lua is this
-- file, the package itself), BatchNorm1d and BatchNorm2d share BatchNorm.lua, nn.DDP is
-- nn.parallel.DistributedDataParallel and nn.FSDP nn.parallel.FullyShardedDataParallel
-- (lua/ddplua/nn/parallel/). Names of API.md whose file does
-- not exist yet raise "ddplua.nn.X is not available yet".
local nn = { functional = require 'ddplua.nn.functional' }

-- The names API.md promises under nn.
local api_names = {}
for name in ([[Module Parameter Linear Conv2d MaxPool2d AvgPool2d AdaptiveAvgPool2d BatchNorm1d
    BatchNorm2d SyncBatchNorm LayerNorm Embedding Dropout ReLU GELU SiLU Tanh Sigmoid Flatten
    Identity Sequential ModuleList CrossEntropyLoss MSELoss NLLLoss utils init parallel
    DDP FSDP]]):gmatch('%S+') do
    api_names[name] = true
end

-- name -> {module, field}: the name is a field of another file's table.
local elsewhere = {
    init = {'ddplua.nn.init_functions'},
    BatchNorm1d = {'ddplua.nn.BatchNorm', 'BatchNorm1d'},
    BatchNorm2d = {'ddplua.nn.BatchNorm', 'BatchNorm2d'},
    parallel = {'ddplua.nn.parallel'},
    DDP = {'ddplua.nn.parallel', 'DistributedDataParallel'},
    FSDP = {'ddplua.nn.parallel', 'FullyShardedDataParallel'},
}

return setmetatable(nn, {
    __index = function(t, key)
        if type(key) ~= 'string' then return nil end
        local e = elsewhere[key]
        if e then
            local mod = require(e[1])
            if e[2] then mod = mod[e[2]] end
            rawset(t, key, mod)
            return mod
        end
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
