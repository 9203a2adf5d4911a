-- bench/fsdp.lua: one configuration of bench/fsdp: a GPT (models/gpt.lua) trained with Adam for
-- a few steps under DDP, ZeRO-1 (ZeroRedundancyOptimizer over DDP), FSDP SHARD_GRAD_OP or FSDP
-- FULL_SHARD (each block a unit), with or without activation checkpointing of every block.
-- Run as `ddplua bench/fsdp.lua --nproc N -- mode=ddp|zero1|sgo|full ckpt=0|1 layers=L
-- width=C steps=K batch=B seq=T fprefetch=0|1 meta=0|1` (fprefetch: FSDP's forward_prefetch;
-- meta: the FSDP modes build the GPT under nn.utils.meta_init and let FSDP materialise it one
-- block at a time with GPT-2's initialisation as param_init_fn; DDP and ZeRO-1 ignore it); rank 0
-- prints one line
--   RESULT mode=.. ckpt=.. world=.. step_ms=<median> state_mb=<max over ranks> peak_mb=<max>
--          rss_mb=<max> act_mb=<max> rss_init_mb=<max> meta=..
-- state_mb: parameters the optimizer holds + their gradients + the optimizer's state tensors,
--   in MiB, on the rank with the most (what sharding divides);
-- peak_mb: the allocator's peak of allocated tensor bytes during the measured steps
--   (ddpl.memory_stats()['allocated_bytes.peak'] after ddpl.reset_peak_memory_stats());
-- act_mb: peak_mb minus the bytes allocated before the step began (what one step adds on top:
--   activations, gathered parameters, gradients in flight);
-- rss_mb: the process's peak resident set (VmHWM), construction included;
-- rss_init_mb: the same right after the model was built and wrapped (construction's peak).
local ddpl = require 'ddplua'
local nn, dist, optim, utils = ddpl.nn, ddpl.distributed, ddpl.optim, ddpl.utils

local o = {mode = 'full', ckpt = 0, layers = 4, width = 256, steps = 5, batch = 4, seq = 64,
    vocab = 512, warmup = 2, fprefetch = 0, meta = 0}
for _, a in ipairs(arg) do
    local k, v = a:match('^([%w_]+)=(.*)$')
    if k then o[k] = math.tointeger(tonumber(v)) or tonumber(v) or v end
end
ddpl.set_num_threads(1)
dist.init_process_group({backend = 'gloo', timeout = 600})
local rank, world = dist.get_rank(), dist.get_world_size()

local gpt = dofile(os.getenv('DDPLUA_SOURCE_DIR') .. '/models/gpt.lua')
ddpl.manual_seed(7)
local fsdp_mode = o.mode == 'sgo' or o.mode == 'full'
local meta = fsdp_mode and o.meta == 1
local function build()
    return gpt({vocab_size = o.vocab, block_size = o.seq, n_layer = o.layers, n_head = 4,
                n_embd = o.width})
end
local net = meta and nn.utils.meta_init(build) or build()
-- GPT-2's initialisation (models/gpt.lua) of one module's own parameters, FSDP's param_init_fn
local resid_proj = {}
for _, pm in ipairs(net:named_modules()) do
    if pm[1]:match('c_proj$') then resid_proj[pm[2]] = true end
end
local function gpt_init(m)
    local name = m.__name
    if name == 'LayerNorm' then
        m.weight:fill_(1)
        m.bias:zero_()
    elseif name == 'Linear' then
        m.weight:normal_(0, resid_proj[m] and 0.02 / math.sqrt(2 * o.layers) or 0.02)
        m.bias:zero_()
    elseif name == 'Embedding' then
        m.weight:normal_(0, 0.02)
    end
end
local block_class = getmetatable(net.h:children()[1]).__class
if o.ckpt == 1 then -- every block called through utils.checkpoint, from outside the block
    local wrapped = {}
    for i, b in ipairs(net.h:children()) do wrapped[i] = utils.checkpoint_wrapper(b) end
    net.h = nn.ModuleList(wrapped)
end

local model, opt
if o.mode == 'ddp' or o.mode == 'zero1' then
    model = nn.DDP(net)
    if o.mode == 'ddp' then
        opt = optim.Adam(net:parameters(), {lr = 1e-3})
    else
        opt = optim.ZeroRedundancyOptimizer(net:parameters(), {optimizer_class = optim.Adam,
                                                               lr = 1e-3})
    end
else
    model = nn.FSDP(net, {sharding_strategy = o.mode == 'sgo' and 'SHARD_GRAD_OP' or 'FULL_SHARD',
                          auto_wrap = {block_class}, forward_prefetch = o.fprefetch == 1,
                          param_init_fn = meta and gpt_init or nil})
    opt = optim.Adam(model:parameters(), {lr = 1e-3})
end

local function batch(s)
    ddpl.manual_seed(1000 * s + rank)
    return ddpl.randint(0, o.vocab, {o.batch, o.seq}), ddpl.randint(0, o.vocab, {o.batch, o.seq})
end
local function step(s)
    local x, y = batch(s)
    opt:zero_grad()
    local _, loss = model(x, y)
    loss:backward()
    opt:step()
end

-- parameters the optimizer holds, their gradients and the optimizer's state, in bytes
local function state_bytes()
    local n, seen = 0, {}
    local function add(t)
        if ddpl.is_tensor(t) and not seen[t] then
            seen[t] = true
            n = n + t:numel() * t:element_size()
        end
    end
    local inner = opt.optim or opt -- ZeroRedundancyOptimizer keeps its shard's optimizer there
    for _, g in ipairs(inner.param_groups) do
        for _, p in ipairs(g.params) do
            add(p)
            add(p.grad)
            for _, v in pairs(inner.state[p] or {}) do add(v) end
        end
    end
    -- ZeRO-1: every parameter and its gradient are still on every rank
    if o.mode == 'zero1' then
        for _, p in ipairs(net:parameters()) do add(p); add(p.grad) end
    end
    return n
end

local function rss_peak_mb()
    for line in io.lines('/proc/self/status') do
        local kb = line:match('^VmHWM:%s*(%d+) kB')
        if kb then return tonumber(kb) / 1024 end
    end
    return 0
end

local rss_init = rss_peak_mb()
for s = 1, o.warmup do step(s) end
collectgarbage()
collectgarbage()
local base = ddpl.memory_stats()['allocated_bytes.current']
ddpl.reset_peak_memory_stats()
local times = {}
for s = 1, o.steps do
    dist.barrier()
    local t = ddpl.time()
    step(o.warmup + s)
    times[s] = (ddpl.time() - t) * 1e3
end
table.sort(times)
local peak = ddpl.memory_stats()['allocated_bytes.peak']
local mine = ddpl.tensor({state_bytes() / 2 ^ 20, peak / 2 ^ 20, rss_peak_mb(),
                          (peak - base) / 2 ^ 20, rss_init}, {dtype = 'float64'})
dist.all_reduce(mine, {op = dist.ReduceOp.MAX})
local v = mine:tolist()
if rank == 0 then
    print(('RESULT mode=%s ckpt=%d world=%d step_ms=%.1f state_mb=%.2f peak_mb=%.2f rss_mb=%.1f '
        .. 'act_mb=%.2f rss_init_mb=%.1f meta=%d'):format(o.mode, o.ckpt, world,
        times[(#times + 1) // 2], v[1], v[2], v[3], v[4], v[5], meta and 1 or 0))
end
dist.destroy_process_group()
