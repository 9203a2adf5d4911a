-- spec/ddp/workers/fsdp_ckpt.lua: FSDP state dicts through files; run by spec/ddp/fsdp_spec.lua
-- as `ddplua spec/ddp/workers/fsdp_ckpt.lua --nproc N -- phase=save|load dir=DIR [key=value]`.
-- phase=save: trains a wrapped GPT-like model 2 steps (strategy=..., wrap=classes), then every
--   rank writes its sharded state dict to DIR/shard<R>.safetensors and rank 0 the full one to
--   DIR/full.safetensors; a fresh FSDP model loading its own shard file gives the same full
--   state dict back.
-- phase=load (any world size): loads every shard file in rank order into a new FSDP model
--   (resharding), checks its full state dict against full.safetensors exactly, loads the full
--   one into another FSDP model and a plain model and checks both, and takes one more training
--   step on each FSDP model: they stay equal.
-- Prints "CKPT_OK rank=R phase=P" and exits 0, or raises.
local ddpl = require 'ddplua'
local nn, F, dist = ddpl.nn, ddpl.nn.functional, ddpl.distributed

local o = {phase = 'save', dir = '/tmp', strategy = 'FULL_SHARD', saved_world = 0}
for _, a in ipairs(arg) do
    local k, v = a:match('^([%w_]+)=(.*)$')
    if k then o[k] = math.tointeger(tonumber(v)) or tonumber(v) or v end
end
dist.init_process_group({backend = 'gloo', timeout = 60})
local rank, world = dist.get_rank(), dist.get_world_size()

local Block = nn.Module:extend('CkptBlock')
function Block:init(w)
    self.norm = nn.LayerNorm(w)
    self.fc = nn.Linear(w, w)
end
function Block:forward(x) return x + self.fc(self.norm(x)):tanh() end
local Net = nn.Module:extend('CkptNet')
function Net:init()
    self.emb = nn.Embedding(11, 12)
    self.blocks = nn.ModuleList({Block(12), Block(12), Block(12)})
    self.head = nn.Linear(12, 11)
end
function Net:forward(idx)
    local h = self.emb(idx)
    for _, b in ipairs(self.blocks:children()) do h = b(h) end
    return self.head(h)
end

local function make(seed)
    ddpl.manual_seed(seed)
    return nn.FSDP(Net(), {sharding_strategy = o.strategy, auto_wrap = {Block}})
end
local function train_step(model, opt, s)
    ddpl.manual_seed(500 + s)
    local x, y = ddpl.randint(0, 11, {2 * world, 5}), ddpl.randint(0, 11, {2 * world, 5})
    local xs, ys = x:narrow(0, 2 * rank, 2), y:narrow(0, 2 * rank, 2)
    opt:zero_grad()
    F.cross_entropy(model(xs):reshape(-1, 11), ys:reshape(-1)):backward()
    opt:step()
end
local function same(a, b, what)
    local n = 0
    for k, v in pairs(b) do
        assert(ddpl.is_tensor(a[k]), what .. ': no ' .. k)
        assert(ddpl.equal(a[k], v), what .. ': ' .. k .. ' differs')
        n = n + 1
    end
    for k in pairs(a) do
        assert(b[k] ~= nil, what .. ': unexpected key ' .. k)
    end
    assert(n > 0, what .. ': empty')
end

if o.phase == 'save' then
    local model = make(1)
    local opt = ddpl.optim.Adam(model:parameters(), {lr = 1e-2})
    for s = 1, 2 do train_step(model, opt, s) end
    local sharded = model:state_dict({type = 'sharded'})
    ddpl.save(sharded, ('%s/shard%d.safetensors'):format(o.dir, rank))
    local full = model:state_dict({type = 'full'})
    if rank == 0 then ddpl.save(full, o.dir .. '/full.safetensors') end
    dist.barrier()
    -- its own shard file back into a fresh model (another seed): the same full state dict
    local again = make(2)
    again:load_state_dict(ddpl.load(('%s/shard%d.safetensors'):format(o.dir, rank)))
    local full2 = again:state_dict({type = 'full'})
    if rank == 0 then same(full2, full, 'own shard reloaded') end
else
    local shards = {}
    for r = 0, o.saved_world - 1 do
        shards[r + 1] = ddpl.load(('%s/shard%d.safetensors'):format(o.dir, r))
    end
    local full = ddpl.load(o.dir .. '/full.safetensors')
    local resharded = make(3)
    resharded:load_state_dict(shards)
    local got = resharded:state_dict({type = 'full'})
    if rank == 0 then same(got, full, 'resharded from ' .. o.saved_world .. ' ranks') end
    local from_full = make(4)
    from_full:load_state_dict(full)
    local got2 = from_full:state_dict({type = 'full'})
    if rank == 0 then same(got2, full, 'loaded from the full state dict') end
    ddpl.manual_seed(9)
    local plain = Net()
    plain:load_state_dict(full)
    if rank == 0 then same(plain:state_dict(), full, 'plain module') end
    -- a sharded state dict of another world size alone is refused, naming both
    if o.saved_world ~= world then
        local ok, err = pcall(function() from_full:load_state_dict(shards[1]) end)
        assert(not ok and tostring(err):find('pass the list', 1, true), tostring(err))
    end
    local o1 = ddpl.optim.SGD(resharded:parameters(), {lr = 0.1})
    local o2 = ddpl.optim.SGD(from_full:parameters(), {lr = 0.1})
    train_step(resharded, o1, 3)
    train_step(from_full, o2, 3)
    local a, b = resharded:state_dict({type = 'full'}), from_full:state_dict({type = 'full'})
    if rank == 0 then same(a, b, 'one step after loading') end
end
print(('CKPT_OK rank=%d phase=%s'):format(rank, o.phase))
dist.destroy_process_group()
