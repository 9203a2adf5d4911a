-- lua/ddplua/nn/parallel/init.lua: the ddpl.nn.parallel namespace.
-- defines: parallel.DistributedDataParallel (also reachable as nn.DDP),
--          parallel.FullyShardedDataParallel (nn.FSDP), each loaded on first use.
return require('ddplua.lazy')({
    DistributedDataParallel = 'ddplua.nn.parallel.DistributedDataParallel',
    FullyShardedDataParallel = 'ddplua.nn.parallel.FullyShardedDataParallel',
})
