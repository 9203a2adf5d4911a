-- lua/ddplua/nn/sync_batch_norm.lua: batch normalisation whose statistics span every rank of a
-- process group: the computation behind nn.SyncBatchNorm in training mode (PyTorch's
-- torch/nn/modules/_functions.py SyncBatchNorm).
-- defines: sync_batch_norm(x, p) -> y, with p = {weight, bias, running_mean, running_var,
--          momentum, eps, group, name}.
--
-- x is (N, C, ...), seen as (N, C, S). N may differ between ranks, and be 0 on some.
--
-- Forward: one collective. Each rank packs its per-channel count n_r, mean m_r and sum of
-- squared deviations M2_r (two passes over its own values) into one float64 vector
-- [m_r (C), M2_r (C), n_r (1)]; all_gather_into_tensor gives every rank all of them, and each
-- combines them in float64 with Chan's parallel formula:
--     n = sum n_r,  mean = sum n_r m_r / n,  M2 = sum M2_r + sum n_r (m_r - mean)^2,
-- so the global variance M2 / n keeps its precision for data with a large mean, which a
-- reduction of raw sums and squares (var = E[x^2] - mean^2) would lose. Counts are float64,
-- exact up to 2^53. The running statistics move towards mean and the unbiased M2 / (n - 1).
-- Then F.batch_norm in evaluation form (the global mean and biased variance as its "running"
-- statistics) normalises: one fused kernel that also gives weight and bias their local
-- gradients sum(dy * xhat) and sum(dy), which DDP (or the caller) reduces like any gradient.
--
-- Backward: one collective. F.batch_norm's evaluation backward gives the input only its direct
-- term g = dy * weight * invstd; the batch-statistics terms need sums over the whole group.
-- A hook on the (N, C, S) view of x that feeds F.batch_norm receives g, all_reduces the packed
-- float64 sums [sum g (C), sum g * (x - mean) (C)] and returns
--     dx = g - sum(g) / n - (x - mean) * invstd^2 * sum(g * (x - mean)) / n
-- (sums over the group), which is batch norm's input gradient for the global batch:
-- invstd * w * (dy - mean(dy) - xhat * mean(dy * xhat)). The per-rank dy of each rank's own loss
-- are summed, so the gradient is that of the sum of the ranks' losses, as in PyTorch. When x
-- does not require grad there is no hook and no collective (PyTorch's needs_input_grad[0]).
-- ddplua has no Lua autograd.Function yet; the hook is how Lua code runs inside backward.
--
-- Every rank must run the same forwards and backwards (the collectives pair up in order); a rank
-- that skips one makes the others fail with the group's timeout or a collective mismatch error.
-- Double backward (create_graph=true) through the statistics is not supported: an error says so.
local ddpl = require 'ddplua'
local F = require 'ddplua.nn.functional'
local dist = require 'ddplua.distributed'

local M = {}

local HALF = {float16 = true, bfloat16 = true}

-- This rank's [mean (C), M2 (C), count (1)] of x3 (N, C, S), float64; zeros when it is empty.
local function local_moments(x3)
    local C = x3:size(1)
    local n = x3:size(0) * x3:size(2)
    local packed = ddpl.zeros({2 * C + 1}, {dtype = 'float64', device = x3.device})
    if n == 0 then return packed end
    local mean = x3:sum({0, 2}, true):div(n) -- (1, C, 1); CPU sums accumulate in double
    local dev = x3 - mean
    local m2 = dev:mul_(dev):sum({0, 2})     -- (C)
    packed:narrow(0, 0, C):copy_(mean:reshape({C}))
    packed:narrow(0, C, C):copy_(m2)
    packed:narrow(0, 2 * C, 1):fill_(n)
    return packed
end

-- The group's mean, biased and unbiased variance (float64, (C)) and count, from the gathered
-- rows (world, 2C+1) of local_moments.
local function combine(rows, C, name, shape)
    local means, m2s = rows:narrow(1, 0, C), rows:narrow(1, C, C)
    local counts = rows:narrow(1, 2 * C, 1) -- (world, 1)
    local n = counts:sum():item()
    if n <= 1 then
        error(('%s: expected more than 1 value per channel when training, got %d over the group '
            .. '(input of shape [%s] on this rank)'):format(name, math.tointeger(n) or n,
            table.concat(shape, ',')), 0)
    end
    local mean = (means * counts):sum(0):div(n)
    local dev = means - mean
    local m2 = m2s:sum(0) + (dev * dev * counts):sum(0)
    return mean, m2 / n, m2 / (n - 1), n
end

-- running = (1 - momentum) * running + momentum * value, in place (PyTorch's update); value is
-- left as it is.
local function move_towards(running, value, momentum)
    running:mul_(1 - momentum):add_((value * momentum):to(running.dtype))
end

-- The hook on xv (N, C, S): turns the direct gradient g into the full input gradient.
local function input_gradient_hook(xd, mean, var, n, eps, group, name)
    local C = xd:size(1)
    local invstd2 = 1 / (var + eps) -- float64 (C)
    return function(g)
        if ddpl.is_grad_enabled() then
            error(name .. ': double backward (create_graph=true) through the batch statistics is '
                .. 'not supported', 0)
        end
        return ddpl.no_grad(function()
            local dt, view = g.dtype, {1, C, 1}
            local xmu = xd - mean:to(dt):view(view)
            local sums = ddpl.cat({g:sum({0, 2}):double(), (g * xmu):sum({0, 2}):double()}, 0)
            dist.all_reduce(sums, {group = group})
            local mean_g = (sums:narrow(0, 0, C) / n):to(dt):view(view)
            local k = (sums:narrow(0, C, C) * invstd2 / n):to(dt):view(view)
            return g - mean_g - xmu:mul_(k)
        end)
    end
end

function M.sync_batch_norm(x, p)
    local name, group = p.name, p.group
    local shape = x:shape()
    -- a 16-bit input under autocast normalises in float32, as F.batch_norm: the result stays
    -- float32 on CUDA (batch_norm is on its float32 list) and is rounded back to the input's
    -- dtype on the CPU (PyTorch's CPU list does not have it)
    local round_to
    local dev_type = x.device:match('^%a+')
    if HALF[x.dtype] and ddpl.is_autocast_enabled(dev_type) then
        round_to = dev_type == 'cpu' and x.dtype or nil
        x = x:float()
    end
    -- checked before the collective, so a bad input fails here rather than after it
    if x.dtype ~= 'float32' and x.dtype ~= 'float64' then
        error(('%s: expected a float32 or float64 input (16-bit ones under autocast), got %s')
            :format(name, x.dtype), 0)
    end
    local N, C, S = shape[1], shape[2], 1
    for d = 3, #shape do S = S * shape[d] end
    -- a new autograd node (a view, or a copy when x is not contiguous) to carry the hook
    local xv = x:reshape({N, C, S})
    local xd = xv:detach()

    local mine = ddpl.no_grad(local_moments, xd)
    local world = dist.get_world_size(group)
    local rows = ddpl.empty({world, 2 * C + 1}, {dtype = 'float64', device = x.device})
    dist.all_gather_into_tensor(rows, mine, {group = group})
    local mean, var, var_unbiased, n = combine(rows, C, name, shape)

    if p.running_mean ~= nil then
        ddpl.no_grad(function()
            move_towards(p.running_mean, mean, p.momentum)
            move_towards(p.running_var, var_unbiased, p.momentum)
        end)
    end
    if xv.requires_grad then
        xv:register_hook(input_gradient_hook(xd, mean, var, n, p.eps, group, name))
    end
    local y = F.batch_norm(xv, mean:to(xv.dtype), var:to(xv.dtype), p.weight, p.bias, false, 0.0,
        p.eps)
    if round_to then y = y:to(round_to) end
    return y:reshape(shape)
end

return M
