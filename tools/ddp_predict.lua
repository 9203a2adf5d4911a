-- tools/ddp_predict.lua: predicts a DDP step's time and the scaling efficiency at N ranks from a
-- DDPLUA_DDP_TIMELINE trace (lua/ddplua/nn/parallel/ddp_timeline.lua writes it), with a
-- ring-allreduce cost model and the overlap measured in the trace. docs/internals/scaling.md
-- explains the model, its assumptions and how it compared with measured steps.
--
--   ddplua tools/ddp_predict.lua TRACE.json --ranks N[,N...] [--bandwidth GB/s] [--latency us]
--       [--compute-scale X] [--cores C] [--sync-us N=us[,N=us...]] [--calibrate OTHER.json]
--       [--stragglers] [--nodes M --link GB/s [--link-latency us] [--flat]]
--
-- The model, per traced step (times from the step's forward start; the first traced step is
-- warm-up and left out when there are others; a step counts once the next forward started):
--   * measured: each bucket's ready time r_b, size x_b and allreduce span; the exposed
--     communication E = (end of the last allreduce) - (last bucket ready), at least 0; the
--     compute C = step - E (forward, backward, optimizer, data: everything but exposed waiting).
--   * cost of one allreduce of x bytes on N ranks (ring: 2(N-1) steps of x/N bytes each):
--       cost_N(x) = 2(N-1) * latency + 2(N-1)/N * x / bandwidth      (0 on 1 rank)
--   * buckets are reduced in order, each once it is ready and the previous one is done:
--       start_b = max(r_b, end_{b-1}), end_b = start_b + cost_N(x_b)
--     predicted step T_N = C + max(0, end_B - max r_b); --compute-scale s multiplies C and the
--     ready times (default 1, or as --cores below).
--   * ranks that share cores (--cores C: the cores the ranks run on, one thread each; with T
--     threads per rank give C / T). With o(n) = max(1, n / C) the oversubscription of n ranks:
--       - compute and ready times x o(N) / o(W) (W: the traced world size), unless
--         --compute-scale is given;
--       - the bandwidth term x o(N) / o(Wc) (Wc: the world size of the trace latency and
--         bandwidth were fitted to; 1 when both are given): on one machine the reduction is CPU
--         work of the ranks, which shares the cores as their compute does;
--       - with --sync-us, each allreduce + 2 x max(0, s(N) - s(Wc)) us: s(n) is what one barrier
--         costs at n ranks beyond the work (bench/ddp_sync_probe.lua measures it and prints the
--         option; s(1) = 0), and a DDP bucket's shared-memory allreduce takes 2 barriers
--         (engine/distributed/shm_coll.c, ddpl_shm_buffer_allreduce). s(Wc) is already in the latency
--         fitted at Wc ranks, hence the difference.
--     Without --cores the ranks are taken to have a core each (o = 1); --sync-us needs --cores.
--   * several machines (--nodes M, --link GB/s: each node's link, per direction): the N ranks
--     spread evenly over M nodes (L = N/M per node; N a multiple of M, or 1), and latency and bandwidth
--     above are those inside a node. The hierarchical allreduce (engine/distributed/
--     pg_host_hier.c: reduce inside the node, a ring of the M leaders over the links, broadcast
--     inside the node) costs
--       cost_L(x) + 2(M-1) * link_latency + 2(M-1)/M * x / link
--     (the reduce and the broadcast inside the node move what an allreduce of L ranks does; 0
--     for L = 1); with --flat, one ring over all N ranks, whose steps each wait for the ring's
--     edges between nodes: 2(N-1) * link_latency + 2(N-1)/N * x / min(link, bandwidth).
--     --link-latency defaults to the latency inside a node. Ranks sharing cores (--cores) scale
--     the part inside the node as above; what crosses the links is not CPU work.
--   * the reported step T_N is the median of the per-step predictions (and its compute and
--     exposed parts those of the same step). With --stragglers: a synchronised step waits for the
--     slowest rank; the compute C of a traced step is the tracing rank's own (waiting for late
--     ranks is in E, which is left out), so if every rank's compute is an independent draw from
--     the traced ones, the median of the slowest of N is their 0.5^(1/N) quantile (71st
--     percentile at 2 ranks, 84th at 4, 92nd at 8), and T_N is that quantile instead (neighbouring
--     steps interpolated). Off by default: on a shared machine the traced steps' tail is other
--     jobs' load, which hits all ranks alike rather than independently
--     (docs/internals/scaling.md).
--   * scaling efficiency (weak scaling, fixed per-rank batch as DDP) = median C / T_N, the step
--     on one rank (no communication) over the predicted one, both at the compute speed of N
--     ranks (--compute-scale, --cores): the share of the step not spent waiting for
--     communication (a slowdown from ranks sharing cores is not in it); throughput = N x that,
--     in one-rank steps.
-- Latency and bandwidth: --latency and --bandwidth where given; what is missing is fitted to the
-- trace's own allreduces (world size W >= 2): per bucket size, the 10th percentile over steps of
-- the time each allreduce ran once the previous one was done (one that did not wait for a late
-- rank), of the allreduces that ended after the last bucket was ready (an earlier end is seen
-- only at the next gradient's hook, so its span is an upper bound), then least squares on
-- d = 2(W-1) latency + 2(W-1)/W x / bandwidth. A trace of one rank has nothing to fit: give both,
-- or --calibrate OTHER.json, a trace of the same model on W >= 2 ranks, to fit them to OTHER's
-- allreduces while the compute comes from TRACE.
-- Output: one line per N, e.g.
--   ranks 4: step 15.020 ms (compute 8.900 + exposed communication 6.120; allreduce 7.620 ms per
--   step, 1.500 of it behind backward), scaling efficiency 59.3%, 2.37x one rank's throughput
-- Errors (missing or malformed file, a trace without complete steps, bad options) are one line
-- "ddp_predict: ..." on stderr and exit status 2.
local json = require 'ddplua.json'

local function die(fmt, ...)
    io.stderr:write('ddp_predict: ', fmt:format(...), '\n')
    os.exit(2)
end

local USAGE = 'usage: ddplua tools/ddp_predict.lua TRACE.json --ranks N[,N...] '
    .. '[--bandwidth GB/s] [--latency us] [--compute-scale X] [--cores C] '
    .. '[--sync-us N=us[,N=us...]] [--calibrate OTHER.json] [--stragglers] '
    .. '[--nodes M --link GB/s [--link-latency us] [--flat]]'

-- barriers of one DDP bucket's allreduce on shared memory (ddpl_shm_buffer_allreduce)
local BARRIERS_PER_ALLREDUCE = 2

---------------------------------------------------------------------------------------------------
-- command line

local function parse_args(argv)
    local o = {ranks = nil, bandwidth = nil, latency = nil}
    local keys = {ranks = true, bandwidth = true, latency = true, ['compute-scale'] = true,
        calibrate = true, cores = true, ['sync-us'] = true, nodes = true, link = true,
        ['link-latency'] = true}
    local i = 1
    while i <= #argv do
        local a = argv[i]
        local key, value = a:match('^%-%-([%w-]+)=(.*)$')
        key = key or a:match('^%-%-([%w-]+)$')
        if (key == 'stragglers' or key == 'flat') and value == nil then
            o[key] = true
        elseif key then
            if not keys[key] then die('unknown option %s\n%s', a, USAGE) end
            if value == nil then
                i = i + 1
                value = argv[i] or die('--%s needs a value\n%s', key, USAGE)
            end
            if key == 'calibrate' then
                o.calibrate = value
            elseif key == 'ranks' then
                o.ranks = {}
                for w in (value .. ','):gmatch('([^,]*),') do
                    local n = math.tointeger(tonumber(w))
                    if not n or n < 1 then
                        die("--ranks: expected positive integers (N or N,N,...), got '%s'", value)
                    end
                    o.ranks[#o.ranks + 1] = n
                end
            elseif key == 'sync-us' then
                o.sync = {}
                for w in (value .. ','):gmatch('([^,]*),') do
                    local n, us = w:match('^(%d+)=(.+)$')
                    n, us = math.tointeger(tonumber(n)), tonumber(us)
                    if not n or n < 2 or not us or us ~= us or us < 0 or us == math.huge then
                        die("--sync-us: expected N=us pairs (N >= 2 ranks, us >= 0), e.g. "
                            .. "2=5,4=180, got '%s'", value)
                    end
                    o.sync[n] = us
                end
            else
                local v = tonumber(value)
                if not v or v ~= v or v == math.huge then
                    die("--%s: expected a number, got '%s'", key, value)
                end
                if key == 'bandwidth' and v <= 0 then
                    die('--bandwidth: expected GB/s > 0, got %s', value)
                elseif key == 'latency' and v < 0 then
                    die('--latency: expected microseconds >= 0, got %s', value)
                elseif key == 'compute-scale' and v <= 0 then
                    die('--compute-scale: expected a factor > 0, got %s', value)
                elseif key == 'cores' and v <= 0 then
                    die('--cores: expected a number of cores > 0, got %s', value)
                elseif key == 'nodes' and (math.tointeger(v) or 0) < 1 then
                    die('--nodes: expected a number of machines >= 1, got %s', value)
                elseif key == 'link' and v <= 0 then
                    die('--link: expected GB/s > 0, got %s', value)
                elseif key == 'link-latency' and v < 0 then
                    die('--link-latency: expected microseconds >= 0, got %s', value)
                end
                local field = {['compute-scale'] = 'scale', ['link-latency'] = 'link_latency'}
                o[field[key] or key] = v
            end
        elseif not o.trace then
            o.trace = a
        else
            die("unexpected argument '%s' (one trace file at a time)\n%s", a, USAGE)
        end
        i = i + 1
    end
    if not o.trace then die('no trace file given\n%s', USAGE) end
    if not o.ranks then die('--ranks N is required\n%s', USAGE) end
    if o.sync and not o.cores then
        die('--sync-us needs --cores C (the synchronisation cost is that of ranks sharing cores)')
    end
    if o.nodes then
        o.nodes = math.tointeger(o.nodes)
        if not o.link then die('--nodes M needs --link GB/s (the bandwidth of a node\'s link)') end
        for _, n in ipairs(o.ranks) do
            if n > 1 and n % o.nodes ~= 0 then
                die('--ranks %d cannot spread evenly over --nodes %d (give multiples of %d)', n,
                    o.nodes, o.nodes)
            end
        end
    elseif o.link or o.link_latency or o.flat then
        die('--link, --link-latency and --flat need --nodes M')
    end
    return o
end

---------------------------------------------------------------------------------------------------
-- reading the trace

-- the q quantile of a list of numbers, interpolated linearly between neighbours (0.5: median)
local function quantile(list, q)
    local v = {}
    for i, x in ipairs(list) do v[i] = x end
    table.sort(v)
    if #v == 0 then return 0 end
    local pos = 1 + q * (#v - 1)
    local lo = math.floor(pos)
    return v[lo] + (pos - lo) * ((v[math.ceil(pos)] or v[lo]) - v[lo])
end
local function median(list) return quantile(list, 0.5) end

-- -> {world=, backend=, steps={ {step=, dur=, buckets={ {ready=, bytes=, start=, finish=} }} },
--     total=} with times in microseconds from each step's forward start
local function read_trace(path)
    local f, err = io.open(path, 'rb')
    if not f then die('cannot read the trace: %s', err) end
    local text = f:read('a')
    f:close()
    local ok, doc = pcall(json.decode, text, path)
    if not ok then die('%s is not valid JSON: %s', path, doc) end
    if type(doc) ~= 'table' or type(doc.traceEvents) ~= 'table' then
        die('%s: expected a Chrome trace object with "traceEvents" (a DDPLUA_DDP_TIMELINE file)',
            path)
    end
    local other = type(doc.otherData) == 'table' and doc.otherData or {}
    local world = math.tointeger(other.world_size)
    if not world or world < 1 then
        die('%s: "otherData" has no world_size (not a DDPLUA_DDP_TIMELINE trace, or one written '
            .. 'by a ddplua before the predictor: record it again)', path)
    end
    local steps = {}
    local function step_of(i, ev)
        local args = ev.args
        local n = type(args) == 'table' and math.tointeger(args.step)
        if not n then die('%s: event %d ("%s") has no integer args.step', path, i, ev.name) end
        steps[n] = steps[n] or {step = n, buckets = {}}
        return steps[n]
    end
    local function num(i, ev, field, v)
        if type(v) ~= 'number' or v ~= v then
            die('%s: event %d ("%s") has no number %s', path, i, ev.name, field)
        end
        return v
    end
    for i, ev in ipairs(doc.traceEvents) do
        if type(ev) ~= 'table' or type(ev.name) ~= 'string' then
            die('%s: event %d is not an object with a "name"', path, i)
        end
        local b = math.tointeger(tonumber(ev.name:match('^bucket (%d+) ready$')))
        local ab = math.tointeger(tonumber(ev.name:match('^allreduce bucket (%d+)$')))
        if ev.name == 'step' then
            local s = step_of(i, ev)
            s.t0, s.dur = num(i, ev, 'ts', ev.ts), num(i, ev, 'dur', ev.dur)
        elseif b then
            local s = step_of(i, ev)
            s.buckets[b] = s.buckets[b] or {}
            s.buckets[b].ready = num(i, ev, 'ts', ev.ts)
            s.buckets[b].bytes = num(i, ev, 'args.bytes', ev.args.bytes)
        elseif ab then
            local s = step_of(i, ev)
            s.buckets[ab] = s.buckets[ab] or {}
            s.buckets[ab].start = num(i, ev, 'ts', ev.ts)
            s.buckets[ab].finish = s.buckets[ab].start + num(i, ev, 'dur', ev.dur)
        end
    end
    -- complete steps: a "step" span, buckets 1..B each with its ready time, size and allreduce
    local numbers, total = {}, 0
    for n, s in pairs(steps) do
        total = total + 1
        local nb, complete = #s.buckets, s.dur ~= nil
        for k in pairs(s.buckets) do
            if math.type(k) ~= 'integer' or k < 1 or k > nb then complete = false end
        end
        for _, bk in ipairs(s.buckets) do
            if not (bk.ready and bk.start) then complete = false end
        end
        if complete and nb > 0 then numbers[#numbers + 1] = n end
    end
    table.sort(numbers)
    if #numbers > 1 then table.remove(numbers, 1) end -- warm-up: before the bucket rebuild
    if #numbers == 0 then
        die('%s: no complete step (%d traced): a step is complete once the next forward has '
            .. 'started; run at least 2 synchronised steps', path, total)
    end
    local out = {}
    for i, n in ipairs(numbers) do
        local s = steps[n]
        for _, bk in ipairs(s.buckets) do -- relative to the step's forward start
            bk.ready, bk.start, bk.finish = bk.ready - s.t0, bk.start - s.t0, bk.finish - s.t0
        end
        out[i] = s
    end
    return {world = world, backend = tostring(other.backend or '?'), steps = out, total = total}
end

---------------------------------------------------------------------------------------------------
-- the model

local function last_ready(s)
    local r = -math.huge
    for _, bk in ipairs(s.buckets) do r = math.max(r, bk.ready) end
    return r
end

-- measured: exposed communication E (us) and the compute C = step - E
local function measured(s)
    local finish = -math.huge
    for _, bk in ipairs(s.buckets) do finish = math.max(finish, bk.finish) end
    local exposed = math.max(0, finish - last_ready(s))
    return s.dur - exposed, exposed
end

-- Fits what the options leave open to trace's allreduces: {latency = us, bandwidth = bytes/us},
-- and how.
local function calibrate(trace, o, path)
    local W = trace.world
    local lat, bw = o.latency, o.bandwidth and o.bandwidth * 1e3 -- GB/s = 1e3 bytes/us
    local how = {latency = lat and '--latency', bandwidth = bw and '--bandwidth'}
    if lat and bw then return {latency = lat, bandwidth = bw, how = how, world = 1} end
    if W < 2 then
        die('%s was recorded on 1 rank: it has no allreduce times to fit; give --bandwidth GB/s '
            .. 'and --latency us (or --calibrate a trace of 2 or more ranks)', path)
    end
    -- per bucket size: the 10th percentile over steps of the time each allreduce ran once the
    -- previous one was done (it queues behind it otherwise): the allreduce that did not wait for a
    -- late rank (stragglers are modelled apart). Only allreduces that ended after the step's last
    -- bucket was ready count: the reducer notices an earlier completion only at the next
    -- gradient's hook (its span is an upper bound), while after the last one the final wait sees
    -- it at once.
    local by_size, used, left_out = {}, 0, 0
    for _, s in ipairs(trace.steps) do
        local prev, last = -math.huge, last_ready(s)
        for _, bk in ipairs(s.buckets) do
            if bk.finish >= last then
                local d = math.max(0, bk.finish - math.max(bk.start, prev))
                by_size[bk.bytes] = by_size[bk.bytes] or {}
                table.insert(by_size[bk.bytes], d)
                used = used + 1
            else
                left_out = left_out + 1
            end
            prev = bk.finish
        end
    end
    local xs, ds = {}, {}
    for x, list in pairs(by_size) do
        xs[#xs + 1], ds[#ds + 1] = x, quantile(list, 0.1)
    end
    -- d = A + B x, A = 2(W-1) latency, B = 2(W-1)/W / bandwidth
    local ka, kb = 2 * (W - 1), 2 * (W - 1) / W
    local A, B
    local n = #xs
    if n == 0 then die('%s: no allreduce ended after the last bucket was ready: nothing to fit', path) end
    local function fit_b(a) -- B for a fixed A, least squares, at least 0
        local sxd, sxx = 0, 0
        for i = 1, n do sxd, sxx = sxd + xs[i] * (ds[i] - a), sxx + xs[i] * xs[i] end
        return sxx > 0 and math.max(0, sxd / sxx) or 0
    end
    local function fit_a(b) -- A for a fixed B, mean, at least 0
        local s = 0
        for i = 1, n do s = s + ds[i] - b * xs[i] end
        return math.max(0, s / n)
    end
    if lat then
        A = ka * lat
        B = fit_b(A)
        how.bandwidth = 'fitted to the trace'
    elseif bw then
        B = kb / bw
        A = fit_a(B)
        how.latency = 'fitted to the trace'
    elseif n >= 2 then
        local mx, md = 0, 0
        for i = 1, n do mx, md = mx + xs[i] / n, md + ds[i] / n end
        local sxx, sxd = 0, 0
        for i = 1, n do
            sxx, sxd = sxx + (xs[i] - mx) ^ 2, sxd + (xs[i] - mx) * (ds[i] - md)
        end
        B = sxx > 0 and sxd / sxx or 0
        A = md - B * mx
        if A < 0 then A, B = 0, fit_b(0) end
        if B < 0 then B, A = 0, fit_a(0) end
        how.latency, how.bandwidth = 'fitted to the trace', 'fitted to the trace'
    else
        A, B = 0, fit_b(0)
        how.latency = 'taken as 0: the trace has one bucket size, which cannot separate latency '
            .. 'from bandwidth (give --latency)'
        how.bandwidth = 'fitted to the trace'
    end
    how.used = ('%d allreduces fitted, %d left out (ended while backward still ran)'):format(used,
        left_out)
    return {latency = A / ka, bandwidth = B > 0 and kb / B or math.huge, how = how, world = W}
end

-- The oversubscription terms at N ranks (see the header): {compute = factor of compute and
-- ready times, reduction = factor of the bandwidth term, sync = us added per allreduce}.
local function sharing(o, trace, cal, N)
    local function over(n) return o.cores and math.max(1, n / o.cores) or 1 end
    local t = {compute = o.scale or over(N) / over(trace.world),
        reduction = over(N) / over(cal.world), sync = 0}
    if o.sync and N > 1 then
        local function s(n)
            if n == 1 then return 0 end
            return o.sync[n] or die('--sync-us has no figure for %d ranks '
                .. '(bench/ddp_sync_probe.lua --ranks %d measures it)', n, n)
        end
        t.sync_n, t.sync_w = s(N), s(cal.world)
        t.sync = BARRIERS_PER_ALLREDUCE * math.max(0, t.sync_n - t.sync_w)
    end
    return t
end

-- cost of one allreduce of x bytes on N ranks of one machine, us
local function cost_one_machine(cal, N, x, share)
    if N == 1 then return 0 end
    return 2 * (N - 1) * cal.latency + share.reduction * 2 * (N - 1) / N * x / cal.bandwidth
        + share.sync
end

-- cost of one allreduce of x bytes on N ranks (spread over o.nodes machines when given), us
local function cost(cal, N, x, share, o)
    local M = o.nodes or 1
    if M == 1 or N == 1 then return cost_one_machine(cal, N, x, share) end
    local link, link_lat = o.link * 1e3, o.link_latency or cal.latency -- bytes/us, us
    if o.flat then
        return 2 * (N - 1) * link_lat + 2 * (N - 1) / N * x / math.min(link, cal.bandwidth)
    end
    local L = N // M
    return cost_one_machine(cal, L, x, share) + 2 * (M - 1) * link_lat + 2 * (M - 1) / M * x / link
end

-- one step at N ranks: predicted step, compute, exposed, communication total (us)
local function predict_step(s, cal, N, share, o)
    local compute, scale = measured(s), share.compute
    local finish, comm = -math.huge, 0
    for _, bk in ipairs(s.buckets) do
        local c = cost(cal, N, bk.bytes, share, o)
        finish = math.max(scale * bk.ready, finish) + c
        comm = comm + c
    end
    local exposed = math.max(0, finish - scale * last_ready(s))
    return scale * compute + exposed, scale * compute, exposed, comm
end

---------------------------------------------------------------------------------------------------
-- main

local o = parse_args(arg)
local trace = read_trace(o.trace)
local cal_path = o.calibrate or o.trace
local cal = calibrate(o.calibrate and read_trace(o.calibrate) or trace, o, cal_path)
if o.calibrate then
    for _, k in ipairs({'latency', 'bandwidth'}) do
        cal.how[k] = cal.how[k]:gsub('fitted to the trace', 'fitted to ' .. cal_path)
    end
end

local shares = {} -- before any output: a missing --sync-us figure is an error of its own
for i, N in ipairs(o.ranks) do shares[i] = sharing(o, trace, cal, N) end

local sizes = {}
for b, bk in ipairs(trace.steps[#trace.steps].buckets) do sizes[b] = ('%d'):format(bk.bytes) end
local m_step, m_compute, m_exposed = {}, {}, {}
for i, s in ipairs(trace.steps) do
    m_step[i] = s.dur
    m_compute[i], m_exposed[i] = measured(s)
end
local function ms(us) return us / 1e3 end
print(('%s: world size %d (%s), %d of %d traced steps used (the first is warm-up), %d bucket%s '
    .. '(bytes: %s)'):format(o.trace, trace.world, trace.backend, #trace.steps, trace.total,
    #sizes, #sizes == 1 and '' or 's', table.concat(sizes, ', ')))
print(('measured, median per step: step %.3f ms, compute %.3f ms, exposed communication %.3f ms')
    :format(ms(median(m_step)), ms(median(m_compute)), ms(median(m_exposed))))
print(('allreduce of x bytes on N ranks = 2(N-1) x %.3g us + 2(N-1)/N x x / %.4g GB/s '
    .. '(latency: %s; bandwidth: %s)'):format(cal.latency, cal.bandwidth / 1e3, cal.how.latency,
    cal.how.bandwidth))
if cal.how.used then print(cal.how.used) end
if o.scale and o.scale ~= 1 then
    print(('compute and ready times x %g (--compute-scale)'):format(o.scale))
end
if o.nodes then
    print(('%d machines (--nodes), each link %g GB/s, latency %g us: %s'):format(o.nodes, o.link,
        o.link_latency or cal.latency, o.flat and 'one flat ring over all ranks (--flat)'
        or 'hierarchical (inside each node, then a ring of one leader per node)'))
end
for k, N in ipairs(o.ranks) do
    local share = shares[k]
    if o.cores and (share.compute ~= 1 or share.reduction ~= 1 or share.sync ~= 0) then
        local sync = share.sync_n and (', + %d barriers x (%g - %g) us per allreduce (--sync-us)')
            :format(BARRIERS_PER_ALLREDUCE, share.sync_n, share.sync_w) or ''
        print(('ranks %d on %g cores: compute x %g%s, bandwidth term x %g%s'):format(N, o.cores,
            share.compute, o.scale and ' (--compute-scale)' or '', share.reduction, sync))
    end
    local rows, one = {}, {}
    for i, s in ipairs(trace.steps) do
        local r = {}
        r.t, r.c, r.e, r.comm = predict_step(s, cal, N, share, o)
        rows[i], one[i] = r, share.compute * measured(s)
    end
    -- the median step, or with --stragglers the 0.5^(1/N) quantile (see the header)
    local q = o.stragglers and 0.5 ^ (1 / N) or 0.5
    table.sort(rows, function(a, b) return a.t < b.t end)
    local pos = 1 + q * (#rows - 1)
    local lo, hi = rows[math.floor(pos)], rows[math.ceil(pos)]
    local w = pos - math.floor(pos)
    local function at(k) return lo[k] + w * (hi[k] - lo[k]) end
    local T, C, E, K = at('t'), at('c'), at('e'), at('comm')
    local eff = median(one) / T
    print(('ranks %d: step %.3f ms (compute %.3f + exposed communication %.3f; allreduce %.3f ms '
        .. 'per step, %.3f of it behind backward), scaling efficiency %.1f%%, %.2fx one rank\'s '
        .. 'throughput'):format(N, ms(T), ms(C), ms(E), ms(K), ms(math.max(0, K - E)), 100 * eff,
        N * eff))
end
