-- spec/dist/dist_rooted_collectives_spec.lua: the rooted collectives and all-to-all (reduce,
-- gather, scatter, all_to_all, all_to_all_single) and isend/irecv on real processes:
-- spec/dist/workers/collectives_more.lua on 2 and 4 ranks under the launcher, through shared memory
-- (the default on one machine) and through Gloo (DDPLUA_SHM=0), each rank checking values computed
-- locally, the argument errors and a size mismatch across ranks; then a one-rank group in this
-- process. Every process runs under `timeout`, so no case can hang.
local S = require 'shell_util'
local bin, src = S.bin, S.src
local q, sh, free_port = S.q, S.sh, S.free_port
local worker = src .. '/spec/dist/workers/collectives_more.lua'

describe('dist rooted collectives and all-to-all (launcher)', function()
    for _, path in ipairs({{'shared memory', ''}, {'gloo', 'DDPLUA_SHM=0'}}) do
        for _, n in ipairs({2, 4}) do
            it(('pass every check on %d ranks through %s'):format(n, path[1]), function()
                local out, code = sh(('env %s timeout 120 %s %s --nproc %d'):format(path[2],
                    q(bin), q(worker), n))
                assert(code == 0, out)
                for r = 0, n - 1 do assert.truthy(out:find('DIST_OK ' .. r, 1, true), out) end
            end)
        end
    end
end)

-- A one-rank default group in this process, destroyed when the test ends.
local function one_rank_world()
    local dist = require('ddplua').dist
    dist.init_process_group({backend = 'gloo', init_method = 'tcp://127.0.0.1:' .. free_port(),
        rank = 0, world_size = 1, timeout = 10})
    finally(function() dist.destroy_process_group() end)
end

describe('dist rooted collectives in a one-rank group', function()
    local ddpl = require 'ddplua'
    local dist = ddpl.dist

    it('run, and refuse bad arguments by name', function()
        one_rank_world()
        local x = ddpl.tensor({1.5, -2, 3})
        dist.reduce(x, 0, {op = 'avg'})
        assert.are.same({1.5, -2, 3}, x:tolist())
        local out = {ddpl.zeros(3)}
        local w = dist.gather(x, out, 0, {async_op = true})
        assert.is_true(w:wait())
        assert.are.same({1.5, -2, 3}, out[1]:tolist())
        local y = ddpl.zeros(3)
        dist.scatter(y, {x}, 0)
        assert.are.same({1.5, -2, 3}, y:tolist())
        local o = {ddpl.zeros(2, {dtype = 'int32'})}
        dist.all_to_all(o, {ddpl.tensor({4, 5}, {dtype = 'int32'})})
        assert.are.same({4, 5}, o[1]:tolist())
        local z = ddpl.zeros(2, 2)
        dist.all_to_all_single(z, ddpl.tensor({{1, 2}, {3, 4}}, {dtype = 'float32'}), {input_split_sizes = {2},
            output_split_sizes = {2}})
        assert.are.same({{1, 2}, {3, 4}}, z:tolist())
        -- empty tensors move nothing and still complete
        dist.all_to_all_single(ddpl.zeros(0, 3), ddpl.zeros(0, 3))
        dist.gather(ddpl.zeros(0), {ddpl.zeros(0)}, 0)

        local ok, err = pcall(dist.gather, x, nil, 0)
        assert.is_false(ok)
        assert.truthy(tostring(err):find(
            'gather: the dst (rank 0) needs a gather_list of 1 tensors (the group\'s size), got nil', 1,
            true), err)
        ok, err = pcall(dist.reduce, x, 1)
        assert.truthy(tostring(err):find('reduce: dst rank 1 is out of range for world_size 1', 1,
            true), err)
        ok, err = pcall(dist.scatter, y, {ddpl.zeros(3, {dtype = 'float64'})}, 0)
        assert.truthy(tostring(err):find(
            'scatter: scatter_list[0] is [3] float64, but the output is [3] float32', 1, true), err)
        ok, err = pcall(dist.all_to_all_single, z, z, {input_split_sizes = {3}})
        assert.truthy(tostring(err):find(
            'all_to_all_single: input_split_sizes[0] = 3 is more than the rows left of dim 0', 1,
            true), err)
        ok, err = pcall(dist.all_to_all_single, z, z, {split = {2}})
        assert.truthy(tostring(err):find("all_to_all_single: unknown option 'split'", 1, true),
            err)
        ok, err = pcall(dist.all_to_all, {z}, {'x'})
        assert.truthy(tostring(err):find('all_to_all: expected a list of tensors, got string at '
            .. 'position 1', 1, true), err)
        -- the group is still usable after refused calls
        dist.all_reduce(x)
        assert.are.same({1.5, -2, 3}, x:tolist())
    end)
end)

describe('get_rank and get_world_size in API.md\'s form', function()
    local ddpl = require 'ddplua'
    local dist = ddpl.dist

    it('take {group = g} as they take g, and refuse other options by name', function()
        one_rank_world()
        local g = dist.new_group({0})
        assert.are.equal(0, dist.get_rank({group = g}))
        assert.are.equal(1, dist.get_world_size({group = g}))
        assert.are.equal(dist.get_rank(g), dist.get_rank({group = g}))
        assert.are.equal(0, dist.get_rank({})) -- no group: the default one
        assert.are.same({0}, dist.get_process_group_ranks({group = g}))
        local ok, err = pcall(dist.get_rank, {grp = g})
        assert.is_false(ok)
        assert.truthy(tostring(err):find("get_rank: unknown option 'grp' (expected {group = g})",
            1, true), err)
        ok, err = pcall(dist.get_world_size, {group = 3})
        assert.is_false(ok)
        assert.truthy(tostring(err):find('get_world_size: group must be a process group', 1, true),
            err)
    end)
end)
