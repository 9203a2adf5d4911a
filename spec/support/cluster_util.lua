-- spec/support/cluster_util.lua: what the specs on a cluster of network namespaces share
-- (netns_cluster_spec, dist_hier_allreduce_spec): the harness (tools/netns-cluster.sh) under a
-- prefix of the spec's own, a cluster that is removed when the test ends, and the launcher started
-- on every node.
-- defines: harness, new_prefix, cluster, up, leftovers, start_nodes, node_outputs.
local S = require 'shell_util'
local q = S.q
local C = {}

C.harness = S.src .. '/tools/netns-cluster.sh'

-- A prefix of our own (specs run in parallel): "c" and 5 digits.
function C.new_prefix()
    return ('c%05d'):format(math.random(0, 99999))
end

-- Runs the harness with prefix p: output, exit status.
function C.cluster(p, args)
    return S.sh(('DDPL_NETNS_PREFIX=%s %s %s 2>&1'):format(p, q(C.harness), args))
end

-- Makes K nodes at rate, or marks the test pending when namespaces cannot be made here; the
-- nodes are removed when the test ends. pending and finally are busted's, which only the spec
-- file sees.
function C.up(k, rate, pending, finally)
    local p = C.new_prefix()
    local out, code = C.cluster(p, 'check')
    if code ~= 0 then pending('no network namespaces here: ' .. out) end
    finally(function() C.cluster(p, 'down') end)
    out, code = C.cluster(p, ('up %d --rate %s'):format(k, rate or '1gbit'))
    assert(code == 0, out)
    return p
end

-- The names of p's namespaces and links that exist now.
function C.leftovers(p)
    local out = S.sh(('{ ip netns list; ip -o link show; } 2>/dev/null | grep -oE "%s-[a-z0-9]+" '
        .. '| sort -u'):format(p))
    return out
end

-- Starts `script` on `nodes` nodes x 2 ranks of cluster p, the launcher on each node (env: more
-- VAR=value words; args: the script's), each node's output into dir/node<n>, in the background:
-- the shell command line to run, followed by whatever should happen before `wait`.
function C.start_nodes(p, nodes, dir, script, args, env, kill_after)
    local parts = {}
    for n = 0, nodes - 1 do
        -- several nodes need the store's shared secret (engine/cli/launch_token.c)
        parts[#parts + 1] = ('( DDPL_NETNS_PREFIX=%s DDPLUA_STORE_TOKEN=spec-cluster %s %s run %d '
            .. 'timeout %d %s %s --nnodes %d '
            .. '--node-rank %d --nproc 2 --master-addr 10.77.0.1 --master-port 29500 -- %s '
            .. '> %s/node%d 2>&1; echo "EXIT $?" >> %s/node%d ) &'):format(p, env or '',
            q(C.harness), n, kill_after, q(S.bin), q(script), nodes, n, args or '', q(dir), n,
            q(dir), n)
    end
    return table.concat(parts, ' ')
end

-- The outputs dir/node0 .. node<nodes-1> joined under "---- node <n>" lines, and whether every
-- one ends with "EXIT 0".
function C.node_outputs(dir, nodes)
    local all, ok = {}, true
    for n = 0, nodes - 1 do
        local out = S.slurp(('%s/node%d'):format(dir, n))
        ok = ok and out:find('EXIT 0', 1, true) ~= nil
        all[#all + 1] = ('---- node %d\n%s'):format(n, out)
    end
    return table.concat(all, '\n'), ok
end

return C
