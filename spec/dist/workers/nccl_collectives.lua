-- spec/dist/workers/nccl_collectives.lua: every collective of backend 'nccl' on CUDA tensors,
-- checked in each rank against values computed locally; run on N ranks (one GPU each: LOCAL_RANK
-- picks it) by spec/dist/nccl_spec.lua. Prints "NCCL_OK <rank>" at the end and raises on the first
-- mismatch. Rank q's input element i is value(q, i): small integers of both signs and zeros, so
-- sums and products are exact in every dtype (float16/bfloat16 included) and max/min differ by
-- rank.
local ddpl = require 'ddplua'
local dist = ddpl.dist

local local_rank = math.tointeger(tonumber(os.getenv('LOCAL_RANK') or '0'))
ddpl.cuda.set_device(local_rank) -- one GPU per rank, before init, as with torchrun
dist.init_process_group({backend = 'nccl', timeout = 60})
local rank, world = dist.get_rank(), dist.get_world_size()
assert(dist.get_backend() == 'nccl')
local dev = 'cuda:' .. local_rank

local U = dofile(arg[0]:match('^(.*)/[^/]*/[^/]*/[^/]*$') .. '/support/dist_check_util.lua')(rank, world)
local fail, values, expect, reduce = U.fail, U.values, U.expect, U.reduced

local function T(vals, dtype) return ddpl.tensor(vals, {dtype = dtype, device = dev}) end

local n = 37
-- all_reduce: every op and dtype NCCL reduces, sync and async
for _, dt in ipairs({'float32', 'float64', 'float16', 'bfloat16', 'int64', 'int32'}) do
    local floating = dt:match('float') ~= nil
    for _, op in ipairs({'sum', 'avg', 'max', 'min', 'product'}) do
        if op ~= 'avg' or floating then
            local x = T(values(rank, n), dt)
            dist.all_reduce(x, {op = op})
            expect(x, reduce(op, n), ('all_reduce %s %s'):format(op, dt),
                op == 'avg' and 1e-2 or 0)
            local y = T(values(rank, n), dt)
            local w = dist.all_reduce(y, {op = op, async_op = true})
            assert(w:wait() == true)
            expect(y, reduce(op, n), ('async all_reduce %s %s'):format(op, dt),
                op == 'avg' and 1e-2 or 0)
            assert(w:is_completed(), 'is_completed after the values were read')
            assert(w:exception() == nil)
        end
    end
end

-- ordering: the input comes from kernels queued just before, the result feeds kernels queued
-- right after the wait (a large tensor, so a missing event would show)
do
    local big = 1 << 22
    local x = ddpl.ones({big}, {device = dev}) * (rank + 1)
    local w = dist.all_reduce(x, {async_op = true})
    w:wait()
    local y = x * 2
    local want = world * (world + 1) -- 2 * sum(1..world)
    local s = y:sum():item()
    if math.abs(s - want * big) > 1e-3 * want * big then
        fail('ordered all_reduce: sum %s, expected %s', tostring(s), tostring(want * big))
    end
end

-- an empty tensor: nothing to move, the work still completes
do
    local e = ddpl.zeros({0}, {device = dev})
    dist.all_reduce(e)
    assert(e:numel() == 0)
end

-- broadcast from every rank, any dtype
for src = 0, world - 1 do
    for _, dt in ipairs({'float32', 'int64', 'float16', 'uint8'}) do
        local vals = values(rank, n)
        if dt == 'uint8' then for i = 1, n do vals[i] = vals[i] + 2 end end
        local x = T(vals, dt)
        dist.broadcast(x, src)
        local want = values(src, n)
        if dt == 'uint8' then for i = 1, n do want[i] = want[i] + 2 end end
        expect(x, want, ('broadcast from %d %s'):format(src, dt))
    end
end

-- all_gather into a list, and into one tensor
do
    local outs = {}
    for q = 1, world do outs[q] = ddpl.zeros({n}, {device = dev}) end
    dist.all_gather(outs, T(values(rank, n), 'float32'))
    for q = 1, world do expect(outs[q], values(q - 1, n), 'all_gather from ' .. (q - 1)) end
    local into = ddpl.zeros({world, n}, {device = dev, dtype = 'int64'})
    dist.all_gather_into_tensor(into, T(values(rank, n), 'int64'))
    local want = {}
    for q = 0, world - 1 do for _, v in ipairs(values(q, n)) do want[#want + 1] = v end end
    expect(into, want, 'all_gather_into_tensor')
end

-- reduce_scatter_tensor: rank r keeps chunk r of the reduction
for _, op in ipairs({'sum', 'avg', 'max'}) do
    local inp = T(values(rank, n * world), 'float32')
    local out = ddpl.zeros({n}, {device = dev})
    dist.reduce_scatter_tensor(out, inp, {op = op})
    local all = reduce(op, n * world)
    local want = {}
    for i = 1, n do want[i] = all[rank * n + i] end
    expect(out, want, 'reduce_scatter_tensor ' .. op, 1e-6)
end

-- send/recv: a ring, every rank sending to the next (even ranks send first, odd ones receive
-- first, so each pair matches in order on one stream)
if world > 1 then
    local nxt, prv = (rank + 1) % world, (rank - 1) % world
    local out = T(values(rank, n), 'float32')
    local got = ddpl.zeros({n}, {device = dev})
    if rank % 2 == 0 then
        dist.send(out, nxt)
        dist.recv(got, prv)
    else
        dist.recv(got, prv)
        dist.send(out, nxt)
    end
    expect(got, values(prv, n), 'recv from ' .. prv)
end

dist.barrier()

-- argument errors name the op, the backend and the problem, and leave the group usable
local function expect_error(f, want, ...)
    local ok, err = pcall(f, ...)
    if ok then fail('expected an error containing %q', want) end
    if not tostring(err):find(want, 1, true) then
        fail('error %q does not contain %q', tostring(err), want)
    end
end
expect_error(dist.all_reduce, 'all_reduce: expected a CUDA tensor on ' .. dev, ddpl.ones({3}))
expect_error(dist.broadcast, 'backend nccl needs a contiguous tensor',
    ddpl.ones({4, 3}, {device = dev}):t(), 0)
expect_error(dist.all_reduce, 'backend nccl reduces',
    ddpl.zeros({3}, {dtype = 'bool', device = dev}))
local x = T(values(rank, n), 'float32')
dist.all_reduce(x)
expect(x, reduce('sum', n), 'all_reduce after argument errors')

dist.destroy_process_group()
print('NCCL_OK ' .. rank)
