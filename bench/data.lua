-- bench/data.lua: DataLoader workers: loading throughput of a costly Lua data set at 0, 1, 2 and
-- 4 workers, and a training run whose loading is hidden behind compute.
--
--   build/ddplua bench/data.lua [--samples 2048] [--work 2000] [--steps 60] [--rounds 3]
--
-- 1. Loading: a Lua data set whose get(i) does --work iterations of Lua arithmetic per sample
--    (a stand-in for decoding and augmenting an image in Lua) and returns a float32 [3, 32, 32]
--    image and a label; batches of 32, persistent workers, one pass to start them, then the
--    median over --rounds timed passes: samples/s, the speed-up over num_workers=0, and the
--    main process's CPU time per batch (os.clock: what loading still costs the training process).
-- 2. Hidden loading: an mlp (784-512-512-10) trained on one thread with SGD for --steps steps
--    of batch 64, once from batches already in memory (a list of tensors) and once from a
--    loader with 2 persistent workers (after one pass that starts them) over a data set whose
--    per-sample work is a fraction of a step: step time (median per-step ms over the timed
--    steps) and the ratio loader / in-memory.
-- The main process runs its ops on one thread (ddpl.set_num_threads(1)): on a 2-core machine
-- the workers get the other core. Figures depend on how busy the machine is.
local ddpl = require 'ddplua'
local data, nn, F = ddpl.data, ddpl.nn, ddpl.F

local opt = { samples = 2048, work = 2000, steps = 60, rounds = 3 }
local i = 1
while i <= #arg do
    local k = arg[i]:match('^%-%-(.+)$')
    if not k or opt[k] == nil or not tonumber(arg[i + 1]) then
        io.stderr:write('usage: ddplua bench/data.lua [--samples N] [--work N] [--steps N] '
            .. '[--rounds N]\n')
        os.exit(2)
    end
    opt[k] = math.tointeger(tonumber(arg[i + 1])) or tonumber(arg[i + 1])
    i = i + 2
end
ddpl.set_num_threads(1)

local function median(t)
    local c = table.move(t, 1, #t, 1, {})
    table.sort(c)
    local n = #c
    return n % 2 == 1 and c[(n + 1) // 2] or (c[n // 2] + c[n // 2 + 1]) / 2
end

-- A data set whose items cost `work` iterations of Lua arithmetic each.
local Costly = data.Dataset:extend('Costly')
function Costly:init(n, work, shape) self.n, self.work, self.shape = n, work, shape end
function Costly:len() return self.n end
function Costly:get(i)
    local acc = i
    for k = 1, self.work do acc = (acc * 1103515245 + k) % 2147483648 end
    return ddpl.full(self.shape, (acc % 1000) / 1000), acc % 10
end

-- ---- 1. loading throughput ----
print(('1. loading: %d samples of [3, 32, 32], %d Lua iterations per sample, batch 32'):format(
    opt.samples, opt.work))
print('   workers   samples/s   speed-up   main-process CPU ms/batch')
local ds = Costly(opt.samples, opt.work, { 3, 32, 32 })
local base_rate
for _, n in ipairs({ 0, 1, 2, 4 }) do
    local loader = data.DataLoader(ds, { batch_size = 32, num_workers = n,
        persistent_workers = n > 0 })
    for _ in loader:iter() do end -- starts the workers
    local rates, cpu = {}, {}
    for r = 1, opt.rounds do
        local t0, c0 = ddpl.time(), os.clock()
        local seen, batches = 0, 0
        for x in loader:iter() do seen, batches = seen + x:size(0), batches + 1 end
        rates[r] = seen / (ddpl.time() - t0)
        cpu[r] = (os.clock() - c0) / batches * 1000
    end
    loader:close()
    local rate = median(rates)
    base_rate = base_rate or rate
    print(('   %7d   %9.0f   %7.2fx   %9.2f'):format(n, rate, rate / base_rate, median(cpu)))
end

-- ---- 2. loading hidden behind compute ----
local batch = 64
ddpl.manual_seed(0)
local function make_model()
    ddpl.manual_seed(0)
    return nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
        nn.Linear(512, 10))
end
local function train(next_batch, steps)
    local model = make_model()
    local sgd = ddpl.optim.SGD(model:parameters(), { lr = 0.01, momentum = 0.9 })
    local times = {}
    local warm = 5
    for s = 1, steps + warm do
        local t0 = ddpl.time()
        local x, y = next_batch()
        sgd:zero_grad()
        local loss = F.cross_entropy(model(x), y)
        loss:backward()
        sgd:step()
        loss:item()
        if s > warm then times[#times + 1] = ddpl.time() - t0 end
    end
    return median(times) * 1000
end
local steps = opt.steps
local in_memory = {}
local work2 = math.max(1, opt.work // 8)
local ds2 = Costly(batch * (steps + 5), work2, { 784 })
local plain = data.DataLoader(ds2, { batch_size = batch })
for x, y in plain:iter() do in_memory[#in_memory + 1] = { x, y } end
local k = 0
local mem_ms = train(function()
    k = k + 1
    return in_memory[k][1], in_memory[k][2]
end, steps)
local loader = data.DataLoader(ds2, { batch_size = batch, num_workers = 2,
    persistent_workers = true })
for _ in loader:iter() do end -- starts the workers and their shared-memory slots
local step = loader:iter()
local load_ms = train(step, steps)
while step() do end
loader:close()
local t0 = ddpl.time()
local m = 0
for _ in plain:iter() do m = m + 1 end
local fetch_ms = (ddpl.time() - t0) / m * 1000
print(('2. training an mlp (784-512-512-10), batch %d, %d steps, %d Lua iterations per sample '
    .. '(%.1f ms to load a batch in the main process)'):format(batch, steps, work2, fetch_ms))
print(('   step time, batches in memory:        %.2f ms'):format(mem_ms))
print(('   step time, 2 workers loading:        %.2f ms  (%.2fx)'):format(load_ms,
    load_ms / mem_ms))
