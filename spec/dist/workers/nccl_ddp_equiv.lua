-- spec/dist/workers/nccl_ddp_equiv.lua: DDP over backend 'nccl' with CUDA parameters against one
-- model on the global batch; run by spec/dist/nccl_spec.lua on N ranks (one GPU each: LOCAL_RANK
-- picks it).
-- Keys: view=0|1 (gradient_as_bucket_view), cap=<bucket_cap_mb>, steps=K, hook=none|
--       fp16_compress|bf16_compress, unused=0|1 (find_unused_parameters), tol=<relative>.
-- Every rank trains the DDP model with SGD (momentum 0.9), rank r taking rows r, r+N, ... of each
-- global batch; rank 0 also trains a reference model on its GPU on the whole batch and compares
-- every parameter: max|ddp - ref| <= tol * max|ref|. Ranks start from different random weights,
-- so the construction broadcast is checked too. Prints "NCCL_DDP_OK rank=R maxrel=E".
local ddpl = require 'ddplua'
local nn, F, dist = ddpl.nn, ddpl.nn.functional, ddpl.distributed

local o = {view = '0', cap = 25, steps = 6, batch = 8, hook = 'none', unused = '0', tol = 1e-6}
for _, a in ipairs(arg) do
    local k, v = a:match('^(%w+)=(.*)$')
    if k then o[k] = tonumber(v) or v end
end

local local_rank = math.tointeger(tonumber(os.getenv('LOCAL_RANK') or '0'))
ddpl.cuda.set_device(local_rank)
dist.init_process_group({backend = 'nccl', timeout = 60})
local rank, world = dist.get_rank(), dist.get_world_size()
local dev = 'cuda:' .. local_rank

local function make()
    return nn.Sequential(nn.Linear(12, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU(),
        nn.Linear(32, 5))
end

ddpl.manual_seed(1000 + rank) -- different weights per rank: DDP must broadcast rank 0's
local net = make():to(dev)
local model = nn.DDP(net, {bucket_cap_mb = o.cap, gradient_as_bucket_view = tostring(o.view) == '1',
    find_unused_parameters = tostring(o.unused) == '1'})
if o.hook ~= 'none' then model:register_comm_hook(o.hook) end
local opt = ddpl.optim.SGD(model:parameters(), {lr = 0.05, momentum = 0.9})

local ref, ref_opt
if rank == 0 then
    ddpl.manual_seed(1000)
    ref = make():to(dev)
    ref_opt = ddpl.optim.SGD(ref:parameters(), {lr = 0.05, momentum = 0.9})
end

local N, B = world, o.batch
local function rows(r, total) -- DistributedSampler(shuffle=false): r, r+N, ...
    local idx = {}
    for i = r, total - 1, N do idx[#idx + 1] = i end
    return ddpl.tensor(idx, {dtype = 'int64'})
end

for step = 1, o.steps do
    ddpl.manual_seed(7 * step) -- the same global batch on every rank (drawn on the CPU)
    local X = ddpl.randn({N * B, 12})
    local Y = ddpl.randint(0, 5, {N * B})
    local idx = rows(rank, N * B)
    local x, y = X:index_select(0, idx):to(dev), Y:index_select(0, idx):to(dev)
    opt:zero_grad()
    F.cross_entropy(model(x), y):backward()
    opt:step()
    if rank == 0 then
        ref_opt:zero_grad()
        F.cross_entropy(ref(X:to(dev)), Y:to(dev)):backward()
        ref_opt:step()
    end
end

local maxrel = 0
if rank == 0 then
    local got, want = model.module:named_parameters(), ref:named_parameters()
    for i, pair in ipairs(want) do
        local a, b = got[i][2], pair[2]
        assert(a.device == dev, 'DDP parameter left the GPU: ' .. tostring(a.device))
        local scale = b:abs():max():item()
        local diff = (a - b):abs():max():item()
        local rel = diff / math.max(scale, 1e-12)
        if rel > maxrel then maxrel = rel end
        if not (rel <= o.tol) then
            error(('rank 0: parameter %s differs from the single-process reference: max|diff| '
                .. '%.3g, relative %.3g > %.3g'):format(pair[1], diff, rel, o.tol))
        end
    end
end
-- every rank holds the same parameters after the averaged steps
for _, p in ipairs(model.module:parameters()) do
    local c = p:detach():clone()
    dist.broadcast(c, 0)
    local d = (c - p):abs():max():item()
    if d > 0 then error(('rank %d: parameters differ from rank 0 by %g'):format(rank, d)) end
end
dist.destroy_process_group()
print(('NCCL_DDP_OK rank=%d maxrel=%.3g'):format(rank, maxrel))
