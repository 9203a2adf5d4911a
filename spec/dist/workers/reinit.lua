-- spec/dist/workers/reinit.lua: one rank of the re-initialisation checks (run by
-- spec/dist/dist_reinit_spec.lua): N times (default 20) init_process_group, an all_reduce whose
-- value says which round it is (a rank that read the previous round's keys, or reached the previous
-- round's store, would sum other rounds' values or hang), a subgroup of the even ranks with its
-- own all_reduce, a barrier, then destroy_process_group. Prints "REINIT_OK <rank> <rounds>".
local ddpl = require 'ddplua'
local dist = ddpl.dist

local rounds = tonumber(os.getenv('ROUNDS') or 20)
for round = 1, rounds do
    dist.init_process_group({timeout = 30})
    local rank, world = dist.get_rank(), dist.get_world_size()
    local t = ddpl.full({3}, round * 100 + rank)
    dist.all_reduce(t)
    local want = round * 100 * world + world * (world - 1) // 2
    assert(t[2]:item() == want, ('round %d: all_reduce gave %g, expected %d'):format(round,
        t[2]:item(), want))
    local evens = {}
    for r = 0, world - 1, 2 do evens[#evens + 1] = r end
    local g = dist.new_group(evens)
    if rank % 2 == 0 then
        local u = ddpl.full({2}, round)
        dist.all_reduce(u, {group = g})
        assert(u[0]:item() == round * #evens, ('round %d: subgroup all_reduce gave %g'):format(
            round, u[0]:item()))
    end
    dist.barrier()
    dist.destroy_process_group()
    assert(not dist.is_initialized(), 'still initialized after destroy_process_group')
end
print(('REINIT_OK %d %d'):format(tonumber(os.getenv('RANK')), rounds))
