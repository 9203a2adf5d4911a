-- spec/ddp/workers/join.lua: DDP's join with uneven inputs and static_graph against one process;
-- run by spec/ddp/ddp_join_spec.lua as
-- `ddplua spec/ddp/workers/join.lua --nproc N -- key=value ...`.
-- Keys: counts=a,b,... (steps of rank 0, 1, ...; default 3,2), divide=1|0
--       (divide_by_initial_world_size), accum=M (M-1 of M micro-batches under no_sync),
--       model=mlp|branch (branch: the `extra` layer is used on ranks of even rank + step, or with
--       static=1 on even ranks only), unused=0|1 (find_unused_parameters), static=0|1
--       (static_graph), hook=none|lua|fp16_compress, view=0|1, cap=<bucket_cap_mb>, tol,
--       epochs=E (join runs E times, as one per epoch), eval=0|1 (a forward under no_grad after
--       each step: joined ranks shadow its buffer broadcast but no backward), nojoin=1 (the
--       same loop without join, then dist.barrier(): must fail on every rank, naming both calls),
--       api=1 (join's argument errors, enable=false, nesting, an error inside fn).
-- Every rank trains a DDP model inside model:join for its own number of steps, each step on its
-- own batches; every rank also computes, in this process, the single-process reference: at step
-- t the global batch is the union of the batches of the ranks that have not run out, and the
-- summed loss is divided by the initial world size (divide=1) or by the number of those ranks
-- (divide=0). After join every rank's parameters must equal the reference (the last rank to join
-- broadcasts them), and so must a buffer that each forward bumps by (rank + 1) after the forward's
-- buffer broadcast, which comes from the highest rank not joined.
-- Prints "JOIN_OK rank=R maxrel=E walks=W" (W: the reducer's graph walks) and exits 0, or raises.
local ddpl = require 'ddplua'
local compare = dofile(arg[0]:match('^(.*)/[^/]*/[^/]*/[^/]*$') .. '/support/ddp_compare.lua')
local nn, F, dist = ddpl.nn, ddpl.nn.functional, ddpl.distributed

local o = compare.options({counts = '3,2', divide = 1, accum = 1, model = 'mlp', unused = 0,
    static = 0, hook = 'none', view = 0, cap = 25, tol = 1e-5, batch = 4, epochs = 1, eval = 0,
    nojoin = 0, api = 0}, arg)

dist.init_process_group({backend = 'gloo', timeout = 30})
local rank, world = dist.get_rank(), dist.get_world_size()
local counts = {}
for c in tostring(o.counts):gmatch('%d+') do counts[#counts + 1] = tonumber(c) end
assert(#counts == world, 'counts must name one number of steps per rank')
local T = math.max(table.unpack(counts))

-- The net with a buffer: `tick` grows by (r + 1) in each forward of rank r.
local Net = nn.Module:extend('JoinNet')
function Net:init(kind)
    self.fc1 = nn.Linear(12, 16)
    self.extra = nn.Linear(16, 16)
    self.fc2 = nn.Linear(16, 5)
    self.kind = kind
    self.use_extra = true
    self.bump = rank + 1
    self:register_buffer('tick', ddpl.zeros({1}))
end
function Net:forward(x)
    ddpl.no_grad(function() self.tick:add_(self.bump) end)
    local h = F.relu(self.fc1(x))
    if self.kind == 'mlp' or self.use_extra then h = F.relu(self.extra(h)) end
    return self.fc2(h)
end
local function uses_extra(r, t)
    if tonumber(o.static) == 1 then return r % 2 == 0 end
    return (r + t) % 2 == 0
end

ddpl.manual_seed(1000 + rank) -- different weights per rank: DDP broadcasts rank 0's
local net = Net(o.model)
local model = nn.DDP(net, {bucket_cap_mb = o.cap, gradient_as_bucket_view = o.view == 1,
    find_unused_parameters = o.unused == 1, static_graph = o.static == 1,
    broadcast_buffers = o.nojoin ~= 1}) -- nojoin: the bucket allreduce meets the barrier
if o.hook == 'lua' then
    model:register_comm_hook({}, function(_, bucket) -- PyTorch's order and interface
        return dist.all_reduce(bucket:buffer(), {async_op = true}):then_(function(work)
            return work:value():div_(world)
        end)
    end)
elseif o.hook ~= 'none' then
    model:register_comm_hook(o.hook)
end
-- momentum only where every parameter gets a gradient each step (SGD skips a nil .grad, as
-- the reference does, but momentum would then differ between skipping and zeros)
local momentum = o.model == 'mlp' and 0.9 or 0
local opt = ddpl.optim.SGD(model:parameters(), {lr = 0.05, momentum = momentum})

local B, M = o.batch, o.accum
local function batch(r, t, m) -- rank r's micro-batch m of step t, the same in every process
    ddpl.manual_seed(100000 * t + 1000 * r + m)
    return ddpl.randn({B, 12}), ddpl.randint(0, 5, {B})
end

if o.api == 1 then -- argument errors, enable=false, nesting, and an error inside fn
    local function fails(pattern, ...)
        local ok, err = pcall(...)
        if ok or not tostring(err):find(pattern, 1, true) then
            error(('rank %d: expected an error with "%s", got %s'):format(rank, pattern,
                ok and 'success' or tostring(err)))
        end
    end
    fails('join: expected an options table or a function, got number', model.join, model, 3)
    fails('join: expected the function to run (the training loop), got nil', model.join, model,
        {})
    fails("join: unknown option 'divide'", model.join, model, {divide = true}, function() end)
    fails('join: this DDP model is already inside join', model.join, model, function()
        return model:join(function() end)
    end)
    -- enable=false runs fn alone: no collective, so ranks may differ
    local a, b = model:join({enable = false}, function(x) return x + 1, 'ok' end, rank)
    assert(a == rank + 1 and b == 'ok', 'join with enable=false must return fn\'s results')
    fails('boom', model.join, model, function() error('boom') end)
    -- the model still trains in join afterwards (uneven: rank r takes r + 1 steps)
    model:join(function()
        for t = 1, rank + 1 do F.cross_entropy(model(batch(rank, t, 1)), ddpl.zeros({B}, {dtype =
            'int64'})):backward() end
    end)
    print(('JOIN_API_OK rank=%d'):format(rank))
    os.exit(0)
end

if o.nojoin == 1 then -- the issue's failure: ranks with fewer batches reach the barrier early
    local ok, err = pcall(function()
        for t = 1, counts[rank + 1] do
            local x, y = batch(rank, t, 1)
            F.cross_entropy(model(x), y):backward()
        end
        dist.barrier()
    end)
    if ok then error('rank ' .. rank .. ': uneven inputs without join did not fail') end
    -- printed and exit 0, so that no rank is stopped before it has printed its error
    print(('NOJOIN_FAILED rank=%d: %s'):format(rank, (tostring(err):gsub('\n', ' '))))
    os.exit(0)
end

for e = 1, o.epochs do
local steps_done = model:join({divide_by_initial_world_size = o.divide == 1}, function()
    for t = (e - 1) * T + 1, (e - 1) * T + counts[rank + 1] do
        if o.model == 'branch' then net.use_extra = uses_extra(rank, t) end
        opt:zero_grad()
        for m = 1, M do
            local x, y = batch(rank, t, m)
            local function fb() F.cross_entropy(model(x), y):div(M):backward() end
            if m < M then model:no_sync(fb) else fb() end
        end
        opt:step()
        if o.eval == 1 then ddpl.no_grad(function() model(batch(rank, t, 0)) end) end
    end
    return counts[rank + 1]
end)
assert(steps_done == counts[rank + 1], 'join did not return the function\'s result')
end

-- the reference, from rank 0's initial weights
ddpl.manual_seed(1000)
local ref = Net(o.model)
local ref_opt = ddpl.optim.SGD(ref:parameters(), {lr = 0.05, momentum = momentum})
local ticks = {} -- each rank's buffer
for r = 1, world do ticks[r] = 0 end
local function step_of(t) return (t - 1) % T + 1 end -- within its epoch
for t = 1, T * o.epochs do
    local active, last = {}, -1
    for r = 0, world - 1 do
        if counts[r + 1] >= step_of(t) then active[#active + 1], last = r, r end
    end
    local div = o.divide == 1 and world or #active
    ref_opt:zero_grad()
    for _, r in ipairs(active) do
        ref.use_extra = uses_extra(r, t)
        for m = 1, M do
            local x, y = batch(r, t, m)
            F.cross_entropy(ref(x), y):div(M * div):backward()
        end
    end
    ref_opt:step()
    -- each forward broadcasts the buffer of the highest rank not joined, then bumps it
    for _ = 1, M + o.eval do
        local from = ticks[last + 1]
        for r = 0, world - 1 do
            ticks[r + 1] = from + (counts[r + 1] >= step_of(t) and r + 1 or 0)
        end
    end
    if step_of(t) == T then -- end of join: the highest of the last to join sends its buffers
        for r = 1, world do ticks[r] = ticks[last + 1] end
    end
end
local tick = ticks[1]

local maxrel = compare(model.module:named_parameters(), ref:named_parameters(), o.tol,
    'rank ' .. rank)
local have = net.tick:item()
if have ~= tick then
    error(('rank %d: buffer tick is %g, want %g (buffers must come from the highest rank not '
        .. 'joined, and at the end from the last to join)'):format(rank, have, tick))
end
print(('JOIN_OK rank=%d maxrel=%.3g walks=%d'):format(rank, maxrel,
    model:_reducer():graph_walks()))
dist.destroy_process_group()
