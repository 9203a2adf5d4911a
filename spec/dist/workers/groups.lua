-- spec/dist/workers/groups.lua: process subgroups on N ranks (N = 2 or 4), run by
-- spec/dist/dist_groups_spec.lua; every value is checked against one computed locally. Prints
-- "GROUPS_OK <rank>" at the end and raises (exit status non-zero) on the first failure.
--   - new_group of the odd ranks (rank 1 alone on 2 ranks) listed backwards: get_rank /
--     get_world_size with the group (-1 on a non-member), all_reduce, broadcast from a GLOBAL src,
--     all_gather, send/recv between GLOBAL ranks inside it; a non-member's collective on it is an
--     error naming its rank and the group's ranks;
--   - two disjoint groups (the even and the odd ranks) in use at once, async, interleaved with
--     the default group;
--   - new_subgroups(2): the caller's group and the list of all; reduce, gather, scatter,
--     all_to_all_single, all_gather_object, gather_object (global dst/src) and monitored_barrier
--     inside it;
--   - get_process_group_ranks / get_global_rank / get_group_rank;
--   - destroy_process_group(g) of one group, then of everything.
local ddpl = require 'ddplua'
local dist = ddpl.dist

dist.init_process_group({backend = 'gloo', timeout = 30})
local rank, world = dist.get_rank(), dist.get_world_size()

local function check(cond, fmt, ...)
    if not cond then error(('rank %d: ' .. fmt):format(rank, ...), 2) end
end

local function sum_of(ranks, f)
    local s = 0
    for _, r in ipairs(ranks) do s = s + f(r) end
    return s
end

