-- spec/tools/ddp_predict_spec.lua: tools/ddp_predict.lua on small synthetic DDPLUA_DDP_TIMELINE
-- traces (the format lua/ddplua/nn/parallel/ddp_timeline.lua writes): the predicted step times and
-- efficiencies against hand computations of the model in the tool's header, with given and with
-- fitted latency and bandwidth, the warm-up and incomplete steps left out, ranks sharing cores
-- (--cores, --sync-us); and bad input (missing file, malformed JSON, not a DDP trace, no complete
-- step, --ranks 0, a 1-rank trace without --bandwidth/--latency, --sync-us without --cores or
-- without a figure it needs) failing with one clear line and exit status 2.
-- Behaviour only: whether the model predicts real steps well is a benchmark
-- (docs/internals/scaling.md).
local S = require 'shell_util'
local tool = S.src .. '/tools/ddp_predict.lua'

-- Runs the tool; returns stdout, stderr and the exit status.
local function predict(args)
    local err = os.tmpname()
    local p = assert(io.popen(('timeout 60 %s %s %s 2>%s'):format(S.q(S.bin), S.q(tool), args,
        S.q(err))))
    local out = p:read('a')
    local _, _, code = p:close()
    local errtext = S.slurp(err)
    os.remove(err)
    return out, errtext, code
end

-- A trace of `world` ranks: steps = { {t0, dur or nil, buckets = { {ready, bytes, start, dur} }} }
-- (absolute microseconds), as the timeline writes them.
local function trace(world, steps)
    local ev = {}
    for n, s in ipairs(steps) do
        if s.dur then
            ev[#ev + 1] = ('{"name":"step","ph":"X","pid":0,"tid":0,"ts":%.1f,"dur":%.1f,'
                .. '"args":{"step":%d}}'):format(s.t0, s.dur, n)
        end
        ev[#ev + 1] = ('{"name":"forward","ph":"X","pid":0,"tid":0,"ts":%.1f,"dur":100.0,'
            .. '"args":{"step":%d}}'):format(s.t0, n)
        for b, bk in ipairs(s.buckets) do
            ev[#ev + 1] = ('{"name":"bucket %d ready","ph":"i","s":"t","pid":0,"tid":0,'
                .. '"ts":%.1f,"args":{"step":%d,"copied_bytes":0,"bytes":%d}}'):format(b,
                s.t0 + bk[1], n, bk[2])
            ev[#ev + 1] = ('{"name":"allreduce bucket %d","ph":"X","pid":0,"tid":%d,"ts":%.1f,'
                .. '"dur":%.1f,"args":{"step":%d}}'):format(b, b, s.t0 + bk[3], bk[4], n)
        end
    end
    local path = os.tmpname()
    S.write(path, ('{"otherData":{"world_size":%d,"backend":"gloo"},\n"traceEvents":[\n%s\n]}\n')
        :format(world, table.concat(ev, ',\n')))
    return path
end

-- Two identical steps of 10 ms after a slow warm-up step, and a last step without its "step"
-- span (the run ended): bucket 1 (4e6 bytes) ready at 7.5 ms, its allreduce 7.5-9.5 ms; bucket 2
-- (1e6 bytes) ready at 9 ms, launched then, its allreduce queued behind bucket 1's: 9.5-10.1 ms.
-- Measured: exposed communication 1.1 ms, compute 8.9 ms.
local function standard_trace()
    local step = {{7500, 4000000, 7500, 2000}, {9000, 1000000, 9000, 1100}}
    return trace(2, {
        {t0 = 0, dur = 50000, buckets = {{1000, 4000000, 1000, 30000}, {2000, 1000000, 31000, 100}}},
        {t0 = 50000, dur = 10000, buckets = step},
        {t0 = 60000, dur = 10000, buckets = step},
        {t0 = 70000, buckets = step},
    })
end

-- Runs the tool on a fresh standard trace; returns its output (exit status 0 asserted).
local function predict_standard(args)
    local path = standard_trace()
    local out, err, code = predict(S.q(path) .. ' ' .. args)
    os.remove(path)
    assert.are.equal(0, code, err)
    return out
end

local function line_for(out, n)
    local step, compute, exposed, comm, eff = out:match(('ranks %d: step ([%%d.]+) ms %%(compute '
        .. '([%%d.]+) %%+ exposed communication ([%%d.]+); allreduce ([%%d.]+) ms per step.-'
        .. 'scaling efficiency ([%%d.]+)%%%%'):format(n))
    assert(step, ('no prediction for %d ranks in:\n%s'):format(n, out))
    return tonumber(step), tonumber(compute), tonumber(exposed), tonumber(comm), tonumber(eff)
