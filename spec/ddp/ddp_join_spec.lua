-- spec/ddp/ddp_join_spec.lua: DistributedDataParallel's join (ranks with different numbers of
-- batches) and static_graph on real processes (`ddplua spec/ddp/workers/join.lua --nproc N`, every
-- run under `timeout`): after join every rank holds the parameters and buffers of the
-- single-process computation of the same steps (each step's global batch is the union of the
-- batches of the ranks not yet joined, divided by the initial world size or by the number of those
-- ranks), on 2, 3 and 4 ranks, with no_sync, find_unused_parameters, comm hooks,
-- gradient_as_bucket_view, one bucket per parameter, Gloo's TCP path, eval forwards and several
-- epochs; static_graph trains as the reference with one graph walk in all; without join the uneven
-- loop fails on every rank naming both calls. The checks run inside the ranks
-- (spec/ddp/workers/join.lua); here we start them and read what they print.
local S = require 'shell_util'
local src = S.src
local script = src .. '/spec/ddp/workers/join.lua'

local function launch(n, args, env) return S.launch(script, n, args, env, 90) end

-- Expects exit status 0 and one `marker` line from each of the n ranks; returns the output and
-- the graph walks each rank reported (walks[rank + 1]).
local function run_ok(n, args, env, marker)
    marker = marker or 'JOIN_OK'
    local out, code = launch(n, args, env)
    assert(code == 0, out)
    local walks, seen = {}, 0
    for r, w in out:gmatch(marker .. ' rank=(%d+)[^\n]-walks=(%d+)') do
        walks[tonumber(r) + 1] = tonumber(w)
    end
    seen = select(2, out:gsub(marker .. ' rank=', ''))
    assert(seen == n, ('expected %d "%s" lines, got %d:\n%s'):format(n, marker, seen, out))
    return out, walks
end

describe('DistributedDataParallel join', function()
    describe('uneven inputs equal one process on the non-joined ranks\' batches', function()
        local cases = {
            {2, 'counts=3,2'}, {2, 'counts=3,2 divide=0'}, {2, 'counts=2,3 view=1'},
            {2, 'counts=0,2 divide=0'},
            {3, 'counts=1,3,2 divide=0 cap=0.000001'},
            {4, 'counts=4,2,3,1'}, {4, 'counts=3,3,1,2 divide=0 cap=0.000001'},
            {4, 'counts=4,1,2,3 divide=0 view=1 cap=0.000001'},
            {2, 'counts=3,1 divide=0', 'DDPLUA_SHM=0'},
            {3, 'counts=3,1,2 divide=0 cap=0.000001', 'DDPLUA_SHM=0'},
        }
        for _, c in ipairs(cases) do
            it(('%d ranks, %s%s'):format(c[1], c[2], c[3] and ', ' .. c[3] or ''), function()
                run_ok(c[1], c[2], c[3])
            end)
        end
    end)

    it('with no_sync (gradient accumulation over 3 micro-batches)', function()
        run_ok(2, 'counts=1,3 accum=3 divide=0')
        run_ok(4, 'counts=2,4,1,3 accum=2')
        run_ok(4, 'counts=2,4,1,3 accum=2 divide=0 view=1 cap=0.000001')
    end)

    it('with find_unused_parameters (a layer each rank uses on alternate steps)', function()
        run_ok(2, 'counts=3,1 model=branch unused=1')
        run_ok(2, 'counts=3,1 model=branch unused=1 divide=0 accum=2 view=1 cap=0.000001')
        run_ok(4, 'counts=2,4,1,3 model=branch unused=1 divide=0 accum=2')
    end)

    it('with comm hooks: a Lua allreduce hook, fp16 and bf16 compression', function()
        run_ok(2, 'counts=3,1 hook=lua')
        run_ok(4, 'counts=1,3,2,2 hook=lua accum=2')
        run_ok(2, 'counts=3,1 hook=fp16_compress divide=0 tol=2e-3')
        run_ok(3, 'counts=1,3,2 hook=bf16_compress tol=2e-2')
    end)

    it('with eval forwards under no_grad and join again in a second epoch', function()
        run_ok(2, 'counts=3,1 epochs=2 eval=1')
        run_ok(3, 'counts=1,3,2 model=branch unused=1 epochs=2 eval=1 divide=0')
    end)

    it('checks its arguments; enable=false runs fn alone; an error in fn propagates', function()
        run_ok(2, 'api=1', nil, 'JOIN_API_OK')
    end)

    it('without join the uneven loop fails on every rank, naming both calls once', function()
        local out, code = launch(2, 'counts=3,2 nojoin=1')
        assert.are.equal(0, code, out) -- the ranks print their errors and exit 0
        local r0 = out:match('NOJOIN_FAILED rank=0: ([^\n]*)')
        local r1 = out:match('NOJOIN_FAILED rank=1: ([^\n]*)')
        assert.truthy(r0 and r1, out)
        local call = 'rank 0 called all_reduce(float32, 565 elements, op sum), rank 1 called '
            .. 'barrier()'
        assert.truthy(r0:find('DistributedDataParallel: rank 0: allreduce of bucket 0 failed: '
            .. 'all_reduce: collective #', 1, true), r0)
        assert.truthy(r0:find(call, 1, true) and r1:find(call, 1, true), out)
        assert.truthy(r0:find('model:join', 1, true), r0)
        -- the cause once, not the wrapper's text twice
        assert.are.equal(1, select(2, r0:gsub('allreduce of bucket', '')), r0)
    end)
end)

describe('DistributedDataParallel static_graph', function()
    it('trains as one process, walking the graph once (unused layer on odd ranks)', function()
        for _, c in ipairs({{2, 'counts=3,3 model=branch static=1'},
            {2, 'counts=3,3 model=branch static=1 unused=1 accum=2 view=1'},
            {4, 'counts=4,4,4,4 model=branch static=1 cap=0.000001'}}) do
            local _, walks = run_ok(c[1], c[2])
            for r = 1, c[1] do assert.are.equal(1, walks[r], c[2]) end
        end
    end)

    it('find_unused_parameters without it walks the graph every synchronised step', function()
        local _, walks = run_ok(2, 'counts=3,3 model=branch unused=1 accum=2')
        assert.are.same({3, 3}, walks)
    end)

    it('with join and several epochs: one walk per rank that trained', function()
        local _, walks = run_ok(4, 'counts=4,2,3,1 model=branch static=1 accum=2 epochs=2')
        assert.are.same({1, 1, 1, 1}, walks)
        _, walks = run_ok(3, 'counts=0,0,2 model=branch static=1 epochs=2 divide=0')
        assert.are.same({0, 0, 1}, walks)
    end)
end)
