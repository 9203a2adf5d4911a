-- bench/hier_allreduce.lua: one rank of bench/hier (float32 allreduce across namespace nodes,
-- flat Gloo ring against the hierarchy). Started by bench/hier on every node under the launcher
-- (`ddplua hier_allreduce.lua --nnodes K --node-rank R --nproc 2 ... -- sizes=4096,... iters=20`).
-- defines: the worker only.
--
-- Per size (bytes of float32): 3 warm-up allreduces (sum, in place), then `iters` timed ones, each
-- right after a barrier; an op's time is the longest of the ranks' (allreduce of the times, op
-- max); the figure is the median. Link bytes: rank 0 reads its node's eth0 tx counter
-- (/sys/class/net/eth0/statistics/tx_bytes, the node's link inside its namespace) around the
-- timed loop and around a loop of barriers alone, and reports the difference per allreduce: what
-- one allreduce sends out of node 0's link. Prints RESULT lines for bench/hier.
local ddpl = require 'ddplua'
local dist = ddpl.dist
local util = dofile((debug.getinfo(1, 'S').source:match('^@(.*)/[^/]*$') or '.') .. '/util.lua')

local o = {sizes = '4096,65536,1048576,4194304,26214400', iters = 20, warmup = 3, mode = 'hier'}
for _, a in ipairs(arg) do
    local k, v = a:match('^(%w+)=(.*)$')
    if not k or o[k] == nil then error('hier_allreduce.lua: unknown argument ' .. a) end
    o[k] = tonumber(v) or v
end

local function tx_bytes()
    local f = io.open('/sys/class/net/eth0/statistics/tx_bytes')
    if not f then return 0 end
    local v = tonumber(f:read('l'))
    f:close()
    return v or 0
end

dist.init_process_group({backend = 'gloo', timeout = 300})
local rank, world = dist.get_rank(), dist.get_world_size()
for size in tostring(o.sizes):gmatch('%d+') do
    local n = tonumber(size) // 4
    local x = ddpl.ones(n)
    for _ = 1, o.warmup do
        x:fill_(1)
        dist.all_reduce(x)
    end
    assert(x[0]:item() == world and x[-1]:item() == world, 'allreduce gave a wrong sum')
    -- the barriers' own bytes, to subtract
    dist.barrier()
    local b0 = tx_bytes()
    for _ = 1, o.iters do dist.barrier() end
    local barrier_bytes = tx_bytes() - b0
    local ts = {}
    local t0_bytes = tx_bytes()
    for i = 1, o.iters do
        dist.barrier()
        local t0 = ddpl.time()
        dist.all_reduce(x)
        ts[i] = ddpl.time() - t0
    end
    local op_bytes = (tx_bytes() - t0_bytes - barrier_bytes) / o.iters
    local times = ddpl.tensor(ts, {dtype = 'float64'})
    dist.all_reduce(times, {op = 'max'})
    if rank == 0 then
        local v = times:tolist()
        print(('RESULT mode=%s nodes=%d world=%d bytes=%d ms=%.3f tx=%.0f'):format(o.mode,
            world // 2, world, n * 4, util.median(v) * 1e3, op_bytes))
    end
end
dist.destroy_process_group()
