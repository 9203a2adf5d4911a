-- spec/dist/workers/faults.lua: one rank of the fault checks (run by
-- spec/dist/dist_faults_spec.lua). Every rank joins with the group timeout 60 s and the heartbeat
-- limit HB seconds, and passes one all_reduce. Then, by CASE, the victim (rank VICTIM, default the
-- last rank):
--   stop: writes its pid to PIDFILE and stops itself (SIGSTOP; a background `sleep 40;
--         kill -KILL` makes sure it never outlives a failed run); the others' next all_reduce
--         (OP=recv: rank 0's recv from it) must fail naming it; the lowest other rank then
--         kills it.
--   kill: kills itself (SIGKILL); the others' next all_reduce must fail naming it.
--   slow: computes (a busy loop) for SLOW seconds, several heartbeat limits, before the
--         all_reduce; the others wait in it and must not report anything: all print "SLOW_OK".
-- A rank whose operation failed prints "FAULT after=<seconds> <message>" and exits 3.
local ddpl = require 'ddplua'
local dist = ddpl.dist

dist.init_process_group({timeout = 60, heartbeat_timeout = tonumber(os.getenv('HB'))})
local rank, world = dist.get_rank(), dist.get_world_size()
local victim = tonumber(os.getenv('VICTIM') or world - 1)
local killer = victim == 0 and 1 or 0 -- ends a stopped victim
local case = os.getenv('CASE')
local t = ddpl.ones(4)
dist.all_reduce(t)
assert(t[0]:item() == dist.get_world_size())

if rank == victim and case == 'stop' then
    -- os.execute's shell is a child of this process: $PPID is this process
    os.execute(('echo $PPID > %s; (sleep 40; kill -KILL $PPID) > /dev/null 2>&1 & '
        .. 'kill -STOP $PPID'):format(os.getenv('PIDFILE')))
elseif rank == victim and case == 'kill' then
    os.execute('kill -KILL $PPID')
elseif rank == victim and case == 'slow' then
    local t0, spins = ddpl.time(), 0
    while ddpl.time() - t0 < tonumber(os.getenv('SLOW')) do spins = spins + 1 end
end

local t0 = ddpl.time()
local ok, err
if os.getenv('OP') == 'recv' then
    -- rank 0 receives from the victim; the other ranks have nothing more to do
    if rank ~= 0 and rank ~= victim then os.exit(0) end
    if rank == 0 then ok, err = pcall(dist.recv, t, victim) else ok = dist.send(t, 0) end
else
    ok, err = pcall(dist.all_reduce, t)
end
local after = ddpl.time() - t0
if rank == killer and case == 'stop' then
    -- this process hosts the store (rank 0): the ranks that have not reported yet read the
    -- fault it published there; a job whose first reporter exits at once may leave them to
    -- name that rank instead. The victim stays stopped meanwhile, so that the others, which
    -- judge it at about the same moment, still find it stopped rather than killed.
    if not ok then os.execute('sleep 2') end
    -- the victim is stopped whatever happened here: end it (its own `sleep 40` is the backstop)
    local f = io.open(os.getenv('PIDFILE'))
    local pid = f and f:read('n')
    if f then f:close() end
    if pid then os.execute(('kill -KILL %d'):format(pid)) end
end
if not ok then
    print(('FAULT after=%.2f %s'):format(after, tostring(err)))
    os.exit(3)
end
assert(t[0]:item() == world * world, 'the sum of the second all_reduce')
print(('SLOW_OK %d after=%.2f'):format(rank, after))
dist.destroy_process_group()