-- 1. the odd ranks, listed backwards: group rank 0 is the highest odd rank
local odd, even = {}, {}
for r = world - 1, 0, -1 do
    if r % 2 == 1 then odd[#odd + 1] = r end
end
for r = 0, world - 1, 2 do even[#even + 1] = r end
local g_odd = dist.new_group(odd)
local is_odd = rank % 2 == 1
local expect_rank = -1
for i, r in ipairs(odd) do if r == rank then expect_rank = i - 1 end end
check(dist.get_rank(g_odd) == expect_rank, 'get_rank(g_odd) = %d, expected %d',
    dist.get_rank(g_odd), expect_rank)
check(dist.get_world_size(g_odd) == (is_odd and #odd or -1), 'get_world_size(g_odd) = %d',
    dist.get_world_size(g_odd))
local ranks_back = dist.get_process_group_ranks(g_odd)
check(#ranks_back == #odd and ranks_back[1] == odd[1], 'get_process_group_ranks(g_odd)')
check(dist.get_global_rank(g_odd, 0) == odd[1], 'get_global_rank(g_odd, 0)')
if is_odd then
    check(dist.get_group_rank(g_odd, rank) == expect_rank, 'get_group_rank(g_odd, rank)')
    local t = ddpl.tensor({rank + 1, 10 * (rank + 1)}, {dtype = 'float64'})
    dist.all_reduce(t, {group = g_odd})
    local s = sum_of(odd, function(r) return r + 1 end)
    check(t[0]:item() == s and t[1]:item() == 10 * s, 'all_reduce in g_odd: %s', tostring(t))
    -- src is a GLOBAL rank: the lowest odd rank, the last group rank
    local src = odd[#odd]
    local b = ddpl.full({3}, rank == src and 7 or 0)
    dist.broadcast(b, src, {group = g_odd})
    check(b:sum():item() == 21, 'broadcast in g_odd from global rank %d: %s', src, tostring(b))
    local outs = {}
    for i = 1, #odd do outs[i] = ddpl.zeros({2}, {dtype = 'int64'}) end
    dist.all_gather(outs, ddpl.tensor({rank, -rank}, {dtype = 'int64'}), {group = g_odd})
    for i, r in ipairs(odd) do
        check(outs[i][0]:item() == r and outs[i][1]:item() == -r,
            'all_gather in g_odd: output %d is %s, expected rank %d', i - 1, tostring(outs[i]), r)
    end
    -- a src outside the group is an argument error
    local ok, err = pcall(dist.broadcast, ddpl.zeros({1}), 0, {group = g_odd})
    check(not ok and tostring(err):find('src rank 0 (a global rank) is not in process group',
        1, true), 'broadcast from a non-member src: %s', tostring(err))
    dist.barrier({group = g_odd})
    -- send/recv inside the group, the group given in place of the options (PyTorch's positional
    -- argument); dst/src are global ranks
    if #odd >= 2 then
        local peer = rank == odd[1] and odd[2] or odd[1]
        local box = ddpl.full({2}, rank)
        if rank == odd[1] then
            dist.send(box, peer, g_odd)
            dist.recv(box, peer, g_odd)
            check(box[0]:item() == peer, 'recv from global rank %d in g_odd: %s', peer, tostring(box))
        elseif rank == odd[2] then
            dist.recv(box, peer, g_odd)
            check(box[0]:item() == peer, 'recv from global rank %d in g_odd: %s', peer, tostring(box))
            dist.send(ddpl.full({2}, rank), peer, g_odd)
        end
    end
else
    local ok, err = pcall(dist.all_reduce, ddpl.ones({2}), {group = g_odd})
    local want = ('all_reduce: rank %d is not a member of process group 1 (ranks %s)')
        :format(rank, table.concat(odd, ', '))
    check(not ok and tostring(err):find(want, 1, true), 'non-member all_reduce: %s', tostring(err))
    ok, err = pcall(dist.barrier, {group = g_odd})
    check(not ok and tostring(err):find('is not a member of process group 1', 1, true),
        'non-member barrier: %s', tostring(err))
end

-- 2. disjoint groups in use at once (async, interleaved with the default group)
local g_even = dist.new_group(even)
local mine = is_odd and g_odd or g_even
local members = is_odd and odd or even
local works, ts = {}, {}
for i = 1, 5 do
    ts[i] = ddpl.full({1000}, rank * i)
    works[#works + 1] = dist.all_reduce(ts[i], {group = mine, async_op = true})
end
local w_all = ddpl.full({4}, rank)
local w_world = dist.all_reduce(w_all, {async_op = true})
for _, w in ipairs(works) do w:wait() end
w_world:wait()
for i = 1, 5 do
    local want = sum_of(members, function(r) return r * i end)
    check(ts[i]:min():item() == want and ts[i]:max():item() == want,
        'all_reduce %d in the %s group: %s, expected %d', i, is_odd and 'odd' or 'even',
        tostring(ts[i][1]:item()), want)
end
check(w_all[0]:item() == world * (world - 1) / 2, 'the default group meanwhile: %s',
    tostring(w_all))

-- 3. new_subgroups(2): consecutive pairs
local cur, all = dist.new_subgroups(2)
check(#all == world // 2, 'new_subgroups(2) made %d groups', #all)
check(cur == all[rank // 2 + 1], 'new_subgroups: the caller is in group %d', rank // 2 + 1)
check(dist.get_rank(cur) == rank % 2 and dist.get_world_size(cur) == 2,
    'new_subgroups: rank %d, size %d', dist.get_rank(cur), dist.get_world_size(cur))
local p = ddpl.full({2}, rank + 1)
dist.all_reduce(p, {group = cur, op = dist.ReduceOp.MAX})
check(p[0]:item() == (rank // 2) * 2 + 2, 'max in the pair: %s', tostring(p))

-- 3b. the rooted collectives, all-to-all and the object collectives inside the pair; dst/src
-- are GLOBAL ranks (the pair's second member), monitored_barrier keyed per group
local first, second = (rank // 2) * 2, (rank // 2) * 2 + 1
local r = ddpl.full({3}, rank + 1, {dtype = 'float64'})
dist.reduce(r, second, {group = cur})
check(r[0]:item() == (rank == second and first + second + 2 or rank + 1),
    'reduce to global rank %d in the pair: %s', second, tostring(r))
local glist = rank == second and {ddpl.zeros({2}), ddpl.zeros({2})} or nil
dist.gather(ddpl.full({2}, rank, {dtype = 'float32'}), glist, second, {group = cur})
if rank == second then
    check(glist[1][0]:item() == first and glist[2][0]:item() == second,
        'gather to global rank %d: %s %s', second, tostring(glist[1]), tostring(glist[2]))
end
local sc = ddpl.zeros({2}, {dtype = 'int64'})
dist.scatter(sc, rank == second and {ddpl.full({2}, 10), ddpl.full({2}, 11)} or nil, second,
    {group = cur})
check(sc[0]:item() == 10 + rank % 2, 'scatter from global rank %d: %s', second, tostring(sc))
local a2a = ddpl.zeros({2}, {dtype = 'int64'})
dist.all_to_all_single(a2a, ddpl.tensor({10 * rank, 10 * rank + 1}, {dtype = 'int64'}),
    {group = cur})
check(a2a[0]:item() == 10 * first + rank % 2 and a2a[1]:item() == 10 * second + rank % 2,
    'all_to_all_single in the pair: %s', tostring(a2a))
local objs = {}
dist.all_gather_object(objs, {rank = rank}, {group = cur})
check(#objs == 2 and objs[1].rank == first and objs[2].rank == second,
    'all_gather_object in the pair')
local gobjs = rank == first and {} or nil
dist.gather_object('r' .. rank, gobjs, first, {group = cur})
if rank == first then
    check(gobjs[1] == 'r' .. first and gobjs[2] == 'r' .. second, 'gather_object in the pair')
end
dist.monitored_barrier({group = cur, timeout = 20})

-- 4. destroying one group leaves the others working
dist.destroy_process_group(g_even)
local ok, err = pcall(dist.all_reduce, ddpl.ones({1}), {group = g_even})
check(not ok and tostring(err):find('destroyed', 1, true), 'a destroyed group: %s', tostring(err))
local last = ddpl.ones({1})
dist.all_reduce(last)
check(last:item() == world, 'the default group after destroying one')

dist.destroy_process_group()
check(not dist.is_initialized(), 'destroy_process_group')
print('GROUPS_OK ' .. rank)
