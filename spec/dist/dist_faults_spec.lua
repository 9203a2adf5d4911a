-- spec/dist/dist_faults_spec.lua: faults are named (docs/internals/fault-detection.md). Through
-- shared memory and through Gloo (DDPLUA_SHM=0), with a heartbeat limit of 3 s and a group timeout
-- of 60 s, the last rank is the victim: stopped with SIGSTOP, it is named as stopped, with its pid,
-- by every other rank's all_reduce at the heartbeat limit (2 and 3 ranks), and by a recv from it;
-- rank 0 stopped (over Gloo the store's host, so the store stops too) is named the same way;
-- killed with SIGKILL, it is named at once, with its pid; computing for 10 s (over twice a
-- limit of 4 s) before the all_reduce, it is not reported, and the sum is right; of two ranks that
-- both receive from each other, the first to reach its limit reports a timeout and the other its
-- close, each naming the other as still running. The scripts are
-- spec/dist/workers/faults.lua; every process runs under `timeout` (spec/support/shell_util.lua).
-- Times are only bounded generously: the report must come well before the group timeout (60 s),
-- which alone would otherwise end the wait.
local S = require 'shell_util'
local faults = S.src .. '/spec/dist/workers/faults.lua'

-- The message and time of rank r's failed operation.
local function fault_of(outs, codes, r)
    assert(codes[r] == 3, ('rank %d: exit %s (3 expected: the operation failed):\n%s')
        :format(r, tostring(codes[r]), outs[r]))
    local after, msg = outs[r]:match('FAULT after=([%d.]+) ([^\n]*)')
    assert(after, ('rank %d printed no fault:\n%s'):format(r, outs[r]))
    return tonumber(after), msg
end

local function assert_has(text, want)
    assert(text:find(want, 1, true), ('%q not found in:\n%s'):format(want, text))
end

-- Runs CASE=stop on `world` ranks (env: more VAR=value words) with rank `victim` (default the
-- last) stopped; the ranks in `reporters` (default every other rank) must name it as stopped,
-- with the pid it wrote, at the limit (`why`: what the message says after the name).
local function assert_stop_named(path_env, world, env, op, reporters, victim, why)
    local pidfile = os.tmpname()
    victim = victim or world - 1
    local outs, codes = S.run_world(world, faults, {kill_after = 60,
        env = ('%s CASE=stop HB=3 VICTIM=%d PIDFILE=%s %s'):format(path_env, victim,
            S.q(pidfile), env or '')})
    local pid = S.slurp(pidfile):match('%d+')
    os.remove(pidfile)
    assert(codes[victim] == 137, 'the victim should have died of SIGKILL:\n' .. outs[victim])
    if not reporters then
        reporters = {}
        for r = 0, world - 1 do if r ~= victim then reporters[#reporters + 1] = r end end
    end
    for _, r in ipairs(reporters) do
        local after, msg = fault_of(outs, codes, r)
        assert_has(msg, ('%s: rank %d (pid %s'):format(op, victim, tostring(pid)))
        assert_has(msg, why or 'stopped responding: no heartbeat for ')
        if not why then assert_has(msg, '(limit 3 s); the process is stopped (SIGSTOP') end
        assert(after >= 2.5 and after < 30, ('reported after %g s:\n%s'):format(after, msg))
    end
end

for _, path in ipairs({{'shared memory', ''}, {'gloo', 'DDPLUA_SHM=0'}}) do
    describe('faults through ' .. path[1], function()
        it('a stopped rank is named at the heartbeat limit', function()
            assert_stop_named(path[2], 2, '', 'all_reduce')
        end)

        it('a stopped rank is named by every other rank (3 ranks)', function()
            assert_stop_named(path[2], 3, '', 'all_reduce')
        end)

        it('a stopped rank is named by a recv from it', function()
            assert_stop_named(path[2], 3, 'OP=recv', 'recv', {0})
        end)

        it('a stopped rank 0, which hosts the store, is named', function()
            -- over Gloo the heartbeat's store stops answering with it
            assert_stop_named(path[2], 2, '', 'all_reduce', nil, 0,
                path[2] == '' and 'stopped responding: no heartbeat for '
                or 'which hosts the store, stopped responding: the store gave no answer for ')
        end)

        it('a killed rank is named', function()
            for _, world in ipairs({2, 3}) do
                local outs, codes = S.run_world(world, faults, {kill_after = 60,
                    env = path[2] .. ' CASE=kill HB=3'})
                local victim = world - 1
                assert(codes[victim] == 137, 'the victim should have died:\n' .. outs[victim])
                for r = 0, victim - 1 do
                    local after, msg = fault_of(outs, codes, r)
                    assert(msg:find(('all_reduce: rank %d %%(pid %%d+'):format(victim)), msg)
                    assert(msg:find('exited', 1, true) or msg:find('closed its connection', 1, true),
                        msg)
                    assert(after < 30, ('reported after %g s:\n%s'):format(after, msg))
                end
            end
        end)

        it('a slow rank is not reported', function()
            local outs, codes = S.run_world(2, faults, {kill_after = 60,
                env = path[2] .. ' CASE=slow HB=4 SLOW=10'})
            S.assert_ranks_ok(outs, codes, 2, 'SLOW_OK')
            local waited = tonumber(outs[0]:match('SLOW_OK 0 after=([%d.]+)'))
            assert(waited and waited > 8, 'rank 0 should have waited for rank 1:\n' .. outs[0])
        end)
    end)
end

describe('a recv that no send matches', function()
    -- Both ranks receive from each other. Rank 0's group timeout is 3 s and rank 1's 30 s: rank
    -- 0 gives up at 3 s, and Gloo closes every pair of a rank whose wait timed out, so rank 1
    -- sees rank 0's close then. (With equal limits the rank whose wait began later sees that
    -- close before its own limit: which rank reports which message was a race, lost under ASan,
    -- whose start-up skews the ranks by seconds.) Neither exits before the other has its error
    -- (a mark file each), so neither is reported as gone.
    it('is a timeout, naming the peer as still running, not as gone', function()
        local script, marks = os.tmpname() .. '.lua', os.tmpname()
        S.write(script, ([[
local ddpl = require 'ddplua'
local dist = ddpl.distributed
dist.init_process_group({backend = 'gloo', timeout = tonumber(os.getenv('RANK')) == 0 and 3 or 30})
local me = dist.get_rank()
local ok, err = pcall(dist.recv, ddpl.zeros(4), 1 - me)
print('RECV ' .. tostring(ok) .. ' ' .. tostring(err))
io.stdout:flush()
io.open(%q .. me, 'w'):close()
for _ = 1, 300 do -- up to 30 s for the peer's mark
    local peer = io.open(%q .. (1 - me))
    if peer then peer:close() break end
    os.execute('sleep 0.1')
end
]]):format(marks, marks))
        local outs = S.run_world(2, script, {kill_after = 60})
        os.remove(script)
        os.remove(marks)
        os.remove(marks .. '0')
        os.remove(marks .. '1')
        local msg = {}
        for r = 0, 1 do
            msg[r] = outs[r]:match('RECV false ([^\n]*)')
            assert(msg[r], outs[r])
            assert(not msg[r]:find('exited', 1, true), msg[r])
        end
        assert_has(msg[0], 'recv: timed out waiting for rank 1 (pid ')
        assert_has(msg[0], 'it is still running (waiting as well? a recv needs a matching send '
            .. 'on the other side)')
        assert(not msg[0]:find('closed its connection', 1, true), msg[0])
        assert_has(msg[1], 'recv: rank 0 (pid ')
        assert_has(msg[1], 'closed its connection')
        assert_has(msg[1], 'it is still running: its own operation failed or timed out first')
    end)
end)

describe('the heartbeat_timeout option', function()
    local ddpl = require 'ddplua'
    local dist = ddpl.dist

    it('refuses what is not a number of seconds, false or 0', function()
        for _, bad in ipairs({'30', -1, 0 / 0, true, {}}) do
            local ok, err = pcall(dist.init_process_group, {backend = 'gloo', rank = 0,
                world_size = 1, init_method = 'tcp://127.0.0.1:1', heartbeat_timeout = bad})
            assert.is_false(ok)
            assert_has(tostring(err), 'init_process_group: heartbeat_timeout must be a positive '
                .. 'number of seconds, or false/0 for none (got ')
            assert.is_false(dist.is_initialized())
        end
    end)

    it('takes a number, or false to turn the heartbeat off', function()
        for _, v in ipairs({5, false, 0}) do
            dist.init_process_group({backend = 'gloo', rank = 0, world_size = 1, timeout = 10,
                init_method = 'tcp://127.0.0.1:' .. S.free_port(), heartbeat_timeout = v})
            local x = ddpl.tensor({1.5, -2})
            dist.all_reduce(x)
            assert.are.equal(1.5, x[0]:item())
            dist.destroy_process_group()
        end
    end)
end)
