-- spec/dist/workers/collectives.lua: every collective and reduce op, checked in each rank against
-- values computed locally; run on N ranks by spec/dist/dist_collectives_spec.lua. Prints "DIST_OK
-- <rank>" at the end and raises (exit status non-zero) on the first mismatch.
-- Rank q's input element i is value(q, i): small integers of both signs and zeros, so sums and
-- products are exact in every dtype and max/min differ between ranks.
local ddpl = require 'ddplua'
local dist = ddpl.dist

dist.init_process_group({backend = 'gloo', timeout = 30})
local rank, world = dist.get_rank(), dist.get_world_size()
assert(dist.is_initialized() and dist.get_backend() == 'gloo')
assert(rank == tonumber(os.getenv('RANK')) and world == tonumber(os.getenv('WORLD_SIZE')))

local U = dofile(arg[0]:match('^(.*)/[^/]*/[^/]*/[^/]*$') .. '/support/dist_check_util.lua')(rank, world)
local fail, values, flat, expect, reduced = U.fail, U.values, U.flat, U.expect, U.reduced

local N = 37 -- odd, so ring chunks are uneven
for _, dt in ipairs({'float32', 'float64', 'int64'}) do
    local tol = dt == 'float32' and 1e-6 or 1e-12
    for _, op in ipairs({'sum', 'avg', 'max', 'min', 'product'}) do
        if not (op == 'avg' and dt == 'int64') then
            for _, async in ipairs({false, true}) do
                local x = ddpl.tensor(values(rank, N), {dtype = dt})
                local w = dist.all_reduce(x, {op = op, async_op = async})
                if async then
                    if w == nil then fail('all_reduce async_op returned no work handle') end
                    w:wait()
                    if not w:is_completed() then fail('work not completed after wait') end
                elseif w ~= nil then
                    fail('all_reduce without async_op returned %s', tostring(w))
                end
                expect(x, reduced(op, N), ('all_reduce %s %s async=%s'):format(dt, op, async), tol)
            end
        end
    end
    -- ReduceOp constants mirror the strings
    local x = ddpl.tensor(values(rank, N), {dtype = dt})
    dist.all_reduce(x, {op = dist.ReduceOp.MAX})
    expect(x, reduced('max', N), 'all_reduce ReduceOp.MAX ' .. dt)

    for src = 0, world - 1 do
        for _, async in ipairs({false, true}) do
            local b = ddpl.tensor(values(rank, N), {dtype = dt})
            local w = dist.broadcast(b, src, {async_op = async})
            if async then w:wait() end
            expect(b, values(src, N), ('broadcast %s from %d async=%s'):format(dt, src, async))
        end
    end

    local outs = {}
    for q = 1, world do outs[q] = ddpl.zeros(N, {dtype = dt}) end
    dist.all_gather(outs, ddpl.tensor(values(rank, N), {dtype = dt}))
    for q = 0, world - 1 do
        expect(outs[q + 1], values(q, N), ('all_gather %s slot %d'):format(dt, q))
    end

    local big = ddpl.zeros(world, N, {dtype = dt})
    local mine = ddpl.tensor(values(rank, N), {dtype = dt})
    dist.all_gather_into_tensor(big, mine, {async_op = true}):wait()
    for q = 0, world - 1 do
        expect(big[q], values(q, N), ('all_gather_into_tensor %s row %d'):format(dt, q))
    end

    for _, op in ipairs({'sum', 'max', 'min', 'product', 'avg'}) do
        if not (op == 'avg' and dt == 'int64') then
            local inp = ddpl.tensor(values(rank, N * world), {dtype = dt})
            local keep = flat(inp)
            local out = ddpl.zeros(N, {dtype = dt})
            dist.reduce_scatter_tensor(out, inp, {op = op})
            local what = ('reduce_scatter_tensor %s %s'):format(dt, op)
            expect(out, reduced(op, N, rank * N), what, tol)
            expect(inp, keep, 'reduce_scatter_tensor leaves its input alone')
        end
    end
end

-- non-contiguous tensors are reduced through a contiguous copy and written back in place
do
    local base = ddpl.tensor(values(rank, 12)):view(3, 4)
    local tt = base:t()
    assert(not tt:is_contiguous())
    dist.all_reduce(tt)
    expect(base, reduced('sum', 12), 'all_reduce of a transposed view')
end

-- a tensor of several shared-memory chunks (4 MiB each) with a ragged end
do
    local n = 2500001 -- float64: about 20 MB
    local x = ddpl.arange(0, n, 1, {dtype = 'float64'}) * (rank + 1)
    dist.all_reduce(x)
    local want = ddpl.arange(0, n, 1, {dtype = 'float64'}) * (world * (world + 1) / 2)
    local err = (x - want):abs():max():item()
    if err ~= 0 then fail('all_reduce of %d float64: max abs error %g', n, err) end
end

-- broadcast and all_gather_into_tensor of several chunks too
do
    local n = 1500001
    local b = ddpl.arange(0, n, 1, {dtype = 'float64'}) * (rank + 1)
    dist.broadcast(b, world - 1)
    local err = (b - ddpl.arange(0, n, 1, {dtype = 'float64'}) * world):abs():max():item()
    if err ~= 0 then fail('broadcast of %d float64: max abs error %g', n, err) end
    local m = 700001
    local out = ddpl.zeros(world, m, {dtype = 'float64'})
    dist.all_gather_into_tensor(out, ddpl.arange(0, m, 1, {dtype = 'float64'}) + rank * 10)
    for q = 0, world - 1 do
        local e = (out[q] - (ddpl.arange(0, m, 1, {dtype = 'float64'}) + q * 10)):abs():max():item()
        if e ~= 0 then fail('all_gather_into_tensor of %d float64: row %d off by %g', m, q, e) end
    end
