-- examples/dist_hello.lua: the smallest distributed ddplua program.
--   ddplua examples/dist_hello.lua --nproc 4
-- Each rank says who it is (from the launcher's torchrun variables), then joins the process
-- group and sums its rank + 1 over all ranks with all_reduce: every rank must get
-- 1 + 2 + ... + N = N(N+1)/2.
local rank = tonumber(os.getenv('RANK') or '0')
local world = tonumber(os.getenv('WORLD_SIZE') or '1')
print(('hello from rank %d of %d (local rank %s, master %s:%s)'):format(rank, world,
    os.getenv('LOCAL_RANK') or '0', os.getenv('MASTER_ADDR') or '-',
    os.getenv('MASTER_PORT') or '-'))

if not os.getenv('MASTER_ADDR') then
    print('no process group: run it under `ddplua examples/dist_hello.lua --nproc N`')
    return
end
local dist = ddpl.distributed

dist.init_process_group({backend = 'gloo', timeout = 60})
local t = ddpl.tensor({rank + 1}, {dtype = 'float32'})
dist.all_reduce(t) -- sum, in place
local expected = world * (world + 1) / 2
local got = t:item()
print(('rank %d: all_reduce(rank + 1) = %g (expected %g)'):format(rank, got, expected))
dist.barrier()
dist.destroy_process_group()
if got ~= expected then error(('rank %d: wrong all_reduce result %g'):format(rank, got)) end
