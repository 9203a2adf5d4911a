-- spec/ddp/workers/fsdp_gc.lua: an FSDP training loop's Lua heap stays flat without the script
-- calling collectgarbage (fsdp_unit.lua's pace_collector: the binding paces the collector by
-- tensor memory, which FSDP's released and reused buffers hardly grow, while each step leaves
-- boxes, closures and autograd nodes to collect). Run by spec/ddp/fsdp_spec.lua as
-- `ddplua spec/ddp/workers/fsdp_gc.lua --nproc 2 [-- steps=K]`; prints "GC_OK rank=R growth_kb=G"
-- and exits 0, or raises.
local ddpl = require 'ddplua'
local nn, dist, optim = ddpl.nn, ddpl.distributed, ddpl.optim
local o = {steps = 60}
for _, a in ipairs(arg) do
    local k, v = a:match('^(%w+)=(.*)$')
    if k then o[k] = math.tointeger(tonumber(v)) or v end
end
dist.init_process_group({backend = 'gloo', timeout = 60})
local rank = dist.get_rank()
local Block = nn.Module:extend('FsdpGcBlock')
function Block:init()
    self.norm = nn.LayerNorm(32)
    self.fc1 = nn.Linear(32, 64)
    self.fc2 = nn.Linear(64, 32)
end
function Block:forward(x) return x + self.fc2(ddpl.nn.functional.gelu(self.fc1(self.norm(x)))) end
ddpl.manual_seed(1)
local blocks = {}
for i = 1, 4 do blocks[i] = Block() end
local model = nn.FSDP(nn.Sequential(table.unpack(blocks)), {auto_wrap = {Block}})
local opt = optim.Adam(model:parameters(), {lr = 1e-3})
local function step()
    opt:zero_grad()
    model(ddpl.randn(4, 32)):pow(2):mean():backward()
    opt:step()
end
for _ = 1, 5 do step() end
collectgarbage()
collectgarbage()
local base = collectgarbage('count')
local top = base
for _ = 1, o.steps do
    step()
    top = math.max(top, collectgarbage('count'))
end
-- each step leaves about 12 KiB of Lua objects here: without the pacing 60 steps grew the heap
-- by 696 KiB from 709 (Lua's own major collection comes at about twice the heap), with it by
-- 182; the bound is the pacing's (a tenth and 64 KiB) plus room for a few steps
local growth = top - base
assert(growth < base * 0.1 + 64 + 200, ('the Lua heap grew by %.0f KiB over %d steps, from %.0f')
    :format(growth, o.steps, base))
print(('GC_OK rank=%d growth_kb=%.0f'):format(rank, growth))
dist.destroy_process_group()