end

describe('tools/ddp_predict.lua', function()
    it('predicts with the given bandwidth and latency (hand computation)', function()
        local path = standard_trace()
        local out, err, code = predict(S.q(path) .. ' --ranks 4,1 --bandwidth 1 --latency 10')
        os.remove(path)
        assert.are.equal(0, code, err)
        assert.truthy(out:find('world size 2 (gloo), 2 of 4 traced steps used', 1, true), out)
        assert.truthy(out:find('step 10.000 ms, compute 8.900 ms, exposed communication 1.100 ms',
            1, true), out)
        -- 4 ranks, 1 GB/s = 1000 bytes/us: cost(4e6) = 6 x 10 + 1.5 x 4000 = 6060 us, cost(1e6)
        -- = 60 + 1500 = 1560 us; bucket 1 runs 7500-13560, bucket 2 13560-15120: exposed
        -- 15120 - 9000 = 6120 us; step 8900 + 6120 = 15020 us; efficiency 8900 / 15020
        local step, compute, exposed, comm, eff = line_for(out, 4)
        assert.are.same({15.020, 8.900, 6.120, 7.620, 59.3}, {step, compute, exposed, comm, eff})
        -- 1 rank: no communication, efficiency 100%
        step, compute, exposed, comm, eff = line_for(out, 1)
        assert.are.same({8.900, 8.900, 0, 0, 100.0}, {step, compute, exposed, comm, eff})
    end)

    it('--nodes and --link: the hierarchical allreduce across machines, and --flat (hand '
        .. 'computation)', function()
        local path = standard_trace()
        local args = ' --ranks 4,1 --bandwidth 1 --latency 10 --nodes 2 --link 0.1 --link-latency 50'
        local out, err, code = predict(S.q(path) .. args)
        local flat_out, flat_err, flat_code = predict(S.q(path) .. args .. ' --flat')
        os.remove(path)
        assert.are.equal(0, code, err)
        assert.are.equal(0, flat_code, flat_err)
        assert.truthy(out:find('2 machines (--nodes), each link 0.1 GB/s, latency 50 us: '
            .. 'hierarchical', 1, true), out)
        -- 4 ranks on 2 nodes (2 each): inside a node cost_2(x) = 2 x 10 + x / 1000; across,
        -- 2 x 50 + x / 100. Bucket 1 (4e6): 4020 + 40100 = 44120 us, 7500-51620; bucket 2
        -- (1e6): 1020 + 10100 = 11120 us, 51620-62740; exposed 62740 - 9000 = 53740 us
        local step, compute, exposed, comm, eff = line_for(out, 4)
        assert.are.same({62.640, 8.900, 53.740, 55.240, 14.2}, {step, compute, exposed, comm, eff})
        step = line_for(out, 1)
        assert.are.equal(8.900, step)
        -- flat ring of 4 over 0.1 GB/s links: 6 x 50 + 1.5 x / 100: 60300 and 15300 us
        assert.truthy(flat_out:find('one flat ring over all ranks (--flat)', 1, true), flat_out)
        step, compute, exposed, comm, eff = line_for(flat_out, 4)
        assert.are.same({83.000, 8.900, 74.100, 75.600, 10.7}, {step, compute, exposed, comm, eff})
    end)

    it('fits latency and bandwidth to the trace, reproducing its own steps', function()
        local path = standard_trace()
        local out, err, code = predict(S.q(path) .. ' --ranks 2,4')
        os.remove(path)
        assert.are.equal(0, code, err)
        -- bucket 2 ran 600 us once bucket 1 was done (10.1 - 9.5 ms)
        -- through (4e6 bytes, 2000 us) and (1e6, 600): d = 133.33 + 4.6667e-4 x; on 2 ranks
        -- A = 2 latency and B = 1 / bandwidth: latency 66.7 us, bandwidth 2.143 GB/s
        assert.truthy(out:find('2(N-1) x 66.7 us + 2(N-1)/N x x / 2.143 GB/s', 1, true), out)
        -- 2 ranks: the measured 10 ms
        assert.are.equal(10.0, (line_for(out, 2)))
        -- 4 ranks: cost(4e6) = 6 x 66.67 + 1.5 x 1866.67 = 3200, cost(1e6) = 400 + 700 = 1100;
        -- bucket 1 7500-10700, bucket 2 10700-11800: exposed 2800; step 8900 + 2800 = 11700 us
        local step, compute, exposed, comm, eff = line_for(out, 4)
        assert.are.same({11.700, 8.900, 2.800, 4.300, 76.1}, {step, compute, exposed, comm, eff})
    end)

    it('--stragglers takes the 0.5^(1/N) quantile of the steps: N ranks wait for the slowest',
        function()
        -- one rank, 5 steps after the warm-up of 1-5 ms (in this order: 4, 1, 5, 2, 3), one
        -- bucket whose allreduce costs a nanosecond at 1000 GB/s
        local steps = {{t0 = 0, dur = 9000, buckets = {{500, 1000, 500, 0}}}}
        local t0 = 9000
        for _, d in ipairs({4000, 1000, 5000, 2000, 3000}) do
            steps[#steps + 1] = {t0 = t0, dur = d, buckets = {{500, 1000, 500, 0}}}
            t0 = t0 + d
        end
        local path = trace(1, steps)
        local out, err, code = predict(S.q(path)
            .. ' --ranks 1,2,4 --bandwidth 1000 --latency 0 --stragglers')
        assert.are.equal(0, code, err)
        -- 1 rank: the median, 3 ms; 2 ranks: quantile 0.7071 -> position 1 + 0.7071 x 4 = 3.83
        -- of the sorted steps: 3.828 ms; 4 ranks: 0.8409 -> 4.364: 4.364 ms, efficiency 3 / 4.3636 = 68.75%
        assert.are.equal(3.0, (line_for(out, 1)))
        assert.are.equal(3.828, (line_for(out, 2)))
        local step, _, _, _, eff = line_for(out, 4)
        assert.are.same({4.364, 68.8}, {step, eff})
        -- without --stragglers: the median step (3 ms) at every N
        out, err, code = predict(S.q(path) .. ' --ranks 4 --bandwidth 1000 --latency 0')
        os.remove(path)
        assert.are.equal(0, code, err)
        assert.are.equal(3.0, (line_for(out, 4)))
    end)

    it('--compute-scale stretches compute and ready times', function()
        local path = standard_trace()
        local out, err, code = predict(S.q(path)
            .. ' --ranks 4 --bandwidth 1 --latency 10 --compute-scale 2')
        os.remove(path)
        assert.are.equal(0, code, err)
        -- ready at 15000 and 18000: bucket 1 15000-21060, bucket 2 21060-22620: exposed 4620;
        -- step 17800 + 4620 = 22420 us; efficiency against one rank at the same speed:
        -- 17800 / 22420
        local step, compute, exposed, _, eff = line_for(out, 4)
        assert.are.same({22.420, 17.800, 4.620, 79.4}, {step, compute, exposed, eff})
    end)

    it('--cores and --sync-us: ranks that share cores (oversubscription terms)', function()
        local out = predict_standard('--ranks 2,4 --cores 2 --sync-us 2=5,4=105')
        -- 2 ranks on 2 cores: nothing shared, the measured 10 ms, and no line about sharing
        assert.are.equal(10.0, (line_for(out, 2)))
        assert.falsy(out:find('ranks 2 on', 1, true), out)
        -- 4 ranks on 2 cores against the 2-rank trace: o = 2 / 1, so compute and ready times
        -- x 2, the bandwidth term x 2, and each allreduce + 2 barriers x (105 - 5) us
        assert.truthy(out:find('ranks 4 on 2 cores: compute x 2, bandwidth term x 2, + 2 barriers '
            .. 'x (105 - 5) us per allreduce (--sync-us)', 1, true), out)
        -- fitted latency 66.67 us, 1 / bandwidth 4.6667e-4 us per byte (the fit test above):
        -- cost(4e6) = 6 x 66.67 + 2 x 1.5 x 4e6 x 4.6667e-4 + 200 = 400 + 5600 + 200 = 6200,
        -- cost(1e6) = 400 + 2 x 1.5 x 466.67 + 200 = 2000; ready at 15000 and 18000: bucket 1
        -- 15000-21200, bucket 2 21200-23200: exposed 5200; step 17800 + 5200 = 23000 us;
        -- efficiency 17800 / 23000
        local step, compute, exposed, comm, eff = line_for(out, 4)
        assert.are.same({23.000, 17.800, 5.200, 8.200, 77.4}, {step, compute, exposed, comm, eff})
        -- --compute-scale overrides the compute factor of --cores; the communication terms stay
        out = predict_standard('--ranks 4 --cores 2 --sync-us 2=5,4=105 --compute-scale 1')
        assert.truthy(out:find('ranks 4 on 2 cores: compute x 1 (--compute-scale), bandwidth term '
            .. 'x 2', 1, true), out)
        -- bucket 1 7500-13700, bucket 2 13700-15700: exposed 6700; step 8900 + 6700
        step, compute, exposed = line_for(out, 4)
        assert.are.same({15.600, 8.900, 6.700}, {step, compute, exposed})
    end)

    it('--sync-us against given latency and bandwidth adds s(N) whole (s(1) = 0)', function()
        local out = predict_standard('--ranks 4 --bandwidth 1 --latency 10 --cores 4 --sync-us 4=30')
        -- 4 ranks on 4 cores: no stretch, + 2 x 30 us per allreduce: cost(4e6) = 6060 + 60,
        -- cost(1e6) = 1560 + 60: bucket 1 7500-13620, bucket 2 13620-15240: exposed 6240
        assert.truthy(out:find('ranks 4 on 4 cores: compute x 1, bandwidth term x 1, + 2 barriers '
            .. 'x (30 - 0) us per allreduce', 1, true), out)
        local step, _, exposed = line_for(out, 4)
        assert.are.same({15.140, 6.240}, {step, exposed})
    end)

    it('fits only allreduces that ended after the last bucket was ready', function()
        -- bucket 1's allreduce ends (as seen) at 6 ms, before bucket 2 is ready at 9 ms: its span
        -- is an upper bound and stays out of the fit, which has one size left (1e6 bytes, 600 us)
        local step = {{1000, 4000000, 1000, 5000}, {9000, 1000000, 9000, 600}}
        local path = trace(2, {{t0 = 0, dur = 10000, buckets = step},
            {t0 = 10000, dur = 10000, buckets = step}, {t0 = 20000, dur = 10000, buckets = step}})
        local out, err, code = predict(S.q(path) .. ' --ranks 2')
        os.remove(path)
        assert.are.equal(0, code, err)
        assert.truthy(out:find('2(N-1) x 0 us + 2(N-1)/N x x / 1.667 GB/s (latency: taken as 0: '
            .. 'the trace has one bucket size', 1, true), out)
        assert.truthy(out:find('2 allreduces fitted, 2 left out (ended while backward still ran)',
            1, true), out)
    end)

    it('fits the latency alone when the bandwidth is given', function()
        local path = standard_trace()
        local out, err, code = predict(S.q(path) .. ' --ranks 2 --bandwidth 2')
        os.remove(path)
        assert.are.equal(0, code, err)
        -- B = 1 / 2000 us per byte: A = mean(2000 - 2000, 600 - 500) = 50 us, latency 25 us
        assert.truthy(out:find('2(N-1) x 25 us + 2(N-1)/N x x / 2 GB/s (latency: fitted to the '
            .. 'trace; bandwidth: --bandwidth)', 1, true), out)
    end)

    it('--calibrate fits latency and bandwidth to another trace, compute from this one',
        function()
            -- one rank: the same buckets ready at the same times, allreduces that cost nothing
            local step = {{7500, 4000000, 7500, 0}, {9000, 1000000, 9000, 0}}
            local one = trace(1, {{t0 = 0, dur = 30000, buckets = step},
                {t0 = 30000, dur = 10000, buckets = step}, {t0 = 40000, dur = 10000, buckets = step}})
            local two = standard_trace()
            local out, err, code = predict(S.q(one) .. ' --ranks 4 --calibrate ' .. S.q(two))
            assert.are.equal(0, code, err)
            assert.truthy(out:find('world size 1 (gloo), 2 of 3 traced steps used', 1, true), out)
            assert.truthy(out:find('x 66.7 us + 2(N-1)/N x x / 2.143 GB/s (latency: fitted to '
                .. two, 1, true), out)
            -- compute 10 ms; bucket 1 7500-10700, bucket 2 10700-11800: exposed 2800 us
            local step_ms, compute, exposed, _, eff = line_for(out, 4)
            assert.are.same({12.800, 10.000, 2.800, 78.1}, {step_ms, compute, exposed, eff})
            -- a 1-rank trace cannot calibrate
            out, err, code = predict(S.q(two) .. ' --ranks 4 --calibrate ' .. S.q(one))
            assert.are.equal(2, code, out)
            assert.truthy(err:find(one .. ' was recorded on 1 rank', 1, true), err)
            os.remove(one)
            os.remove(two)
        end)

    describe('bad input gets one clear line and status 2', function()
        local function fails(args, pattern)
            local out, err, code = predict(args)
            assert.are.equal(2, code, out .. err)
            assert.truthy(err:find(pattern), err)
            assert.are.equal('', out)
        end
        it('a missing file', function()
            fails('/nonexistent/trace.json --ranks 2',
                '^ddp_predict: cannot read the trace: /nonexistent/trace.json: No such file')
        end)
        it('malformed JSON, with line and column', function()
            local path = os.tmpname()
            S.write(path, '{"traceEvents":[\n{"name":"step",}\n]}')
            fails(S.q(path) .. ' --ranks 2', 'is not valid JSON: .*line 2, column 16: expected '
                .. 'a string key in an object')
            os.remove(path)
        end)
        it('JSON that is not a DDP trace', function()
            local path = os.tmpname()
            S.write(path, '[1, 2]')
            fails(S.q(path) .. ' --ranks 2', 'expected a Chrome trace object with "traceEvents"')
            S.write(path, '{"traceEvents":[]}')
            fails(S.q(path) .. ' --ranks 2', '"otherData" has no world_size')
            os.remove(path)
        end)
        it('a trace without a complete step', function()
            local path = trace(2, {{t0 = 0, buckets = {{10, 100, 10, 5}}}})
            fails(S.q(path) .. ' --ranks 2', 'no complete step %(1 traced%)')
            os.remove(path)
        end)
        it('--ranks 0, a missing --ranks, bad numbers and unknown options', function()
            local path = standard_trace()
            fails(S.q(path) .. ' --ranks 0', "%-%-ranks: expected positive integers %(N or "
                .. "N,N,...%), got '0'")
            fails(S.q(path) .. ' --ranks 2,x', "got '2,x'")
            fails(S.q(path), '%-%-ranks N is required')
            fails(S.q(path) .. ' --ranks 2 --bandwidth 0', '%-%-bandwidth: expected GB/s > 0')
            fails(S.q(path) .. ' --ranks 2 --latency fast', "%-%-latency: expected a number, "
                .. "got 'fast'")
            fails(S.q(path) .. ' --ranks 2 --hosts 3', 'unknown option %-%-hosts')
            fails(S.q(path) .. ' --ranks 4 --nodes 2', '%-%-nodes M needs %-%-link GB/s')
            fails(S.q(path) .. ' --ranks 3 --nodes 2 --link 1', '%-%-ranks 3 cannot spread evenly '
                .. 'over %-%-nodes 2')
            fails(S.q(path) .. ' --ranks 4 --flat', '%-%-flat need %-%-nodes M')
            fails(S.q(path) .. ' --ranks 4 --nodes 0 --link 1', '%-%-nodes: expected a number of '
                .. 'machines >= 1')
            fails(S.q(path) .. ' --ranks 4 --nodes 2 --link 0', '%-%-link: expected GB/s > 0')
            fails(S.q(path) .. ' --ranks 2 --cores 0', '%-%-cores: expected a number of cores > 0')
            fails(S.q(path) .. ' --ranks 4 --sync-us 4=100', '%-%-sync%-us needs %-%-cores C')
            fails(S.q(path) .. ' --ranks 4 --cores 2 --sync-us 4=100', '%-%-sync%-us has no '
                .. 'figure for 2 ranks %(bench/ddp_sync_probe.lua %-%-ranks 2 measures it%)')
            fails(S.q(path) .. ' --ranks 4 --cores 2 --sync-us 2=1', 'no figure for 4 ranks')
            for _, bad in ipairs({'4', '1=3', '4=-1', '4=x', '2=1,,4=2'}) do
                fails(S.q(path) .. ' --ranks 4 --cores 2 --sync-us ' .. bad, "%-%-sync%-us: "
                    .. 'expected N=us pairs %(N >= 2 ranks, us >= 0%), e.g. 2=5,4=180, got')
            end
            fails('--ranks 2', 'no trace file given')
            os.remove(path)
        end)
        it('a 1-rank trace needs --bandwidth and --latency', function()
            local path = trace(1, {{t0 = 0, dur = 100, buckets = {{50, 100, 50, 1}}},
                {t0 = 100, dur = 100, buckets = {{50, 100, 50, 1}}}})
            fails(S.q(path) .. ' --ranks 2 --latency 5', 'was recorded on 1 rank: it has no '
                .. 'allreduce times to fit; give %-%-bandwidth GB/s and %-%-latency us')
            os.remove(path)
        end)
    end)
end)
