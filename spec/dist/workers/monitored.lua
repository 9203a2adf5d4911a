-- spec/dist/workers/monitored.lua: one rank of the monitored_barrier checks (run by
-- spec/dist/dist_objects_spec.lua). MB_MODE=pass: every rank calls monitored_barrier three times
-- (keys of each call apart), then an all_reduce shows the group is still in step; prints
-- "MB_OK <rank>". MB_MODE=late: the ranks listed in MB_LATE (e.g. "2,3") sleep MB_SLEEP seconds
-- first; MB_MODE=never: they never call it (they exit 0 after the sleep). MB_ALL=1 passes
-- wait_all_ranks. A rank whose monitored_barrier fails prints "MB_ERR <message>" and exits 3.
local ddpl = require 'ddplua'
local dist = ddpl.dist

dist.init_process_group({timeout = 30})
local rank, world = dist.get_rank(), dist.get_world_size()
local mode = os.getenv('MB_MODE')
local timeout = tonumber(os.getenv('MB_TIMEOUT') or '4')

if mode == 'pass' then
    for _ = 1, 3 do dist.monitored_barrier({timeout = timeout}) end
    dist.monitored_barrier()                                      -- the group's timeout
    dist.monitored_barrier({timeout = timeout, wait_all_ranks = true})
    local t = ddpl.ones(2)
    dist.all_reduce(t)
    assert(t[0]:item() == world)
    local ok, err = pcall(dist.monitored_barrier, {timeout = -1})
    assert(not ok and err:find('monitored_barrier: timeout must be a positive number', 1, true),
        err)
    ok, err = pcall(dist.monitored_barrier, {wait_all = true})
    assert(not ok and err:find("monitored_barrier: unknown option 'wait_all'", 1, true), err)
    print('MB_OK ' .. rank)
    dist.destroy_process_group()
    os.exit(0)
end

dist.barrier() -- every rank leaves together, so only the sleep below makes a rank late
local late = false
for r in (os.getenv('MB_LATE') or ''):gmatch('%d+') do late = late or tonumber(r) == rank end
if late then
    os.execute('sleep ' .. (os.getenv('MB_SLEEP') or '9'))
    if mode == 'never' then os.exit(0) end
end
local ok, err = pcall(dist.monitored_barrier, {timeout = timeout,
    wait_all_ranks = os.getenv('MB_ALL') == '1'})
if ok then
    print('MB_PASSED ' .. rank)
    os.exit(0)
end
print('MB_ERR ' .. tostring(err))
io.stdout:flush()
os.exit(3)
