-- bench/step_faults.lua: minor page faults and wall time of each training step of one model, to
-- see what the host caching allocator (docs/internals/allocators.md) saves. One process, one JSON
-- line.
--
-- usage (paths as bench/train sets them; the build folder chooses the engine):
--   LUA_PATH="lua/?.lua;lua/?/init.lua;;" LUA_CPATH="build/?.so;;" \
--     lua5.4 bench/step_faults.lua [model=gpt|mlp|cnn] [steps=10] [warmup=5] [threads=1]
-- gpt is issue 17's configuration (models/gpt.lua: 4 layers, 256 wide, 4 heads, sequence 256,
-- batch 4, vocab 8192, AdamW); mlp and cnn (models/mlp.lua, models/lenet.lua) train on random
-- batches of 64 28x28 images with SGD (momentum 0.9), 50 steps by default. Faults are the
-- process's minor faults (/proc/self/stat, field 10) around each step; "steady" is the median
-- over the steps after warm-up (the host cache fills while the Lua GC's pacing settles: about 5
-- GPT steps).
local ddpl = require 'ddplua'
local F = ddpl.F

local o = { model = 'gpt', steps = 0, threads = 1, warmup = 5 }
for _, a in ipairs(arg) do
    local k, v = a:match('^(%w+)=(.*)$')
    if not k or o[k] == nil then error('bench/step_faults: unknown argument ' .. a, 0) end
    o[k] = tonumber(v) or v
end
if o.steps == 0 then o.steps = o.model == 'gpt' and 10 or 50 end
if o.warmup >= o.steps then error('bench/step_faults: warmup must be below steps', 0) end
ddpl.set_num_threads(o.threads)
ddpl.manual_seed(0)
local root = (arg[0]:match('^(.*)/bench/[^/]*$') or '.')

local util = dofile((arg[0]:match('^(.*)/[^/]*$') or '.') .. '/util.lua')
local minflt, median = util.minor_faults, util.median

local model, opt, batch
if o.model == 'gpt' then
    local cfg = { vocab_size = 8192, block_size = 256, n_layer = 4, n_head = 4, n_embd = 256 }
    model = dofile(root .. '/models/gpt.lua')(cfg)
    opt = ddpl.optim.AdamW(model:parameters(), { lr = 3e-4, weight_decay = 0.1 })
    batch = function()
        local idx = ddpl.randint(0, cfg.vocab_size, { 4, 256 })
        local _, loss = model(idx, ddpl.randint(0, cfg.vocab_size, { 4, 256 }))
        return loss
    end
elseif o.model == 'mlp' or o.model == 'cnn' then
    model = dofile(root .. '/models/' .. (o.model == 'cnn' and 'lenet' or 'mlp') .. '.lua')()
    opt = ddpl.optim.SGD(model:parameters(), { lr = 0.01, momentum = 0.9 })
    batch = function()
        local x = ddpl.randn(64, 1, 28, 28)
        return F.cross_entropy(model(x), ddpl.randint(0, 10, { 64 }))
    end
else
    error('bench/step_faults: unknown model ' .. o.model, 0)
end

local faults, ms = {}, {}
for s = 1, o.steps do
    local f0, t0 = minflt(), ddpl.time()
    local loss = batch()
    opt:zero_grad()
    loss:backward()
    opt:step()
    loss:item()
    ms[s], faults[s] = (ddpl.time() - t0) * 1e3, minflt() - f0
end

local steady_f = median(table.move(faults, o.warmup + 1, #faults, 1, {}))
local steady_ms = median(table.move(ms, o.warmup + 1, #ms, 1, {}))
local function peak_rss_mib()
    for line in io.lines('/proc/self/status') do
        local kb = line:match('^VmHWM:%s*(%d+) kB')
        if kb then return tonumber(kb) / 1024 end
    end
end
local st = ddpl.memory_stats and ddpl.memory_stats() or {}
print(('{"model": "%s", "threads": %d, "steps": %d, "faults": [%s], "ms": [%s], ' ..
    '"steady_faults": %.1f, "steady_ms": %.1f, "reserved_mib": %.1f, "cached_mib": %.1f, "peak_rss_mib": %.1f}')
    :format(o.model, o.threads, o.steps, table.concat(faults, ', '),
        table.concat((function()
            local t = {}
            for i, v in ipairs(ms) do t[i] = ('%.1f'):format(v) end
            return t
        end)(), ', '), steady_f, steady_ms, (st.reserved_bytes or 0) / 2 ^ 20,
        (st.cached_bytes or 0) / 2 ^ 20, peak_rss_mib()))
