-- bench/zero_state.lua: optimizer state per rank, ZeroRedundancyOptimizer(Adam) against plain
-- Adam, for the reference models (a measurement of bytes, not of time).
-- defines: a script; run `build/ddplua bench/zero_state.lua --nproc N [-- model=mlp|lenet|gpt]`.
--
-- Each rank builds the model (models/*.lua), computes one gradient, then takes one step with
-- ZeRO(Adam) and one with plain Adam over the same parameters, and reports for each: the bytes of
-- the state tensors the optimizer holds (exp_avg + exp_avg_sq, counted), and the growth of
-- ddpl.memory_allocated() over the step (the state, plus whatever a step leaves allocated: for
-- ZeRO this shows that its broadcast buckets are freed). Rank 0 prints one line per rank.
local ddpl = require 'ddplua'
local dist, optim, F = ddpl.distributed, ddpl.optim, ddpl.F

local o = {model = 'mlp'}
for _, a in ipairs(arg) do
    local k, v = a:match('^(%w+)=(.*)$')
    if k then o[k] = v end
end

-- the models directory next to this script's bench/ directory
local root = (arg[0]:match('^(.*)/bench/[^/]*$') or '.')
package.path = root .. '/models/?.lua;' .. package.path

dist.init_process_group({backend = 'gloo'})
local rank, world = dist.get_rank(), dist.get_world_size()

ddpl.manual_seed(0)
local net, x, loss_of
if o.model == 'gpt' then
    net = require('gpt')({vocab_size = 256, block_size = 64, n_layer = 4, n_head = 4, n_embd = 128})
    x = ddpl.randint(0, 256, {2, 64})
    loss_of = function() local _, loss = net(x, x); return loss end
else
    net = require(o.model)()
    x = ddpl.randn(4, 1, 28, 28)
    loss_of = function() return F.cross_entropy(net(x), ddpl.randint(0, 10, {4})) end
end
local params = net:parameters()
local total = 0
for _, p in ipairs(params) do total = total + p:numel() end

local function state_bytes(state)
    local n = 0
    for _, s in pairs(state) do
        for _, v in pairs(s) do
            if ddpl.is_tensor(v) then n = n + v:numel() * v:element_size() end
        end
    end
    return n
end

-- one step of opt; returns the growth of memory_allocated over it
local function step(opt)
    opt:zero_grad()
    loss_of():backward()
    collectgarbage()
    local before = ddpl.memory_allocated()
    opt:step()
    collectgarbage()
    local grown = ddpl.memory_allocated() - before
    opt:zero_grad()
    return grown
end

local zero = optim.ZeroRedundancyOptimizer(params, {optimizer_class = optim.Adam, lr = 1e-3})
local zero_grow = step(zero)
local shard = 0
for _, p in ipairs(zero.optim.param_groups[1].params) do shard = shard + p:numel() end
local zero_bytes = state_bytes(zero.optim.state)

local plain = optim.Adam(params, {lr = 1e-3})
local plain_grow = step(plain)
local plain_bytes = state_bytes(plain.state)

local rows = {}
dist.all_gather_object(rows, {shard, zero_bytes, zero_grow, plain_bytes, plain_grow})
if rank == 0 then
    print(('%s: %d parameters (%d tensors), %d ranks, Adam state in bytes'):format(o.model,
        total, #params, world))
    print('rank  shard elems  ZeRO state  ZeRO mem growth  plain state  plain mem growth  '
        .. 'ZeRO/plain')
    local peak = 0
    for r, row in ipairs(rows) do
        peak = math.max(peak, row[2])
        print(('%4d  %11d  %10d  %15d  %11d  %16d  %10.3f'):format(r - 1, row[1], row[2], row[3],
            row[4], row[5], row[2] / row[4]))
    end
    print(('peak ZeRO state per rank / plain: %.3f (ideal 1/N = %.3f)'):format(peak / rows[1][4],
        1 / world))
end
dist.destroy_process_group()
