-- spec/ddp/workers/fsdp_equiv.lua: nn.FSDP on N ranks against one process on the global batch;
-- run by spec/ddp/fsdp_spec.lua as `ddplua spec/ddp/workers/fsdp_equiv.lua --nproc N -- key=value`.
-- Keys: strategy=FULL_SHARD|SHARD_GRAD_OP|NO_SHARD, model=mlp|cnn|gpt, wrap=none|classes|size
--       (auto_wrap: none, the model's block class, or {min_num_params=200}), steps=K,
--       accum=0|1 (two micro-batches per step, the first under no_sync), clip=0|1
--       (clip_grad_norm_(0.5) before each step), ckpt=0|1 (the blocks under
--       utils.checkpoint), opt=adam|sgd, device=cpu|cuda (cuda: the models on GPU LOCAL_RANK
--       and backend nccl; the reference on rank 0's GPU too), offload=0|1 (cpu_offload: then
--       every shard and its gradient must be in page-locked host memory), fprefetch=0|1
--       (forward_prefetch; then a twin FSDP without it trains alongside and must stay
--       bit-identical, unless twin=0: a DDPLUA_FSDP_TIMELINE run traces one model),
--       blocks=N (the gpt model's blocks, 2 by default: from 4 on, FULL_SHARD's backward
--       prefetch of a block gathers into the memory of the reduce-scatter in flight, which
--       another block of the same size started: fsdp_unit.lua's reduced_memory).
-- Every rank trains the FSDP model on its slice of each global batch; rank 0 also trains a
-- plain copy on the whole global batch. After every step the full state dict (gathered to rank
-- 0) must equal the plain model's parameters to 1e-5 (relative, float32). Each rank checks that
-- it holds only its shard (the shards' element count is the padded total divided by the world).
-- Prints "FSDP_OK rank=R shard_elems=E total_elems=T" and exits 0, or raises.
local ddpl = require 'ddplua'
local nn, F, dist, optim, utils = ddpl.nn, ddpl.nn.functional, ddpl.distributed, ddpl.optim,
    ddpl.utils

local o = {strategy = 'FULL_SHARD', model = 'mlp', wrap = 'none', steps = 4, accum = 0,
    clip = 0, ckpt = 0, opt = 'adam', batch = 4, device = 'cpu', offload = 0, fprefetch = 0,
    twin = 1, blocks = 2}
for _, a in ipairs(arg) do
    local k, v = a:match('^(%w+)=(.*)$')
    if k then o[k] = math.tointeger(tonumber(v)) or tonumber(v) or v end
end

local dev = 'cpu'
if o.device == 'cuda' then
    local local_rank = math.tointeger(tonumber(os.getenv('LOCAL_RANK') or '0'))
    ddpl.cuda.set_device(local_rank)
    dev = 'cuda:' .. local_rank
end
dist.init_process_group({backend = o.device == 'cuda' and 'nccl' or 'gloo', timeout = 60})
local rank, world = dist.get_rank(), dist.get_world_size()

-- a block of the models: the class auto_wrap={Block} wraps
local Block = nn.Module:extend('FsdpTestBlock')
function Block:init(width)
    self.norm = nn.LayerNorm(width)
    self.fc1 = nn.Linear(width, 2 * width)
    self.fc2 = nn.Linear(2 * width, width)
end
function Block:forward(x) return x + self.fc2(F.gelu(self.fc1(self.norm(x)))) end

local Tiny = nn.Module:extend('FsdpTestGPT')
function Tiny:init()
    self.wte = nn.Embedding(17, 16)
    local blocks = {}
    for i = 1, o.blocks do blocks[i] = Block(16) end
    self.blocks = nn.ModuleList(blocks)
    self.ln = nn.LayerNorm(16)
    self.head = nn.Linear(16, 17, {bias = false})
end
function Tiny:forward(idx)
    local h = self.wte(idx)
    for _, b in ipairs(self.blocks:children()) do
        -- checkpointed whole: the recomputation calls the unit again, which gathers again
        if o.ckpt == 1 then h = utils.checkpoint(b, h) else h = b(h) end
    end
    return self.head(self.ln(h))
end

local function make_cpu()
    ddpl.manual_seed(1234)
    if o.model == 'mlp' then
        return nn.Sequential(nn.Linear(12, 24), nn.Tanh(), Block(24), Block(24),
                             nn.Linear(24, 5))
    elseif o.model == 'cnn' then
        return nn.Sequential(nn.Conv2d(1, 4, 3, {padding = 1}), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(4, 8, 3, {padding = 1}), nn.ReLU(), nn.Flatten(), nn.Linear(8 * 4 * 4, 5))
    end
    return Tiny()
end
local function make() return make_cpu():to(dev) end

-- the global batch of step s (every rank draws the same), and this rank's slice of it
local function global_batch(s)
    ddpl.manual_seed(100 + s)
    local n = o.batch * world
    if o.model == 'gpt' then
        return ddpl.randint(0, 17, {n, 6}), ddpl.randint(0, 17, {n, 6})
    elseif o.model == 'cnn' then
        return ddpl.randn(n, 1, 8, 8), ddpl.randint(0, 5, {n})
    end
    return ddpl.randn(n, 12), ddpl.randint(0, 5, {n})
end
local function loss_of(model, x, y)
    local out = model(x)
    if o.model == 'gpt' then return F.cross_entropy(out:reshape(-1, 17), y:reshape(-1)) end
    return F.cross_entropy(out, y)
end
local function make_opt(params)
    if o.opt == 'sgd' then return optim.SGD(params, {lr = 0.1, momentum = 0.9}) end
    return optim.Adam(params, {lr = 1e-2})
end

local wrap = ({none = false, classes = {Block}, size = {min_num_params = 200}})[o.wrap]
local function make_fsdp(fprefetch)
    return nn.FSDP(make(), {sharding_strategy = o.strategy, auto_wrap = wrap,
                            cpu_offload = o.offload == 1, forward_prefetch = fprefetch})
end
local fsdp = make_fsdp(o.fprefetch == 1)
local opt = make_opt(fsdp:parameters())
local twin, twin_opt
if o.fprefetch == 1 and o.twin == 1 then
    twin = make_fsdp(false)
    twin_opt = make_opt(twin:parameters())
end
local plain, plain_opt
if rank == 0 then
    plain = make()
    plain_opt = make_opt(plain:parameters())
end

local shard_elems, total_elems = 0, 0
for _, u in ipairs(fsdp:units()) do
    shard_elems = shard_elems + u.shard_size
    total_elems = total_elems + u.numel
end
local own = 0
local shard_device = o.offload == 1 and 'cpu' or dev
for _, p in ipairs(fsdp:parameters()) do
    own = own + p:numel()
    assert(p.device == shard_device, ('a shard is on %s, expected %s'):format(p.device,
                                                                             shard_device))
    assert(o.offload == 0 or p:is_pinned(), 'an offloaded shard is not in page-locked memory')
end
assert(own == shard_elems, ('rank %d holds %d elements, its shards %d'):format(rank, own,
                                                                            shard_elems))
if o.strategy ~= 'NO_SHARD' then
    assert(shard_elems <= total_elems // world + #fsdp:units(),
           ('shards of %d elements for %d in all on %d ranks'):format(shard_elems, total_elems,
                                                                      world))
end

local function compare(step)
    local sd = fsdp:state_dict({type = 'full'})
    local twin_sd = twin and twin:state_dict({type = 'full'})
    if rank ~= 0 then return end
    if twin then -- forward_prefetch changes when gathers run, never a value
        for k, v in pairs(twin_sd) do
            assert(sd[k] and sd[k]:equal(v), ('step %d: %s differs with forward_prefetch')
                :format(step, k))
        end
    end
    local want = plain:state_dict()
    local n = 0
    for k, v in pairs(want) do
        local got = sd[k]
        assert(ddpl.is_tensor(got), ('step %d: the full state dict has no %s'):format(step, k))
        local err = (got - v):abs():max():item()
        local scale = v:abs():max():item()
        assert(err <= 1e-5 * math.max(scale, 1), ('step %d: %s differs by %g (scale %g)')
            :format(step, k, err, scale))
        n = n + 1
    end
    local m = 0
    for _ in pairs(sd) do m = m + 1 end
    assert(m == n, ('step %d: the full state dict has %d keys, the module %d'):format(step, m, n))
end

compare(0)
for step = 1, o.steps do
    local x, y = global_batch(step)
    local lo = rank * o.batch
    x, y = x:to(dev), y:to(dev)
    local xs, ys = x:narrow(0, lo, o.batch), y:narrow(0, lo, o.batch)
    local function backward(model, optimizer)
        optimizer:zero_grad()
        if o.accum == 1 then
            local half = o.batch // 2
            model:no_sync(function()
                loss_of(model, xs:narrow(0, 0, half), ys:narrow(0, 0, half)):div(2):backward()
            end)
            loss_of(model, xs:narrow(0, half, o.batch - half), ys:narrow(0, half, o.batch - half))
                :div(2):backward()
        else
            loss_of(model, xs, ys):backward()
        end
    end
    if twin then
        backward(twin, twin_opt)
        if o.clip == 1 then twin:clip_grad_norm_(0.5) end
        twin_opt:step()
    end
    backward(fsdp, opt)
    for _, p in ipairs(fsdp:parameters()) do
        assert(p.grad and p.grad.device == shard_device and p.grad.dtype == p.dtype,
               ('step %d: a shard\'s gradient is %s, expected %s %s'):format(step,
                p.grad and (p.grad.dtype .. ' on ' .. p.grad.device) or 'missing', p.dtype,
                shard_device))
        assert(o.offload == 0 or p.grad:is_pinned(),
               'an offloaded gradient is not in page-locked memory')
    end
    local norm
    if o.clip == 1 then norm = fsdp:clip_grad_norm_(0.5):item() end
    opt:step()
    if rank == 0 then
        plain_opt:zero_grad()
        if o.accum == 1 then
            -- the same split of every rank's slice: each half averages over its own samples
            local total
            for r = 0, world - 1 do
                local half = o.batch // 2
                local a = loss_of(plain, x:narrow(0, r * o.batch, half),
                                  y:narrow(0, r * o.batch, half)):div(2)
                local b = loss_of(plain, x:narrow(0, r * o.batch + half, o.batch - half),
                                  y:narrow(0, r * o.batch + half, o.batch - half)):div(2)
                total = (total and total + a + b or a + b)
            end
            total:div(world):backward()
        else
            loss_of(plain, x, y):backward()
        end
        if o.clip == 1 then
            local want = nn.utils.clip_grad_norm_(plain:parameters(), 0.5)
            want = ddpl.is_tensor(want) and want:item() or want
            assert(math.abs(want - norm) <= 1e-4 * math.max(1, want),
                   ('step %d: clip_grad_norm_ gave %g, the plain model %g'):format(step, norm, want))
        end
        plain_opt:step()
    end
    compare(step)
end
print(('FSDP_OK rank=%d shard_elems=%d total_elems=%d'):format(rank, shard_elems, total_elems))
dist.destroy_process_group()
