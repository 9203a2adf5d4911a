-- spec/dist/dist_hier_allreduce_spec.lua: hierarchical allreduce across the nodes of a namespace
-- cluster (tools/netns-cluster.sh; engine/distributed/pg_host_hier.c, issue 30 item 3): shared
-- memory inside each node, Gloo between one leader per node. Every reduce op exact on every dtype
-- and size (spec/dist/workers/hier.lua), the collectives that stay flat still right, a mismatched
-- call named on every rank with every rank's call, and, read from each node's own link counters,
-- one all_reduce of G bytes sends at most about 2(M-1)/M x G out of every node, less than the flat
-- Gloo ring over all ranks; ranks spread over the nodes in any order, a node with one rank; a
-- rank of another node that dies is named with its host. (DDP across nodes through the
-- hierarchy, to 1e-6 against one process: spec/tools/netns_cluster_spec.lua.) Pending where
-- namespaces cannot be made (not root).
local S = require 'shell_util'
local C = require 'cluster_util'
local q = S.q
local worker = S.src .. '/spec/dist/workers/hier.lua'
local G = 4 * 1024 * 1024 -- bytes of the all_reduce whose link bytes spec/dist/workers/hier.lua counts

local function up(k, rate)
    return C.up(k, rate, pending, finally)
end

-- Runs the worker on `nodes` nodes x 2 ranks through the launcher: the nodes' outputs, all ok.
local function run_nodes(p, nodes, env)
    local dir = S.new_tmpdir()
    S.sh(C.start_nodes(p, nodes, dir, worker, nil, env, 120) .. ' wait')
    local out, ok = C.node_outputs(dir, nodes)
    os.execute('rm -rf ' .. q(dir))
    return out, ok
end

