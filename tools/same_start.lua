-- tools/same_start.lua: trains the cnn (models/lenet.lua) as examples/train.lua does, and saves
-- what PyTorch needs to train from the same starting point: the initial weights
-- (DIR/init<seed>.safetensors) and every epoch's shuffle order plus our per-step losses
-- (DIR/perms<seed>.safetensors). tools/same_start.py then trains torch.nn from exactly there.
-- This separates numerics from luck: two engines seeded alike still draw different initial
-- weights, and the cnn's 2-epoch test accuracy varies by about a point with the draw.
-- usage: build/ddplua tools/same_start.lua [SEED=0 [EPOCHS=2 [DIR=/tmp]]]  (positional; from the repo root)
local ddpl = require 'ddplua'
local nn, F, optim, data = ddpl.nn, ddpl.nn.functional, ddpl.optim, ddpl.data
local seed = tonumber(arg[1] or 0)
local epochs = tonumber(arg[2] or 2)
local out = arg[3] or '/tmp'
ddpl.set_num_threads(1)
ddpl.manual_seed(seed)
local function load_split(train)
    local ds = data.datasets.FashionMNIST({ train = train })
    local x, y = ds.data, ds.targets
    x = x:float():div_(255):add_(-0.2860):div_(0.3530)
    return x:view(x:size(0), 1, 28, 28), y
end
local xtr, ytr = load_split(true)
local xte, yte = load_split(false)
local train_set = data.TensorDataset(xtr, ytr)
local sampler = data.DistributedSampler(train_set, { num_replicas = 1, rank = 0, shuffle = true, seed = seed })
local model = dofile('models/lenet.lua')()
ddpl.save(model:state_dict(), out .. '/init' .. seed .. '.safetensors')
local opt = optim.SGD(model:parameters(), { lr = 0.02, momentum = 0.9 })
local perms, losses = {}, {}
for e = 0, epochs - 1 do
    sampler:set_epoch(e)
    local idx = sampler:indices()
    if type(idx) == 'table' then idx = ddpl.tensor(idx, { dtype = 'int64' }) end
    perms['perm' .. e] = idx
    local n = idx:size(0)
    for i = 0, n - 1, 64 do
        local len = math.min(64, n - i)
        local b = idx:narrow(0, i, len)
        local xb, yb = xtr:index_select(0, b), ytr:index_select(0, b)
        local loss = F.cross_entropy(model(xb), yb)
        opt:zero_grad()
        loss:backward()
        opt:step()
        losses[#losses + 1] = loss:item()
    end
end
perms.losses = ddpl.tensor(losses, { dtype = 'float64' })
ddpl.save(perms, out .. '/perms' .. seed .. '.safetensors')
model:eval()
local correct = 0
ddpl.no_grad(function()
    for i = 0, 9999, 1000 do
        local o = model(xte:narrow(0, i, 1000))
        correct = correct + o:argmax(1):eq(yte:narrow(0, i, 1000)):sum():item()
    end
end)
print(('ddplua seed %d acc %.4f last50 %.4f'):format(seed, correct / 10000, (function() local s=0 for i=#losses-49,#losses do s=s+losses[i] end return s/50 end)()))
