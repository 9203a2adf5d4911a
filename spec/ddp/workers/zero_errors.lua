-- spec/ddp/workers/zero_errors.lua: optim.ZeroRedundancyOptimizer's errors, on every rank alike;
-- run by spec/ddp/zero_redundancy_spec.lua as `ddplua spec/ddp/workers/zero_errors.lua --nproc 2`.
-- Each bad call must raise an error containing the expected words (and must not hang the
-- others: the calls that fail before any collective fail on every rank, those after it too).
-- Prints "ZERO_ERRORS_OK rank=R checked=K" and exits 0, or raises.
local ddpl = require 'ddplua'
local nn, dist, optim = ddpl.nn, ddpl.distributed, ddpl.optim
local ZeRO = optim.ZeroRedundancyOptimizer

dist.init_process_group({backend = 'gloo', timeout = 30})
local rank = dist.get_rank()

local checked = 0
local function expect_error(words, f, ...)
    local ok, err = pcall(f, ...)
    if ok then error(('expected an error with "%s", got success'):format(words), 2) end
    if not tostring(err):find(words, 1, true) then
        error(('expected an error with "%s", got: %s'):format(words, tostring(err)), 2)
    end
    if not tostring(err):find('zero_errors.lua', 1, true) then
        error('the error is not raised at the caller\'s line: ' .. tostring(err), 2)
    end
    checked = checked + 1
end

ddpl.manual_seed(1)
local net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
local ps = net:parameters()

expect_error("unknown option 'momentum' (neither ZeroRedundancyOptimizer's nor Adam's)",
    function() local _ = ZeRO(ps, {optimizer_class = optim.Adam, momentum = 0.9}) end)
expect_error('optimizer_class is required',
    function() local _ = ZeRO(ps, {lr = 1e-3}) end)
expect_error('optimizer_class must be an optimizer class such as optim.AdamW, got number',
    function() local _ = ZeRO(ps, {optimizer_class = 5}) end)
expect_error('optimizer_class must be an optimizer class such as optim.AdamW, got Linear',
    function() local _ = ZeRO(ps, {optimizer_class = nn.Linear}) end)
expect_error('optimizer_class must be an optimizer class such as optim.AdamW, got Optimizer',
    function() local _ = ZeRO(ps, {optimizer_class = optim.Optimizer}) end)
expect_error('got an optimizer instance (Adam)',
    function() local _ = ZeRO(ps, {optimizer_class = optim.Adam(ps)}) end)
expect_error('optimizer_class cannot be ZeroRedundancyOptimizer itself',
    function() local _ = ZeRO(ps, {optimizer_class = ZeRO}) end)
expect_error('expected an options table as argument 2, got string',
    function() local _ = ZeRO(ps, 'adam') end)
expect_error('invalid lr value: -1',
    function() local _ = ZeRO(ps, {optimizer_class = optim.AdamW, lr = -1}) end)
expect_error('overlap_with_ddp = true is not supported',
    function() local _ = ZeRO(ps, {optimizer_class = optim.AdamW, overlap_with_ddp = true}) end)
expect_error('parameters_as_bucket_view = true is not supported', function()
    local _ = ZeRO(ps, {optimizer_class = optim.AdamW, parameters_as_bucket_view = true})
end)
expect_error('bucket_cap_mb must be a positive number, got 0',
    function() local _ = ZeRO(ps, {optimizer_class = optim.AdamW, bucket_cap_mb = 0}) end)
expect_error('process_group must be a process group (dist.new_group), got string',
    function() local _ = ZeRO(ps, {optimizer_class = optim.AdamW, process_group = 'world'}) end)
expect_error('optimizer got an empty parameter list',
    function() local _ = ZeRO({}, {optimizer_class = optim.SGD, lr = 0.1}) end)

-- a group of rank 0 alone: rank 1 is not a member; rank 0's ZeRO over it is the plain optimizer
local solo = dist.new_group({0})
if rank == 1 then
    expect_error('rank 1 is not a member of process_group (ranks 0)',
        function() local _ = ZeRO(ps, {optimizer_class = optim.Adam, process_group = solo}) end)
else
    local z = ZeRO(ps, {optimizer_class = optim.Adam, process_group = solo})
    assert(z.world_size == 1 and #z.optim.param_groups[1].params == #ps, 'one-rank ZeRO')
end

local zero = ZeRO(ps, {optimizer_class = optim.AdamW, lr = 1e-2})
expect_error('state_dict: optimizer state has not been consolidated on this rank',
    function() local _ = zero:state_dict() end)
expect_error('consolidate_state_dict: to must be a rank of the process group (0 to 1), got 2',
    function() local _ = zero:consolidate_state_dict(2) end)
expect_error('ZeroRedundancyOptimizer: some parameters appear in more than one parameter group',
    function() zero:add_param_group({params = ps[1]}) end)
local x = ddpl.randn(3, 4)
net(x):sum():backward()
zero:step()
zero:consolidate_state_dict(1)
local holder = {rank == 1 and zero:state_dict() or nil}
dist.broadcast_object_list(holder, 1)
local sd = holder[1]
-- every rank checks the whole state dict, so every rank fails alike
local bad_groups = {state = sd.state, param_groups = {sd.param_groups[1], sd.param_groups[1]}}
expect_error('loaded state dict has 2 parameter groups, the optimizer has 1',
    function() zero:load_state_dict(bad_groups) end)
local bad_shape = {state = {}, param_groups = sd.param_groups}
for i, s in pairs(sd.state) do bad_shape.state[i] = s end
bad_shape.state[0] = {step = 1, exp_avg = ddpl.zeros(3), exp_avg_sq = ddpl.zeros(8, 4)}
expect_error('state exp_avg of parameter 0 has 3 elements, the parameter 32',
    function() zero:load_state_dict(bad_shape) end)
local bad_index = {state = {[7] = sd.state[0]}, param_groups = sd.param_groups}
expect_error('state for parameter 7, which no group lists',
    function() zero:load_state_dict(bad_index) end)

-- ranks that wrap different parameters: named on every rank, no hang
local other = rank == 0 and {ddpl.zeros(4, {requires_grad = true})}
    or {ddpl.zeros(5, {requires_grad = true})}
expect_error('has other parameters than group rank',
    function() local _ = ZeRO(other, {optimizer_class = optim.Adam}) end)

print(('ZERO_ERRORS_OK rank=%d checked=%d'):format(rank, checked))
dist.destroy_process_group()
