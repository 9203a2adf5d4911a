-- lua/ddplua/optim/Adam.lua: optim.Adam(params, {lr=1e-3, betas={0.9, 0.999}, eps=1e-8,
--   weight_decay=0, amsgrad=false, maximize=false}).
-- defines: Adam, an Optimizer whose update is torch 1.13's _single_tensor_adam:
--   g = grad (+ weight_decay * p);  m = beta1*m + (1-beta1)*g;  v = beta2*v + (1-beta2)*g*g
--   amsgrad: vmax = max(vmax, v), used in place of v below
--   p = p - lr/(1-beta1^t) * m / (sqrt(v)/sqrt(1-beta2^t) + eps)
-- state per parameter: step (an integer), exp_avg, exp_avg_sq, and max_exp_avg_sq with
-- amsgrad. Also the shared runner that AdamW uses (Adam.run_group).
local ddpl = require 'ddplua'
local Optimizer = require 'ddplua.optim.Optimizer'

local Adam = Optimizer:extend('Adam', {
    lr = 1e-3,
    betas = {0.9, 0.999},
    eps = 1e-8,
    weight_decay = 0,
    amsgrad = false,
    maximize = false,
})

function Adam:_check_group(g, level)
    self:_check_number(g, 'lr', 0, nil, level)
    self:_check_number(g, 'eps', 0, nil, level)
    self:_check_number(g, 'weight_decay', 0, nil, level)
    local b = g.betas
    if type(b) ~= 'table' or type(b[1]) ~= 'number' or type(b[2]) ~= 'number' or b[1] < 0
        or b[1] >= 1 or b[2] < 0 or b[2] >= 1 then
        error(string.format('%s: invalid betas: expected {beta1, beta2} in [0, 1), got %s',
                            self.__name, type(b) == 'table' and
                            ('{' .. tostring(b[1]) .. ', ' .. tostring(b[2]) .. '}') or tostring(b)),
              level)
    end
    self:_check_boolean(g, 'amsgrad', level)
end

-- One fused step for group g; decoupled: AdamW's weight decay.
function Adam.run_group(self, g, decoupled)
    local ps, gs, ss = self:_with_grads(g)
    if #ps == 0 then return end
    local ms, vs, vmaxs, steps = {}, {}, {}, {}
    for i, p in ipairs(ps) do
        local s = ss[i]
        if s.step == nil then
            s.step = 0
            s.exp_avg = ddpl.zeros_like(p)
            s.exp_avg_sq = ddpl.zeros_like(p)
        end
        -- created on first use, so amsgrad switched on later starts from zeros (PyTorch would
        -- fail with a KeyError)
        if g.amsgrad and s.max_exp_avg_sq == nil then s.max_exp_avg_sq = ddpl.zeros_like(p) end
        s.step = s.step + 1
        ms[i], vs[i], vmaxs[i], steps[i] = s.exp_avg, s.exp_avg_sq, s.max_exp_avg_sq, s.step
    end
    ddpl._fused_adam_(ps, gs, ms, vs, steps, {
        name = self.__name,
        lr = g.lr,
        beta1 = g.betas[1],
        beta2 = g.betas[2],
        eps = g.eps,
        weight_decay = g.weight_decay,
        decoupled = decoupled,
        amsgrad = g.amsgrad,
        maximize = g.maximize,
    }, vmaxs)
    ddpl._release(gs)
end

function Adam:_update(g) Adam.run_group(self, g, false) end

return Adam
