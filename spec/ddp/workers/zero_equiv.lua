-- spec/ddp/workers/zero_equiv.lua: optim.ZeroRedundancyOptimizer on N ranks against the plain
-- optimizer; run by spec/ddp/zero_redundancy_spec.lua as `ddplua spec/ddp/workers/zero_equiv.lua
-- --nproc N -- key=value ...`.
-- Keys: opt=adam|adamw, model=mlp|cnn, ddp=0|1 (gradients averaged by DDP, else by all_reduce
--       avg), cap=<bucket_cap_mb>, steps=K, groups=0|1 (two parameter groups, the second at
--       half the lr), to=<group rank of consolidate_state_dict>, sub=S (ZeRO over subgroups of S
--       ranks from new_subgroups, gradients still averaged over the world), addgroup=0|1 (the
--       last layer joins both optimizers by add_param_group after step 2), sched=0|1 (a StepLR
--       halving the lr every 2 steps drives each optimizer: ZeRO passes its groups' lr on).
-- Every rank trains two identical models on the same averaged gradients: one stepped by ZeRO
-- over optimizer_class, one by the plain optimizer; after every step their parameters must agree
-- to 1e-6 (they are expected bitwise equal). Rank 0 also trains one model on the whole global
-- batch in one process (rel 1e-5, as spec/ddp/workers/train_equiv.lua). Then: the shard state is
-- the shard's only (element count = 2 x the shard's elements), the shards cover every parameter
-- exactly once and follow PyTorch's greedy partition, consolidate_state_dict(to) + state_dict()
-- on rank `to` equals the plain optimizer's state dict, and a new ZeRO loading that state dict
-- (and a plain optimizer loading it) step on exactly as the originals.
-- Prints "ZERO_OK rank=R shard_state=E plain_state=P ..." and exits 0, or raises.
local ddpl = require 'ddplua'
local nn, F, dist, optim = ddpl.nn, ddpl.nn.functional, ddpl.distributed, ddpl.optim

local o = {opt = 'adam', model = 'mlp', ddp = 0, cap = 25, steps = 5, groups = 0, to = 0,
    sub = 0, addgroup = 0, sched = 0, batch = 8}
for _, a in ipairs(arg) do
    local k, v = a:match('^(%w+)=(.*)$')
    if k then o[k] = math.tointeger(tonumber(v)) or tonumber(v) or v end
end

dist.init_process_group({backend = 'gloo', timeout = 30})
local rank, world = dist.get_rank(), dist.get_world_size()
local pg = nil
if o.sub > 0 then pg = dist.new_subgroups(o.sub) end
local zrank, zworld = dist.get_rank(pg), dist.get_world_size(pg)

