-- spec/ddp/workers/timeline_exit.lua: a short DDP run under DDPLUA_DDP_TIMELINE (set by
-- spec/ddp/ddp_timeline_spec.lua) that never calls model:write_timeline(): the trace must still be
-- written when the process ends. args: steps=N (synchronised steps), fail=1 (raise an error
-- after them instead of ending normally), nosync=1 (one more step under no_sync, not traced).
local ddpl = require 'ddplua'
local nn, F, dist = ddpl.nn, ddpl.nn.functional, ddpl.distributed

local o = {steps = 3, fail = 0, nosync = 0}
for _, a in ipairs(arg) do
    local k, v = a:match('^(%w+)=(.*)$')
    if k then o[k] = tonumber(v) end
end
dist.init_process_group({backend = 'gloo', timeout = 30})
local rank = dist.get_rank()
ddpl.manual_seed(1)
-- 16*64 + 64 + 64*64 + 64 + 64*4 + 4 parameters; 0.01 MB buckets: several of them
local model = nn.DDP(nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(),
    nn.Linear(64, 4)), {bucket_cap_mb = 0.01})
local opt = ddpl.optim.SGD(model:parameters(), {lr = 0.01})
local function step()
    ddpl.manual_seed(10 + rank)
    local x, y = ddpl.randn({8, 16}), ddpl.randint(0, 4, {8})
    opt:zero_grad()
    F.cross_entropy(model(x), y):backward()
    opt:step()
end
for _ = 1, o.steps do step() end
if o.nosync == 1 then model:no_sync(step) end
print(('TIMELINE_RUN %d buckets=%d'):format(rank, #model:buckets()))
if o.fail == 1 then error('failing on purpose after the steps') end
