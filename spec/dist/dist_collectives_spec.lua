-- spec/dist/dist_collectives_spec.lua: ddpl.distributed on real processes: every collective and
-- reduce op on 2 and 4 ranks (sync and async, float32/float64/int64, checked in each rank against
-- values computed locally: spec/dist/workers/collectives.lua), started both by this spec (RANK,
-- WORLD_SIZE, MASTER_ADDR, MASTER_PORT set per process) and by `ddplua script --nproc N`, with
-- allreduce through shared memory and through Gloo; a rank that never joins (the others fail at a
-- short timeout naming it); a peer that stops taking part in a collective (the others fail at the
-- timeout, never hang); two "nodes" as network namespaces joined by a veth pair; and a one-rank
-- group inside this very process (the stock lua5.4 C module).
-- Every process runs under `timeout`, so no case can hang.
local S = require 'shell_util'
local bin, src = S.bin, S.src
local q, slurp, write, sh, free_port = S.q, S.slurp, S.write, S.sh, S.free_port
local collectives = src .. '/spec/dist/workers/collectives.lua'

local tmpdir = S.new_tmpdir()

-- Starts one process per entry of `ranks` ({rank=, script=, prefix= (a command that runs the
-- rest in a node of tools/netns-cluster.sh)})
-- with the torchrun environment, waits for all; returns outputs[rank] and codes[rank].
local function run_ranks(world, ranks, opts)
    opts = opts or {}
    local port = opts.port or free_port()
    local addr = opts.addr or '127.0.0.1'
    local parts = {}
    for _, r in ipairs(ranks) do
        local out = ('%s/out%d'):format(tmpdir, r.rank)
        os.remove(out)
        parts[#parts + 1] = ('( %s env %s RANK=%d LOCAL_RANK=%d WORLD_SIZE=%d MASTER_ADDR=%s '
            .. 'MASTER_PORT=%d timeout %d %s %s > %s 2>&1; echo "EXIT $?" >> %s ) &'):format(
            r.prefix or '', opts.env or '', r.rank, r.rank, world, addr, port,
            opts.kill_after or 60, q(bin), q(r.script or collectives), q(out), q(out))
    end
    sh(table.concat(parts, ' ') .. ' wait')
    local outs, codes = {}, {}
    for _, r in ipairs(ranks) do
        outs[r.rank] = slurp(('%s/out%d'):format(tmpdir, r.rank))
        codes[r.rank] = tonumber(outs[r.rank]:match('EXIT (%d+)%s*$'))
    end
    return outs, codes
end

-- asserts that text (or an error value) contains the plain string want
local function assert_has(text, want)
    local s = tostring(text)
    assert(s:find(want, 1, true), ('%q not found in:\n%s'):format(want, s))
end

