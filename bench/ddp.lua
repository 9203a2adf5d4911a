-- bench/ddp.lua: the ddplua worker of bench/ddp (run as `ddplua bench/ddp.lua --nproc 2 -- ...`).
-- DDP training throughput on Fashion-MNIST: per-rank batch 32, DistributedSampler (shuffle,
-- set_epoch), SGD momentum 0.9, 1 thread per rank (the launcher's OMP_NUM_THREADS=1).
-- Modes, each for every round: "ddp" (synchronised steps), "nosync" (the same steps with every
-- forward/backward inside model:no_sync: the step without gradient communication) and "view" (a
-- second replica, same initial weights, wrapped with gradient_as_bucket_view = true); on request
-- (modes=), "unused" (a replica with find_unused_parameters = true: a walk of the autograd graph
-- and a used-parameter exchange every step) and "static" (find_unused_parameters and
-- static_graph = true: both only in the first step), whose step times differ by what
-- static_graph saves; "fp16" and "powersgd" (a replica whose buckets go through the comm hook
-- 'fp16_compress' or 'powersgd' with its defaults: rank 1, from the 2nd step, error feedback).
-- Per round: `steps` timed steps after `warmup` untimed ones; a round's time is the longest of
-- the ranks' (all_reduce max), global samples/s = world * batch * steps / time. Rank 0 prints
--   RESULT engine=ddplua model=M mode=ddp sps=<median> rounds=<r1,r2,...>
-- and, from the reducer's timeline of untimed ddp steps run after the rounds, per bucket: bytes,
-- mean allreduce time (launch to completion seen), and the mean time from launch to the last
-- bucket being ready (how long the allreduce ran while backward still computed):
--   BUCKET model=M bucket=b bytes=N allreduce_ms=X overlap_ms=Y
--   WAIT model=M final_wait_ms=X backward_ms=Y
-- and per mode the 10th percentile and the median of the timed steps' wall times (each rank's,
-- then the slower rank's): the 10th percentile is the step on a quiet moment of this shared
-- machine, where the gap between modes is the communication's own cost; the rest of the
-- throughput gap is host noise, which a synchronised step pays on either rank and no_sync only
-- on its own:
--   STEP engine=ddplua model=M mode=ddp p10_us=X p50_us=Y
-- args: model=mlp|cnn steps=N warmup=N rounds=N batch=N modes=ddp,nosync,view (a subset, or
-- any of ddp,nosync,view,unused,static,fp16,powersgd)
local ddpl = require 'ddplua'
local nn, F, dist, data = ddpl.nn, ddpl.F, ddpl.distributed, ddpl.data

local o = {model = 'mlp', steps = 200, warmup = 20, rounds = 5, batch = 32}
for _, a in ipairs(arg) do
    local k, v = a:match('^(%w+)=(.*)$')
    if k then o[k] = tonumber(v) or v end
end
dist.init_process_group({backend = 'gloo'})
local rank, world = dist.get_rank(), dist.get_world_size()
local root = (arg[0]:match('^(.*)/[^/]*$') or '.') .. '/..'

local ds = data.datasets.FashionMNIST({train = true})
local x = ds.data:float():div_(255):add_(-0.2860):div_(0.3530)
local train = data.TensorDataset(x:view(x:size(0), 1, 28, 28), ds.targets)
local sampler = data.DistributedSampler(train, {num_replicas = world, rank = rank, seed = 0})
local loader = data.DataLoader(train, {batch_size = o.batch, sampler = sampler, drop_last = true})

local file = o.model == 'cnn' and 'lenet' or 'mlp'
local function replica(opts, hook)
    ddpl.manual_seed(0)
    local m = nn.DDP(assert(loadfile(root .. '/models/' .. file .. '.lua'))()(), opts)
    if hook then m:register_comm_hook(hook) end
    return m, ddpl.optim.SGD(m:parameters(), {lr = o.model == 'cnn' and 0.02 or 0.05,
        momentum = 0.9})
end
local modes = {}
for m in (o.modes or 'ddp,nosync,view'):gmatch('[^,]+') do modes[#modes + 1] = m end
local replica_opts = {view = {gradient_as_bucket_view = true},
    unused = {find_unused_parameters = true},
    static = {find_unused_parameters = true, static_graph = true}}
local model, opt = replica({})
local replica_hooks = {fp16 = 'fp16_compress', powersgd = 'powersgd'}
local replicas = {} -- mode -> {model, optimizer}, for the modes with a replica of their own
for _, m in ipairs(modes) do
    if replica_opts[m] or replica_hooks[m] then
        replicas[m] = {replica(replica_opts[m] or {}, replica_hooks[m])}
    elseif m ~= 'ddp' and m ~= 'nosync' then
        error('bench/ddp.lua: unknown mode ' .. m)
    end
end

local epoch, it = 0, nil
local function next_batch()
    local xb, yb
    if it then xb, yb = it() end
    if not xb then
        sampler:set_epoch(epoch)
        epoch = epoch + 1
        it = loader:iter()
        xb, yb = it()
    end
    return xb, yb
end

local per_bucket, waits = {}, {n = 0, wait = 0, backward = 0}
local function step(mode, record)
    local xb, yb = next_batch()
    local m, op = model, opt
    if replicas[mode] then m, op = replicas[mode][1], replicas[mode][2] end
    op:zero_grad()
    local function fb() F.cross_entropy(m(xb), yb):backward() end
    if mode == 'nosync' then m:no_sync(fb) else fb() end
    op:step()
    if record and rank == 0 then
        local tl = model:_reducer():timeline()
        local last_ready = 0
        for _, ev in ipairs(tl) do
            if ev.name == 'bucket' then last_ready = math.max(last_ready, ev.ready) end
        end
        for _, ev in ipairs(tl) do
            if ev.name == 'bucket' then
                local b = per_bucket[ev.bucket] or {n = 0, ar = 0, ov = 0}
                per_bucket[ev.bucket] = b
                b.n, b.ar = b.n + 1, b.ar + (ev['end'] - ev.start)
                b.ov = b.ov + math.max(0, last_ready - ev.start)
            elseif ev.name == 'wait' then
                waits.n, waits.wait = waits.n + 1, waits.wait + (ev['end'] - ev.start)
            elseif ev.name == 'backward' then
                waits.backward = waits.backward + (ev['end'] - ev.start)
            end
        end
    end
end

local function median(t)
    local s = {table.unpack(t)}
    table.sort(s)
    return s[(#s + 1) // 2]
end

local results, step_times = {}, {} -- step_times: seconds, every timed step of this rank
for _, m in ipairs(modes) do results[m], step_times[m] = {}, {} end
for _, mode in ipairs(modes) do
    for _ = 1, o.warmup do step(mode) end
end
for _ = 1, o.rounds do
    for _, mode in ipairs(modes) do
        dist.barrier()
        local t0 = ddpl.time()
        local times = step_times[mode]
        for _ = 1, o.steps do
            local s0 = ddpl.time()
            step(mode, false)
            times[#times + 1] = ddpl.time() - s0
        end
        local t = ddpl.tensor({ddpl.time() - t0}, {dtype = 'float64'})
        dist.all_reduce(t, {op = dist.ReduceOp.MAX})
        table.insert(results[mode], world * o.batch * o.steps / t:item())
    end
end
-- bucket timing from separate steps: reading the timeline from Lua costs time the timed ddp
-- steps must not pay (the no_sync steps would not)
for _ = 1, math.max(10, o.steps // 4) do step('ddp', true) end
local step_pct = {} -- mode -> {p10, p50} of the slower rank, seconds
for _, mode in ipairs(modes) do
    local s = {table.unpack(step_times[mode])}
    table.sort(s)
    local t = ddpl.tensor({s[math.max(1, #s // 10)], s[(#s + 1) // 2]}, {dtype = 'float64'})
    dist.all_reduce(t, {op = dist.ReduceOp.MAX})
    step_pct[mode] = {t[0]:item(), t[1]:item()}
end
if rank == 0 then
    for _, mode in ipairs(modes) do
        local r = {}
        for i, v in ipairs(results[mode]) do r[i] = ('%.0f'):format(v) end
        print(('RESULT engine=ddplua model=%s mode=%s sps=%.0f rounds=%s'):format(o.model, mode,
            median(results[mode]), table.concat(r, ',')))
    end
    for _, mode in ipairs(modes) do
        print(('STEP engine=ddplua model=%s mode=%s p10_us=%.0f p50_us=%.0f'):format(o.model, mode,
            1e6 * step_pct[mode][1], 1e6 * step_pct[mode][2]))
    end
    local buckets = model:buckets()
    for b, pb in pairs(per_bucket) do
        print(('BUCKET model=%s bucket=%d bytes=%d allreduce_ms=%.3f overlap_ms=%.3f'):format(
            o.model, b, buckets[b].bytes, 1e3 * pb.ar / pb.n, 1e3 * pb.ov / pb.n))
    end
    print(('WAIT model=%s final_wait_ms=%.3f backward_ms=%.3f'):format(o.model,
        1e3 * waits.wait / waits.n, 1e3 * waits.backward / waits.n))
end
dist.destroy_process_group()
