-- spec/ddp/workers/fsdp_mixed.lua: nn.FSDP's mixed_precision against DDP under the same casts;
-- run by spec/ddp/fsdp_spec.lua (and fsdp_cuda_spec.lua) as `ddplua spec/ddp/workers/
-- fsdp_mixed.lua --nproc N -- key=value`.
-- Keys: pd=bfloat16|float16 (param_dtype), rd=none|float32|bfloat16|float16 (reduce_dtype),
--       bd=none|bfloat16|float16 (buffer_dtype), strategy=FULL_SHARD|SHARD_GRAD_OP|NO_SHARD,
--       steps=K, device=cpu|cuda, offload=0|1 (cpu_offload), tol=<relative>.
-- PyTorch's semantics (MixedPrecision): the parameters are gathered and computed in
-- param_dtype (and the root's floating inputs cast to it), gradients reduced in reduce_dtype
-- (param_dtype when not given), buffers kept in buffer_dtype, and the sharded master copy, its
-- gradient, the optimizer step and the full state dict stay float32 (buffers too, in state
-- dicts). The reference is DDP over a module that computes with its float32 parameters cast to
-- param_dtype (the cast's backward brings each gradient back to float32 exactly), the same
-- inputs and buffers cast, and the comm hook that reduces in the same dtype (bf16_compress,
-- fp16_compress, or none for float32). After every SGD step, rank 0 compares the full state
-- dict with the reference: max|fsdp - ddp| <= tol * max(1, max|ddp|) per tensor.
-- Prints "MIXED_OK rank=R maxdiff=D" and exits 0, or raises.
local ddpl = require 'ddplua'
local State = require 'ddplua.nn.module_state'
local nn, F, dist, optim = ddpl.nn, ddpl.nn.functional, ddpl.distributed, ddpl.optim

local o = {pd = 'bfloat16', rd = 'none', bd = 'none', strategy = 'FULL_SHARD', steps = 3,
    device = 'cpu', offload = 0, batch = 4, tol = 0}
for _, a in ipairs(arg) do
    local k, v = a:match('^(%w+)=(.*)$')
    if k then o[k] = tonumber(v) or v end
end
local function opt_dtype(v) return v ~= 'none' and v or nil end
local pd, rd, bd = o.pd, opt_dtype(o.rd), opt_dtype(o.bd)

local dev = 'cpu'
if o.device == 'cuda' then
    local local_rank = math.tointeger(tonumber(os.getenv('LOCAL_RANK') or '0'))
    ddpl.cuda.set_device(local_rank)
    dev = 'cuda:' .. local_rank
end
dist.init_process_group({backend = o.device == 'cuda' and 'nccl' or 'gloo', timeout = 60})
local rank, world = dist.get_rank(), dist.get_world_size()

-- a block with a floating buffer, so buffer_dtype has something to cast
local Block = nn.Module:extend('FsdpMixedBlock')
function Block:init(width)
    self.norm = nn.LayerNorm(width)
    self.fc1 = nn.Linear(width, 2 * width)
    self.fc2 = nn.Linear(2 * width, width)
    self:register_buffer('scale', ddpl.full({width}, 0.75))
end
-- (a float32 buffer times a 16-bit activation is float32, as in PyTorch: back to x's dtype)
function Block:forward(x)
    return x + (self.fc2(F.gelu(self.fc1(self.norm(x)))) * self.scale):to(x.dtype)
end

local function make()
    ddpl.manual_seed(1234)
    return nn.Sequential(nn.Linear(12, 24), nn.Tanh(), Block(24), Block(24),
                         nn.Linear(24, 5)):to(dev)
end

-- The reference's module: inner's float32 parameters in its slots as param_dtype copies (with
-- history) during its forward, as FSDP's gathered views are; its buffers cast once, as FSDP's.
local Cast = nn.Module:extend('FsdpMixedCast')
function Cast:init(inner)
    self.inner = inner
    if bd then
        for _, pm in ipairs(inner:named_modules()) do
            for _, e in ipairs(State.entries(pm[2], 'buffers')) do
                if e[2] ~= nil then pm[2]:register_buffer(e[1], e[2]:to(bd)) end
            end
        end
    end
end
function Cast:forward(x)
    local slots = {}
    for _, pm in ipairs(self.inner:named_modules()) do
        local vals = rawget(pm[2], '__params').vals -- the slot table (module_state.lua)
        for _, e in ipairs(State.entries(pm[2], 'params')) do
            if e[2] ~= nil then
                slots[#slots + 1] = {vals, e[1], e[2]}
                vals[e[1]] = e[2]:to(pd)
            end
        end
    end
    local ok, out = pcall(self.inner, x:to(pd))
    for _, s in ipairs(slots) do s[1][s[2]] = s[3] end
    if not ok then error(out, 0) end
    return out
end

local fsdp = nn.FSDP(make(), {sharding_strategy = o.strategy, auto_wrap = {Block},
    mixed_precision = {param_dtype = pd, reduce_dtype = rd, buffer_dtype = bd},
    cpu_offload = o.offload == 1})
local opt = optim.SGD(fsdp:parameters(), {lr = 0.1, momentum = 0.9})
local ddp = nn.DDP(Cast(make()))
local hook = ({bfloat16 = 'bf16_compress', float16 = 'fp16_compress'})[rd or pd]
if hook then ddp:register_comm_hook(hook) end
local ref = ddp.module.inner
local ref_opt = optim.SGD(ddp:parameters(), {lr = 0.1, momentum = 0.9})

-- inside the forward the module computes in param_dtype
local seen = 0
fsdp.module[2].fc1:register_forward_pre_hook(function(m)
    assert(m.weight.dtype == pd, ('inside forward a weight is %s, expected %s'):format(
        m.weight.dtype, pd))
    seen = seen + 1
end)
for _, nb in ipairs(fsdp.module:named_buffers()) do
    assert(nb[2].dtype == (bd or 'float32'), ('buffer %s is %s'):format(nb[1], nb[2].dtype))
end

local maxdiff = 0
local function compare(step)
    local sd = fsdp:state_dict({type = 'full'})
    if rank ~= 0 then return end
    local n = 0
    for k, want in pairs(ref:state_dict()) do
        local got = sd[k]
        assert(ddpl.is_tensor(got), ('step %d: no %s in the full state dict'):format(step, k))
        -- parameters are the float32 master copy; buffers come back in their own dtype
        assert(got.dtype == 'float32', ('step %d: %s is %s in the full state dict, expected '
            .. 'float32'):format(step, k, got.dtype))
        local w = want:float()
        local err = (got - w):abs():max():item()
        local scale = math.max(1, w:abs():max():item())
        maxdiff = math.max(maxdiff, err / scale)
        assert(err <= o.tol * scale, ('step %d: %s differs by %g (scale %g, tol %g)'):format(step,
            k, err, scale, o.tol))
        n = n + 1
    end
    assert(n > 0)
end

compare(0)
for step = 1, o.steps do
    ddpl.manual_seed(100 + step)
    local x = ddpl.randn(o.batch * world, 12)
    local y = ddpl.randint(0, 5, {o.batch * world})
    x = x:narrow(0, rank * o.batch, o.batch):to(dev)
    y = y:narrow(0, rank * o.batch, o.batch):to(dev)
    opt:zero_grad()
    local out = fsdp(x)
    assert(out.dtype == pd, ('the output is %s, expected %s'):format(out.dtype, pd))
    F.cross_entropy(out, y):backward()
    for _, p in ipairs(fsdp:parameters()) do
        assert(p.dtype == 'float32' and p.grad and p.grad.dtype == 'float32',
               ('step %d: a shard is %s with a %s gradient, expected float32'):format(step,
                p.dtype, p.grad and p.grad.dtype or 'missing'))
    end
    opt:step()
    ref_opt:zero_grad()
    F.cross_entropy(ddp(x), y):backward()
    ref_opt:step()
    compare(step)
end
assert(seen == o.steps, ('the pre-hook ran %d times in %d steps'):format(seen, o.steps))
print(('MIXED_OK rank=%d maxdiff=%g'):format(rank, maxdiff))
dist.destroy_process_group()