local function all_ranks(n, extra)
    local t = {}
    for r = 0, n - 1 do
        t[#t + 1] = {rank = r}
        for k, v in pairs(extra or {}) do t[#t][k] = v end
    end
    return t
end

local function assert_all_ok(outs, codes, n) S.assert_ranks_ok(outs, codes, n, 'DIST_OK') end

describe('dist collectives (processes started by the spec)', function()
    -- allreduce and barrier go through shared memory on one machine, through Gloo with
    -- DDPLUA_SHM=0 (and across the namespaces below)
    for _, path in ipairs({{'shared memory', ''}, {'gloo', 'DDPLUA_SHM=0'}}) do
        for _, n in ipairs({2, 4}) do
            local name = ('pass every check on %d ranks (allreduce through %s)'):format(n, path[1])
            it(name, function()
                local outs, codes = run_ranks(n, all_ranks(n), {env = path[2]})
                assert_all_ok(outs, codes, n)
            end)
        end
    end
end)

describe('dist collectives under the launcher', function()
    for _, n in ipairs({2, 4}) do
        it('pass every check with --nproc ' .. n, function()
            local out, code = sh(('timeout 60 %s %s --nproc %d'):format(q(bin), q(collectives), n))
            assert(code == 0, out)
            for r = 0, n - 1 do assert.truthy(out:find('DIST_OK ' .. r, 1, true), out) end
        end)
    end
end)

describe('dist init failures', function()
    local join = tmpdir .. '/join.lua'
    write(join, [[
local ddpl = require 'ddplua'
local t0 = ddpl.time()
local ok, err = pcall(ddpl.dist.init_process_group, {timeout = 2})
print(('JOIN ok=%s after=%.2f'):format(tostring(ok), ddpl.time() - t0))
print(err)
os.exit(ok and 0 or 3)
]])
    local idle = tmpdir .. '/idle.lua'
    write(idle, 'print("never calls init")\n')

    it('a rank that never calls init: the others fail at the timeout, naming it', function()
        local ranks = {{rank = 0, script = join}, {rank = 1, script = join},
            {rank = 2, script = idle}}
        local outs, codes = run_ranks(3, ranks, {kill_after = 20})
        for r = 0, 1 do
            assert.are.equal(3, codes[r], outs[r])
            assert_has(outs[r],
                'init_process_group: timed out after 2 s waiting for rank 2 to join')
            local after = tonumber(outs[r]:match('after=([%d.]+)'))
            assert(after and after >= 1.9 and after < 8, outs[r])
        end
    end)

    local stuck = tmpdir .. '/stuck.lua'
    write(stuck, [[
local ddpl = require 'ddplua'
local dist = ddpl.dist
dist.init_process_group({timeout = 2})
if dist.get_rank() == 1 then os.execute('sleep 3.5'); os.exit(0) end -- alive, never joins in
local t0 = ddpl.time()
local ok, err = pcall(dist.all_reduce, ddpl.ones(4))
print(('STUCK ok=%s after=%.2f'):format(tostring(ok), ddpl.time() - t0))
print(err)
local _, again = pcall(dist.all_reduce, ddpl.ones(4))
print('AGAIN ' .. tostring(again))
os.exit(ok and 0 or 3)
]])
    for _, path in ipairs({{'shared memory', ''}, {'gloo', 'DDPLUA_SHM=0'}}) do
        local name = 'a peer that stops taking part: all_reduce fails at the timeout, then at '
            .. 'once (' .. path[1] .. ')'
        it(name, function()
            local ranks = {{rank = 0, script = stuck}, {rank = 1, script = stuck}}
            local outs, codes = run_ranks(2, ranks, {kill_after = 20, env = path[2]})
            local out = outs[0]
            assert.are.equal(3, codes[0], out)
            local after = tonumber(out:match('after=([%d.]+)'))
            assert(after and after >= 1.9 and after < 5, out)
            assert.truthy(out:find('all_reduce: ', 1, true), out)
            assert.truthy(out:lower():find('timed out', 1, true), out)
            if path[2] == '' then -- shared memory names the rank that never came
                assert.truthy(out:find('rank 1 of the group did not arrive', 1, true), out)
            end
            assert.truthy(out:find('AGAIN [^\n]*all_reduce: the process group is unusable after '
                .. 'an earlier failure'), out)
        end)
    end

    it('a missing rank 0 is named as the store host the others could not reach', function()
        local outs, codes = run_ranks(2, {{rank = 1, script = join}}, {kill_after = 20})
        assert.are.equal(3, codes[1], outs[1])
        assert.truthy(outs[1]:find('could not reach the store that rank 0 hosts', 1, true), outs[1])
    end)
end)

describe('dist in this process', function()
    local ddpl = require 'ddplua'
    local dist = ddpl.dist

    it('refuses nccl, unknown backends and calls before init, by name', function()
        assert.is_false(dist.is_initialized())
        -- nccl is refused only where it cannot work (no NCCL in the build, or no device: the
        -- CUDA emulation build and a GPU machine have both, spec/dist/nccl_spec.lua runs it there)
        local ok, err
        if not (ddpl.config().nccl and ddpl.cuda.is_available()) then
            ok, err = pcall(dist.init_process_group, {backend = 'nccl', rank = 0, world_size = 1})
            assert.is_false(ok)
            assert_has(err, "init_process_group: backend 'nccl'")
            local s = tostring(err)
            assert.truthy(s:find('no NCCL', 1, true) or s:find('CUDA is not available', 1, true),
                s)
        end
        ok, err = pcall(dist.init_process_group, {backend = 'mpi', rank = 0, world_size = 1})
        assert.truthy(tostring(err):find("unknown backend 'mpi'", 1, true), err)
        ok, err = pcall(dist.init_process_group,
            {rank = 0, world_size = 1, init_method = 'file:///x'})
        assert.truthy(tostring(err):find("unsupported init_method 'file:///x'", 1, true), err)
        ok, err = pcall(dist.get_rank)
        assert_has(err, 'get_rank: the default process group is not initialized')
        ok, err = pcall(dist.all_reduce, ddpl.ones(2))
        assert_has(err, 'all_reduce: the default process group is not initialized')
    end)

    it('runs a one-rank group over tcp://', function()
        local port = free_port()
        dist.init_process_group({backend = 'gloo', init_method = 'tcp://127.0.0.1:' .. port,
            rank = 0, world_size = 1, timeout = 10})
        assert.is_true(dist.is_initialized())
        assert.are.equal(0, dist.get_rank())
        assert.are.equal(1, dist.get_world_size())
        assert.are.equal('gloo', dist.get_backend())
        local x = ddpl.tensor({1.5, -2, 3})
        local w = dist.all_reduce(x, {op = 'avg', async_op = true})
        assert.is_true(w:wait())
        assert.is_true(w:is_completed())
        assert.is_nil(w:exception())
        assert.are.same({1.5, -2, 3}, x:tolist())
        local out = ddpl.zeros(3)
        dist.reduce_scatter_tensor(out, x, {op = dist.ReduceOp.SUM})
        assert.are.same({1.5, -2, 3}, out:tolist())
        local ok, err = pcall(dist.all_reduce, ddpl.zeros(2, {dtype = 'int32'}))
        assert.is_false(ok)
        assert_has(err, 'all_reduce: expected a CPU tensor of float32/float64/int64, got int32')
        dist.barrier()
        dist.destroy_process_group()
        assert.is_false(dist.is_initialized())
    end)
end)

-- Gloo writes to its sockets with writev, and a peer that died turns that into SIGPIPE, whose
-- default action killed a surviving rank (exit 141) before Gloo could report the peer: the
-- first Gloo connection ignores SIGPIPE where it is at its default, as Python does at start-up.
-- The child starts with SIGPIPE at its default (Python's subprocess restores it), whatever
-- this process inherited.
describe('gloo and SIGPIPE', function()
    it('ignores SIGPIPE once a gloo group connects, as Python does', function()
        local script = S.script_file([[
local ddpl = require 'ddplua'
local function ignored()
    for line in io.lines('/proc/self/status') do
        local mask = line:match('^SigIgn:%s*(%x+)')
        if mask then return (tonumber(mask, 16) >> 12) & 1 == 1 end -- bit 12: signal 13
    end
end
print('before ' .. tostring(ignored()))
ddpl.dist.init_process_group({backend = 'gloo', init_method = 'tcp://127.0.0.1:' .. arg[1],
    rank = 0, world_size = 1, timeout = 10})
print('after ' .. tostring(ignored()))
ddpl.dist.destroy_process_group()
]])
        local launcher = 'import subprocess, sys; sys.exit(subprocess.run(sys.argv[1:]).returncode)'
        local out, code = sh(('/usr/bin/python3 -c %s %s %s %d'):format(q(launcher), q(bin),
            q(script), free_port()))
        os.remove(script)
        assert.are.equal(0, code, out)
        assert.truthy(out:find('before false', 1, true), out)
        assert.truthy(out:find('after true', 1, true), out)
    end)
end)

-- Two "nodes" of tools/netns-cluster.sh: network namespaces on a bridge, 10.77.0.1 (A) and
-- 10.77.0.2 (B). Returns the command prefixes that run a command in each, or marks the test
-- pending where namespaces cannot be made; the nodes are removed when the test ends, whatever
-- happens.
local function two_nodes()
    local harness = q(src .. '/tools/netns-cluster.sh')
    local env = ('DDPL_NETNS_PREFIX=d%05d'):format(math.random(0, 99999))
    local out, code = sh(('%s %s check 2>&1'):format(env, harness))
    if code ~= 0 then pending('cannot create network namespaces here: ' .. out) end
    finally(function() sh(('%s %s down'):format(env, harness)) end)
    out, code = sh(('%s %s up 2 2>&1'):format(env, harness))
    assert(code == 0, out)
    return ('%s %s run 0'):format(env, harness), ('%s %s run 1'):format(env, harness)
end

describe('dist across two network namespaces', function()
    it('completes every collective, ranks 0-1 on node A and 2-3 on node B', function()
        local na, nb = two_nodes()
        local ranks = {
            {rank = 0, prefix = na}, {rank = 1, prefix = na},
            {rank = 2, prefix = nb}, {rank = 3, prefix = nb},
        }
        local outs, codes = run_ranks(4, ranks, {addr = '10.77.0.1', port = 29400})
        assert_all_ok(outs, codes, 4)
    end)

    it('completes every collective under the launcher with --nnodes 2', function()
        local na, nb = two_nodes()
        -- several nodes need the store's shared secret (engine/cli/launch_token.c)
        local cmd = '( DDPLUA_STORE_TOKEN=two-nodes %s timeout 60 %s %s --nnodes 2 --node-rank %d '
            .. '--nproc 2 --master-addr 10.77.0.1 --master-port 29401 > %s 2>&1; '
            .. 'echo "EXIT $?" >> %s ) &'
        local oa, ob = tmpdir .. '/nodeA', tmpdir .. '/nodeB'
        sh(cmd:format(na, q(bin), q(collectives), 0, q(oa), q(oa)) .. ' '
            .. cmd:format(nb, q(bin), q(collectives), 1, q(ob), q(ob)) .. ' wait')
        local a, b = slurp(oa), slurp(ob)
        assert(a:find('EXIT 0', 1, true) and b:find('EXIT 0', 1, true), a .. '\n----\n' .. b)
        for r = 0, 3 do assert.truthy((a .. b):find('DIST_OK ' .. r, 1, true), a .. b) end
    end)
end)

teardown(function() os.execute('rm -rf ' .. q(tmpdir)) end)
