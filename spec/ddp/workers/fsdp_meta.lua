-- spec/ddp/workers/fsdp_meta.lua: nn.FSDP of a module built under nn.utils.meta_init (no memory
-- for its parameters until FSDP materialises each unit); run by spec/ddp/fsdp_spec.lua as
-- `ddplua spec/ddp/workers/fsdp_meta.lua --nproc N [-- strategy=FULL_SHARD|SHARD_GRAD_OP
-- width=128 maxr=1]` (maxr: the bound on the construction peak over the model's bytes).
-- 1. param_init_fn copying an eagerly built twin's values module by module: the full state dict
--    right after construction is the twin's, and after 3 Adam steps FSDP of the meta module
--    equals FSDP of the twin bit for bit; constructing it never held the whole model (the
--    allocator's peak while wrapping stays below the model's bytes).
-- 2. the default (each module's reset_parameters) with another seed on every rank: the values
--    are rank 0's (sync_module_states), as rank 0 recorded them when it materialised.
-- Prints "META_OK rank=R peak_ratio=X" and exits 0, or raises naming the check.
local ddpl = require 'ddplua'
local nn, dist = ddpl.nn, ddpl.distributed

local o = {strategy = 'FULL_SHARD'}
for _, a in ipairs(arg) do
    local k, v = a:match('^([%w_]+)=(.*)$')
    if k then o[k] = v end
end
dist.init_process_group({backend = 'gloo', timeout = 60})
local rank = dist.get_rank()

local Block = nn.Module:extend('MetaSpecBlock')
function Block:init(w)
    self.ln = nn.LayerNorm(w)
    self.fc1 = nn.Linear(w, 2 * w)
    self.fc2 = nn.Linear(2 * w, w)
end
function Block:forward(x) return x + self.fc2(ddpl.tanh(self.fc1(self.ln(x)))) end

local W, DEPTH = tonumber(o.width or 128), 8
local function build()
    local layers = {nn.Linear(8, W)}
    for i = 1, DEPTH do layers[#layers + 1] = Block(W) end
    layers[#layers + 1] = nn.Linear(W, 3)
    return nn.Sequential(table.unpack(layers))
end

local function model_bytes(m)
    local n = 0
    for _, p in ipairs(m:parameters()) do n = n + p:numel() * p:element_size() end
    return n
end

local function max_diff(a, b)
    local d = 0
    for k, v in pairs(a) do
        assert(b[k] ~= nil, 'missing ' .. k)
        d = math.max(d, (v:double() - b[k]:double()):abs():max():item())
    end
    return d
end

-- 1. values copied from a twin
ddpl.manual_seed(11)
local twin = build()
local twin_sd = {}
for k, v in pairs(twin:state_dict()) do twin_sd[k] = v:clone() end
local bytes = model_bytes(twin)
local net = nn.utils.meta_init(build)
for _, p in ipairs(net:parameters()) do assert(nn.utils.is_meta(p), 'a parameter has memory') end
local twin_of = {} -- meta module -> the twin's module at the same path
do
    local by_path = {}
    for _, pm in ipairs(twin:named_modules()) do by_path[pm[1]] = pm[2] end
    for _, pm in ipairs(net:named_modules()) do twin_of[pm[2]] = by_path[pm[1]] end
end
local function copy_init(m)
    local src = twin_of[m]
    for _, np in ipairs(m:named_parameters(nil, false)) do np[2]:copy_(src[np[1]]) end
end
collectgarbage()
collectgarbage()
local base = ddpl.memory_stats()['allocated_bytes.current']
ddpl.reset_peak_memory_stats()
local opts = {sharding_strategy = o.strategy, auto_wrap = {Block}}
opts.param_init_fn = copy_init
local fm = nn.FSDP(net, opts)
local peak = ddpl.memory_stats()['allocated_bytes.peak'] - base
local ratio = peak / bytes
assert(ratio < (tonumber(o.maxr) or 1),
       ('constructing from meta held %.2f of the model at once'):format(ratio))
opts.param_init_fn = nil
local ft = nn.FSDP(twin, opts)

local sd = fm:state_dict()
if rank == 0 then
    assert(max_diff(twin_sd, sd) == 0, 'the materialised values are not the twin\'s')
end
local om = ddpl.optim.Adam(fm:parameters(), {lr = 1e-2})
local ot = ddpl.optim.Adam(ft:parameters(), {lr = 1e-2})
for s = 1, 3 do
    ddpl.manual_seed(100 * s + rank)
    local x = ddpl.randn(5, 8)
    for _, pair in ipairs({{fm, om}, {ft, ot}}) do
        pair[2]:zero_grad()
        pair[1](x):pow(2):mean():backward()
        pair[2]:step()
    end
    local a, b = fm:state_dict(), ft:state_dict()
    if rank == 0 then
        local d = max_diff(a, b)
        assert(d == 0, ('step %d: FSDP of the meta module differs from its twin\'s by %g'):format(
            s, d))
    end
end

-- 2. reset_parameters on every rank with its own seed: rank 0's values everywhere
local recorded = {}
local path_of = {}
local net2 = nn.utils.meta_init(build)
for _, pm in ipairs(net2:named_modules()) do path_of[pm[2]] = pm[1] end
ddpl.manual_seed(500 + rank)
local f2 = nn.FSDP(net2, {sharding_strategy = o.strategy, auto_wrap = {Block},
                          param_init_fn = function(m)
                              m:reset_parameters()
                              local prefix = path_of[m] == '' and '' or path_of[m] .. '.'
                              for _, np in ipairs(m:named_parameters(nil, false)) do
                                  recorded[prefix .. np[1]] = np[2]:clone()
                              end
                          end})
local sd2 = f2:state_dict()
if rank == 0 then
    assert(max_diff(recorded, sd2) == 0, 'the values are not rank 0\'s')
    local n = 0
    for _ in pairs(recorded) do n = n + 1 end
    assert(n == #build():parameters(), 'not every parameter was materialised once')
end

print(('META_OK rank=%d peak_ratio=%.3f'):format(rank, ratio))
dist.destroy_process_group()
