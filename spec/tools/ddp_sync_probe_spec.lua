-- spec/tools/ddp_sync_probe_spec.lua: bench/ddp_sync_probe.lua, the barrier-cost probe whose output
-- feeds tools/ddp_predict.lua's --sync-us: a short real run on 2 ranks prints its figures and
-- an option line the predictor accepts; bad arguments fail with one line and status 2. Only the
-- form is checked: the figures are timings of a shared machine.
local S = require 'shell_util'
local probe = S.src .. '/bench/ddp_sync_probe.lua'

local function run(args)
    return S.sh(('timeout 120 %s %s %s'):format(S.q(S.bin), S.q(probe), args))
end

describe('bench/ddp_sync_probe.lua', function()
    it('measures 2 ranks and prints the --sync-us option for the predictor', function()
        local out, code = run('--ranks 2 --cores 2 --work-us 50 --iters 40 --repeats 1')
        assert.are.equal(0, code, out)
        local w = tonumber(out:match('work unit ([%d.]+) us alone %(%d+ loop iterations%), 2 '
            .. 'cores, 40 iterations per run, 1 run per rank count'))
        assert.truthy(w and w > 0, out)
        local t, work, s = out:match('\n2 ranks: ([%d.]+) us per iteration, ([%d.]+) of it work '
            .. '%(1 x [%d.]+%): (%-?[%d.]+) us per barrier\n')
        assert.truthy(t, out)
        -- s = (t - work) / 2, to the printed precision
        assert.is_true(math.abs((tonumber(t) - tonumber(work)) / 2 - tonumber(s)) <= 0.1, out)
        local opt = out:match('\n(%-%-sync%-us [^\n]*)\n$')
        assert.truthy(opt and opt:match('^%-%-sync%-us 2=[%d.]+$'), out)
        -- what it prints is what the predictor takes
        local trace = os.tmpname()
        S.write(trace, '{"otherData":{"world_size":1,"backend":"gloo"},"traceEvents":['
            .. '{"name":"step","ph":"X","ts":0,"dur":100,"args":{"step":1}},'
            .. '{"name":"bucket 1 ready","ph":"i","ts":50,"args":{"step":1,"bytes":100}},'
            .. '{"name":"allreduce bucket 1","ph":"X","ts":50,"dur":1,"args":{"step":1}}]}')
        local pout, pcode = S.sh(('%s %s %s --ranks 2 --bandwidth 1 --latency 0 --cores 2 %s')
            :format(S.q(S.bin), S.q(S.src .. '/tools/ddp_predict.lua'), S.q(trace), opt))
        os.remove(trace)
        assert.are.equal(0, pcode, pout)
    end)

    it('rejects bad arguments with one line and status 2', function()
        local function fails(args, pattern)
            local out, code = run(args)
            assert.are.equal(2, code, out)
            assert.truthy(out:find(pattern), out)
        end
        fails('', '^ddp_sync_probe: %-%-ranks N is required')
        fails('--ranks 1', "^ddp_sync_probe: %-%-ranks: expected integers of 2 or more")
        fails('--ranks 2 --iters 5', '^ddp_sync_probe: %-%-iters: expected at least 20, got 5')
        fails('--ranks 2 --cores -1', "^ddp_sync_probe: %-%-cores: expected an integer of 0 or "
            .. "more, got '%-1'")
        fails('--ranks 2 --iters x', '^ddp_sync_probe: %-%-iters needs a number')
        fails('--ranks 2 --repeats 0', "^ddp_sync_probe: %-%-repeats: expected an integer of 1 "
            .. "or more, got '0'")
        fails('--ranks 2 --work-us', '^ddp_sync_probe: %-%-work%-us needs a value')
        fails('--ranks 2 --fast', '^ddp_sync_probe: unknown argument %-%-fast')
    end)
end)
