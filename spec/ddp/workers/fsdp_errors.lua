-- spec/ddp/workers/fsdp_errors.lua: every error of nn.FSDP names what was wrong; run by
-- spec/ddp/fsdp_spec.lua as `ddplua spec/ddp/workers/fsdp_errors.lua --nproc 2`.
-- Prints "ERRORS_OK rank=R checked=N" and exits 0, or raises naming the case.
local ddpl = require 'ddplua'
local nn, dist = ddpl.nn, ddpl.distributed

local checked = 0
local function expect_error(what, fn, ...)
    local ok, err = pcall(fn)
    assert(not ok, what .. ': no error')
    err = tostring(err)
    for _, part in ipairs({...}) do
        assert(err:find(part, 1, true), ('%s: the message lacks %q: %s'):format(what, part, err))
    end
    checked = checked + 1
end

local function mlp()
    ddpl.manual_seed(3)
    return nn.Sequential(nn.Linear(4, 6), nn.Tanh(), nn.Linear(6, 2))
end

expect_error('before init_process_group', function() nn.FSDP(mlp()) end,
             'FullyShardedDataParallel', 'init_process_group')
dist.init_process_group({backend = 'gloo', timeout = 30})
local rank = dist.get_rank()

expect_error('not a module', function() nn.FSDP(42) end, 'expected a module')
expect_error('unknown option', function() nn.FSDP(mlp(), {sharding = 'FULL_SHARD'}) end,
             "unknown option 'sharding'")
expect_error('bad strategy', function() nn.FSDP(mlp(), {sharding_strategy = 'HYBRID'}) end,
             'sharding_strategy', 'HYBRID')
expect_error('bad auto_wrap', function() nn.FSDP(mlp(), {auto_wrap = 'all'}) end,
             'auto_wrap must be')
expect_error('bad min_num_params', function()
    nn.FSDP(mlp(), {auto_wrap = {min_num_params = -1}})
end, 'min_num_params must be a positive integer')
expect_error('not a class in auto_wrap', function() nn.FSDP(mlp(), {auto_wrap = {42}}) end,
             'auto_wrap[1]', 'module class')
expect_error('param_init_fn', function() nn.FSDP(mlp(), {param_init_fn = 42}) end,
             'param_init_fn must be a function')
-- a module built under meta_init without reset_parameters needs a param_init_fn
expect_error('meta module without reset_parameters', function()
    local m = nn.utils.meta_init(function()
        local mod = nn.Module()
        mod.w = nn.Parameter(ddpl.empty(4))
        return mod
    end)
    nn.FSDP(m)
end, 'FullyShardedDataParallel', 'meta_init', 'param_init_fn')
expect_error('mixed_precision key', function()
    nn.FSDP(mlp(), {mixed_precision = {compute_dtype = 'bfloat16'}})
end, "unknown mixed_precision option 'compute_dtype'")
expect_error('no parameters', function() nn.FSDP(nn.Sequential(nn.ReLU())) end,
             'no parameters')

-- a parameter tied across two units
local Tied = nn.Module:extend('TiedPair')
function Tied:init()
    self.a = nn.Linear(3, 3)
    self.b = nn.Linear(3, 3)
    self.b.weight = self.a.weight
end
expect_error('tied across units', function()
    nn.FSDP(Tied(), {auto_wrap = {nn.Linear}})
end, "parameter 'b.weight' is shared by units")

-- a parameter used outside its unit's forward
local model = nn.FSDP(mlp())
expect_error('placeholder outside forward', function() return model.module[0].weight:sum() end,
             "memory was released", 'FSDP unit')
assert(#model:parameters() == 1, 'one flat parameter for one unit')
assert(model:named_parameters()[1][1] == 'module.flat_param', model:named_parameters()[1][1])

-- state dicts
expect_error('state_dict type', function() model:state_dict({type = 'local'}) end,
             "type must be 'full' or 'sharded'")
expect_error('state_dict option', function() model:state_dict({rank0_only = true}) end,
             "unknown option 'rank0_only'")
local full = model:state_dict({type = 'full'})
local broken = {}
if rank == 0 then
    for k, v in pairs(full) do broken[k] = v end
else
    broken = {['0.weight'] = ddpl.zeros(6, 4), ['0.bias'] = ddpl.zeros(6),
              ['2.weight'] = ddpl.zeros(2, 6), ['2.bias'] = ddpl.zeros(2)}
end
broken['2.bias'] = nil
expect_error('missing key', function() model:load_state_dict(broken) end,
             "missing key '2.bias'")
broken['2.bias'] = ddpl.zeros(3)
expect_error('wrong size', function() model:load_state_dict(broken) end,
             "'2.bias' has 3 elements")
local sharded = model:state_dict({type = 'sharded'})
sharded._fsdp.rank = 1 - rank
expect_error('another rank\'s shard', function() model:load_state_dict(sharded) end,
             'saved by rank', 'pass the list')
sharded._fsdp.rank = 1
expect_error('list out of order', function() model:load_state_dict({sharded}) end,
             'entry 1 of the list')
sharded._fsdp.rank = 0
expect_error('list too short', function() model:load_state_dict({sharded}) end,
             'the list has 1 sharded state dicts, saved by 2 ranks')

-- clip_grad_norm_ and no_sync arguments
expect_error('clip max_norm', function() model:clip_grad_norm_(-1) end, 'max_norm')
expect_error('clip norm_type', function() model:clip_grad_norm_(1, 0) end, 'norm_type')
expect_error('no_sync', function() model:no_sync(42) end, 'no_sync: expected a function')
-- an error inside no_sync comes out, and gradients are synchronised again afterwards
expect_error('error in no_sync', function()
    model:no_sync(function() error('inside no_sync') end)
end, 'inside no_sync')
model(ddpl.randn(2, 4)):sum():backward()
assert(model:parameters()[1].grad ~= nil, 'the backward after no_sync reduced the gradient')

print(('ERRORS_OK rank=%d checked=%d'):format(rank, checked))
dist.destroy_process_group()
