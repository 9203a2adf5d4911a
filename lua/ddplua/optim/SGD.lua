-- lua/ddplua/optim/SGD.lua: optim.SGD(params, {lr, momentum=0, dampening=0, nesterov=false,
--   weight_decay=0, maximize=false}).
-- defines: SGD, an Optimizer whose update is torch 1.13's _single_tensor_sgd:
--   d = grad (+ weight_decay * p);  buf = d on the first step, else momentum*buf + (1-dampening)*d;
--   d = nesterov and d + momentum*buf or buf;  p = p - lr*d
-- state per parameter: momentum_buffer (only with momentum ~= 0).
local ddpl = require 'ddplua'
local Optimizer = require 'ddplua.optim.Optimizer'

local SGD = Optimizer:extend('SGD', {
    lr = Optimizer.REQUIRED,
    momentum = 0,
    dampening = 0,
    nesterov = false,
    weight_decay = 0,
    maximize = false,
})

function SGD:_check_group(g, level)
    self:_check_number(g, 'lr', 0, nil, level)
    self:_check_number(g, 'momentum', 0, nil, level)
    self:_check_number(g, 'dampening', -math.huge, nil, level)
    self:_check_number(g, 'weight_decay', 0, nil, level)
    if g.nesterov and (g.momentum <= 0 or g.dampening ~= 0) then
        error('SGD: Nesterov momentum requires a momentum and zero dampening', level)
    end
end

function SGD:_update(g)
    local ps, gs, ss = self:_with_grads(g)
    if #ps == 0 then return end
    local bufs, init = {}, {}
    local momentum = g.momentum ~= 0
    for i, p in ipairs(ps) do
        init[i] = false
        if momentum then
            local b = ss[i].momentum_buffer
            if b == nil then
                b = ddpl.zeros_like(p)
                ss[i].momentum_buffer = b
                init[i] = true
            end
            bufs[i] = b
        end
    end
    ddpl._fused_sgd_(ps, gs, bufs, init, g)
    ddpl._release(gs)
end

return SGD