end

-- reduce_scatter_tensor of several chunks whose blocks straddle the chunks' ends (the shared
-- memory path sums each block straight out of the staged chunks), async, and of a transposed
-- (non-contiguous) input
do
    local m = 700001
    local x = ddpl.arange(0, m * world, 1, {dtype = 'float64'}) * (rank + 1)
    local out = ddpl.zeros(m, {dtype = 'float64'})
    dist.reduce_scatter_tensor(out, x, {async_op = true}):wait()
    local want = ddpl.arange(rank * m, (rank + 1) * m, 1, {dtype = 'float64'}) *
        (world * (world + 1) / 2)
    local e = (out - want):abs():max():item()
    if e ~= 0 then fail('reduce_scatter_tensor of %d float64: off by %g', m * world, e) end
    local t = (ddpl.arange(0, 6 * world, 1, {dtype = 'float64'}) * (rank + 1)):view(world, 6):t()
    local o = ddpl.zeros(6, {dtype = 'float64'})
    dist.reduce_scatter_tensor(o, t)
    local flat_t = ddpl.arange(0, 6 * world, 1, {dtype = 'float64'}):view(world, 6):t():contiguous()
    local w = flat_t:view(-1):narrow(0, rank * 6, 6) * (world * (world + 1) / 2)
    e = (o - w):abs():max():item()
    if e ~= 0 then fail('reduce_scatter_tensor of a transposed input: off by %g', e) end
end

-- several async ops in flight keep their order on every rank
do
    local xs, ws = {}, {}
    for k = 1, 8 do
        xs[k] = ddpl.full({1000}, rank + k)
        ws[k] = dist.all_reduce(xs[k], {async_op = true})
    end
    for k = 8, 1, -1 do ws[k]:wait() end
    for k = 1, 8 do
        local want = 0
        for q = 0, world - 1 do want = want + q + k end
        local v = flat(xs[k])
        if v[1] ~= want or v[1000] ~= want then
            fail('async all_reduce %d gave %s, expected %s', k, v[1], want)
        end
    end
end

-- send/recv around a ring; even ranks send first, odd ranks receive first
do
    local nxt, prev = (rank + 1) % world, (rank - 1) % world
    local got = ddpl.zeros(5, {dtype = 'int64'})
    local mine = ddpl.tensor(values(rank, 5), {dtype = 'int64'})
    if rank % 2 == 0 then
        dist.send(mine, nxt); dist.recv(got, prev)
    else
        dist.recv(got, prev); dist.send(mine, nxt)
    end
    expect(got, values(prev, 5), 'send/recv ring')
    -- both directions posted before either waits
    local a, b = ddpl.zeros(3), ddpl.zeros(3)
    local ws = {dist.isend(ddpl.full({3}, rank + 0.0), nxt), dist.irecv(a, prev)}
    local ws2 = {dist.isend(ddpl.full({3}, 10.0 + rank), prev), dist.irecv(b, nxt)}
    for _, w in ipairs(ws) do w:wait() end
    for _, w in ipairs(ws2) do w:wait() end
    expect(a, {prev, prev, prev}, 'isend/irecv forward')
    expect(b, {10 + nxt, 10 + nxt, 10 + nxt}, 'isend/irecv backward')
end

-- argument errors name the function and leave the group usable
local expect_error = U.expect_error
expect_error('all_reduce: expected a CPU tensor of float32/float64/int64, got int32',
    dist.all_reduce, ddpl.zeros(2, {dtype = 'int32'}))
expect_error("all_reduce: op 'avg' needs a floating dtype, got int64",
    dist.all_reduce, ddpl.zeros(2, {dtype = 'int64'}), {op = 'avg'})
expect_error("all_reduce: unknown op 'mean'", dist.all_reduce, ddpl.zeros(2), {op = 'mean'})
expect_error('broadcast: src rank ' .. world .. ' is out of range',
    dist.broadcast, ddpl.zeros(2), world)
expect_error('all_gather: expected a list of ' .. world,
    dist.all_gather, {ddpl.zeros(2)}, ddpl.zeros(2))
expect_error('all_gather_into_tensor: the output must hold world_size', dist.all_gather_into_tensor,
    ddpl.zeros(world * 2 + 1), ddpl.zeros(2))
expect_error('send: dst rank ' .. rank .. ' is this rank itself', dist.send, ddpl.zeros(2), rank)
expect_error('init_process_group: the default process group is already initialized',
    dist.init_process_group, {})

-- a receiver whose tensor does not match what was sent gets an error, not a crash, and the
-- pair stays in step
if world % 2 == 0 then
    if rank % 2 == 0 then
        dist.send(ddpl.ones(3, {dtype = 'float64'}), rank + 1)
        dist.send(ddpl.full({2}, 7.0), rank + 1)
    else
        expect_error('recv: rank ' .. (rank - 1)
            .. ' sent [3] float64, but the tensor here is [3] float32',
            dist.recv, ddpl.zeros(3), rank - 1)
        local y = ddpl.zeros(2)
        dist.recv(y, rank - 1)
        expect(y, {7, 7}, 'recv after a mismatched recv')
    end
end

local x = ddpl.ones(3)
dist.barrier()
dist.all_reduce(x)
expect(x, {world, world, world}, 'all_reduce after the error checks')
dist.barrier()
dist.destroy_process_group()
assert(not dist.is_initialized())
print('DIST_OK ' .. rank)
