-- spec/cli/elastic_spec.lua: elastic restarts, `ddplua script --nproc N --max-restarts M`
-- (engine/cli/launch.c): the option's bad values (and --nnodes MIN:MAX's); the TORCHELASTIC_* variables of each start;
-- a gang restarted after rank 0 itself died, rendezvousing afresh on the store the launcher
-- keeps (the keys of the first generation must not confuse the second); restarts used up; a
-- SIGTERM to the launcher is no failure to restart from; --log-dir keeps every start's output.
-- Then examples/ddp_train.lua on the real Fashion-MNIST: a run killed mid-epoch (SIGKILL, on
-- rank 1 of 2 and on rank 0 of 4) and restarted from its checkpoint ends with the parameters
-- and optimizer state of an uninterrupted run, bit for bit; a checkpoint of another run is not
-- resumed (nor an empty file); a mid-epoch checkpoint refuses another number of ranks.
-- Every command runs under `timeout`; the specs never wait on a worker that might hang.
local S = require 'shell_util'
local ddpl = require 'ddplua'
local bin, src, q, sh = S.bin, S.src, S.q, S.sh

local function has(text, plain)
    assert.truthy(text:find(plain, 1, true), ('expected %q in:\n%s'):format(plain, text))
end

local function hasnt(text, plain)
    assert.falsy(text:find(plain, 1, true), ('did not expect %q in:\n%s'):format(plain, text))
end

local function script_file(text)
    local path = os.tmpname() .. '.lua'
    S.write(path, text)
    return path
end

-- Runs the launcher with args (launcher flags, the script, its arguments); the combined output
-- and the exit status.
local function ddplua(args, env)
    return sh(('%s timeout 120 %s %s'):format(env or '', q(bin), args))
end

-- Lua for a worker: kill this process with SIGKILL, as a crash would.
local KILL_SELF = [[
local function kill_self()
    io.stdout:flush()
    os.execute('kill -KILL ' .. io.open('/proc/self/stat'):read('l'):match('^%d+'))
end
]]

