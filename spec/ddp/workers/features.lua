-- spec/ddp/workers/features.lua: DDP features checked inside each rank; run by
-- spec/ddp/ddp_spec.lua as `ddplua spec/ddp/workers/features.lua --nproc 2 -- CASE`. Prints
-- "FEATURE_OK <case> <rank> <info>". Cases:
--   compress   fp16/bf16 hooks: gradients within the dtype's precision of the exact average
--              (all_reduce of this rank's own copy of the local gradients, divided by N)
--   luahook    a Lua hook sees every bucket once per step and its result lands in .grad
--   view       gradient_as_bucket_view: .grad shares the bucket's memory (writing the bucket
--              changes .grad) and steady-state memory holds no second copy of the gradients
--   rebuild    after the first iteration the buckets follow the order gradients became ready
--   mismatch   rank 1 wraps a different model: construction fails naming the parameter, ranks
--   timeline   DDPLUA_DDP_TIMELINE (set by the spec): a multi-bucket model writes a Chrome trace
--              in which an allreduce starts before the last gradient of the step is ready
local ddpl = require 'ddplua'
local nn, F, dist = ddpl.nn, ddpl.nn.functional, ddpl.distributed

local case = arg[1]
dist.init_process_group({backend = 'gloo', timeout = 30})
local rank, world = dist.get_rank(), dist.get_world_size()
local function fail(fmt, ...) error(('rank %d: %s: '):format(rank, case) .. fmt:format(...), 2) end
local function mlp(width)
    return nn.Sequential(nn.Linear(16, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU(),
        nn.Linear(width, 4))
end
local function batch(seed)
    ddpl.manual_seed(seed)
    return ddpl.randn({8, 16}) * 3, ddpl.randint(0, 4, {8})
end
local info = ''
-- Whether tensor t shares its memory with one of model's buckets: doubling every bucket (exact in
-- floating point) doubles t; they are halved back afterwards.
local function in_buckets(model, t)
    local r, before = model:_reducer(), t:clone()
    for b = 1, #model:buckets() do r:bucket_tensor(b):mul_(2) end
    local scale = before:abs():max():item()
    local doubled = scale > 0 and (t - before * 2):abs():max():item() == 0
    for b = 1, #model:buckets() do r:bucket_tensor(b):div_(2) end
    return doubled
end

