-- spec/ddp/workers/train_equiv.lua: DDP on N ranks against one process on the global batch; run by
-- spec/ddp/ddp_spec.lua as `ddplua spec/ddp/workers/train_equiv.lua --nproc N -- key=value ...`.
-- Keys: model=mlp|cnn|bn|branch, cap=<bucket_cap_mb>, view=0|1, steps=K, batch=B (per rank),
--       hook=none|fp16_compress|bf16_compress|lua, tol=<relative tolerance>, unused=0|1
--       (find_unused_parameters), accum=M (M-1 of M micro-batches under no_sync).
-- Every rank trains a DDP model with SGD (momentum 0.9) for K steps, rank r taking rows
-- r, r+N, ... of each global batch (DistributedSampler(shuffle=false)'s split); rank 0 also
-- trains a reference model in the same process on the whole global batch (for the BatchNorm
-- model, on the N per-rank chunks with their gradients averaged: batch statistics are per rank
-- in DDP, as in PyTorch) and compares every parameter: max|ddp - ref| <= tol * max|ref|.
-- Ranks start from different random weights, so the construction broadcast is checked too.
-- Prints "DDP_OK rank=R maxrel=E buckets=NB" and exits 0, or raises.
local ddpl = require 'ddplua'
local compare = dofile(arg[0]:match('^(.*)/[^/]*/[^/]*/[^/]*$') .. '/support/ddp_compare.lua')
local nn, F, dist = ddpl.nn, ddpl.nn.functional, ddpl.distributed

local o = compare.options({model = 'mlp', cap = 25, view = '0', steps = 10, batch = 8,
    hook = 'none', tol = 1e-5, unused = '0', accum = 1}, arg)

dist.init_process_group({backend = 'gloo', timeout = 30})
local rank, world = dist.get_rank(), dist.get_world_size()

local Branch = nn.Module:extend('Branch') -- the `extra` layer is used on even steps only
function Branch:init()
    self.fc1 = nn.Linear(12, 16)
    self.extra = nn.Linear(16, 16)
    self.fc2 = nn.Linear(16, 5)
    self.use_extra = true
end
function Branch:forward(x)
    local h = F.relu(self.fc1(x))
    if self.use_extra then h = F.relu(self.extra(h)) end
    return self.fc2(h)
end

local function make(kind)
    if kind == 'mlp' then
        return nn.Sequential(nn.Linear(12, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU(),
            nn.Linear(32, 5)), {12}
    elseif kind == 'cnn' then
        return nn.Sequential(nn.Conv2d(1, 4, 3, {padding = 1}), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(4, 8, 3, {padding = 1}), nn.ReLU(), nn.Flatten(), nn.Linear(8 * 4 * 4, 5)),
            {1, 8, 8}
    elseif kind == 'bn' then
        return nn.Sequential(nn.Linear(12, 24), nn.BatchNorm1d(24), nn.ReLU(), nn.Linear(24, 5)),
            {12}
    elseif kind == 'branch' then
        return Branch(), {12}
    end
    error('unknown model ' .. kind)
end

ddpl.manual_seed(1000 + rank) -- different weights per rank: DDP must broadcast rank 0's
local net, feat = make(o.model)
local model = nn.DDP(net, {bucket_cap_mb = o.cap, gradient_as_bucket_view = tostring(o.view) == '1',
    find_unused_parameters = tostring(o.unused) == '1'})
if o.hook == 'lua' then
    model:register_comm_hook(function(state, bucket) -- a tensor returned, not a future
        state.calls = state.calls + 1
        local t = bucket:buffer()
        dist.all_reduce(t)
        return t:div(world)
    end, {calls = 0})
elseif o.hook == 'default' then -- PyTorch's allreduce_hook on the comm-hook interface
    local default_hooks = require 'ddplua.distributed.algorithms.default_hooks'
    model:register_comm_hook(nil, default_hooks.allreduce_hook)
elseif o.hook == 'default_fp16' then
    local default_hooks = require 'ddplua.distributed.algorithms.default_hooks'
    model:register_comm_hook(nil, default_hooks.fp16_compress_hook)
elseif o.hook ~= 'none' then
    model:register_comm_hook(o.hook)
end
local opt = ddpl.optim.SGD(model:parameters(), {lr = 0.05, momentum = 0.9})

local ref, ref_opt
if rank == 0 then
    ddpl.manual_seed(1000)
    ref = make(o.model)
    ref_opt = ddpl.optim.SGD(ref:parameters(), {lr = 0.05, momentum = 0.9})
end

local N, B, M = world, o.batch, o.accum
local function rows(r, total) -- DistributedSampler(shuffle=false): r, r+N, ...
    local idx = {}
    for i = r, total - 1, N do idx[#idx + 1] = i end
    return ddpl.tensor(idx, {dtype = 'int64'})
end

for step = 1, o.steps do
    ddpl.manual_seed(7 * step) -- the same global batch on every rank
    local shape = {N * B * M}
    for _, d in ipairs(feat) do shape[#shape + 1] = d end
    local X = ddpl.randn(shape)
    local Y = ddpl.randint(0, 5, {N * B * M})
    local use_extra = step % 2 == 0
    if o.model == 'branch' then net.use_extra = use_extra end

    -- DDP: this rank's rows, in M micro-batches; the first M-1 under no_sync
    local idx = rows(rank, N * B * M)
    local x, y = X:index_select(0, idx), Y:index_select(0, idx)
    opt:zero_grad()
    for m = 1, M do
        local xm, ym = x:narrow(0, (m - 1) * B, B), y:narrow(0, (m - 1) * B, B)
        local function fb() F.cross_entropy(model(xm), ym):div(M):backward() end
        if m < M then model:no_sync(fb) else fb() end
    end
    opt:step()

    if rank == 0 then
        if o.model == 'branch' then ref.use_extra = use_extra end
        ref_opt:zero_grad()
        if o.model == 'bn' then
            -- per-rank batch statistics: rank chunks N-1..1, then rank 0's last, so the running
            -- statistics end as rank 0's (DDP broadcasts rank 0's buffers)
            local saved = {}
            for i, b in ipairs(ref:buffers()) do saved[i] = b:clone() end
            for r = N - 1, 0, -1 do
                if r == 0 then
                    for i, b in ipairs(ref:buffers()) do b:copy_(saved[i]) end
                end
                local ir = rows(r, N * B)
                F.cross_entropy(ref(X:index_select(0, ir)), Y:index_select(0, ir)):div(N)
                    :backward()
            end
        else
            F.cross_entropy(ref(X), Y):backward()
        end
        ref_opt:step()
    end
end

local maxrel = 0
if rank == 0 then
    maxrel = compare(model.module:named_parameters(), ref:named_parameters(), o.tol, 'rank 0')
    -- BatchNorm running statistics: rank 0's (broadcast_buffers) equal the reference's
    local gb, wb = model.module:named_buffers(), ref:named_buffers()
    for i, pair in ipairs(wb) do
        local a, b = gb[i][2], pair[2]
        local diff = (a:double() - b:double()):abs():max():item()
        local scale = math.max(b:double():abs():max():item(), 1e-12)
        if not (diff / scale <= o.tol) then
            error(('rank 0: buffer %s differs from the reference: max|diff| %.3g'):format(pair[1],
                diff))
        end
    end
    -- the wrapper: model.module is the net, state_dict keys carry the 'module.' prefix
    assert(model.module == net)
    local n_keys = 0
    for k in pairs(model:state_dict()) do
        n_keys = n_keys + 1
        if not k:find('^module%.') then error('state_dict key without module. prefix: ' .. k) end
    end
    assert(n_keys >= #ref:parameters(), 'state_dict is missing keys')
end
-- every rank holds the same parameters
for _, p in ipairs(model:parameters()) do
    local mine = p:clone()
    local r0 = p:clone()
    dist.broadcast(r0, 0)
    local d = (mine - r0):abs():max():item()
    if d ~= 0 then error(('rank %d: parameters differ from rank 0 by %g'):format(rank, d)) end
end
print(('DDP_OK rank=%d maxrel=%.3g buckets=%d'):format(rank, maxrel, #model:buckets()))
dist.destroy_process_group()
