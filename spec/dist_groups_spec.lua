-- spec/dist_groups_spec.lua: process subgroups on real processes (spec/dist/groups.lua: new_group
-- of a subset, collectives in it with values checked, two disjoint groups in use at once,
-- new_subgroups, the non-member's error, get_rank/get_world_size with a group, src as a global
-- rank, destroying one group), on 2 and 4 ranks, through shared memory and through Gloo; DDP
-- over a subgroup (spec/dist/ddp_group.lua); the DDPLUA_DISTRIBUTED_DEBUG=INFO log of every
-- group and of DDP's bucket layout. A mismatch inside a subgroup is in
-- spec/dist_safety_spec.lua. Every process runs under `timeout` (spec/shell_util.lua).
local S = require 'shell_util'
local groups = S.src .. '/spec/dist/groups.lua'
local ddp_group = S.src .. '/spec/dist/ddp_group.lua'

local function assert_all_ok(outs, codes, n)
    for r = 0, n - 1 do
        assert(codes[r] == 0 and outs[r]:find('GROUPS_OK ' .. r, 1, true),
            ('rank %d failed (exit %s):\n%s'):format(r, tostring(codes[r]), outs[r]))
    end
end

for _, path in ipairs({{'shared memory', ''}, {'gloo', 'DDPLUA_SHM=0'}}) do
    for _, n in ipairs({2, 4}) do
        describe(('subgroups on %d ranks through %s'):format(n, path[1]), function()
            it('pass every check', function()
                local outs, codes = S.run_world(n, groups, {env = path[2]})
                assert_all_ok(outs, codes, n)
            end)
        end)
    end
end

describe('DDP with process_group = a subgroup', function()
    for _, path in ipairs({{'shared memory', ''}, {'gloo', 'DDPLUA_SHM=0'}}) do
        it('averages within each pair (new_subgroups(2) of 4 ranks) through ' .. path[1],
            function()
                local outs, codes = S.run_world(4, ddp_group, {env = path[2]})
                for r = 0, 3 do
                    assert(codes[r] == 0 and outs[r]:find('DDP_GROUP_OK ' .. r, 1, true),
                        ('rank %d failed (exit %s):\n%s'):format(r, tostring(codes[r]), outs[r]))
                    assert(not outs[r]:find('DDP bucket layout', 1, true), 'logged without INFO')
                end
            end)
    end
end)

describe('DDPLUA_DISTRIBUTED_DEBUG=INFO', function()
    it("logs DDP's bucket layout at construction and after the rebuild", function()
        local outs, codes = S.run_world(4, ddp_group, {env = 'DDPLUA_DISTRIBUTED_DEBUG=INFO'})
        for r = 0, 3 do
            assert(codes[r] == 0, outs[r])
            for _, line in ipairs({
                ('ddplua: rank %d: DDP bucket layout at construction (process group %d): '
                    .. '1 bucket, 2 parameters'):format(r, r // 2 + 1),
                ('ddplua: rank %d:   bucket 0: 32 bytes, 2 parameters: '):format(r),
                ('ddplua: rank %d: DDP bucket layout rebuilt in gradient-ready order after the '
                    .. 'first iteration (process group %d)'):format(r, r // 2 + 1)}) do
                assert(outs[r]:find(line, 1, true), ('rank %d: %q not logged:\n%s'):format(r,
                    line, outs[r]))
            end
        end
    end)

    it('logs every group made: id, global ranks, backend, transport', function()
        local outs, codes = S.run_world(4, groups, {env = 'DDPLUA_DISTRIBUTED_DEBUG=INFO'})
        assert_all_ok(outs, codes, 4)
        local function has(r, line)
            assert(outs[r]:find(line, 1, true), ('rank %d: %q not logged:\n%s'):format(r, line,
                outs[r]))
        end
        for r = 0, 3 do
            has(r, ('ddplua: rank %d: process group 0: ranks [0, 1, 2, 3], backend gloo, '
                .. 'transport shm'):format(r))
            has(r, ('ddplua: rank %d: process group 1: ranks [3, 1], backend gloo, transport %s')
                :format(r, r % 2 == 1 and 'shm' or 'none (not a member)'))
            has(r, ('ddplua: rank %d: process group 2: ranks [0, 2], backend gloo'):format(r))
        end
        local quiet_outs = S.run_world(2, groups, {env = 'DDPLUA_SHM=0'})
        assert(not quiet_outs[0]:find('process group 0', 1, true), 'logged without INFO:\n'
            .. quiet_outs[0])
        outs = S.run_world(2, groups, {env = 'DDPLUA_SHM=0 DDPLUA_DISTRIBUTED_DEBUG=DETAIL'})
        assert(outs[1]:find('process group 1: ranks [1], backend gloo, transport gloo', 1, true),
            'DETAIL logs as INFO does:\n' .. outs[1])
    end)
end)
