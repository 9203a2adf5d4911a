-- lua/ddplua/optim/RMSprop.lua: optim.RMSprop(params, {lr=1e-2, alpha=0.99, eps=1e-8,
--   weight_decay=0, momentum=0, centered=false, maximize=false}).
-- defines: RMSprop, an Optimizer whose update is torch 1.13's _single_tensor_rmsprop:
--   g = grad (+ weight_decay * p);  sq = alpha*sq + (1-alpha)*g*g
--   centered: ga = alpha*ga + (1-alpha)*g;  avg = sqrt(sq - ga*ga) + eps
--   else:     avg = sqrt(sq) + eps
--   momentum > 0: buf = momentum*buf + g/avg;  p = p - lr*buf
--   else:         p = p - lr*g/avg
-- state per parameter (PyTorch's keys): step (an integer), square_avg, momentum_buffer (with
-- momentum > 0), grad_avg (centered). One native call per group (ddpl._fused_rmsprop_), one
-- pass over each tensor.
local ddpl = require 'ddplua'
local Optimizer = require 'ddplua.optim.Optimizer'

local RMSprop = Optimizer:extend('RMSprop', {
    lr = 1e-2,
    alpha = 0.99,
    eps = 1e-8,
    weight_decay = 0,
    momentum = 0,
    centered = false,
    maximize = false,
})

-- PyTorch's checks (lr, eps, momentum, weight_decay, alpha all >= 0).
function RMSprop:_check_group(g, level)
    self:_check_number(g, 'lr', 0, nil, level)
    self:_check_number(g, 'eps', 0, nil, level)
    self:_check_number(g, 'momentum', 0, nil, level)
    self:_check_number(g, 'weight_decay', 0, nil, level)
    self:_check_number(g, 'alpha', 0, nil, level)
    self:_check_boolean(g, 'centered', level)
    self:_check_boolean(g, 'maximize', level)
end

function RMSprop:_update(g)
    local ps, gs, ss = self:_with_grads(g)
    if #ps == 0 then return end
    local sqs, bufs, gavgs = {}, {}, {}
    local momentum, centered = g.momentum > 0, g.centered
    for i, p in ipairs(ps) do
        local s = ss[i]
        if s.step == nil then
            s.step = 0
            s.square_avg = ddpl.zeros_like(p)
        end
        -- buffers a group option switched on after the first step start from zeros (PyTorch
        -- would fail with a KeyError)
        if momentum and s.momentum_buffer == nil then s.momentum_buffer = ddpl.zeros_like(p) end
        if centered and s.grad_avg == nil then s.grad_avg = ddpl.zeros_like(p) end
        s.step = s.step + 1
        sqs[i], bufs[i], gavgs[i] = s.square_avg, s.momentum_buffer, s.grad_avg
    end
    ddpl._fused_rmsprop_(ps, gs, sqs, momentum and bufs or {}, centered and gavgs or {}, g)
    ddpl._release(gs)
end

return RMSprop
