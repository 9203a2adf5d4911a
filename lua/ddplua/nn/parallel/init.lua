-- lua/ddplua/nn/parallel/init.lua: the ddpl.nn.parallel namespace.
-- defines: parallel.DistributedDataParallel (also reachable as nn.DDP).
return {
    DistributedDataParallel = require 'ddplua.nn.parallel.DistributedDataParallel',
}
