-- bench/json.lua: the JSON codec's speed on the two documents ddplua's tools meet: a DDP timeline
-- (a Chrome trace, read by tools/ddp_predict.lua) and metrics records (written by
-- ddpl.utils.MetricsLogger, read by `ddplua plot`). Prints MB/s (1 MB = 1e6 bytes of JSON text)
-- for ddplua.json and, with --compare FILE, for another Lua module with the same decode/encode
-- (e.g. the pure-Lua codec of before issue 33: `git show eaf2c09:lua/ddplua/json.lua > old.lua`).
--
-- usage: build/ddplua bench/json.lua [--events N] [--rounds R] [--compare FILE]
local json = require 'ddplua.json'
local ddpl = require 'ddplua'

local opts = {events = 50000, rounds = 5}
local i = 1
while i <= #arg do
    local a = arg[i]
    if a == '--events' or a == '--rounds' then
        opts[a:sub(3)] = assert(math.tointeger(tonumber(arg[i + 1])), a .. ' takes an integer')
    elseif a == '--compare' then
        opts.compare = arg[i + 1]
    else
        error('bench/json.lua: unknown argument ' .. a)
    end
    i = i + 2
end

-- A timeline as the reducer writes it: complete events with a name, a category, microsecond
-- times and a few arguments.
local function timeline(n)
    local ev = {}
    for k = 1, n do
        ev[k] = {name = ('allreduce bucket %d'):format(k % 25), cat = 'ddp', ph = 'X',
            ts = 1000000 + k * 137.25, dur = 88.5 + k % 7, pid = 0, tid = k % 3,
            args = {bucket = k % 25, bytes = 4194304, step = k // 25}}
    end
    return {traceEvents = ev, displayTimeUnit = 'ms'}
end

-- Metrics records: one small object per step.
local function records(n)
    local r = {}
    for k = 1, n do
        r[k] = {step = k, epoch = k // 1000, loss = 2.5 / k, lr = 0.1, tag = 'train',
            time = 12.5 + k * 0.031}
    end
    return r
end

local function median(t)
    table.sort(t)
    return t[(#t + 1) // 2]
end

local function measure(codec, label)
    local doc = timeline(opts.events)
    local text = codec.encode(doc)
    local recs = records(opts.events)
    local rec_bytes = 0
    for _, r in ipairs(recs) do rec_bytes = rec_bytes + #codec.encode(r) + 1 end
    local enc, dec, rec = {}, {}, {}
    for _ = 1, opts.rounds do
        collectgarbage()
        local t0 = ddpl.time()
        codec.encode(doc)
        local t1 = ddpl.time()
        codec.decode(text)
        local t2 = ddpl.time()
        for _, r in ipairs(recs) do codec.encode(r) end
        local t3 = ddpl.time()
        enc[#enc + 1] = #text / (t1 - t0) / 1e6
        dec[#dec + 1] = #text / (t2 - t1) / 1e6
        rec[#rec + 1] = rec_bytes / (t3 - t2) / 1e6
    end
    print(('%-12s timeline %.1f MB: encode %7.1f MB/s, decode %7.1f MB/s; %d records: ' ..
        'encode %6.1f MB/s (median of %d)'):format(label, #text / 1e6, median(enc), median(dec),
        #recs, median(rec), opts.rounds))
    return median(enc), median(dec), median(rec)
end

local e1, d1, r1 = measure(json, 'ddplua.json')
if opts.compare then
    local other = dofile(opts.compare)
    local e2, d2, r2 = measure(other, 'compare')
    print(('ddplua.json / compare: encode %.2fx, decode %.2fx, records %.2fx'):format(e1 / e2,
        d1 / d2, r1 / r2))
end
