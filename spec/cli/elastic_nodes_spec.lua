-- spec/cli/elastic_nodes_spec.lua: elastic jobs on several machines (engine/cli/launch_rdzv.c;
-- issue 30, item 5), on a cluster of network namespaces (tools/netns-cluster.sh): with
-- `--nnodes 2:3 --max-restarts 1`, examples/ddp_train.lua on the real Fashion-MNIST on 3 nodes x
-- 2 ranks loses a whole node mid-epoch (every process of its namespace killed, its launcher
-- too); the other two restart from the last checkpoint on 4 ranks, finish, and end with the
-- parameters and optimizer state of a 2-node run started from that checkpoint, bit for bit. A
-- node that starts late joins at a restart that uses none of --max-restarts, and the job goes on
-- with it. Pending where namespaces cannot be made (not root).
local S = require 'shell_util'
local C = require 'cluster_util'
local q = S.q
local train = S.src .. '/examples/ddp_train.lua'
local TRAIN = '--epochs 4 --train-size 6144 --test-size 200 --progress off'

local function up(k)
    return C.up(k, '1gbit', pending, finally)
end

-- The shell command that starts the launcher of node n in the background (its output and exit
-- status into dir/<name>).
local function launcher(p, n, dir, name, flags, args, env)
    return ('( DDPL_NETNS_PREFIX=%s DDPLUA_STORE_TOKEN=spec-elastic %s run %d env %s timeout 150 %s '
        .. '%s --node-rank %d --nproc 2 '
        .. '--master-addr 10.77.0.1 --master-port 29500 %s -- %s > %s/%s 2>&1; echo "EXIT $?" '
        .. '>> %s/%s ) &'):format(p, q(C.harness), n, env, q(S.bin), q(train), n, flags, args,
        q(dir), name, q(dir), name)
end

-- Largest difference over the model's parameters and the optimizer's state of two checkpoints.
local function difference(a, b)
    local script = os.tmpname() .. '.lua'
    S.write(script, [[
local ddpl = require 'ddplua'
local a, b = ddpl.load(arg[1]), ddpl.load(arg[2])
local n, worst = 0, 0
local function cmp(x, y)
    for k, v in pairs(x) do
        if ddpl.is_tensor(v) then
            n, worst = n + 1, math.max(worst, (v:double() - y[k]:double()):abs():max():item())
        elseif type(v) == 'table' then cmp(v, y[k]) end
    end
end
cmp(a.model, b.model)
cmp(a.optimizer, b.optimizer)
print(('COMPARED %d %g %d %d'):format(n, worst, a.epoch, b.epoch))]])
    local out, code = S.sh(('%s %s %s %s'):format(q(S.bin), q(script), q(a), q(b)))
    os.remove(script)
    local n, worst, ea, eb = out:match('COMPARED (%d+) (%S+) (%d+) (%d+)')
    assert(n, out .. ' (exit ' .. tostring(code) .. ')')
    return tonumber(worst), tonumber(n), tonumber(ea), tonumber(eb)
end

describe('elastic jobs on several machines (--nnodes MIN:MAX)', function()
    it('lose a node mid-epoch, finish on the others and equal a run of those from the '
        .. 'checkpoint, bit for bit', function()
        local p = up(3)
        local dir = S.new_tmpdir()
        local ck, ref, ck_ref = dir .. '/ck.safetensors', dir .. '/ref.safetensors',
            dir .. '/b.safetensors'
        local parts = {}
        for n = 0, 2 do
            parts[#parts + 1] = launcher(p, n, dir, 'node' .. n, '--nnodes 2:3 --max-restarts 1',
                TRAIN .. ' --checkpoint ' .. q(ck), 'DDPLUA_RUN_ID=elastic DDPLUA_RDZV_LAST_CALL=3')
        end
        -- once the first checkpoint is there (after epoch 1), node 2 is lost: everything in its
        -- namespace killed at once, its launcher too; the checkpoint is kept for the reference
        S.sh(table.concat(parts, ' ') .. (' for i in $(seq 900); do [ -e %s ] && break; sleep 0.1; '
            .. 'done; for pid in $(ip netns pids %s-n2); do kill -KILL $pid; done; cp %s %s; wait')
            :format(q(ck), p, q(ck), q(ref)))
        local out, ok = C.node_outputs(dir, 2)
        assert(ok, out)
        -- generation 1, or 2 on a loaded machine whose node 2 started after the last call (it
        -- then joined at generation 1, a membership change, before it was lost)
        assert.truthy(out:find('starting generation %d on the nodes that join it %(restart 1 of 1%)'),
            out)
        local resumed = out:match('resumed from [^\n]* after epoch (%d)')
        assert(resumed, out)
        assert.truthy(out:find('4 ranks x batch 32', 1, true), out)
        assert.truthy(out:find('epoch 4/4', 1, true), out)
        -- the reference: 2 nodes from the same checkpoint
        S.sh(launcher(p, 0, dir, 'ref0', '--nnodes 2', TRAIN .. (' --resume %s --checkpoint %s')
            :format(q(ref), q(ck_ref)), 'DDPLUA_RUN_ID=reference') .. ' '
            .. launcher(p, 1, dir, 'ref1', '--nnodes 2', TRAIN .. (' --resume %s --checkpoint %s')
            :format(q(ref), q(ck_ref)), 'DDPLUA_RUN_ID=reference') .. ' wait')
        local ref_out = S.slurp(dir .. '/ref0') .. S.slurp(dir .. '/ref1')
        assert.are.equal(2, select(2, ref_out:gsub('EXIT 0', '')), ref_out)
        local worst, n, ea, eb = difference(ck, ck_ref)
        os.execute('rm -rf ' .. q(dir))
        assert.are.same({12, 0, 4, 4}, {n, worst, ea, eb})
    end)

    it('take a node that starts late at a restart that uses none of --max-restarts', function()
        local p = up(3)
        local dir = S.new_tmpdir()
        local ck = dir .. '/ck.safetensors'
        local flags, args = '--nnodes 2:3 --max-restarts 0', TRAIN .. ' --checkpoint ' .. q(ck)
        local env = 'DDPLUA_RUN_ID=late DDPLUA_RDZV_LAST_CALL=1'
        -- nodes 0 and 1 start on their own (at least 2: after the last call, without node 2);
        -- node 2 comes once the first checkpoint is written
        S.sh(launcher(p, 0, dir, 'node0', flags, args, env) .. ' '
            .. launcher(p, 1, dir, 'node1', flags, args, env)
            .. (' for i in $(seq 900); do [ -e %s ] && break; sleep 0.1; done; '):format(q(ck))
            .. launcher(p, 2, dir, 'node2', flags, args, env) .. ' wait')
        local out, ok = C.node_outputs(dir, 3)
        os.execute('rm -rf ' .. q(dir))
        assert(ok, out)
        assert.truthy(out:find('a node is waiting to join (2 running, at most 3)', 1, true), out)
        assert.truthy(out:find('starting generation 1 on the nodes that join it (restart 0 of 0)',
            1, true), out)
        assert.truthy(out:find('4 ranks x batch 32', 1, true), out)
        assert.truthy(out:find('6 ranks x batch 32', 1, true), out)
        assert.truthy(out:find('epoch 4/4', 1, true), out)
    end)
end)
