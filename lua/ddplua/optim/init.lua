-- lua/ddplua/optim/init.lua: ddpl.optim, optimizers and learning-rate schedulers.
-- defines: optim.Optimizer (base class), optim.SGD, optim.Adam, optim.AdamW, optim.RMSprop,
--          optim.Adagrad, optim.lr_scheduler (StepLR, MultiStepLR, ExponentialLR,
--          CosineAnnealingLR, LinearLR, LambdaLR, OneCycleLR, SequentialLR, ReduceLROnPlateau),
--          optim.ZeroRedundancyOptimizer (ZeRO stage 1 over any of them: docs/internals/zero.md).
--
-- Updates follow torch.optim 1.13 exactly and run natively: one C call per parameter group
-- and step (ddpl._fused_sgd_, _fused_adam_, _fused_rmsprop_, _fused_adagrad_), fused into one
-- pass over each tensor.
local optim = {
    Optimizer = require 'ddplua.optim.Optimizer',
    SGD = require 'ddplua.optim.SGD',
    Adam = require 'ddplua.optim.Adam',
    AdamW = require 'ddplua.optim.AdamW',
    RMSprop = require 'ddplua.optim.RMSprop',
    Adagrad = require 'ddplua.optim.Adagrad',
    lr_scheduler = require 'ddplua.optim.lr_scheduler',
    ZeroRedundancyOptimizer = require 'ddplua.optim.ZeroRedundancyOptimizer',
}
return optim
