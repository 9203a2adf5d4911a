-- spec/dist/workers/objects.lua: one rank of the object-collective checks (run by
-- spec/dist/dist_objects_spec.lua on 2 and 4 ranks with the torchrun environment). Every rank sends
-- a value built from its rank and checks, against values built locally, what all_gather_object,
-- gather_object and broadcast_object_list deliver; a value that cannot be sent fails on every rank,
-- naming the rank, and the group stays usable. Prints "OBJ_OK <rank>" when every check passed.
local ddpl = require 'ddplua'
local dist = ddpl.dist

dist.init_process_group({timeout = 30})
local rank, world = dist.get_rank(), dist.get_world_size()

-- the value rank r sends: every kind of value, sizes differing by rank
local function value_of(r)
    local v = {
        r, r + 0.5, 'rank ' .. r .. '\0tail', r % 2 == 0, nil, -- a hole at [5]
        name = string.rep('x', 100 * r + 1),
        t = ddpl.arange(0, r + 1, {dtype = 'float64'}) * (r + 1),
        ints = ddpl.full({2, 2}, r, {dtype = 'int32'}),
        nested = {deep = {deeper = {r}}},
        [7] = 'after the hole',
        [2.5] = 'float key',
        [true] = 'boolean key',
    }
    v.me = v -- a cycle
    return v
end

local function check_value(v, r, where)
    local function eq(a, b, what)
        if a ~= b then
            error(('%s: %s: expected %s (%s), got %s (%s)'):format(where, what, tostring(b),
                math.type(b) or type(b), tostring(a), math.type(a) or type(a)))
        end
    end
    eq(math.type(v[1]), 'integer', '[1] subtype')
    eq(v[1], r, '[1]')
    eq(math.type(v[2]), 'float', '[2] subtype')
    eq(v[2], r + 0.5, '[2]')
    eq(v[3], 'rank ' .. r .. '\0tail', '[3]')
    eq(v[4], r % 2 == 0, '[4]')
    eq(v[5], nil, '[5]')
    eq(v[7], 'after the hole', '[7]')
    eq(v[2.5], 'float key', '[2.5]')
    eq(v[true], 'boolean key', '[true]')
    eq(v.name, string.rep('x', 100 * r + 1), 'name')
    eq(v.nested.deep.deeper[1], r, 'nested')
    eq(v.me, v, 'cycle')
    eq(v.t.dtype, 'float64', 't.dtype')
    eq(v.t:numel(), r + 1, 't:numel()')
    for i = 0, r do eq(v.t[i]:item(), i * (r + 1.0), 't[' .. i .. ']') end
    eq(v.ints.dtype, 'int32', 'ints.dtype')
    eq(v.ints:sum():item(), 4 * r, 'ints sum')
end

-- all_gather_object
local list = {}
dist.all_gather_object(list, value_of(rank))
for r = 0, world - 1 do check_value(list[r + 1], r, 'all_gather_object from rank ' .. r) end
assert(#list == world)

-- nil values and plain scalars
local scalars = {}
dist.all_gather_object(scalars, rank % 2 == 1 and rank or nil)
for r = 0, world - 1 do assert(scalars[r + 1] == (r % 2 == 1 and r or nil), 'nil/scalar') end

-- gather_object to the last rank
local dst = world - 1
local gathered = rank == dst and {} or nil
dist.gather_object(value_of(rank), gathered, dst)
if rank == dst then
    for r = 0, world - 1 do check_value(gathered[r + 1], r, 'gather_object from rank ' .. r) end
end

-- broadcast_object_list from rank 1: entries overwritten, extra entries removed, holes kept
local objects
if rank == 1 then
    objects = {value_of(1), nil, 'three', 4}
else
    objects = {'stale', 'stale', 'stale', 'stale', 'stale', 'stale'}
end
dist.broadcast_object_list(objects, 1)
check_value(objects[1], 1, 'broadcast_object_list [1]')
assert(objects[2] == nil and objects[3] == 'three' and objects[4] == 4, 'broadcast entries')
assert(objects[5] == nil and objects[6] == nil, 'entries beyond the source list removed')

-- a value that cannot be sent: every rank fails, naming the rank; the group stays usable
local bad = rank == 1 and {opt = {step = print}} or {fine = true}
local ok, err = pcall(dist.all_gather_object, {}, bad)
assert(not ok, 'an unsendable value must fail')
if rank == 1 then
    assert(err:find('all_gather_object: cannot send a function (at value.opt.step)', 1, true), err)
else
    assert(err:find('all_gather_object: rank 1 could not serialise its value', 1, true), err)
end
ok, err = pcall(dist.broadcast_object_list, {rank == 0 and coroutine.create(print) or 0}, 0)
assert(not ok and err:find('broadcast_object_list: ', 1, true), err)
if rank == 0 then
    assert(err:find('cannot send a thread (coroutine) (at object_list[1])', 1, true), err)
else
    assert(err:find('rank 0 (src) could not serialise its list', 1, true), err)
end

-- bad arguments: raised before any communication, the same on every rank
ok, err = pcall(dist.all_gather_object, 'x', 1)
assert(not ok and err:find('all_gather_object: expected a table as the output list', 1, true), err)
ok, err = pcall(dist.broadcast_object_list, {}, world)
assert(not ok and err:find('broadcast_object_list: src ' .. world .. ' is out of range', 1, true),
    err)
ok, err = pcall(dist.gather_object, 1, {}, 1.5)
assert(not ok and err:find('gather_object: expected an integer rank as dst', 1, true), err)

-- still in step after the failures
local after = {}
dist.all_gather_object(after, {rank = rank})
for r = 0, world - 1 do assert(after[r + 1].rank == r, 'after failures') end
local t = ddpl.ones(3)
dist.all_reduce(t)
assert(t[0]:item() == world)

dist.destroy_process_group()
print('OBJ_OK ' .. rank)
