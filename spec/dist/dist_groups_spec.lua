-- spec/dist/dist_groups_spec.lua: process subgroups on real processes
-- (spec/dist/workers/groups.lua: new_group of a subset, collectives in it with values checked, two
-- disjoint groups in use at once, new_subgroups, the non-member's error, get_rank/get_world_size
-- with a group, src as a global rank, destroying one group), on 2 and 4 ranks, through shared
-- memory and through Gloo; DDP over a subgroup (spec/dist/workers/ddp_group.lua); the
-- DDPLUA_DISTRIBUTED_DEBUG=INFO log of every group and of DDP's bucket layout. A mismatch inside a
-- subgroup is in spec/dist/dist_mismatch_spec.lua. Every process runs under `timeout`
-- (spec/support/shell_util.lua).
local S = require 'shell_util'
local groups = S.src .. '/spec/dist/workers/groups.lua'
local ddp_group = S.src .. '/spec/dist/workers/ddp_group.lua'

local function assert_all_ok(outs, codes, n) S.assert_ranks_ok(outs, codes, n, 'GROUPS_OK') end

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

describe('new_group called differently across ranks', function()
    local function script(body)
        local path = S.new_tmpdir() .. '/script.lua'
        S.write(path, [[
local ddpl = require 'ddplua'
local dist = ddpl.dist
dist.init_process_group({backend = 'gloo', timeout = 60})
local r = dist.get_rank()
]] .. body)
        return path
    end

    it('other ranks on some rank: an error on both naming both lists', function()
        local outs, codes = S.run_world(2, script([[
local ok, err = pcall(dist.new_group, r == 0 and {0, 1} or {1, 0})
print(ok and 'NO_ERROR' or ('ERR ' .. tostring(err)))
]]))
        for r = 0, 1 do
            assert(codes[r] == 0, outs[r])
            local want = ('ERR new_group: the ranks disagree on process group 1: rank %d was given '
                .. 'ranks [%s], rank %d ranks [%s]'):format(r, r == 0 and '0, 1' or '1, 0', 1 - r,
                r == 0 and '1, 0' or '0, 1')
            assert(outs[r]:find(want, 1, true), want .. '\nnot in:\n' .. outs[r])
        end
    end)

    it('a member that never calls it: the others fail at the timeout, naming it', function()
        local outs, codes = S.run_world(2, script([[
if r == 1 then os.execute('sleep 4'); os.exit(0) end -- alive, never creates the group
local ok, err = pcall(dist.new_group, {0, 1}, {timeout = 1.5})
print(ok and 'NO_ERROR' or ('ERR ' .. tostring(err)))
os.exit(0)
]]))
        assert(codes[0] == 0, outs[0])
        local want = 'ERR new_group: timed out after 1.5 s waiting for rank 1 to create process '
            .. 'group 1'
        assert(outs[0]:find(want, 1, true), want .. '\nnot in:\n' .. outs[0])
    end)

    it('bad ranks are refused by name on the calling rank', function()
        local outs, codes = S.run_world(2, script([[
for _, bad in ipairs({{0, 0}, {0, 2}, {}, {0.5}}) do
    local ok, err = pcall(dist.new_group, bad)
    print(ok and 'NO_ERROR' or ('ERR ' .. tostring(err)))
end
]]))
        for r = 0, 1 do
            assert(codes[r] == 0, outs[r])
            for _, want in ipairs({'ERR new_group: rank 0 is listed twice',
                'ERR new_group: rank 2 is out of range for world_size 2',
                'ERR new_group: expected a list of 1 to 2 ranks (world_size), got 0',
                'ERR new_group: rank 1 of the list is not an integer (number)'}) do
                assert(outs[r]:find(want, 1, true), want .. '\nnot in:\n' .. outs[r])
            end
            assert(not outs[r]:find('NO_ERROR', 1, true), outs[r])
        end
    end)
end)

describe('DDP with process_group = a subgroup', function()
    for _, path in ipairs({{'shared memory', ''}, {'gloo', 'DDPLUA_SHM=0'}}) do
        it('averages within each pair (new_subgroups(2) of 4 ranks) through ' .. path[1],
            function()
                local outs, codes = S.run_world(4, ddp_group, {env = path[2]})
                S.assert_ranks_ok(outs, codes, 4, 'DDP_GROUP_OK')
                for r = 0, 3 do
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
