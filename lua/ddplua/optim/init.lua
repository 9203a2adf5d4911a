-- lua/ddplua/optim/init.lua: ddpl.optim, optimizers and learning-rate schedulers.
-- defines: optim.Optimizer (base class), optim.SGD, optim.Adam, optim.AdamW,
--          optim.lr_scheduler (StepLR, CosineAnnealingLR, LinearLR, LambdaLR),
--          optim.ZeroRedundancyOptimizer (ZeRO stage 1 over any of them: docs/zero.md).
--
-- Updates follow torch.optim 1.13 exactly and run natively: one C call per parameter group
-- and step (ddpl._fused_sgd_, ddpl._fused_adam_), fused into one pass over each tensor.
local optim = {
    Optimizer = require 'ddplua.optim.Optimizer',
    SGD = require 'ddplua.optim.SGD',
    Adam = require 'ddplua.optim.Adam',
    AdamW = require 'ddplua.optim.AdamW',
    lr_scheduler = require 'ddplua.optim.lr_scheduler',
    ZeroRedundancyOptimizer = require 'ddplua.optim.ZeroRedundancyOptimizer',
}
return optim
