-- spec/dist/dist_objects_spec.lua: the object collectives and monitored_barrier on real processes.
-- spec/dist/workers/objects.lua on 2 and 4 ranks (through shared memory and through Gloo) checks
-- all_gather_object, gather_object and broadcast_object_list against values built locally, and
-- that a value one rank cannot send fails on every rank. spec/dist/workers/monitored.lua: a passing
-- monitored_barrier, then ranks that arrive past the timeout or never call it: rank 0's error
-- names them (the first, or all with wait_all_ranks), every rank that called it exits non-zero
-- with rank 0's verdict or a store error, and nothing hangs; rank 0 never calling: the others
-- fail naming it after twice the timeout. Every process runs under `timeout` (S.run_world).
local S = require 'shell_util'
local objects = S.src .. '/spec/dist/workers/objects.lua'
local monitored = S.src .. '/spec/dist/workers/monitored.lua'

local function assert_has(text, want)
    assert(tostring(text):find(want, 1, true), ('%q not found in:\n%s'):format(want, text))
end

describe('object collectives', function()
    for _, case in ipairs({{2, ''}, {4, ''}, {2, 'DDPLUA_SHM=0'}, {4, 'DDPLUA_SHM=0'}}) do
        local n, env = case[1], case[2]
        it(('pass every check on %d ranks %s'):format(n, env), function()
            local outs, codes = S.run_world(n, objects, {env = env})
            S.assert_ranks_ok(outs, codes, n, 'OBJ_OK')
        end)
    end
end)

describe('monitored_barrier', function()
    it('passes on 4 ranks, call after call, and leaves the group in step', function()
        local outs, codes = S.run_world(4, monitored, {env = 'MB_MODE=pass'})
        S.assert_ranks_ok(outs, codes, 4, 'MB_OK')
    end)

    it('2 ranks, rank 0 never calling: the other fails naming rank 0, within twice the timeout',
        function()
            local outs, codes = S.run_world(2, monitored, {kill_after = 40,
                env = 'MB_MODE=never MB_LATE=0 MB_SLEEP=12'})
            assert.are.equal(0, codes[0], outs[0])
            assert.are.equal(3, codes[1], outs[1])
            assert_has(outs[1], 'MB_ERR monitored_barrier: rank 1 got no verdict from rank 0 '
                .. 'within 8 s')
        end)

    -- world, mode, late ranks, wait_all_ranks, what rank 0's message names
    local cases = {
        {2, 'late', '1', false, 'rank 1 did not arrive within 4 s'},
        {2, 'never', '1', false, 'rank 1 did not arrive within 4 s'},
        {4, 'late', '2', false, 'rank 2 did not arrive within 4 s'},
        {4, 'late', '2,3', false, 'rank 2 did not arrive within 4 s'},
        {4, 'never', '2,3', true, 'ranks 2, 3 did not arrive within 4 s'},
        {4, 'late', '1,3', true, 'ranks 1, 3 did not arrive within 4 s'},
    }
    for _, c in ipairs(cases) do
        local world, mode, late, all, names = c[1], c[2], c[3], c[4], c[5]
        local title = ('%d ranks, rank(s) %s %s%s: rank 0 names them, every caller fails')
            :format(world, late, mode == 'late' and 'late' or 'never calling',
            all and ', wait_all_ranks' or '')
        it(title, function()
            local outs, codes = S.run_world(world, monitored, {kill_after = 40,
                env = ('MB_MODE=%s MB_LATE=%s MB_ALL=%s'):format(mode, late, all and 1 or 0)})
            assert.are.equal(3, codes[0], outs[0])
            assert_has(outs[0], 'MB_ERR monitored_barrier: ' .. names)
            local is_late = {}
            for r in late:gmatch('%d+') do is_late[tonumber(r)] = true end
            for r = 1, world - 1 do
                if not is_late[r] then
                    -- arrived in time: rank 0's verdict
                    assert.are.equal(3, codes[r], outs[r])
                    assert_has(outs[r], 'MB_ERR monitored_barrier: failed on rank 0: ' .. names)
                elseif mode == 'late' then
                    -- arrived after rank 0 gave up: its verdict, or the store gone with rank 0
                    assert.are.equal(3, codes[r], outs[r])
                    assert_has(outs[r], 'MB_ERR monitored_barrier: ')
                else
                    assert.are.equal(0, codes[r], outs[r]) -- never called it
                end
            end
        end)
    end
end)
