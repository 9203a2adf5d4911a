-- spec/dist/workers/hier.lua: one rank of spec/dist/dist_hier_allreduce_spec.lua, on a cluster of
-- namespace nodes whose group all-reduces through the hierarchy (shared memory in each node, Gloo
-- between the nodes' leaders; engine/distributed/pg_host_hier.c). Checks, exactly, every reduce op
-- on float32, float64 and int64 at sizes from 1 element to past the shared segment's 4 MB chunk,
-- against what every rank can compute on its own; then broadcast, all_gather and all_reduce on a
-- non-contiguous tensor (the collectives that stay flat, after the hierarchy's fingerprint
-- check); then the bytes one 4 MB all_reduce sends out of this node's link (the local rank 0
-- reads eth0's tx counter around REPS of them, minus as many barriers): "TX node=<k>
-- bytes=<per all_reduce>"; then, with MISMATCH set, a collective the last rank calls with
-- another size: "MISMATCH <message>" on every rank. Prints "HIER_OK rank=<r>" when all passed.
local ddpl = require 'ddplua'
local dist = ddpl.dist

dist.init_process_group({timeout = 60})
local rank, world = dist.get_rank(), dist.get_world_size()

-- rank r's values: small integers ((7 i + 3 r) mod 11 - 5 at element i), so every sum,
-- product and average is exact
local function values(n, dtype, r)
    local period = {}
    for i = 0, 10 do period[i + 1] = (7 * i + 3 * r) % 11 - 5 end
    local rows = (n + 10) // 11
    return ddpl.tensor(period):view(1, 11):expand(rows, 11):contiguous():view(-1)
        :narrow(0, 0, n):to(dtype):contiguous()
end

local function expected(n, dtype, op)
    local acc = values(n, 'float64', 0)
    for r = 1, world - 1 do
        local v = values(n, 'float64', r)
        if op == 'sum' or op == 'avg' then acc = acc + v
        elseif op == 'product' then acc = acc * v
        elseif op == 'max' then acc = ddpl.maximum(acc, v)
        else acc = ddpl.minimum(acc, v) end
    end
    acc = acc:to(dtype) -- exact: small integers
    if op == 'avg' then acc = acc / world end -- rounded in dtype, as the sum's division is
    return acc
end

local function check(n, dtype, op)
    local x = values(n, dtype, rank)
    dist.all_reduce(x, {op = op})
    local diff = (x - expected(n, dtype, op)):double():abs():max():item()
    assert(diff == 0, ('all_reduce %s %s of %d elements: off by %g on rank %d'):format(op, dtype,
        n, diff, rank))
end
for _, n in ipairs({1, 1000}) do
    for _, dtype in ipairs({'float32', 'float64', 'int64'}) do
        for _, op in ipairs({'sum', 'max', 'min', 'product', 'avg'}) do
            if not (op == 'avg' and dtype == 'int64') then check(n, dtype, op) end
        end
    end
end
-- past the shared segment's 4 MB chunk: two chunks and more
check(1100000, 'float32', 'sum')
check(1100000, 'float64', 'avg')
check(1100000, 'int64', 'max')

-- the flat collectives still work behind the hierarchy's check
local b = ddpl.full({5}, rank)
dist.broadcast(b, world - 1)
assert(b:min():item() == world - 1 and b:max():item() == world - 1, 'broadcast')
local outs = {}
for r = 1, world do outs[r] = ddpl.zeros(3) end
dist.all_gather(outs, ddpl.full({3}, rank * 10.0))
for r = 1, world do assert(outs[r][0]:item() == (r - 1) * 10, 'all_gather') end
local m = values(600, 'float32', rank):view(20, 30):t() -- not contiguous
dist.all_reduce(m)
assert((m - expected(600, 'float32', 'sum'):view(20, 30):t()):abs():max():item() == 0,
    'all_reduce of a transposed tensor')

-- what one all_reduce of 4 MB sends out of this node's link
local function tx()
    local f = io.open('/sys/class/net/eth0/statistics/tx_bytes')
    local v = f and tonumber(f:read('l')) or 0
    if f then f:close() end
    return v
end
local reps = 10
local g = ddpl.ones(1024 * 1024)
dist.all_reduce(g)
dist.barrier()
local t0 = tx()
for _ = 1, reps do dist.barrier() end
local t1 = tx()
for _ = 1, reps do
    dist.barrier()
    dist.all_reduce(g)
end
local t2 = tx()
dist.barrier()
if os.getenv('LOCAL_RANK') == '0' then
    print(('TX node=%s bytes=%.0f'):format(os.getenv('GROUP_RANK') or '?',
        ((t2 - t1) - (t1 - t0)) / reps))
end

if os.getenv('MISMATCH') then
    local ok, err = pcall(dist.all_reduce, ddpl.ones(rank == world - 1 and 5 or 4))
    assert(not ok, 'a mismatched all_reduce went through')
    print('MISMATCH ' .. tostring(err):gsub('^[^\n]-: all_reduce: ', 'all_reduce: '))
end
io.stdout:flush()
print(('HIER_OK rank=%d'):format(rank))
dist.destroy_process_group()
