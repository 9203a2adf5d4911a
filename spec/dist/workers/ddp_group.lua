-- spec/dist/workers/ddp_group.lua: DDP over a subgroup (process_group = g, PyTorch's option), run
-- by spec/dist/dist_groups_spec.lua on 4 ranks: new_subgroups(2) pairs {0, 1} and {2, 3}; every
-- rank seeds its model differently, so DDP's broadcast must give each pair its first rank's
-- weights, and feeds its own batch, so the gradient after backward must be the pair's average
-- (computed here from both members' batches), different between the pairs. Then a rank wrapping a
-- group it is not a member of gets an error. Prints "DDP_GROUP_OK <rank>".
local ddpl = require 'ddplua'
local nn, dist = ddpl.nn, ddpl.distributed

dist.init_process_group({backend = 'gloo', timeout = 30})
local rank = dist.get_rank()
local function check(cond, fmt, ...)
    if not cond then error(('rank %d: ' .. fmt):format(rank, ...), 2) end
end

local pair, pairs_all = dist.new_subgroups(2)
check(#pairs_all == 2, 'new_subgroups(2) on 4 ranks made %d groups', #pairs_all)
local first = rank - rank % 2

local function model_of(r)
    ddpl.manual_seed(100 + r)
    return nn.Linear(3, 2)
end
local function batch_of(r)
    ddpl.manual_seed(200 + r)
    return ddpl.randn({5, 3})
end

local model = nn.DDP(model_of(rank), {process_group = pair})
local want_w = model_of(first).weight
check((model.module.weight - want_w):abs():max():item() == 0,
    'the weights are not those of the pair\'s first rank %d', first)

-- loss = sum(W x + b): dL/dW[i][j] = sum over the batch of x[:, j], the same for each row i
model(batch_of(rank)):sum():backward()
local g = model.module.weight.grad
for i = 0, 1 do
    for j = 0, 2 do
        local mean = (batch_of(first):sum(0)[j]:item() + batch_of(first + 1):sum(0)[j]:item()) / 2
        check(math.abs(g[i][j]:item() - mean) < 1e-5, 'grad[%d][%d] = %g, expected the pair '
            .. 'average %g', i, j, g[i][j]:item(), mean)
    end
end
check(math.abs(model.module.bias.grad[0]:item() - 5) < 1e-6, 'bias grad %g, expected 5',
    model.module.bias.grad[0]:item())
-- a second step: the buckets are rebuilt (logged under INFO)
model.module.weight.grad = nil
model.module.bias.grad = nil
model(batch_of(rank)):sum():backward()

local other = pairs_all[rank < 2 and 2 or 1]
local ok, err = pcall(nn.DDP, model_of(rank), {process_group = other})
check(not ok and tostring(err):find(('rank %d is not a member of process_group'):format(rank), 1,
    true), 'DDP on a group without this rank: %s', tostring(err))

dist.destroy_process_group()
print('DDP_GROUP_OK ' .. rank)
