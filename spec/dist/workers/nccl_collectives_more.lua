-- spec/dist/workers/nccl_collectives_more.lua: reduce, gather, scatter, all_to_all and
-- all_to_all_single of backend 'nccl' on CUDA tensors, checked in each rank against values computed
-- locally; run on N ranks (one GPU each: LOCAL_RANK picks it) by spec/dist/nccl_spec.lua. Prints
-- "NCCL_MORE_OK <rank>" at the end and raises on the first mismatch. Values and checks:
-- spec/support/dist_check_util.lua.
local ddpl = require 'ddplua'
local dist = ddpl.dist

local local_rank = math.tointeger(tonumber(os.getenv('LOCAL_RANK') or '0'))
ddpl.cuda.set_device(local_rank)
dist.init_process_group({backend = 'nccl', timeout = 60})
local rank, world = dist.get_rank(), dist.get_world_size()
local dev = 'cuda:' .. local_rank

local U = dofile(arg[0]:match('^(.*)/[^/]*/[^/]*/[^/]*$') .. '/support/dist_check_util.lua')(rank, world)
local fail, values, moved_list, expect, reduced = U.fail, U.values, U.moved_list, U.expect,
    U.reduced

local function T(vals, dtype) return ddpl.tensor(vals, {dtype = dtype, device = dev}) end

local N = 37
for _, dt in ipairs({'float32', 'float64', 'int64'}) do
    for _, op in ipairs({'sum', 'avg', 'max', 'product'}) do
        if not (op == 'avg' and dt == 'int64') then
            for dst = 0, world - 1 do
                for _, async in ipairs({false, true}) do
                    local x = T(values(rank, N), dt)
                    local w = dist.reduce(x, dst, {op = op, async_op = async})
                    if async then w:wait() end
                    local what = ('reduce %s %s dst=%d async=%s'):format(dt, op, dst, async)
                    expect(x, rank == dst and reduced(op, N) or values(rank, N), what, 1e-6)
                end
            end
        end
    end
end

for _, dt in ipairs({'float32', 'int32', 'uint8'}) do
    for root = 0, world - 1 do
        local list = nil
        if rank == root then
            list = {}
            for q = 1, world do list[q] = ddpl.zeros(N, {dtype = dt, device = dev}) end
        end
        dist.gather(T(moved_list(rank, root, N), dt), list, root)
        if list then
            for q = 0, world - 1 do
                expect(list[q + 1], moved_list(q, root, N), ('gather %s from %d'):format(dt, q))
            end
        end
        list = nil
        if rank == root then
            list = {}
            for q = 0, world - 1 do list[q + 1] = T(moved_list(root, q, N), dt) end
        end
        local out = ddpl.zeros(N, {dtype = dt, device = dev})
        local w = dist.scatter(out, list, root, {async_op = true})
        w:wait()
        expect(out, moved_list(root, rank, N), ('scatter %s src=%d'):format(dt, root))
    end
end

-- all_to_all with per-pair sizes (some empty), and all_to_all_single with uneven splits
local function pair_n(p, q) return (p + 2 * q) % 3 + (world == 1 and 1 or 0) end
do
    local ins, outs = {}, {}
    for q = 0, world - 1 do
        local n = pair_n(rank, q)
        ins[q + 1] = n > 0 and T(moved_list(rank, q, n), 'float32') or
            ddpl.zeros(0, {device = dev})
        outs[q + 1] = ddpl.zeros(pair_n(q, rank), {device = dev})
    end
    dist.all_to_all(outs, ins)
    for q = 0, world - 1 do
        expect(outs[q + 1], moved_list(q, rank, pair_n(q, rank)), 'all_to_all from ' .. q)
    end
    local in_splits, out_splits, flat_in, want = {}, {}, {}, {}
    for q = 0, world - 1 do
        in_splits[q + 1], out_splits[q + 1] = pair_n(rank, q), pair_n(q, rank)
        for _, x in ipairs(moved_list(rank, q, pair_n(rank, q))) do flat_in[#flat_in + 1] = x end
        for _, x in ipairs(moved_list(q, rank, pair_n(q, rank))) do want[#want + 1] = x end
    end
    local inp = #flat_in > 0 and T(flat_in, 'int64') or ddpl.zeros(0, {dtype = 'int64',
        device = dev})
    local out = ddpl.zeros(#want, {dtype = 'int64', device = dev})
    dist.all_to_all_single(out, inp, {input_split_sizes = in_splits,
        output_split_sizes = out_splits})
    expect(out, want, 'all_to_all_single uneven')
    out = ddpl.zeros(world * 2, {device = dev})
    local inp2 = ddpl.arange(world * 2, {dtype = 'float32', device = dev}) + 100 * rank
    dist.all_to_all_single(out, inp2)
    for q = 0, world - 1 do
        expect(out:narrow(0, 2 * q, 2), {2 * rank + 100 * q, 2 * rank + 1 + 100 * q},
            'all_to_all_single equal from ' .. q)
    end
end

-- nccl needs contiguous tensors, and CUDA ones
local ok, err = pcall(dist.reduce, ddpl.zeros(4, 2, {device = dev}):t(), 0)
if ok or not tostring(err):find('reduce: backend nccl needs a contiguous tensor', 1, true) then
    fail('non-contiguous reduce: %s', tostring(err))
end
ok, err = pcall(dist.gather, ddpl.zeros(2), nil, 0)
if ok or not tostring(err):find('gather: expected a CUDA tensor', 1, true) then
    fail('CPU gather: %s', tostring(err))
end

dist.barrier()
dist.destroy_process_group()
print('NCCL_MORE_OK ' .. rank)
