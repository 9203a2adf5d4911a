-- spec/dist/workers/mismatch.lua: one collective that does not match across ranks, for
-- spec/dist/dist_mismatch_spec.lua. CASE (environment) says what differs; rank DIFFER (default: the
-- last rank) makes the odd call, every other rank the common one:
--   dtype     all_reduce of 8 float32 elements vs 8 float64
--   count     all_reduce of 8 elements vs 1000
--   op        all_reduce vs broadcast (src 0)
--   reduce_op all_reduce with op sum vs op max
--   root      broadcast from src 0 vs src 1
--   barrier   all_reduce of a bucket-sized tensor vs barrier
--   reduce_root reduce of 8 float32 elements to dst 0 vs dst 1
--   a2a       all_to_all_single of 8 elements vs all_reduce of 8
--   bucket    DDP's backward (its bucket's allreduce, on a shared buffer through shared memory)
--             vs barrier
-- GROUP=sub runs the case in a subgroup of all ranks but rank 0 (world >= 3), listed backwards.
-- A first matching all_reduce checks that the group works. Then every rank prints
-- "MISMATCH_ERROR <message>" and exits 3 when its call raised, or "NO_ERROR" and exits 0.
local ddpl = require 'ddplua'
local dist = ddpl.dist

dist.init_process_group({backend = 'gloo', timeout = tonumber(os.getenv('PG_TIMEOUT') or '20')})
local rank, world = dist.get_rank(), dist.get_world_size()
local case = assert(os.getenv('CASE'), 'CASE is not set')
local differ = tonumber(os.getenv('DIFFER') or world - 1)

local g -- nil: the default group
if os.getenv('GROUP') == 'sub' then
    local ranks = {}
    for r = world - 1, 1, -1 do ranks[#ranks + 1] = r end
    g = dist.new_group(ranks)
    if rank == 0 then
        print('NOT_A_MEMBER')
        dist.destroy_process_group()
        os.exit(0)
    end
end
local function opts(t)
    t = t or {}
    t.group = g
    return t
end

local warm = ddpl.ones({4})
dist.all_reduce(warm, opts())
local members = g and world - 1 or world
assert(warm:sum():item() == 4 * members, 'the warm-up all_reduce gave a wrong sum')

local odd = rank == differ
local ddp_model
if case == 'bucket' then
    ddpl.manual_seed(1)
    ddp_model = ddpl.nn.DDP(ddpl.nn.Linear(64, 64), {process_group = g})
end
local cases = {
    dtype = function()
        dist.all_reduce(ddpl.ones({8}, {dtype = odd and 'float64' or 'float32'}), opts())
    end,
    count = function() dist.all_reduce(ddpl.ones({odd and 1000 or 8}), opts()) end,
    op = function()
        if odd then
            dist.broadcast(ddpl.ones({8}), g and world - 1 or 0, opts())
        else
            dist.all_reduce(ddpl.ones({8}), opts())
        end
    end,
    reduce_op = function()
        dist.all_reduce(ddpl.ones({8}), opts({op = odd and dist.ReduceOp.MAX or dist.ReduceOp.SUM}))
    end,
    root = function()
        local src = odd and (g and world - 2 or 1) or (g and world - 1 or 0)
        dist.broadcast(ddpl.ones({8}), src, opts())
    end,
    reduce_root = function()
        local dst = odd and (g and world - 2 or 1) or (g and world - 1 or 0)
        dist.reduce(ddpl.ones({8}), dst, opts())
    end,
    a2a = function()
        if odd then
            dist.all_to_all_single(ddpl.zeros({8}), ddpl.ones({8}), opts())
        else
            dist.all_reduce(ddpl.ones({8}), opts())
        end
    end,
    barrier = function()
        if odd then dist.barrier(opts()) else dist.all_reduce(ddpl.ones({1 << 18}), opts()) end
    end,
    bucket = function()
        if odd then
            dist.barrier(opts())
        else
            ddp_model(ddpl.ones({2, 64})):sum():backward()
        end
    end,
}
local run = assert(cases[case], 'unknown CASE ' .. case)
local ok, err = pcall(run)
if ok then
    print('NO_ERROR')
    dist.destroy_process_group()
    os.exit(0)
end
print('MISMATCH_ERROR ' .. tostring(err))
io.stdout:flush()
os.exit(3)
