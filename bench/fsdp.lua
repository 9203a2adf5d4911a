-- bench/fsdp.lua: one configuration of bench/fsdp: a GPT (models/gpt.lua) trained with Adam for
-- a few steps under DDP, ZeRO-1 (ZeroRedundancyOptimizer over DDP), FSDP SHARD_GRAD_OP or FSDP
-- FULL_SHARD (each block a unit), with or without activation checkpointing of every block.
-- Run as `ddplua bench/fsdp.lua --nproc N -- mode=ddp|zero1|sgo|full ckpt=0|1 layers=L
-- width=C steps=K batch=B seq=T ctx=N fprefetch=0|1 bprefetch=0|1 meta=0|1 wrap=block|sublayer`
-- (ctx: the GPT's context length, its position table's rows, default max(seq, 64))
-- (fprefetch, bprefetch: FSDP's forward_prefetch and backward_prefetch, default off and on;
-- meta: the FSDP modes build the GPT under nn.utils.meta_init and let FSDP materialise it one
-- unit at a time with GPT-2's initialisation as param_init_fn; DDP and ZeRO-1 ignore it; wrap:
-- each block one FSDP unit, or each block's attention and MLP one unit each, the block's two
-- LayerNorms joining the root unit); rank 0 prints one line
--   RESULT mode=.. ckpt=.. world=.. step_ms=<median> state_mb=<max over ranks> peak_mb=<max>
--          rss_mb=<max> act_mb=<max> rss_init_mb=<max> meta=.. rss_base_mb=<max>
--          rss_over_base_mb=<max> pss_over_base_mb=<max> anon_mb=<max> shm_mb=<max> wrap=..
--          bprefetch=..
-- state_mb: parameters the optimizer holds + their gradients + the optimizer's state tensors,
--   in MiB, on the rank with the most (what sharding divides);
-- peak_mb: the allocator's peak of allocated tensor bytes during the measured steps
--   (ddpl.memory_stats()['allocated_bytes.peak'] after ddpl.reset_peak_memory_stats());
-- act_mb: peak_mb minus the bytes allocated before the step began (what one step adds on top:
--   activations, gathered parameters, gradients in flight);
-- rss_mb: the process's peak resident set (VmHWM), construction included;
-- rss_init_mb: the same right after the model was built and wrapped (construction's peak);
-- rss_base_mb: the resident set (VmRSS) before the model is built: libraries, the Lua heap and
--   the process group with its shared-memory segment's pages mapped (a warm-up of each kind of
--   collective, its tensors freed and the host cache emptied: bench/README.md, 'Session 43:
--   FSDP peak RSS');
-- rss_over_base_mb: rss_mb - rss_base_mb on each rank, the maximum: what the model, its
--   training state and a step add to the process at their peak. With a tiny batch (batch=1
--   seq=8) activations are negligible and this is the RSS measure of parameters + gradients +
--   optimizer state (with whatever each mode adds to hold them: DDP's buckets, FSDP's gathered
--   units);
-- pss_over_base_mb: the proportional set size (Pss of /proc/self/smaps_rollup: a page that n
--   processes map counts 1/n) at the end of the run minus the same before the model: the RSS
--   counts in full the pages of the other ranks' DDP buckets that a rank reads (shared memory),
--   which the PSS divides among them. Taken at the end, not at the peak (the kernel keeps no
--   peak of it): the resident set at the end is its peak here (rss_mb), as the host cache
--   keeps every block;
-- anon_mb, shm_mb: the resident set's private and shared-memory parts at the end (RssAnon,
--   RssShmem: DDP's buckets live in shared memory on one machine).
local ddpl = require 'ddplua'
local nn, dist, optim, utils = ddpl.nn, ddpl.distributed, ddpl.optim, ddpl.utils

local o = {mode = 'full', ckpt = 0, layers = 4, width = 256, steps = 5, batch = 4, seq = 64,
    vocab = 512, warmup = 2, fprefetch = 0, bprefetch = 1, meta = 0, wrap = 'block', ctx = 0}
for _, a in ipairs(arg) do
    local k, v = a:match('^([%w_]+)=(.*)$')
    if k then o[k] = math.tointeger(tonumber(v)) or tonumber(v) or v end
end
ddpl.set_num_threads(1)
dist.init_process_group({backend = 'gloo', timeout = 600})
local rank, world = dist.get_rank(), dist.get_world_size()

-- a field of /proc/self/status in MiB (VmRSS: resident now, VmHWM: its peak, RssAnon, RssShmem)
local function status_mb(field)
    for line in io.lines('/proc/self/status') do
        local kb = line:match('^' .. field .. ':%s*(%d+) kB')
        if kb then return tonumber(kb) / 1024 end
    end
    return 0
end
-- the proportional set size in MiB
local function pss_mb()
    for line in io.lines('/proc/self/smaps_rollup') do
        local kb = line:match('^Pss:%s*(%d+) kB')
        if kb then return tonumber(kb) / 1024 end
    end
    return 0
end

-- The baseline. The shared-memory transport's segment (its per-rank chunk buffers, a fixed
-- size whatever the model) is mapped at start and its pages become resident as collectives
-- first pass through them; so every kind of collective runs once here on 8 MiB per rank, then
-- those tensors go, and with them the host cache's blocks. Not under a memory cap
-- (DDPLUA_MEMORY_LIMIT_MB, bench/fsdp --limit-mb and --fit): 40 MiB would not fit the small
-- ones, and the allocator's figures are what a capped run measures.
local capped = (tonumber(os.getenv('DDPLUA_MEMORY_LIMIT_MB') or '') or 0) > 0
if not capped then
    local n = 2 * 2 ^ 20
    local a <close> = ddpl.ones({n})
    local all <close> = ddpl.empty({n * world})
    local part <close> = ddpl.empty({n // world})
    dist.all_reduce(a)
    dist.all_gather_into_tensor(all, a)
    dist.reduce_scatter_tensor(part, a:narrow(0, 0, n // world * world))
    dist.barrier()
end
collectgarbage()
collectgarbage()
ddpl.empty_cache()
local rss_base, pss_base = status_mb('VmRSS'), pss_mb()

local gpt = dofile(os.getenv('DDPLUA_SOURCE_DIR') .. '/models/gpt.lua')
ddpl.manual_seed(7)
local fsdp_mode = o.mode == 'sgo' or o.mode == 'full'
local meta = fsdp_mode and o.meta == 1
local function build()
    return gpt({vocab_size = o.vocab, block_size = math.max(o.seq, o.ctx > 0 and o.ctx or 64),
                n_layer = o.layers, n_head = 4,
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
local first_block = net.h:children()[1]
local wrap_classes = {getmetatable(first_block).__class}
if o.wrap == 'sublayer' then
    wrap_classes = {getmetatable(first_block.attn).__class, getmetatable(first_block.mlp).__class}
elseif o.wrap ~= 'block' then
    error('wrap must be block or sublayer, got ' .. tostring(o.wrap))
end
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
                          auto_wrap = wrap_classes, forward_prefetch = o.fprefetch == 1,
                          backward_prefetch = o.bprefetch == 1,
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

local function rss_peak_mb() return status_mb('VmHWM') end

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
                          (peak - base) / 2 ^ 20, rss_init, rss_base, rss_peak_mb() - rss_base,
                          status_mb('RssAnon'), status_mb('RssShmem'), pss_mb() - pss_base},
                         {dtype = 'float64'})
dist.all_reduce(mine, {op = dist.ReduceOp.MAX})
local v = mine:tolist()
if rank == 0 then
    print(('RESULT mode=%s ckpt=%d world=%d step_ms=%.1f state_mb=%.2f peak_mb=%.2f rss_mb=%.1f '
        .. 'act_mb=%.2f rss_init_mb=%.1f meta=%d rss_base_mb=%.1f rss_over_base_mb=%.1f '
        .. 'pss_over_base_mb=%.1f anon_mb=%.1f shm_mb=%.1f wrap=%s bprefetch=%d'):format(o.mode,
        o.ckpt, world, times[(#times + 1) // 2], v[1], v[2], v[3], v[4], v[5], meta and 1 or 0,
        v[6], v[7], v[10], v[8], v[9], o.wrap, o.bprefetch))
end
dist.destroy_process_group()
