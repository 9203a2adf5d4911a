-- bench/allreduce.lua: float32 allreduce bandwidth on 2 ranks, ddplua (its default path, shared
-- memory on one machine, and with DDPLUA_SHM=0 the same Gloo TCP path PyTorch uses) against
-- torch.distributed (gloo) and memcpy, side by side in one run. Started by bench/allreduce (see
-- bench/README.md).
-- defines: the driver (no RANK in the environment) and the worker (under `ddplua --nproc N`).
--
-- Method (as shared/reference/torch/allreduce_ref.py): per size, 3 warm-up allreduces (sum, in
-- place), then 10 timed ones, each right after a barrier; an op's time is the longer of the
-- ranks' times (an allreduce of the time list with op max); the figure is the median.
-- Algorithm bandwidth = tensor bytes / time, GB = 1e9, sizes in MiB (2^20 bytes); for 2 ranks
-- bus bandwidth equals algorithm bandwidth. memcpy: one thread copying a 100 MiB float32 tensor
-- into one already faulted in (dst:copy_(src)), bytes copied per second: the ceiling of a
-- reduction that must at least read and write every byte once.
-- The driver runs R rounds alternating the engines (this machine drifts by tens of percent over
-- minutes) and reports the median of the rounds' medians.
local ddpl = require 'ddplua'

