-- spec/dist/workers/collectives_more.lua: reduce, gather, scatter, all_to_all, all_to_all_single
-- and isend/irecv, checked in each rank against values computed locally; run on N ranks by
-- spec/dist/dist_rooted_collectives_spec.lua (through shared memory, and through Gloo with
-- DDPLUA_SHM=0). Covers sync and async calls, float32/float64/int64 (reductions) plus int32 and
-- uint8 (data movement), non-contiguous tensors, pairs of different sizes (empty ones too),
-- messages larger than the shared-memory staging buffers (4 MB), the argument errors, and an
-- all_to_all whose sizes do not match across ranks (an error on every rank, after which the group
-- still works). Prints "DIST_OK <rank>" at the end and raises (exit status non-zero) on the first
-- mismatch. Values and checks: spec/support/dist_check_util.lua.
local ddpl = require 'ddplua'
local dist = ddpl.dist

dist.init_process_group({backend = 'gloo', timeout = 60})
local rank, world = dist.get_rank(), dist.get_world_size()

local U = dofile(arg[0]:match('^(.*)/[^/]*/[^/]*/[^/]*$') .. '/support/dist_check_util.lua')(rank, world)
local fail, values, moved_list, expect = U.fail, U.values, U.moved_list, U.expect
local expect_error, reduced = U.expect_error, U.reduced