describe('--max-restarts', function()
    it('refuses bad values with a clear message (several machines: spec/cli/elastic_nodes_spec.lua)',
        function()
        local cases = {
            {'--max-restarts -1', "--max-restarts expects an integer from 0 to 1000000, got '-1'"},
            {'--max-restarts x', "--max-restarts expects an integer from 0 to 1000000, got 'x'"},
            {'--max-restarts=', "--max-restarts expects an integer from 0 to 1000000, got ''"},
            {'--max-restarts 1.5', "got '1.5'"},
            {'--nnodes 3:2 --max-restarts 1', '--nnodes 3:2: MIN is larger than MAX'},
            {'--nnodes x:2', "--nnodes expects an integer from 1 to 65536, got 'x'"},
            {'--nnodes 1:', "--nnodes expects an integer from 1 to 65536, got ''"},
            {'--nnodes 12345678901234567:2', "--nnodes expects M or MIN:MAX"},
        }
        for _, c in ipairs(cases) do
            local out, code = ddplua(c[1] .. " -e 'print(1)'")
            assert.are_not.equal(0, code, c[1])
            has(out, c[2])
            hasnt(out, '\n1\n')
        end
        local out, code = ddplua("-e 'print(1)' --nproc 2 --max-restarts")
        assert.are_not.equal(0, code, out)
        has(out, '--max-restarts needs a value')
        out, code = ddplua("--max-restarts=2 --nproc 2 -e 'print(\"ran\")'")
        assert.are.equal(0, code, out)
        assert.are.equal(2, select(2, out:gsub('ran\n', '')), out)
    end)

    it('restarts the gang after rank 0 died; the new gang rendezvous afresh', function()
        local dir = S.new_tmpdir()
        local path = script_file(KILL_SELF .. [[
local dist = ddpl.distributed
local gen = os.getenv('TORCHELASTIC_RESTART_COUNT')
print(('env gen=%s max=%s agent=%s run=%s'):format(gen, os.getenv('TORCHELASTIC_MAX_RESTARTS'),
    os.getenv('TORCHELASTIC_USE_AGENT_STORE'), os.getenv('TORCHELASTIC_RUN_ID')))
dist.init_process_group({timeout = 60})
local t = ddpl.tensor({dist.get_rank() + 1.0})
dist.all_reduce(t)
print(('gen %s rank %d sum %g'):format(gen, dist.get_rank(), t:item()))
-- rank 0 dies after its keys (and the others') are in the store; the others wait at the barrier
if dist.get_rank() == 0 and gen == '0' then kill_self() end
dist.barrier()
dist.destroy_process_group()
]])
        local out, code = ddplua(('--nproc 3 --max-restarts 2 --log-dir %s %s'):format(q(dir),
            q(path)))
        local log0 = S.slurp(dir .. '/rank0.stdout')
        os.execute('rm -rf ' .. q(dir))
        os.remove(path)
        assert.are.equal(0, code, out)
        assert.truthy(out:find('ddplua: rank 0 %(pid %d+%) was killed by signal SIGKILL %(its '
            .. 'output: [^)]*/rank0.stderr%); stopping the other 2 workers'), out)
        has(out, 'ddplua: rank 0 was killed by signal SIGKILL; restarting all 3 workers '
            .. '(restart 1 of 2)\n')
        hasnt(out, '(restart 2 of 2)')
        for r = 0, 2 do has(out, ('gen 1 rank %d sum 6\n'):format(r)) end
        local starts, run_id = 0, nil
        for gen, max, agent, run in out:gmatch('env gen=(%S*) max=(%S*) agent=(%S*) run=(%S*)') do
            assert.truthy(gen == '0' or gen == '1', out)
            assert.are.equal('2', max)
            assert.are.equal('True', agent)
            run_id = run_id or run
            assert.are.equal(run_id, run) -- one run id for both starts
            starts = starts + 1
        end
        assert.are.equal(6, starts, out) -- 3 ranks, 2 starts
        assert.truthy(#run_id > 0)
        -- the log files keep the first start's output too
        has(log0, 'gen 0 rank 0 sum 6\n')
        has(log0, 'gen 1 rank 0 sum 6\n')
    end)

    it('gives up when the restarts are used up, naming the rank and its status', function()
        local out, code = ddplua("--nproc 2 --max-restarts 2 -e " .. q([[
if os.getenv('RANK') == '1' then
    print('start ' .. os.getenv('TORCHELASTIC_RESTART_COUNT'))
    os.exit(3)
end
local t0 = ddpl.time()
while ddpl.time() - t0 < 60 do end -- the launcher must stop this]]))
        assert.are.equal(3, code, out)
        for gen = 0, 2 do has(out, 'start ' .. gen .. '\n') end
        hasnt(out, 'start 3')
        has(out, 'ddplua: rank 1 failed with exit code 3; restarting all 2 workers (restart 1 of 2)')
        has(out, 'ddplua: rank 1 failed with exit code 3; restarting all 2 workers (restart 2 of 2)')
        has(out, 'ddplua: rank 1 failed with exit code 3; no restarts left (--max-restarts 2), '
            .. 'giving up')
    end)

    it('is 0 by default: TORCHELASTIC_RESTART_COUNT=0, rank 0 hosts, no restart', function()
        local out, code = ddplua("--nproc 2 -e " .. q([[
print(('env gen=%s max=%s agent=%s'):format(os.getenv('TORCHELASTIC_RESTART_COUNT'),
    os.getenv('TORCHELASTIC_MAX_RESTARTS'), os.getenv('TORCHELASTIC_USE_AGENT_STORE')))
if os.getenv('RANK') == '1' then os.exit(4) end]]))
        assert.are.equal(4, code, out)
        has(out, 'env gen=0 max=0 agent=False')
        hasnt(out, 'env gen=1')
        hasnt(out, 'restarting')
    end)

    it('does not restart when the launcher itself is told to stop', function()
        local out, code = ddplua("--nproc 2 --max-restarts 3 -e " .. q([[
print('start ' .. os.getenv('TORCHELASTIC_RESTART_COUNT') .. ' rank ' .. os.getenv('RANK'))
io.stdout:flush()
if os.getenv('RANK') == '1' then -- SIGTERM to the launcher, this worker's parent
    os.execute('kill -TERM ' .. io.open('/proc/self/stat'):read('l'):match('^%d+ %b() %a (%d+)'))
end
local t0 = ddpl.time()
while ddpl.time() - t0 < 60 do end]]))
        assert.are.equal(128 + 15, code, out)
        has(out, 'ddplua: got SIGTERM; stopping the 2 workers')
        hasnt(out, 'restarting')
        hasnt(out, 'start 1')
    end)
end)

---------------------------------------------------------------------------------------------------
-- examples/ddp_train.lua

local train_script = src .. '/examples/ddp_train.lua'

-- A short run: 512 training images, 2 epochs, 512 / (n * 32) steps per epoch.
local function train(n, ck, args, env, launcher)
    return sh(('%s timeout 180 %s %s --nproc %d %s -- --train-size 512 --test-size 200 '
        .. '--epochs 2 --progress off --checkpoint %s %s'):format(env or '', q(bin),
        q(train_script), n, launcher or '', q(ck), args or ''))
end

-- The tensor's bytes (float32, float64, int64 or uint8), for a bit-for-bit comparison.
local formats = {float32 = '<f', float64 = '<d', int64 = '<j', uint8 = 'B'}
local function bytes(t)
    local fmt = assert(formats[t.dtype], 'no byte format for ' .. tostring(t.dtype))
    local parts = {}
    for i, v in ipairs(t:contiguous():view(-1):tolist()) do parts[i] = string.pack(fmt, v) end
    return table.concat(parts)
end

-- Every tensor of a nested table, by path ("model.0.weight", "optimizer.state.1.momentum_buffer").
local function tensors(tbl, prefix, out)
    out = out or {}
    for k, v in pairs(tbl) do
        local name = prefix .. tostring(k)
        if ddpl.is_tensor(v) then
            out[name] = v
        elseif type(v) == 'table' then
            tensors(v, name .. '.', out)
        end
    end
    return out
end

local function assert_same_state(path_a, path_b)
    local a, b = ddpl.load(path_a), ddpl.load(path_b)
    -- and every rank's generator: the resumed pass drew nothing twice (DataLoader:state_dict)
    local ta = tensors({model = a.model, optimizer = a.optimizer, rng = a.rng}, '')
    local tb = tensors({model = b.model, optimizer = b.optimizer, rng = b.rng}, '')
    local n = 0
    for name, t in pairs(ta) do
        assert.truthy(tb[name], 'missing in the restarted run: ' .. name)
        assert.are.same(t:size(), tb[name]:size(), name)
        assert.is_true(bytes(t) == bytes(tb[name]), name .. ' differs')
        n = n + 1
    end
    for name in pairs(tb) do assert.truthy(ta[name], 'only in the restarted run: ' .. name) end
    assert.is_true(n >= 14, 'expected the 6 parameters, their momentum buffers and the ranks\' '
        .. 'RNG states, got ' .. n)
    return a, b
end

describe('examples/ddp_train.lua with --max-restarts', function()
    local cases = {
        -- 8 steps per epoch; checkpoints after steps 5, 8 (epoch end) and 10; rank 1 dies before
        -- step 13, so the restart redoes steps 11 and 12 of epoch 2
        {n = 2, every = 5, fail = 13, rank = 1, resumed = 'at epoch 2, step 2 of 8'},
        -- 4 steps per epoch; checkpoints after 3, 4 (epoch end), 6; rank 0 dies before step 8
        {n = 4, every = 3, fail = 8, rank = 0, resumed = 'at epoch 2, step 2 of 4'},
    }
    for _, c in ipairs(cases) do
        it(('killed on rank %d of %d mid-epoch, ends bit for bit as an uninterrupted run')
            :format(c.rank, c.n), function()
            local dir = S.new_tmpdir()
            local every = '--checkpoint-every ' .. c.every
            local out_a, code_a = train(c.n, dir .. '/a.st', every)
            local out_b, code_b = train(c.n, dir .. '/b.st', ('%s --fail-at-step %d --fail-rank %d')
                :format(every, c.fail, c.rank), nil, '--max-restarts 1')
            local ok, a, b = pcall(assert_same_state, dir .. '/a.st', dir .. '/b.st')
            os.execute('rm -rf ' .. q(dir))
            assert.are.equal(0, code_a, out_a)
            assert.are.equal(0, code_b, out_b)
            hasnt(out_a, 'restart')
            has(out_b, ('rank %d: --fail-at-step %d: killing myself with SIGKILL'):format(c.rank,
                c.fail))
            has(out_b, ('ddplua: rank %d was killed by signal SIGKILL; restarting all %d workers '
                .. '(restart 1 of 1)'):format(c.rank, c.n))
            has(out_b, 'TORCHELASTIC_RESTART_COUNT=1: this gang is restart 1 of the job')
            has(out_b, 'resumed from ' .. dir .. '/b.st ' .. c.resumed)
            -- the epoch that was interrupted reports the same train loss as the uninterrupted one
            local loss_a = out_a:match('epoch 2/2  train loss ([%d.]+)')
            assert.truthy(loss_a, out_a)
            has(out_b, 'epoch 2/2  train loss ' .. loss_a)
            assert.is_true(ok, tostring(a))
            assert.are.equal(2, a.epoch)
            assert.are.equal(2, b.epoch)
            assert.are.equal(1024 // 32 // c.n, b.global_step)
        end)
    end

    it('resumes only a checkpoint of its own run (DDPLUA_RUN_ID), and the same number of ranks',
        function()
        local dir = S.new_tmpdir()
        local ck = dir .. '/ck.st'
        S.write(ck, '') -- as os.tmpname leaves it: no checkpoint
        local out1, code1 = train(2, ck, '--epochs 1', 'DDPLUA_RUN_ID=one')
        local out2, code2 = train(2, ck, '', 'DDPLUA_RUN_ID=two')
        local out3, code3 = train(2, ck, '', 'DDPLUA_RUN_ID=two') -- a job started again by hand
        -- a mid-epoch checkpoint of 2 ranks (rank 1 dies before step 4, no restarts) ...
        local out4, code4 = train(2, ck, '--checkpoint-every 2 --fail-at-step 4',
            'DDPLUA_RUN_ID=three')
        -- ... cannot go on with 4
        local out5, code5 = train(4, ck, '', 'DDPLUA_RUN_ID=three')
        os.execute('rm -rf ' .. q(dir))
        assert.are.equal(0, code1, out1)
        has(out1, "is not this run's checkpoint (it cannot be read): starting afresh")
        assert.are.equal(0, code2, out2)
        has(out2, "is not this run's checkpoint (run id one, not two): starting afresh")
        has(out2, 'epoch 1/2')
        assert.are.equal(0, code3, out3)
        has(out3, 'resumed from ' .. ck .. ' after epoch 2')
        hasnt(out3, 'epoch 1/2')
        hasnt(out3, 'epoch 2/2')
        assert.are.equal(128 + 9, code4, out4)
        has(out4, 'rank 1: --fail-at-step 4: killing myself with SIGKILL')
        assert.are_not.equal(0, code5)
        has(out5, 'was saved in the middle of epoch 1 by 2 ranks; resume it with --nproc 2')
    end)

    it('checks its new options', function()
        local cases = {
            {'--checkpoint-every 0', '--checkpoint-every must be a positive integer, got 0'},
            {'--fail-at-step 1.5', '--fail-at-step must be a positive integer, got 1.5'},
            {'--fail-at-step 2 --fail-rank 2', '--fail-rank 2 is not a rank of this job (0 to 1)'},
        }
        for _, c in ipairs(cases) do
            local out, code = train(2, '/nonexistent/ck.st', c[1])
            assert.are_not.equal(0, code, out)
            has(out, c[2])
        end
        local out, code = sh(('timeout 60 %s %s --nproc 2 -- --checkpoint-every 3'):format(q(bin),
            q(train_script)))
        assert.are_not.equal(0, code, out)
        has(out, '--checkpoint-every needs --checkpoint PATH')
    end)
end)