-- Starts `script` as ranks placed on the nodes of p by `layout` (layout[r + 1]: rank r's node),
-- without the launcher: RANK, WORLD_SIZE, LOCAL_RANK (its place among its node's ranks),
-- GROUP_RANK and MASTER_* as a cluster scheduler would set them; rank r's output into
-- dir/rank<r>. The shell command line, in the background, as C.start_nodes.
local function start_ranks(p, layout, dir, script, env)
    local parts, seen = {}, {}
    for r = 0, #layout - 1 do
        local node = layout[r + 1]
        seen[node] = (seen[node] or 0) + 1
        parts[#parts + 1] = ('( DDPL_NETNS_PREFIX=%s %s run %d env RANK=%d WORLD_SIZE=%d '
            .. 'LOCAL_RANK=%d GROUP_RANK=%d MASTER_ADDR=10.77.0.1 MASTER_PORT=29500 %s timeout 90 '
            .. '%s %s > %s/rank%d 2>&1; echo "EXIT $?" >> %s/rank%d ) &'):format(p, q(C.harness),
            node, r, #layout, seen[node] - 1, node, env or '', q(S.bin), q(script), q(dir), r,
            q(dir), r)
    end
    return table.concat(parts, ' ')
end

-- The ranks' outputs joined under "---- rank <r>" lines, whether all exited 0, and each one
-- (by rank + 1).
local function rank_outputs(dir, n)
    local all, each, ok = {}, {}, true
    for r = 0, n - 1 do
        each[r + 1] = S.slurp(('%s/rank%d'):format(dir, r))
        ok = ok and each[r + 1]:find('EXIT 0', 1, true) ~= nil
        all[#all + 1] = ('---- rank %d\n%s'):format(r, each[r + 1])
    end
    return table.concat(all, '\n'), ok, each
end

-- The TX lines: node -> bytes one all_reduce of G sent out of its link.
local function tx_by_node(out)
    local tx = {}
    for node, bytes in out:gmatch('TX node=(%d+) bytes=(%d+)') do tx[tonumber(node)] = tonumber(bytes) end
    return tx
end

-- Every one of nodes 0 .. nodes-1 sent between lo and hi bytes per all_reduce of G (out: the
-- outputs, for the message).
local function assert_link_bytes(out, nodes, lo, hi)
    local tx = tx_by_node(out)
    for n = 0, nodes - 1 do
        assert(tx[n] and tx[n] >= lo and tx[n] <= hi, ('node %d sent %s bytes per all_reduce of '
            .. '%d (expected %.0f to %.0f):\n%s'):format(n, tx[n], G, lo, hi, out))
    end
end

local function count(out, pattern)
    return select(2, out:gsub(pattern, ''))
end

describe('hierarchical all_reduce across network namespaces', function()
    it('on 2 nodes x 2 ranks: exact, flat collectives behind its check, mismatches named, '
        .. 'G bytes out of each link', function()
        local p = up(2, '1gbit')
        local out, ok = run_nodes(p, 2, 'MISMATCH=1 DDPLUA_DISTRIBUTED_DEBUG=INFO')
        assert(ok, out)
        assert.are.equal(4, count(out, 'HIER_OK rank=%d'), out)
        assert.are.equal(4, count(out, 'transport gloo%+shm %(hierarchical: shared memory within '
            .. 'each of 2 nodes, gloo across%)'), out)
        -- the same message on every rank, naming every rank's call
        local want = 'MISMATCH all_reduce: collective #%d+ of group 0 differs across ranks: ranks '
            .. '0, 1, 2 called all_reduce%(float32, 4 elements, op sum%), rank 3 called '
            .. 'all_reduce%(float32, 5 elements, op sum%)'
        assert.are.equal(4, count(out, want), out)
        -- 2(M-1)/M x G = G for M = 2, and a little for the packets' headers
        assert_link_bytes(out, 2, 0.97 * G, 1.03 * G)
    end)

    it('on 3 nodes x 2 ranks: at most about 2(M-1)/M x G out of every link, less than the '
        .. 'flat ring', function()
        local p = up(3, '1gbit')
        local flat_out, flat_ok = run_nodes(p, 3, 'DDPLUA_HIER=0 DDPLUA_DISTRIBUTED_DEBUG=INFO')
        assert(flat_ok, flat_out)
        assert.are.equal(6, count(flat_out, 'transport gloo,'), flat_out)
        local out, ok = run_nodes(p, 3)
        assert(ok, out)
        local flat, hier = tx_by_node(flat_out), tx_by_node(out)
        for n = 0, 2 do
            assert(hier[n] and hier[n] <= 1.03 * 4 / 3 * G and hier[n] < flat[n],
                ('node %d: hierarchical %s, flat %s bytes per all_reduce of %d:\n%s\n%s'):format(
                    n, hier[n], flat[n], G, out, flat_out))
        end
    end)

    it('ranks spread over the nodes in any order, one node with a single rank', function()
        local p = up(3, '1gbit')
        local dir = S.new_tmpdir()
        local layout = {0, 1, 2, 0, 2} -- rank r on node layout[r + 1]
        S.sh(start_ranks(p, layout, dir, worker, 'DDPLUA_DISTRIBUTED_DEBUG=INFO') .. ' wait')
        local out, ok = rank_outputs(dir, #layout)
        os.execute('rm -rf ' .. q(dir))
        assert(ok, out)
        assert.are.equal(5, count(out, 'HIER_OK rank=%d'), out)
        assert.are.equal(5, count(out, 'within each of 3 nodes'), out)
        assert_link_bytes(out, 3, 0, 1.03 * 4 / 3 * G)
    end)

    for _, victim in ipairs({{3, 'a rank that is not its node\'s leader'}, {2, 'a node\'s leader'}}) do
        it(('a rank of another node dies, %s: the other node names it and its host'):format(
            victim[2]), function()
            local p = up(2, '1gbit')
            local dir = S.new_tmpdir()
            local script = S.src .. '/spec/dist/workers/steady.lua'
            local kill = ('for pid in $(ip netns pids %s-n1); do grep -qz "^RANK=%d$" '
                .. '/proc/$pid/environ 2>/dev/null && kill -KILL $pid; done'):format(p, victim[1])
            S.sh(start_ranks(p, {0, 0, 1, 1}, dir, script, 'HB=3')
                .. (' for i in $(seq 400); do [ "$(cat %s/rank* | grep -c STEADY)" = 4 ] && '
                .. 'break; sleep 0.1; done; %s; wait'):format(q(dir), kill))
            local out, _, each = rank_outputs(dir, 4)
            os.execute('rm -rf ' .. q(dir))
            assert.are.equal(4, count(out, 'STEADY %d'), out)
            for r = 0, 1 do
                local mine = each[r + 1]:match('FAULT after=[%d.]+ ([^\n]*)')
                assert(mine, ('rank %d reported no fault:\n%s'):format(r, out))
                assert(mine:find(('rank %d %%(pid %%d+, host %s%%-n1%%)'):format(victim[1], p)),
                    ('rank %d named the wrong rank:\n%s'):format(r, out))
            end
        end)
    end
end)
