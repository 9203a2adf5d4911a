-- spec/dist/dist_mismatch_spec.lua: collectives that do not match across ranks (issue 13's cases)
-- are an error on EVERY rank naming each side's call, with a non-zero exit and no signal, never a
-- wrong result, a crash or a hang: all_reduce of float32 against float64, of 8 elements against
-- 1000, all_reduce against broadcast, reduce op sum against max, broadcast from src 0 against src
-- 1, a bucket-sized all_reduce against barrier, and DDP's bucket allreduce (a shared buffer on the
-- shared-memory path) against barrier; on 2 and 4 ranks (the last rank differs), through
-- shared memory and through Gloo (DDPLUA_SHM=0), in the default group and in a subgroup.
-- The scripts are spec/dist/workers/mismatch.lua; every process runs under `timeout`
-- (spec/support/shell_util.lua), and the group timeout is long (60 s) against a `timeout` of 90 s:
-- a mismatch that were only noticed by the timeout would fail the spec instead of passing it.
local S = require 'shell_util'
local mismatch = S.src .. '/spec/dist/workers/mismatch.lua'

-- what every rank's message must contain, per case: the calls of both sides
local cases = {
    dtype = {'all_reduce(float32, 8 elements, op sum)', 'all_reduce(float64, 8 elements, op sum)'},
    count = {'all_reduce(float32, 8 elements, op sum)', 'all_reduce(float32, 1000 elements, op sum)'},
    op = {'all_reduce(float32, 8 elements, op sum)', 'broadcast(float32, 8 elements, root '},
    reduce_op = {'all_reduce(float32, 8 elements, op sum)', 'all_reduce(float32, 8 elements, op max)'},
    root = {'broadcast(float32, 8 elements, root ', 'broadcast(float32, 8 elements, root '},
    reduce_root = {'reduce(float32, 8 elements, op sum, root ',
        'reduce(float32, 8 elements, op sum, root '},
    a2a = {'all_reduce(float32, 8 elements, op sum)', 'all_to_all_single(float32)'},
    barrier = {'all_reduce(float32, 262144 elements, op sum)', 'barrier()'},
    -- DDP's bucket of a Linear(64, 64): 64 * 64 + 64 float32 gradients
    bucket = {'all_reduce(float32, 4160 elements, op sum)', 'barrier()'},
}
local order = {'dtype', 'count', 'op', 'reduce_op', 'root', 'reduce_root', 'a2a', 'barrier',
    'bucket'}

local function assert_has(text, want, what)
    assert(text:find(want, 1, true), ('%s: %q not found in:\n%s'):format(what, want, text))
end

-- Every member rank failed with the mismatch error naming both calls (and which rank made the
-- odd one); the error is the same text on every rank.
local function assert_mismatch(outs, codes, world, case, sub)
    local first = sub and 1 or 0
    local message
    for r = first, world - 1 do
        local what = ('%s, rank %d'):format(case, r)
        assert(codes[r] == 3, ('%s: exit %s (3 expected: the error was raised; 124 is the '
            .. 'timeout, >128 a signal):\n%s'):format(what, tostring(codes[r]), outs[r]))
        local m = outs[r]:match('MISMATCH_ERROR [^\n]-(collective #%d+ of group %d+ differs '
            .. 'across ranks: [^\n]*)')
        assert(m, what .. ': no mismatch error:\n' .. outs[r])
        assert(not message or m == message, what .. ': another message than rank ' .. first
            .. ':\n' .. m .. '\n' .. tostring(message))
        message = m
        for _, call in ipairs(cases[case]) do assert_has(m, call, what) end
        assert_has(m, ('rank %d called'):format(world - 1), what)
        assert_has(m, ('group %d'):format(sub and 1 or 0), what)
    end
    if sub then assert(outs[0]:find('NOT_A_MEMBER', 1, true) and codes[0] == 0, outs[0]) end
end

for _, path in ipairs({{'shared memory', ''}, {'gloo', 'DDPLUA_SHM=0'}}) do
    for _, world in ipairs({2, 4}) do
        describe(('a mismatched collective on %d ranks through %s'):format(world, path[1]),
            function()
                for _, case in ipairs(order) do
                    it('fails on every rank naming both calls: ' .. case, function()
                        local outs, codes = S.run_world(world, mismatch, {
                            env = ('%s CASE=%s PG_TIMEOUT=60'):format(path[2], case),
                            kill_after = 90})
                        assert_mismatch(outs, codes, world, case, false)
                    end)
                end
            end)
    end
    describe('a mismatched collective in a subgroup of 3 of 4 ranks through ' .. path[1],
        function()
            for _, case in ipairs({'dtype', 'reduce_root', 'barrier', 'bucket'}) do
                it('fails on every member naming both calls: ' .. case, function()
                    local outs, codes = S.run_world(4, mismatch, {
                        env = ('%s CASE=%s GROUP=sub PG_TIMEOUT=60'):format(path[2], case),
                        kill_after = 90})
                    assert_mismatch(outs, codes, 4, case, true)
                end)
            end
        end)
end

describe('after a mismatch', function()
    it('the group is unusable: the next collective fails at once with the first error',
        function()
            local script = S.new_tmpdir() .. '/after.lua'
            S.write(script, [[
local ddpl = require 'ddplua'
local dist = ddpl.dist
dist.init_process_group({backend = 'gloo', timeout = 60})
local odd = dist.get_rank() == 1
pcall(dist.all_reduce, ddpl.ones({odd and 3 or 2}))
local ok, err = pcall(dist.all_reduce, ddpl.ones({2}))
print(ok and 'SECOND_OK' or ('SECOND_ERROR ' .. tostring(err)))
os.exit(0)
]])
            for _, env in ipairs({'', 'DDPLUA_SHM=0'}) do
                local outs, codes = S.run_world(2, script, {env = env, kill_after = 90})
                for r = 0, 1 do
                    assert(codes[r] == 0, outs[r])
                    assert_has(outs[r], 'SECOND_ERROR ', env .. ' rank ' .. r)
                    assert_has(outs[r], 'all_reduce: the process group is unusable after an '
                        .. 'earlier failure (all_reduce: collective #1 of group 0 differs across '
                        .. 'ranks', env .. ' rank ' .. r)
                end
            end
        end)
end)
