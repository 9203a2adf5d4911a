-- spec/data/workers/ddp_loader.lua: the DataLoader with workers inside a DDP run; run by
-- spec/data/data_workers_spec.lua as `ddplua spec/data/workers/ddp_loader.lua --nproc 2`.
-- Each rank loads its DistributedSampler share with the seed tutorial's loader line
-- (batch_size=32, num_workers=4, pin_memory=true) for two epochs (set_epoch between them),
-- checks every batch against the same loader with num_workers=0, and trains a DDP model on
-- them; the ranks' parameters must agree. Prints "DDP_LOADER_OK <rank> <batches>".
local ddpl = require 'ddplua'
local nn, dist, data = ddpl.nn, ddpl.distributed, ddpl.data

dist.init_process_group({ backend = 'gloo', timeout = 60 })
local rank = dist.get_rank()
local function fail(fmt, ...) error(('rank %d: '):format(rank) .. fmt:format(...), 2) end
-- a and b have one shape and the same elements
local function equal(a, b)
    return a.dtype == b.dtype and a:dim() == b:dim() and a:numel() == b:numel()
        and (a:numel() == 0 or a:ne(b):sum():item() == 0)
end

ddpl.manual_seed(7)
local x = ddpl.randn({200, 6})
local y = ddpl.randint(0, 3, { 200 })
local dataset = data.TensorDataset(x, y)
local sampler = data.DistributedSampler(dataset)
local loader = data.DataLoader(dataset, { batch_size = 32, sampler = sampler, num_workers = 4,
    pin_memory = true })
local plain = data.DataLoader(dataset, { batch_size = 32, sampler = sampler })

ddpl.manual_seed(1)
local model = nn.parallel.DistributedDataParallel(nn.Linear(6, 3))
local opt = ddpl.optim.SGD(model:parameters(), { lr = 0.1 })
local batches = 0
for epoch = 0, 1 do
    sampler:set_epoch(epoch)
    local expect = {}
    for xb, yb in plain:iter() do expect[#expect + 1] = { xb, yb } end
    local k = 0
    for xb, yb in loader:iter() do
        k = k + 1
        local e = expect[k]
        if not e or not equal(xb, e[1]) or not equal(yb, e[2]) then
            fail('epoch %d batch %d differs from num_workers=0', epoch, k)
        end
        opt:zero_grad()
        ddpl.nn.functional.cross_entropy(model(xb), yb):backward()
        opt:step()
        batches = batches + 1
    end
    if k ~= #expect then fail('epoch %d: %d batches, expected %d', epoch, k, #expect) end
end
-- the ranks hold the same parameters after training on different shares
for _, p in ipairs(model:parameters()) do
    local others = p:detach():clone()
    dist.broadcast(others, 0)
    if not equal(others, p:detach()) then fail('parameters differ from rank 0 after training') end
end
print(('DDP_LOADER_OK %d %d'):format(rank, batches))
dist.destroy_process_group()