-- a non-contiguous tensor of shape {n} holding want: every other element of a {n, 2} tensor
local function strided(want, dt)
    local rows = {}
    for i = 1, #want do rows[i] = {want[i], 0} end
    local t = ddpl.tensor(rows, {dtype = dt}):select(1, 0)
    assert(#want < 2 or not t:is_contiguous())
    return t
end

local function waited(w, async, what)
    if async then
        if w == nil then fail('%s: async_op returned no work handle', what) end
        w:wait()
        if not w:is_completed() then fail('%s: work not completed after wait', what) end
    elseif w ~= nil then
        fail('%s without async_op returned %s', what, tostring(w))
    end
end

local N = 37

-- ---------------------------------------------------------------------------- reduce ----
for _, dt in ipairs({'float32', 'float64', 'int64'}) do
    local tol = dt == 'float32' and 1e-6 or 1e-12
    for _, op in ipairs({'sum', 'avg', 'max', 'min', 'product'}) do
        if not (op == 'avg' and dt == 'int64') then
            for dst = 0, world - 1 do
                local async = dst % 2 == 1
                local x = ddpl.tensor(values(rank, N), {dtype = dt})
                local what = ('reduce %s %s dst=%d async=%s'):format(dt, op, dst, async)
                waited(dist.reduce(x, dst, {op = op, async_op = async}), async, what)
                -- the result on dst; the other ranks' tensors are left as they were
                expect(x, rank == dst and reduced(op, N) or values(rank, N), what, tol)
            end
        end
    end
    local x = strided(values(rank, N), dt)
    dist.reduce(x, world - 1, {op = dist.ReduceOp.MAX})
    expect(x, rank == world - 1 and reduced('max', N) or values(rank, N),
        'reduce non-contiguous ' .. dt)
end

-- --------------------------------------------------------------------- gather, scatter ----
for _, dt in ipairs({'float32', 'float64', 'int64', 'int32', 'uint8'}) do
    for root = 0, world - 1 do
        for _, async in ipairs({false, true}) do
            local what = ('gather %s dst=%d async=%s'):format(dt, root, async)
            local list = nil
            if rank == root then
                list = {}
                for q = 1, world do list[q] = ddpl.zeros(N, {dtype = dt}) end
                if async then list[1] = strided(values(0, N), dt) end -- overwritten
            end
            local mine = async and strided(moved_list(rank, root, N), dt)
                or ddpl.tensor(moved_list(rank, root, N), {dtype = dt})
            waited(dist.gather(mine, list, root, {async_op = async}), async, what)
            if rank == root then
                for q = 0, world - 1 do
                    expect(list[q + 1], moved_list(q, root, N), what .. ' from ' .. q)
                end
            end
            expect(mine, moved_list(rank, root, N), what .. ' (input unchanged)')

            what = ('scatter %s src=%d async=%s'):format(dt, root, async)
            if rank == root then
                list = {}
                for q = 0, world - 1 do
                    local v = moved_list(root, q, N)
                    list[q + 1] = async and strided(v, dt) or ddpl.tensor(v, {dtype = dt})
                end
            else
                list = nil
            end
            local out = async and strided(values(0, N), dt) or ddpl.zeros(N, {dtype = dt})
            waited(dist.scatter(out, list, root, {async_op = async}), async, what)
            expect(out, moved_list(root, rank, N), what)
        end
    end
end
-- src/dst default to 0, as in PyTorch
do
    local list = rank == 0 and {} or nil
    if list then for q = 1, world do list[q] = ddpl.zeros(3) end end
    dist.gather(ddpl.full({3}, rank, {dtype = 'float32'}), list)
    if list then for q = 0, world - 1 do expect(list[q + 1], {q, q, q}, 'gather dst=0') end end
    local out = ddpl.zeros(2, {dtype = 'int64'})
    if rank == 0 then
        list = {}
        for q = 1, world do list[q] = ddpl.full({2}, 10 * q, {dtype = 'int64'}) end
    end
    dist.scatter(out, rank == 0 and list or nil)
    expect(out, {10 * (rank + 1), 10 * (rank + 1)}, 'scatter src=0')
end

-- ------------------------------------------------------------------------ all_to_all ----
-- pair (p -> q) carries (p + 2 * q) % 3 elements: some pairs empty, sizes differ per pair
local function pair_n(p, q) return (p + 2 * q) % 3 end
for _, dt in ipairs({'float32', 'int64', 'int32', 'uint8'}) do
    for _, async in ipairs({false, true}) do
        local ins, outs = {}, {}
        for q = 0, world - 1 do
            local v = moved_list(rank, q, pair_n(rank, q))
            ins[q + 1] = (async and #v > 0) and strided(v, dt) or ddpl.tensor(v, {dtype = dt})
            if #v == 0 then ins[q + 1] = ddpl.zeros(0, {dtype = dt}) end
            local n = pair_n(q, rank)
            outs[q + 1] = (async and n > 0) and strided(values(0, n), dt)
                or ddpl.zeros(n, {dtype = dt})
        end
        local what = ('all_to_all %s async=%s'):format(dt, async)
        waited(dist.all_to_all(outs, ins, {async_op = async}), async, what)
        for q = 0, world - 1 do
            expect(outs[q + 1], moved_list(q, rank, pair_n(q, rank)), what .. ' from ' .. q)
        end
    end
end
-- a rank that sends nothing at all (but receives), and one that neither sends nor receives
for _, case in ipairs({
    {'rank 0 sends nothing', function(p, q) return (p == 0 or p == q) and 0 or 1 + q end},
    {'rank 0 takes no part', function(p, q) return (p == 0 or q == 0) and 0 or 2 end},
}) do
    local n = case[2]
    local ins, outs = {}, {}
    for q = 0, world - 1 do
        ins[q + 1] = ddpl.tensor(moved_list(rank, q, n(rank, q)), {dtype = 'float32'})
        if n(rank, q) == 0 then ins[q + 1] = ddpl.zeros(0) end
        outs[q + 1] = ddpl.zeros(n(q, rank))
    end
    dist.all_to_all(outs, ins)
    for q = 0, world - 1 do
        expect(outs[q + 1], moved_list(q, rank, n(q, rank)), case[1] .. ': from ' .. q)
    end
end
-- shapes may differ between the two sides of a pair when the element counts agree
do
    local ins, outs = {}, {}
    for q = 0, world - 1 do
        ins[q + 1] = ddpl.tensor(moved_list(rank, q, 6), {dtype = 'float64'}):view(2, 3)
        outs[q + 1] = ddpl.zeros(3, 2, {dtype = 'float64'})
    end
    dist.all_to_all(outs, ins)
    for q = 0, world - 1 do expect(outs[q + 1], moved_list(q, rank, 6), 'all_to_all 2x3 -> 3x2') end
end

-- ----------------------------------------------------------------- all_to_all_single ----
-- equal split: rows 2q, 2q + 1 of the input go to rank q; rows of 3 elements
local R = 2
for _, dt in ipairs({'float32', 'float64', 'int64', 'int32'}) do
    for _, async in ipairs({false, true}) do
        local rows = {}
        for q = 0, world - 1 do
            local v = moved_list(rank, q, R * 3)
            for r = 0, R - 1 do rows[#rows + 1] = {v[3 * r + 1], v[3 * r + 2], v[3 * r + 3]} end
        end
        local inp = ddpl.tensor(rows, {dtype = dt})
        if async then inp = inp:t():contiguous():t() end -- same values, column-major strides
        local out = ddpl.zeros(world * R, 3, {dtype = dt})
        if async then out = ddpl.zeros(3, world * R, {dtype = dt}):t() end
        local what = ('all_to_all_single %s async=%s'):format(dt, async)
        waited(dist.all_to_all_single(out, inp, {async_op = async}), async, what)
        local want = {}
        for q = 0, world - 1 do
            for _, x in ipairs(moved_list(q, rank, R * 3)) do want[#want + 1] = x end
        end
        expect(out, want, what)
    end
end
-- uneven splits: rank p sends pair_n(p, q) rows of 2 to rank q
do
    local in_splits, out_splits, rows, want = {}, {}, {}, {}
    for q = 0, world - 1 do
        in_splits[q + 1] = pair_n(rank, q)
        out_splits[q + 1] = pair_n(q, rank)
        local v = moved_list(rank, q, 2 * pair_n(rank, q))
        for r = 0, pair_n(rank, q) - 1 do rows[#rows + 1] = {v[2 * r + 1], v[2 * r + 2]} end
        for _, x in ipairs(moved_list(q, rank, 2 * pair_n(q, rank))) do want[#want + 1] = x end
    end
    local inp = #rows > 0 and ddpl.tensor(rows, {dtype = 'int64'}) or ddpl.zeros(0, 2,
        {dtype = 'int64'})
    local out = ddpl.zeros(#want // 2, 2, {dtype = 'int64'})
    dist.all_to_all_single(out, inp, {input_split_sizes = in_splits,
        output_split_sizes = out_splits})
    expect(out, want, 'all_to_all_single uneven splits')
end

-- ------------------------------------------------- messages larger than a staging buffer ----
do
    local big = 1500000 -- float32: 6 MB, more than one 4 MB chunk
    local base = ddpl.arange(big, {dtype = 'float32'})
    local function same(t, want, what)
        local n = t:eq(want):sum():item()
        if n ~= big then fail('%s: %d of %d elements differ', what, big - n, big) end
    end
    local list = nil
    if rank == 1 % world then
        list = {}
        for q = 1, world do list[q] = ddpl.zeros(big) end
    end
    dist.gather(base + rank, list, 1 % world)
    if list then for q = 0, world - 1 do same(list[q + 1], base + q, 'big gather ' .. q) end end
    local out = ddpl.zeros(big)
    if rank == 0 then
        list = {}
        for q = 1, world do list[q] = base * 2 + q end
    else
        list = nil
    end
    dist.scatter(out, list, 0)
    same(out, base * 2 + (rank + 1), 'big scatter')
    local x = base + rank
    dist.reduce(x, 0)
    same(x, rank == 0 and base * world + world * (world - 1) / 2 or base + rank, 'big reduce')
    -- all_to_all_single of 6 MB: rank q receives world slices of big / world elements
    local per = big // world
    local inp = ddpl.arange(per * world, {dtype = 'float32'}) + 1e6 * rank
    local got = ddpl.zeros(per * world)
    dist.all_to_all_single(got, inp)
    for q = 0, world - 1 do
        local slice = got:narrow(0, q * per, per)
        local want = ddpl.arange(rank * per, (rank + 1) * per, {dtype = 'float32'}) + 1e6 * q
        local n = slice:eq(want):sum():item()
        if n ~= per then fail('big all_to_all_single from %d: %d elements differ', q, per - n) end
    end
end

-- -------------------------------------------------------------------- isend / irecv ----
do
    local right, left = (rank + 1) % world, (rank - 1) % world
    local out = ddpl.tensor(moved_list(rank, right, 5), {dtype = 'int32'})
    local inb = ddpl.zeros(5, {dtype = 'int32'})
    local rw = dist.irecv(inb, left)
    local sw = dist.isend(out, right)
    sw:wait()
    rw:wait()
    if not (sw:is_completed() and rw:is_completed()) then fail('isend/irecv not completed') end
    expect(inb, moved_list(left, rank, 5), 'irecv from the left neighbour')
    expect_error('isend: unknown option', dist.isend, out, right, {tag = 3})
end

-- --------------------------------------------------------------------- argument errors ----
-- checked before anything is issued, so every rank raising them keeps the group in step
do
    local t = ddpl.zeros(3)
    local list = {}
    for q = 1, world do list[q] = ddpl.zeros(3) end
    local other = (rank + 1) % world
    if world > 1 then
        expect_error(('gather: gather_list must be nil on rank %d, which is not the dst (rank %d)')
            :format(rank, other), dist.gather, t, list, other)
        expect_error(('scatter: scatter_list must be nil on rank %d, which is not the src'):format(
            rank), dist.scatter, t, list, other)
    end
    expect_error(('gather: the dst (rank %d) needs a gather_list of %d tensors (the group\'s '
        .. 'size), got nil'):format(rank, world), dist.gather, t, nil, rank)
    expect_error(('scatter: the src (rank %d) needs a scatter_list of %d tensors (the group\'s '
        .. 'size), got %d'):format(rank, world, world + 1), dist.scatter, t,
        (function() local l = {table.unpack(list)}; l[#l + 1] = ddpl.zeros(3); return l end)(),
        rank)
    local bad = {table.unpack(list)}
    bad[world] = ddpl.zeros(4)
    expect_error(('gather: gather_list[%d] is [4] float32, but the input is [3] float32'):format(
        world - 1), dist.gather, t, bad, rank)
    bad[world] = ddpl.zeros(3, {dtype = 'int64'})
    expect_error('scatter: scatter_list[' .. (world - 1) .. '] is [3] int64', dist.scatter, t, bad,
        rank)
    expect_error(('reduce: dst rank %d is out of range for world_size %d'):format(world, world),
        dist.reduce, t, world)
    expect_error('gather: dst rank -1 is out of range', dist.gather, t, nil, -1)
    expect_error('scatter: src rank ' .. world .. ' is out of range', dist.scatter, t, nil, world)
    expect_error('reduce: expected a CPU tensor of float32/float64/int64, got int32', dist.reduce,
        ddpl.zeros(2, {dtype = 'int32'}), 0)
    expect_error("reduce: op 'avg' needs a floating dtype, got int64", dist.reduce,
        ddpl.zeros(2, {dtype = 'int64'}), 0, {op = 'avg'})
    expect_error("reduce: unknown op 'mean'", dist.reduce, t, 0, {op = 'mean'})
    expect_error("gather: unknown option 'op'", dist.gather, t, nil, 0, {op = 'sum'})

    expect_error(('all_to_all: expected an input_tensor_list of %d tensors (world_size), got %d')
        :format(world, world - 1), dist.all_to_all, list, {table.unpack(list, 1, world - 1)})
    expect_error(('all_to_all: expected an output_tensor_list of %d tensors'):format(world),
        dist.all_to_all, {}, list)
    local mixed = {table.unpack(list)}
    mixed[world] = ddpl.zeros(3, {dtype = 'float64'})
    expect_error(('all_to_all: output_tensor_list[%d] is float64, but the tensors must all be '
        .. 'float32'):format(world - 1), dist.all_to_all, mixed, list)

    local inp = ddpl.zeros(world * 2, 3)
    expect_error('all_to_all_single: the output is int64, but the input is float32',
        dist.all_to_all_single, ddpl.zeros(world * 2, 3, {dtype = 'int64'}), inp)
    expect_error(("all_to_all_single: the input's dim 0 (%d) is not divisible by world_size %d")
        :format(world * 2 + 1, world), dist.all_to_all_single, inp,
        ddpl.zeros(world * 2 + 1, 3))
    expect_error('all_to_all_single: the input must have at least one dimension',
        dist.all_to_all_single, ddpl.zeros(world), ddpl.tensor(1.0))
    local splits = {}
    for q = 1, world do splits[q] = 2 end
    splits[1] = 3
    expect_error(('all_to_all_single: input_split_sizes[%d] = 2 is more than the rows left of '
        .. 'dim 0'):format(world - 1), dist.all_to_all_single, inp, inp,
        {input_split_sizes = splits})
    splits[1] = 1
    expect_error(("all_to_all_single: output_split_sizes add up to %d, but the output's dim 0 is "
        .. '%d'):format(world * 2 - 1, world * 2), dist.all_to_all_single, inp, inp,
        {output_split_sizes = splits})
    splits[1] = -1
    expect_error('all_to_all_single: input_split_sizes[0] = -1 is negative',
        dist.all_to_all_single, inp, inp, {input_split_sizes = splits})
    expect_error(('all_to_all_single: output_split_sizes has %d entries, expected %d'):format(
        world + 1, world), dist.all_to_all_single, inp, inp,
        {output_split_sizes = (function() local l = {}; for q = 1, world + 1 do l[q] = 0 end;
            return l end)()})
    expect_error('all_to_all_single: input_split_sizes must hold integers, got string',
        dist.all_to_all_single, inp, inp, {input_split_sizes = {'2'}})
end

-- ------------------------------------ sizes that do not match across ranks: all fail alike ----
if world > 1 then
    local ins, outs = {}, {}
    for q = 0, world - 1 do
        ins[q + 1] = ddpl.zeros(2)
        outs[q + 1] = ddpl.zeros(2)
    end
    -- rank 0 expects 3 elements from rank 1, which sends 2
    if rank == 0 then outs[2] = ddpl.zeros(3) end
    for _, f in ipairs({'all_to_all', 'all_to_all_single'}) do
        local ok, err
        if f == 'all_to_all' then
            ok, err = pcall(dist.all_to_all, outs, ins)
        else
            local splits = {}
            for q = 1, world do splits[q] = 2 end
            if rank == 0 then splits[2] = 3 end
            local out = ddpl.zeros(rank == 0 and world * 2 + 1 or world * 2)
            ok, err = pcall(dist.all_to_all_single, out, ddpl.zeros(world * 2),
                {output_split_sizes = splits})
        end
        if ok then fail('%s with mismatched sizes succeeded', f) end
        local want = f .. ': rank 1 sends 8 bytes to rank 0, but rank 0 expects 12 bytes from rank 1'
        if not tostring(err):find(want, 1, true) then
            fail('%s: expected %q, got: %s', f, want, tostring(err))
        end
    end
    -- the group is still in step
    local x = ddpl.ones(3)
    dist.all_reduce(x)
    expect(x, {world, world, world}, 'all_reduce after a mismatched all_to_all')
end

dist.barrier()
dist.destroy_process_group()
print('DIST_OK ' .. rank)