if case == 'compress' then
    for _, spec in ipairs({{'fp16_compress', 2 ^ -10}, {'bf16_compress', 2 ^ -7}}) do
        ddpl.manual_seed(1)
        local net = mlp(64)
        local model = nn.DDP(net, {bucket_cap_mb = 0.01})
        model:register_comm_hook(spec[1])
        local x, y = batch(10 + rank)
        -- exact average of the local gradients, from a copy of the same model
        ddpl.manual_seed(1)
        local twin = mlp(64)
        for i, p in ipairs(twin:parameters()) do p.data = net:parameters()[i]:detach():clone() end
        F.cross_entropy(twin(x), y):backward()
        F.cross_entropy(model(x), y):backward()
        local worst = 0
        for i, p in ipairs(net:parameters()) do
            local exact = twin:parameters()[i].grad:clone()
            dist.all_reduce(exact)
            exact = exact / world
            local err = (p.grad - exact):abs():max():item() / exact:abs():max():item()
            worst = math.max(worst, err)
            -- two roundings (each rank's contribution, then the sum): 2 units of the last place
            if err > 2 * spec[2] then
                fail('%s: parameter %d relative error %.3g > %.3g', spec[1], i, err, 2 * spec[2])
            end
            if err == 0 and p:numel() > 100 then
                fail('%s: parameter %d is exact: no compression happened', spec[1], i)
            end
        end
        info = info .. ('%s=%.3g '):format(spec[1], worst)
    end
elseif case == 'luahook' then
    ddpl.manual_seed(1)
    local model = nn.DDP(mlp(32), {bucket_cap_mb = 0.001})
    local state = {calls = 0, seen = {}}
    model:register_comm_hook(state, function(st, bucket)
        st.calls = st.calls + 1
        local buf = bucket:buffer()
        st.seen[#st.seen + 1] = {index = bucket:index(), last = bucket:is_last(),
            numel = buf:numel(), params = bucket:parameters(), grads = bucket:gradients()}
        local t = buf:clone()
        return dist.all_reduce(t, {async_op = true}):then_(function(work)
            return work:value() / world + 1000 -- the marker shows that the result is used
        end)
    end)
    local x, y = batch(rank)
    F.cross_entropy(model(x), y):backward()
    local nb = #model:buckets()
    if state.calls ~= nb then fail('hook called %d times for %d buckets', state.calls, nb) end
    -- the GradBucket: 0-based indices in order, the last one marked, parameters whose numels
    -- add up to the buffer's and gradients shaped as them, every parameter in one bucket
    local owned = {}
    for b, seen in ipairs(state.seen) do
        if seen.index ~= b - 1 then fail('bucket %d has index %d', b, seen.index) end
        if seen.last ~= (b == nb) then fail('bucket %d: is_last() is %s', b, seen.last) end
        local total = 0
        for i, p in ipairs(seen.params) do
            total = total + p:numel()
            owned[p] = (owned[p] or 0) + 1
            local g = seen.grads[i]
            if table.concat(g:shape(), 'x') ~= table.concat(p:shape(), 'x') then
                fail('bucket %d gradient %d has shape %s', b, i, table.concat(g:shape(), 'x'))
            end
        end
        if total ~= seen.numel then fail('bucket %d: %d elements for %d', b, seen.numel, total) end
    end
    for i, p in ipairs(model:parameters()) do
        if owned[p] ~= 1 then fail('parameter %d is in %s buckets', i, owned[p] or 0) end
    end
    for i, p in ipairs(model:parameters()) do
        if p.grad:min():item() < 900 then fail('parameter %d does not hold the hook result', i) end
    end
    info = ('buckets=%d'):format(nb)
elseif case == 'view' then
    local function run(view)
        collectgarbage(); collectgarbage()
        ddpl.manual_seed(1)
        local net = mlp(256)
        local pbytes = 0
        for _, p in ipairs(net:parameters()) do pbytes = pbytes + p:numel() * 4 end
        collectgarbage(); collectgarbage()
        local m0 = ddpl.memory_allocated()
        local model = nn.DDP(net, {gradient_as_bucket_view = view, bucket_cap_mb = 0.1})
        local opt = ddpl.optim.SGD(model:parameters(), {lr = 0.01})
        for s = 1, 3 do
            local x, y = batch(s * 10 + rank)
            opt:zero_grad({set_to_none = false})
            F.cross_entropy(model(x), y):backward()
            opt:step()
        end
        collectgarbage(); collectgarbage()
        local delta = ddpl.memory_allocated() - m0
        return delta / pbytes, model
    end
    local copy_ratio = run(false)
    local view_ratio, model = run(true)
    -- view: the buckets only. Default mode too, on shared-memory buckets: a Linear weight's
    -- gradient is computed into its bucket slot (a gradient home of its own), and this MLP's
    -- biases are 1% of it (the 'homes' case checks that a .grad kept by the user stays as is).
    if not (copy_ratio < 1.1) then fail('default mode holds %.2fx the parameter bytes', copy_ratio) end
    if not (view_ratio < 1.1) then
        fail('gradient_as_bucket_view holds %.2fx the parameter bytes (a second copy?)', view_ratio)
    end
    local r = model:_reducer()
    for i, p in ipairs(model:parameters()) do
        if not in_buckets(model, p.grad) then fail('parameter %d: .grad is not a view of its bucket', i) end
    end
    -- after zero_grad() (gradients set to nil) backward computes each Linear weight's gradient
    -- straight into its bucket slot (the slot is its gradient home): only the biases, made by
    -- a sum, are copied in; every .grad is its slot again
    local opt = ddpl.optim.SGD(model:parameters(), {lr = 0.01})
    local x, y = batch(50 + rank)
    opt:zero_grad()
    F.cross_entropy(model(x), y):backward()
    local copied, bias_bytes = 0, 0
    for _, ev in ipairs(r:timeline()) do copied = copied + (ev.copied_bytes or 0) end
    for name, p in model.module:named_parameters() do
        if name:match('bias$') then bias_bytes = bias_bytes + p:numel() * 4 end
    end
    if copied ~= bias_bytes then
        fail('backward copied %d gradient bytes into the buckets, expected the biases\' %d',
            copied, bias_bytes)
    end
    for i, p in ipairs(model:parameters()) do
        if not in_buckets(model, p.grad) then
            fail('parameter %d: after zero_grad(), .grad is not its bucket slot', i)
        end
    end
    info = ('copy=%.2fx view=%.2fx copied=%d'):format(copy_ratio, view_ratio, copied)
elseif case == 'homes' then
    -- default mode: gradients computed into their bucket slots must behave as new memory each
    -- step: a .grad the user keeps (and views of it) keep their values after the next backward,
    -- whether that backward computes into the slot again (the kept one moves out first) or not
    -- (a tensor hook keeps the weight's gradient out of the slot; the allreduce still writes it)
    ddpl.manual_seed(1)
    local model = nn.DDP(mlp(64))
    local opt = ddpl.optim.SGD(model:parameters(), {lr = 0.01})
    local w = model:parameters()[1]
    local function step(s)
        local x, y = batch(s * 10 + rank)
        opt:zero_grad()
        F.cross_entropy(model(x), y):backward()
    end
    local function in_bucket(t) return in_buckets(model, t) end
    step(1)
    -- the rebuild (at the next forward) moves a .grad living in its old slot, and what views it,
    -- into the new slot
    local g1, g1_view = w.grad:clone(), w.grad:view(-1)
    model((batch(20 + rank)))
    if not in_bucket(w.grad) or (g1_view - g1:view(-1)):abs():max():item() ~= 0 then
        fail('the rebuild did not move the .grad in its old slot, values kept, into the new one')
    end
    step(2)
    if not in_bucket(w.grad) then fail('the weight gradient is not in its bucket slot') end
    local kept = w.grad
    local kept_view, kept_values = kept:view(-1), kept:clone()
    opt:step()
    step(3)
    if not in_bucket(w.grad) then fail('after a kept .grad, the next one is not in its slot') end
    if in_bucket(kept) or (kept - kept_values):abs():max():item() ~= 0
        or (kept_view - kept_values:view(-1)):abs():max():item() ~= 0 then
        fail('a kept .grad changed when the next backward computed into its slot')
    end
    if (w.grad - kept_values):abs():max():item() == 0 then fail('step 3 gave step 2 gradient') end
    local kept3, kept3_values = w.grad, w.grad:clone()
    local handle = w:register_hook(function(g) return g * 1 end)
    step(4)
    if in_bucket(w.grad) then fail('with a tensor hook the gradient went to its slot') end
    if (kept3 - kept3_values):abs():max():item() ~= 0 then
        fail('a kept .grad changed when the allreduce wrote its slot')
    end
    handle:remove()
    step(5)
    if not in_bucket(w.grad) then fail('without the hook the gradient is not in its slot again') end
    -- a compression hook copies gradients into the buckets: the slots stop being homes, and
    -- what lay in them moves out first
    local kept5, kept5_values = w.grad, w.grad:clone()
    model:register_comm_hook('fp16_compress')
    step(6)
    if in_bucket(w.grad) or in_bucket(kept5) then fail('a gradient stayed in its slot under fp16') end
    if (kept5 - kept5_values):abs():max():item() ~= 0 then
        fail('a kept .grad changed when the compression hook wrote its slot')
    end
    info = 'kept gradients unchanged'
elseif case == 'rebuild' then
    -- fc_late is registered first but used last in forward, so its gradient is ready last
    local Net = nn.Module:extend('Net')
    function Net:init()
        self.late = nn.Linear(8, 4)
        self.early = nn.Linear(16, 8)
    end
    function Net:forward(x) return self.late(F.relu(self.early(x))) end
    ddpl.manual_seed(1)
    local model = nn.DDP(Net(), {bucket_cap_mb = 0.0001})
    local first = model:buckets()
    if first[1][1] ~= 'early.bias' then
        fail('initial bucket 1 holds %s, expected early.bias (reverse registration)', first[1][1])
    end
    for s = 1, 2 do
        local x, y = batch(s + rank)
        F.cross_entropy(model(x), y):backward()
    end
    local r = model:_reducer()
    if not r:rebuilt() then fail('buckets were not rebuilt after the first iteration') end
    local b = model:buckets()
    if b[1][1] ~= 'late.bias' and b[1][1] ~= 'late.weight' then
        fail('rebuilt bucket 1 holds %s, expected a parameter of late (ready first)', b[1][1])
    end
    local names = {}
    for i, bk in ipairs(b) do names[i] = table.concat(bk, '+') end
    info = 'buckets=' .. table.concat(names, ',')
elseif case == 'mismatch' then
    local net = rank == 1 and nn.Sequential(nn.Linear(16, 8), nn.Linear(8, 3))
        or nn.Sequential(nn.Linear(16, 8), nn.Linear(8, 4))
    local ok, err = pcall(nn.DDP, net)
    if ok then fail('construction succeeded with different models') end
    err = tostring(err)
    if not (err:find("parameter '1.weight'", 1, true) and err:find('rank 1', 1, true)
            and err:find('[3, 8]', 1, true) and err:find('[4, 8]', 1, true)) then
        fail('unexpected message: %s', err)
    end
    info = err:gsub('\n', ' ')
elseif case == 'timeline' then
    local path = os.getenv('DDPLUA_DDP_TIMELINE')
    ddpl.manual_seed(1)
    local model = nn.DDP(mlp(256), {bucket_cap_mb = 0.05})
    local opt = ddpl.optim.SGD(model:parameters(), {lr = 0.01})
    for s = 1, 4 do
        local x, y = batch(s + rank)
        opt:zero_grad()
        F.cross_entropy(model(x), y):backward()
        opt:step()
    end
    model:write_timeline()
    if rank == 0 then
        local f = assert(io.open(path))
        local text = f:read('a')
        f:close()
        -- overlap: an allreduce launched before the last bucket of its step was ready, i.e.
        -- while backward still had gradients to compute
        local last_ready = {}
        for ts, step in text:gmatch('"name":"bucket %d+ ready","ph":"i","s":"t","pid":0,'
                .. '"tid":0,"ts":([%d.]+),"args":{"step":(%d+),"copied_bytes":%d+') do
            step = tonumber(step)
            last_ready[step] = math.max(last_ready[step] or 0, tonumber(ts))
        end
        local n_ar, overlapped = 0, 0
        for ts, step in text:gmatch('"name":"allreduce bucket %d+","ph":"X","pid":0,"tid":%d+,'
                .. '"ts":([%d.]+),"dur":[%d.]+,"args":{"step":(%d+)}') do
            n_ar = n_ar + 1
            if tonumber(ts) < last_ready[tonumber(step)] then overlapped = overlapped + 1 end
        end
        if #model:buckets() < 2 then fail('expected several buckets') end
        if n_ar < 4 * #model:buckets() then
            fail('%d allreduce spans for 4 steps of %d buckets', n_ar, #model:buckets())
        end
        if overlapped == 0 then fail('no allreduce started before the end of backward') end
        info = ('allreduces=%d overlapped=%d'):format(n_ar, overlapped)
    end
else
    error('unknown case ' .. tostring(case))
end
print(('FEATURE_OK %s %d %s'):format(case, rank, info))
dist.destroy_process_group()
