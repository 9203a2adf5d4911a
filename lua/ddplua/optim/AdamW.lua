-- lua/ddplua/optim/AdamW.lua: optim.AdamW(params, {lr=1e-3, betas={0.9, 0.999}, eps=1e-8,
--   weight_decay=1e-2, amsgrad=false, maximize=false}).
-- defines: AdamW: Adam with decoupled weight decay (torch 1.13's _single_tensor_adamw):
--   p = p * (1 - lr*weight_decay), then Adam's update without weight decay in the gradient.
local Optimizer = require 'ddplua.optim.Optimizer'
local Adam = require 'ddplua.optim.Adam'

local AdamW = Optimizer:extend('AdamW', {
    lr = 1e-3,
    betas = {0.9, 0.999},
    eps = 1e-8,
    weight_decay = 1e-2,
    amsgrad = false,
    maximize = false,
})

AdamW._check_group = Adam._check_group

function AdamW:_update(g) Adam.run_group(self, g, true) end

return AdamW