local function make()
    ddpl.manual_seed(1000)
    if o.model == 'mlp' then
        return nn.Sequential(nn.Linear(12, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU(),
            nn.Linear(32, 5)), {12}
    end
    return nn.Sequential(nn.Conv2d(1, 4, 3, {padding = 1}), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(4, 8, 3, {padding = 1}), nn.ReLU(), nn.Flatten(), nn.Linear(8 * 4 * 4, 5)),
        {1, 8, 8}
end

local Opt = ({adam = optim.Adam, adamw = optim.AdamW})[o.opt]
local hyper = {lr = 1e-2, betas = {0.9, 0.99}, eps = 1e-8, weight_decay = 0.01}

-- the parameter list (or groups) an optimizer gets; with addgroup the last layer comes later
local function param_spec(net)
    local ps = net:parameters()
    local n = #ps - (o.addgroup == 1 and 2 or 0)
    local first, rest = {}, {}
    for i = 1, n do
        local into = (o.groups == 1 and i > n // 2) and rest or first
        into[#into + 1] = ps[i]
    end
    if o.groups == 1 then return {{params = first}, {params = rest, lr = hyper.lr / 2}} end
    return first
end
local function late_group(net)
    local ps = net:parameters()
    return {params = {ps[#ps - 1], ps[#ps]}, lr = hyper.lr * 2}
end

local net_z, feat = make()
local net_r = make()
local model_z, model_r = net_z, net_r
if o.ddp == 1 then model_z, model_r = nn.DDP(net_z), nn.DDP(net_r) end

local zopts = {optimizer_class = Opt, bucket_cap_mb = o.cap, process_group = pg}
for k, v in pairs(hyper) do zopts[k] = v end
local zero = optim.ZeroRedundancyOptimizer(param_spec(net_z), zopts)
local ref = Opt(param_spec(net_r), hyper)
assert(zero.rank == zrank and zero.world_size == zworld)

local net_g, opt_g
if rank == 0 then
    net_g = make()
    opt_g = Opt(param_spec(net_g), hyper)
end
local scheds = {}
if o.sched == 1 then
    for _, opt in ipairs({zero, ref, opt_g}) do
        scheds[#scheds + 1] = optim.lr_scheduler.StepLR(opt, {step_size = 2, gamma = 0.5})
    end
end

local N, B = world, o.batch
local function rows(r, total)
    local idx = {}
    for i = r, total - 1, N do idx[#idx + 1] = i end
    return ddpl.tensor(idx, {dtype = 'int64'})
end

-- this rank's gradient of the batch, averaged over the world
local function backward(model, net, x, y)
    F.cross_entropy(model(x), y):backward()
    if o.ddp == 1 then return end
    for _, p in ipairs(net:parameters()) do
        local g = p.grad
        dist.all_reduce(g, {op = 'avg'})
        p.grad = g
    end
end

local function max_diff(a_net, b_net)
    local m = 0
    for i, p in ipairs(a_net:parameters()) do
        local d = (p - b_net:parameters()[i]):abs():max():item()
        if d > m then m = d end
    end
    return m
end

local function batch(step)
    ddpl.manual_seed(7 * step) -- the same global batch on every rank
    local shape = {N * B}
    for _, d in ipairs(feat) do shape[#shape + 1] = d end
    return ddpl.randn(shape), ddpl.randint(0, 5, {N * B})
end

local function train_step(step, pairs_)
    local X, Y = batch(step)
    local idx = rows(rank, N * B)
    local x, y = X:index_select(0, idx), Y:index_select(0, idx)
    for _, m in ipairs(pairs_) do
        m.opt:zero_grad()
        backward(m.model, m.net, x, y)
        m.opt:step()
    end
    return X, Y
end

local worst, worst_g = 0, 0
for step = 1, o.steps do
    local X, Y = train_step(step, {{opt = zero, model = model_z, net = net_z},
        {opt = ref, model = model_r, net = net_r}})
    local d = max_diff(net_z, net_r)
    worst = math.max(worst, d)
    if not (d <= 1e-6) then
        error(('rank %d step %d: ZeRO parameters differ from plain %s by %.3g'):format(rank, step,
            Opt.__name, d))
    end
    if rank == 0 then
        opt_g:zero_grad()
        F.cross_entropy(net_g(X), Y):backward()
        opt_g:step()
        for i, p in ipairs(net_g:parameters()) do
            local scale = math.max(p:abs():max():item(), 1e-12)
            local rel = (p - net_z:parameters()[i]):abs():max():item() / scale
            worst_g = math.max(worst_g, rel)
            if not (rel <= 1e-5) then
                error(('step %d: ZeRO parameter %d differs from one process on the global batch '
                    .. 'by rel %.3g'):format(step, i, rel))
            end
        end
    end
    for _, sc in ipairs(scheds) do sc:step() end
    if o.addgroup == 1 and step == 2 then
        zero:add_param_group(late_group(net_z))
        ref:add_param_group(late_group(net_r))
        if rank == 0 then opt_g:add_param_group(late_group(net_g)) end
        assert(#zero.param_groups == #ref.param_groups and
            #zero.optim.param_groups == #ref.param_groups, 'add_param_group: group counts')
    end
end

-- ---- the shard: its state only, a cover of every parameter, PyTorch's partition ----
local all_params, index = {}, {}
for _, g in ipairs(zero.param_groups) do
    for _, p in ipairs(g.params) do
        all_params[#all_params + 1] = p
        index[p] = #all_params - 1
    end
end
local total = 0
for _, p in ipairs(all_params) do total = total + p:numel() end

local shard, shard_numel, owned = {}, 0, {}
for _, g in ipairs(zero.optim.param_groups) do
    for _, p in ipairs(g.params) do
        shard[p] = true
        shard_numel = shard_numel + p:numel()
        owned[#owned + 1] = index[p]
    end
end
local function state_elems(state)
    local n = 0
    for _, s in pairs(state) do
        for _, v in pairs(s) do if ddpl.is_tensor(v) then n = n + v:numel() end end
    end
    return n
end
assert(zero.state == zero.optim.state, 'zero.state is the wrapped optimizer\'s state')
for p in pairs(zero.optim.state) do
    if not shard[p] then error(('rank %d holds state for parameter %d outside its shard'):format(
        rank, index[p] or -1)) end
end
for p in pairs(shard) do
    if zero.optim.state[p] == nil then
        error(('rank %d has no state for its parameter %d'):format(rank, index[p]))
    end
end
local shard_state, plain_state = state_elems(zero.optim.state), state_elems(ref.state)
if shard_state ~= 2 * shard_numel then
    error(('rank %d: shard state has %d elements, expected 2 x %d'):format(rank, shard_state,
        shard_numel))
end
assert(plain_state == 2 * total, 'plain optimizer state is 2 x every parameter')

-- PyTorch's partition, computed here independently: per group, largest first, to the least
-- loaded rank (lowest on ties), totals carried across groups
local expect, sizes = {}, {}
for r = 1, zworld do sizes[r] = 0 end
local base = 0
for _, g in ipairs(zero.param_groups) do
    local order = {}
    for i, p in ipairs(g.params) do order[i] = {i = base + i - 1, n = p:numel()} end
    table.sort(order, function(a, b) return a.n > b.n or (a.n == b.n and a.i < b.i) end)
    for _, e in ipairs(order) do
        local best = 1
        for r = 2, zworld do if sizes[r] < sizes[best] then best = r end end
        sizes[best] = sizes[best] + e.n
        if best - 1 == zrank then expect[e.i] = true end
    end
    base = base + #g.params
end
for _, i in ipairs(owned) do
    if not expect[i] then error(('rank %d owns parameter %d, not its by the partition'):format(
        rank, i)) end
    expect[i] = nil
end
if next(expect) then error(('rank %d is missing parameter %d of its shard'):format(rank,
    next(expect))) end

-- every parameter in exactly one shard of the group; the largest shard within the greedy
-- bound (total / N + the largest parameter)
local lists = {}
dist.all_gather_object(lists, {owned = owned, numel = shard_numel}, pg and {group = pg} or nil)
local count, largest_param, largest_shard = {}, 0, 0
for _, p in ipairs(all_params) do largest_param = math.max(largest_param, p:numel()) end
for r = 1, zworld do
    largest_shard = math.max(largest_shard, lists[r].numel)
    for _, i in ipairs(lists[r].owned) do count[i] = (count[i] or 0) + 1 end
end
for i = 0, #all_params - 1 do
    if count[i] ~= 1 then
        error(('parameter %d is in %d shards, expected exactly 1'):format(i, count[i] or 0))
    end
end
assert(largest_shard <= total / zworld + largest_param, 'greedy bound')

-- ---- consolidate_state_dict(to) + state_dict() equals the plain optimizer's ----
local function check_same_sd(sd, rsd, what)
    local n, m = 0, 0
    for _ in pairs(rsd.state) do n = n + 1 end
    for _ in pairs(sd.state) do m = m + 1 end
    assert(n == m and n == #all_params, ('%s: %d state entries, plain %d'):format(what, m, n))
    for i, rs in pairs(rsd.state) do
        local s = sd.state[i]
        assert(s, what .. ': no state for parameter ' .. i)
        assert(s.step == rs.step, ('%s: step of %d is %s, plain %s'):format(what, i,
            tostring(s.step), tostring(rs.step)))
        for _, k in ipairs({'exp_avg', 'exp_avg_sq'}) do
            local d = (s[k] - rs[k]):abs():max():item()
            if not (d <= 1e-6) then
                error(('%s: %s of parameter %d differs by %.3g'):format(what, k, i, d))
            end
        end
    end
    assert(#sd.param_groups == #rsd.param_groups, what .. ': group count')
    for gi, rg in ipairs(rsd.param_groups) do
        local g = sd.param_groups[gi]
        assert(#g.params == #rg.params, what .. ': group size')
        for j, v in ipairs(rg.params) do assert(g.params[j] == v, what .. ': parameter index') end
        for _, k in ipairs({'lr', 'eps', 'weight_decay'}) do
            assert(g[k] == rg[k], ('%s: group %d %s'):format(what, gi, k))
        end
        assert(g.betas[1] == rg.betas[1] and g.betas[2] == rg.betas[2], what .. ': betas')
    end
end

if o.sched == 1 then -- the schedule reached the shard's optimizer: lr halved every 2 steps
    local want = hyper.lr * 0.5 ^ (o.steps // 2)
    assert(math.abs(zero.optim.param_groups[1].lr - want) < 1e-15, 'scheduled lr not passed on')
end

local to = o.to
zero:consolidate_state_dict(to)
local sd
if zrank == to then
    sd = zero:state_dict()
    check_same_sd(sd, ref:state_dict(), 'consolidated state dict')
else
    local ok, err = pcall(zero.state_dict, zero)
    assert(not ok and err:find('has not been consolidated on this rank', 1, true), err)
end
-- the full state dict to every rank of the group
local holder = {sd}
dist.broadcast_object_list(holder, dist.get_global_rank(pg or dist.default_group(), to),
    pg and {group = pg} or nil)
sd = holder[1]

-- ---- load_state_dict: a fresh ZeRO and a fresh plain optimizer resume alike ----
local net_z2, net_r2 = make(), make()
ddpl.no_grad(function()
    for i, p in ipairs(net_z:parameters()) do
        net_z2:parameters()[i]:copy_(p)
        net_r2:parameters()[i]:copy_(p)
    end
end)
local function spec_for_load(net)
    local s = param_spec(net)
    if o.addgroup == 1 then
        if o.groups == 1 then
            s[#s + 1] = late_group(net)
        else
            s = {{params = s}, late_group(net)}
        end
    end
    return s
end
local zero2 = optim.ZeroRedundancyOptimizer(spec_for_load(net_z2), zopts)
zero2:load_state_dict(sd)
local ref2 = Opt(spec_for_load(net_r2), hyper)
ref2:load_state_dict(sd)
assert(state_elems(zero2.optim.state) == shard_state, 'loaded shard state size')
local model_z2, model_r2 = net_z2, net_r2
if o.ddp == 1 then model_z2, model_r2 = nn.DDP(net_z2), nn.DDP(net_r2) end
local Xs = o.steps + 1
train_step(Xs, {{opt = zero, model = model_z, net = net_z}, {opt = ref, model = model_r,
    net = net_r}, {opt = zero2, model = model_z2, net = net_z2},
    {opt = ref2, model = model_r2, net = net_r2}})
for _, pair in ipairs({{net_z2, 'reloaded ZeRO'}, {net_r2, 'plain optimizer loaded from ZeRO'},
    {net_r, 'plain optimizer'}}) do
    local d = max_diff(net_z, pair[1])
    if not (d <= 1e-6) then
        error(('rank %d: after load_state_dict, %s differs from the original ZeRO by %.3g')
            :format(rank, pair[2], d))
    end
end
-- a step makes the consolidated state stale: state_dict() refuses it again
local ok, err = pcall(zero.state_dict, zero)
assert(not ok and err:find('has not been consolidated', 1, true), 'stale state_dict accepted')

print(('ZERO_OK rank=%d group_rank=%d shard_state=%d plain_state=%d shard_params=%d/%d '
    .. 'maxdiff=%.3g maxrel_global=%.3g buckets=%d'):format(rank, zrank, shard_state, plain_state,
    #owned, #all_params, worst, worst_g, #zero._buckets))
dist.destroy_process_group()
