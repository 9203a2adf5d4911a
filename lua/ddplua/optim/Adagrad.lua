-- lua/ddplua/optim/Adagrad.lua: optim.Adagrad(params, {lr=1e-2, lr_decay=0, weight_decay=0,
--   initial_accumulator_value=0, eps=1e-10, maximize=false}).
-- defines: Adagrad, an Optimizer whose update is torch 1.13's _single_tensor_adagrad (dense):
--   g = grad (+ weight_decay * p);  clr = lr / (1 + (step-1)*lr_decay)
--   sum = sum + g*g;  p = p - clr * g / (sqrt(sum) + eps)
-- state per parameter (PyTorch's keys): step (an integer), sum. As PyTorch, the state exists
-- from construction (step 0, sum filled with the group's initial_accumulator_value); groups
-- added later get theirs when added (PyTorch 1.13 would fail on them). One native call per
-- group (ddpl._fused_adagrad_), one pass over each tensor.
local ddpl = require 'ddplua'
local Optimizer = require 'ddplua.optim.Optimizer'

local Adagrad = Optimizer:extend('Adagrad', {
    lr = 1e-2,
    lr_decay = 0,
    weight_decay = 0,
    initial_accumulator_value = 0,
    eps = 1e-10,
    maximize = false,
})

-- PyTorch's checks (every option >= 0).
function Adagrad:_check_group(g, level)
    self:_check_number(g, 'lr', 0, nil, level)
    self:_check_number(g, 'lr_decay', 0, nil, level)
    self:_check_number(g, 'weight_decay', 0, nil, level)
    self:_check_number(g, 'initial_accumulator_value', 0, nil, level)
    self:_check_number(g, 'eps', 0, nil, level)
    self:_check_boolean(g, 'maximize', level)
end

-- The parameters' state, created as the group is added.
function Adagrad:add_param_group(group, level)
    Optimizer.add_param_group(self, group, (level or 2) + 1)
    local g = self.param_groups[#self.param_groups]
    for _, p in ipairs(g.params) do
        if self.state[p] == nil then
            self.state[p] = {step = 0, sum = ddpl.full_like(p, g.initial_accumulator_value)}
        end
    end
end

function Adagrad:_update(g)
    local ps, gs, ss = self:_with_grads(g)
    if #ps == 0 then return end
    local sums, steps = {}, {}
    for i, p in ipairs(ps) do
        local s = ss[i]
        if s.sum == nil then -- state dropped by load_state_dict of a partial state dict
            s.step = 0
            s.sum = ddpl.full_like(p, g.initial_accumulator_value)
        end
        s.step = s.step + 1
        sums[i], steps[i] = s.sum, s.step
    end
    ddpl._fused_adagrad_(ps, gs, sums, steps, g)
    ddpl._release(gs)
end

return Adagrad
