-- bench/ddp_sync_probe.lua: measures what one barrier of the shared-memory collectives costs
-- beyond the compute when N ranks share C cores, for tools/ddp_predict.lua's --sync-us (the
-- model and its use: docs/internals/scaling.md, "Ranks that share cores"). It is a probe of this
-- machine's scheduling, not a fit to any training run: the ranks do nothing but a fixed CPU loop
-- and a one-element allreduce.
-- defines: the driver (no RANK in the environment) and the worker (under `ddplua --nproc N`).
--
--   ddplua bench/ddp_sync_probe.lua --ranks 2,4 [--cores C (default: nproc)] [--work-us 1000]
--       [--iters 200] [--repeats 3]
--
-- Method. The work unit is a Lua loop of K iterations (no memory traffic, so sharing a core
-- costs nothing but the core), K chosen so that one process alone takes about --work-us of CPU
-- time; its time w is measured here, alone, as the median of blocks of 20 units, in CPU time
-- (os.clock: what the unit costs a core, whatever else the machine runs meanwhile). Each rank
-- of an N-rank job then runs, --iters times: one work unit, then all_reduce of one float32 (on
-- one machine the shared-memory path, engine/distributed/shm_coll.c ddpl_shm_allreduce: 2 barriers, as
-- a DDP bucket's ddpl_shm_buffer_allreduce). Rank 0 takes the time of each block of 20 iterations
-- (all ranks leave the last barrier of a block together); a run's time is the median of its
-- blocks, and t_N the median of --repeats runs, the rank counts taking turns (2, 4, 2, 4, ...)
-- so that a stretch of load from other jobs falls on all of them.
-- With N ranks on C cores the work alone needs o w per iteration, o = max(1, N / C) (the cores
-- never idle while a rank can run); the rest is synchronisation: spinning that keeps a waiting
-- rank's peer off the core, sleeping, waking and switching:
--   s_N = (t_N - o w) / 2   microseconds per barrier
-- Output: one line per N, then the option for the predictor, e.g.
--   --sync-us 2=4.1,4=310.5
-- A rank count whose s_N comes out negative (noise: the machine is shared) is printed as 0.
local ddpl = require 'ddplua'

local util = dofile((arg[0]:match('^(.*)/[^/]*$') or '.') .. '/util.lua')

local USAGE = 'usage: ddplua bench/ddp_sync_probe.lua --ranks N[,N...] [--cores C] '
    .. '[--work-us 1000] [--iters 200] [--repeats 3]'
local BLOCK = 20 -- iterations per timed block
local BARRIERS = 2 -- per one-element allreduce on shared memory (shm_coll.c)

local function die(fmt, ...)
    io.stderr:write('ddp_sync_probe: ', fmt:format(...), '\n')
    os.exit(2)
end

-- --worker and --k K (loop iterations per work unit) are the driver's, for the ranks it starts
local function parse(argv)
    local ok, o = pcall(util.parse_args, argv, {ranks = '', cores = 0, work_us = 1000,
        iters = 200, repeats = 3, worker = false, k = 0}, 'ddp_sync_probe')
    if not ok then die('%s\n%s', (o:gsub('^ddp_sync_probe: ', '')), USAGE) end
    local least = {cores = 0, work_us = 1, iters = 1, repeats = 1, k = 0} -- cores 0: nproc's
    for key, min in pairs(least) do
        if math.tointeger(o[key]) == nil or o[key] < min then
            die("--%s: expected an integer of %d or more, got '%s'", (key:gsub('_', '-')), min,
                o[key])
        end
    end
    if o.iters < BLOCK then die('--iters: expected at least %d, got %d', BLOCK, o.iters) end
    local ranks = {}
    for w in o.ranks:gmatch('[^,]+') do ranks[#ranks + 1] = math.tointeger(tonumber(w)) or 0 end
    for _, n in ipairs(ranks) do
        if n < 2 then
            die("--ranks: expected integers of 2 or more (N or N,N,...), got '%s'", o.ranks)
        end
    end
    o.ranks = #ranks > 0 and ranks or nil
    return o
end

local median = util.median

-- the work unit: k iterations of arithmetic on locals
local function work(k)
    local x = 0.0
    for i = 1, k do x = x + i * 0.5 end
    return x
end

local opts = parse(arg)

-- ---- worker: one rank ----
if opts.worker then
    local dist = ddpl.dist
    dist.init_process_group({backend = 'gloo', timeout = 120})
    local one = ddpl.zeros(1)
    for _ = 1, BLOCK do -- warm-up: first collectives, page faults
        work(opts.k)
        dist.all_reduce(one)
    end
    local blocks = {}
    for b = 1, opts.iters // BLOCK do
        local t0 = ddpl.time()
        for _ = 1, BLOCK do
            work(opts.k)
            dist.all_reduce(one)
        end
        blocks[b] = (ddpl.time() - t0) / BLOCK
    end
    if dist.get_rank() == 0 then print(('RESULT %.3f'):format(median(blocks) * 1e6)) end
    dist.destroy_process_group()
    return
end

-- ---- driver ----
if not opts.ranks then die('--ranks N is required\n%s', USAGE) end
if opts.cores == 0 then
    local p = io.popen('nproc 2>/dev/null')
    opts.cores = p and math.tointeger(tonumber(p:read('l') or '')) or nil
    if p then p:close() end
    if not opts.cores then die('cannot tell the number of cores (nproc): give --cores C') end
end
local exe = arg[-1] -- the ddplua executable running this script
local script = debug.getinfo(1, 'S').source:sub(2)
local q = util.sh_quote

-- one work unit's CPU time alone (us): median of blocks, after a warm-up
local function unit_us(k)
    local blocks = {}
    work(k)
    for b = 1, 9 do
        local t0 = os.clock()
        for _ = 1, BLOCK do work(k) end
        blocks[b] = (os.clock() - t0) / BLOCK * 1e6
    end
    return median(blocks)
end
local k = 100000
k = math.max(1, math.floor(k * opts.work_us / unit_us(k) + 0.5))
local w = unit_us(k)

print(('ddp_sync_probe: work unit %.1f us alone (%d loop iterations), %d cores, %d iterations '
    .. 'per run, %d run%s per rank count'):format(w, k, opts.cores, opts.iters, opts.repeats,
    opts.repeats == 1 and '' or 's'))
local runs = {} -- runs[n]: t of each run, us per iteration
for _ = 1, opts.repeats do
    for _, n in ipairs(opts.ranks) do
        local cmd = ('OMP_NUM_THREADS=1 timeout 300 %s --nproc %d %s --worker --k %d --iters %d '
            .. '2>&1'):format(q(exe), n, q(script), k, opts.iters)
        local p = assert(io.popen(cmd))
        local text = p:read('a')
        local ok = p:close()
        local t = tonumber(text:match('RESULT ([%d.]+)'))
        if not ok or not t then die('the %d-rank run failed:\n%s', n, text) end
        runs[n] = runs[n] or {}
        table.insert(runs[n], t)
    end
end
local out = {}
for _, n in ipairs(opts.ranks) do
    local t = median(runs[n])
    local o = math.max(1, n / opts.cores)
    local s = (t - o * w) / BARRIERS
    print(('%d ranks: %.1f us per iteration, %.1f of it work (%g x %.1f): %.1f us per barrier')
        :format(n, t, o * w, o, w, s))
    out[#out + 1] = ('%d=%.1f'):format(n, math.max(0, s))
end
print('--sync-us ' .. table.concat(out, ','))