local function parse(argv)
    local o = {sizes = {1, 4, 25, 100}, rounds = 3, warmup = 3, iters = 10, world = 2,
        python = '/usr/bin/python3', torch = true}
    local i = 1
    while i <= #argv do
        local a = argv[i]
        if a == '--worker' then o.worker = true
        elseif a == '--no-torch' then o.torch = false
        elseif a == '--sizes' then
            o.sizes = {}
            for s in argv[i + 1]:gmatch('[^,]+') do o.sizes[#o.sizes + 1] = tonumber(s) end
            i = i + 1
        elseif a == '--rounds' or a == '--iters' or a == '--warmup' or a == '--world' then
            o[a:sub(3)] = math.tointeger(tonumber(argv[i + 1])); i = i + 1
        elseif a == '--python' then o.python = argv[i + 1]; i = i + 1
        else error('allreduce.lua: unknown argument ' .. a) end
        i = i + 1
    end
    return o
end

local function median(v)
    local s = {table.unpack(v)}
    table.sort(s)
    local n = #s
    return n % 2 == 1 and s[(n + 1) // 2] or (s[n // 2] + s[n // 2 + 1]) / 2
end

local opts = parse(arg)

-- ---- worker: one rank of the job ----
if opts.worker then
    local dist = ddpl.dist
    dist.init_process_group({backend = 'gloo', timeout = 120})
    local rank, world = dist.get_rank(), dist.get_world_size()
    for _, mib in ipairs(opts.sizes) do
        local x = ddpl.ones(mib * 2 ^ 20 // 4)
        for _ = 1, opts.warmup do
            x:fill_(1)
            dist.all_reduce(x)
        end
        assert(x[0]:item() == world and x[-1]:item() == world, 'allreduce gave a wrong sum')
        local times = ddpl.zeros(opts.iters, {dtype = 'float64'})
        local ts = {}
        for i = 1, opts.iters do
            dist.barrier()
            local t0 = ddpl.time()
            dist.all_reduce(x)
            ts[i] = ddpl.time() - t0
        end
        times:copy_(ddpl.tensor(ts, {dtype = 'float64'}))
        dist.all_reduce(times, {op = 'max'})
        if rank == 0 then
            local v = times:tolist()
            local label = os.getenv('DDPLUA_SHM') == '0' and 'ddplua_tcp' or 'ddplua'
            print(('RESULT %s %d %.6f %.6f %.6f'):format(label, mib, median(v) * 1e3,
                math.min(table.unpack(v)) * 1e3, math.max(table.unpack(v)) * 1e3))
        end
    end
    dist.destroy_process_group()
    return
end

-- ---- driver ----
local here = debug.getinfo(1, 'S').source:match('^@(.*)/[^/]*$') or '.'
local exe = arg[-1] -- the ddplua executable running this script
local function q(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end
local sizes_arg = table.concat(opts.sizes, ',')

local function run(cmd, engine, into)
    local p = assert(io.popen(cmd .. ' 2>&1'))
    local text = p:read('a')
    local ok = p:close()
    local n = 0
    for e, mib, med in text:gmatch('RESULT (%S+) (%d+) ([%d.]+)') do
        if e == engine then
            local t = into[tonumber(mib)] or {}
            t[#t + 1] = tonumber(med) / 1e3
            into[tonumber(mib)] = t
            n = n + 1
        end
    end
    if not ok or n == 0 then
        io.stderr:write(('bench/allreduce: %s failed:\n%s\n'):format(engine, text))
        return false
    end
    return true
end

local function memcpy_gbps()
    ddpl.set_num_threads(1)
    local n = 100 * 2 ^ 20 // 4
    local src, dst = ddpl.ones(n), ddpl.zeros(n)
    dst:copy_(src)
    local ts = {}
    for i = 1, 10 do
        local t0 = ddpl.time()
        dst:copy_(src)
        ts[i] = ddpl.time() - t0
    end
    return n * 4 / median(ts) / 1e9
end

local have_torch = opts.torch
    and os.execute(q(opts.python) .. ' -c "import torch.distributed" 2>/dev/null')
local results = {ddplua = {}, ddplua_tcp = {}, torch = {}}
local memcpy = {}
io.stderr:write(('bench/allreduce: %d rounds, sizes %s MiB, %d ranks%s\n'):format(opts.rounds,
    sizes_arg, opts.world, have_torch and '' or ' (torch not found: ddplua only)'))
for round = 1, opts.rounds do
    io.stderr:write(('  round %d/%d\n'):format(round, opts.rounds))
    run(('timeout 600 %s --nproc %d %s --worker --sizes %s --iters %d --warmup %d'):format(q(exe),
        opts.world, q(here .. '/allreduce.lua'), sizes_arg, opts.iters, opts.warmup), 'ddplua',
        results.ddplua)
    run(('DDPLUA_SHM=0 timeout 600 %s --nproc %d %s --worker --sizes %s --iters %d --warmup %d')
        :format(q(exe), opts.world, q(here .. '/allreduce.lua'), sizes_arg, opts.iters,
        opts.warmup), 'ddplua_tcp', results.ddplua_tcp)
    if have_torch then
        run(('OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 timeout 600 %s %s --world %d --sizes %s '
            .. '--iters %d --warmup %d'):format(q(opts.python), q(here .. '/allreduce_torch.py'),
            opts.world, sizes_arg, opts.iters, opts.warmup), 'torch', results.torch)
    end
    memcpy[#memcpy + 1] = memcpy_gbps()
end

local function gbps(mib, times)
    if not times or #times == 0 then return nil end
    return mib * 2 ^ 20 / median(times) / 1e9
end
local mc = median(memcpy)
print(('\nfloat32 allreduce, %d ranks on this machine, algorithm bandwidth in GB/s (1e9 B/s):'
    .. ' median over %d rounds of the median of %d ops'):format(opts.world, opts.rounds,
    opts.iters))
print('| size MiB | ddplua GB/s (ms) | ddplua over Gloo TCP GB/s (ms) | torch gloo GB/s (ms) '
    .. '| ddplua / torch | memcpy GB/s |')
print('| --- | --- | --- | --- | --- | --- |')
local function cell(mib, times)
    local g = gbps(mib, times)
    return g and ('%.2f (%.1f)'):format(g, median(times) * 1e3) or '-'
end
for _, mib in ipairs(opts.sizes) do
    local d, t = gbps(mib, results.ddplua[mib]), gbps(mib, results.torch[mib])
    print(('| %d | %s | %s | %s | %s | %.1f |'):format(mib, cell(mib, results.ddplua[mib]),
        cell(mib, results.ddplua_tcp[mib]), cell(mib, results.torch[mib]),
        (d and t) and ('%.2fx'):format(d / t) or '-', mc))
end
