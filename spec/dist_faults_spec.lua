-- spec/dist_faults_spec.lua: faults are named (docs/fault-detection.md). On 2 ranks, through
-- shared memory and through Gloo (DDPLUA_SHM=0), with a heartbeat limit of 3 s and a group
-- timeout of 60 s: a rank stopped with SIGSTOP is named by rank 0's all_reduce at the heartbeat
-- limit, as stopped, with its pid; a rank killed with SIGKILL is named at once, with its pid; a
-- rank that computes for 8 s (over twice the limit) before the all_reduce is not reported, and
-- the sum is right. The scripts are spec/dist/faults.lua; every process runs under `timeout`
-- (spec/shell_util.lua). Times are only bounded generously: detection must come well before
-- the group timeout (60 s), which alone would otherwise end the wait.
local S = require 'shell_util'
local faults = S.src .. '/spec/dist/faults.lua'

local function fault_of(outs, codes)
    assert(codes[0] == 3, ('rank 0: exit %s (3 expected: the all_reduce failed):\n%s')
        :format(tostring(codes[0]), outs[0]))
    local after, msg = outs[0]:match('FAULT after=([%d.]+) ([^\n]*)')
    assert(after, 'rank 0 printed no fault:\n' .. outs[0])
    return tonumber(after), msg
end

local function assert_has(text, want)
    assert(text:find(want, 1, true), ('%q not found in:\n%s'):format(want, text))
end

for _, path in ipairs({{'shared memory', ''}, {'gloo', 'DDPLUA_SHM=0'}}) do
    describe('faults through ' .. path[1], function()
        it('a stopped rank is named at the heartbeat limit', function()
            local pidfile = os.tmpname()
            local outs, codes = S.run_world(2, faults, {kill_after = 60,
                env = ('%s CASE=stop HB=3 PIDFILE=%s'):format(path[2], S.q(pidfile))})
            local pid = S.slurp(pidfile):match('%d+')
            os.remove(pidfile)
            local after, msg = fault_of(outs, codes)
            assert_has(msg, 'all_reduce: rank 1 (pid ' .. tostring(pid))
            assert_has(msg, 'stopped responding: no heartbeat for ')
            assert_has(msg, '(limit 3 s); the process is stopped (SIGSTOP')
            assert(after >= 2.5 and after < 30, ('reported after %g s:\n%s'):format(after, msg))
            assert(codes[1] == 137, 'rank 1 should have died of SIGKILL:\n' .. outs[1])
        end)

        it('a killed rank is named', function()
            local outs, codes = S.run_world(2, faults, {kill_after = 60,
                env = path[2] .. ' CASE=kill HB=3'})
            local after, msg = fault_of(outs, codes)
            assert(msg:find('all_reduce: rank 1 %(pid %d+'), msg)
            assert(msg:find('exited', 1, true) or msg:find('closed its connection', 1, true), msg)
            assert(after < 30, ('reported after %g s:\n%s'):format(after, msg))
            assert(codes[1] == 137, 'rank 1 should have died of SIGKILL:\n' .. outs[1])
        end)

        it('a slow rank is not reported', function()
            local outs, codes = S.run_world(2, faults, {kill_after = 60,
                env = path[2] .. ' CASE=slow HB=3 SLOW=8'})
            S.assert_ranks_ok(outs, codes, 2, 'SLOW_OK')
            local waited = tonumber(outs[0]:match('SLOW_OK 0 after=([%d.]+)'))
            assert(waited and waited > 6, 'rank 0 should have waited for rank 1:\n' .. outs[0])
        end)
    end)
end
