-- lua/ddplua/nn/parallel/init.lua: the ddpl.nn.parallel namespace.
-- defines: parallel.DistributedDataParallel (also reachable as nn.DDP),
--          parallel.FullyShardedDataParallel (nn.FSDP), each loaded on first use.
local files = {
    DistributedDataParallel = 'ddplua.nn.parallel.DistributedDataParallel',
    FullyShardedDataParallel = 'ddplua.nn.parallel.FullyShardedDataParallel',
}
return setmetatable({}, {
    __index = function(t, key)
        local file = files[key]
        if not file then return nil end
        local mod = require(file)
        rawset(t, key, mod)
        return mod
    end,
})
