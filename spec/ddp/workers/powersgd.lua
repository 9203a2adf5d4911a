-- spec/ddp/workers/powersgd.lua: DDP's 'powersgd' comm hook and device_ids checked inside each
-- rank; run by spec/ddp/ddp_powersgd_spec.lua as `ddplua spec/ddp/workers/powersgd.lua --nproc N --
-- CASE [cap]`. Prints "POWERSGD_OK <case> <rank> <info>". cap is the bucket_cap_mb (1e-6: one
-- bucket per parameter; 25: one bucket for the model). Cases:
--   vanilla   before start_powerSGD_iter the gradients equal the plain allreduce's bit for bit
--             (a second DDP model over the same parameters), and so do the bytes; from then
--             on they are compressed (they differ, fewer bytes: the count checked by hand)
--   fullrank  matrix_approximation_rank >= min(n, m) and min_compression_rate 0 (every
--             gradient compressed): the gradients equal the exact average (a twin model's local
--             gradients, all_reduce'd and divided) to 1e-9 in float64, with error feedback and
--             warm start on and off
--   feedback  rank 1, fixed parameters: over the PowerSGD steps, the sum of the gradients DDP
--             applied plus the error kept equals the sum of this rank's own gradients, the error
--             is not small; use_error_feedback=false keeps no error
--   warmstart rank 1, no error feedback, the same batch every step: each step's result is the
--             one that one power iteration from the previous step's Q gives (computed here from
--             the Q kept in the state), the Q memory is the same tensor and no new random Q is
--             drawn; with warm_start=false the memory is dropped every step, a new Q drawn and
--             the result differs from the power iteration's
--   errors    bad PowerSGD options and CPU device_ids are errors naming what was wrong
local ddpl = require 'ddplua'
local nn, F, dist = ddpl.nn, ddpl.nn.functional, ddpl.distributed

local case, cap = arg[1], tonumber(arg[2] or '25')
dist.init_process_group({backend = 'gloo', timeout = 30})
local rank, world = dist.get_rank(), dist.get_world_size()
local function fail(fmt, ...) error(('rank %d: %s: '):format(rank, case) .. fmt:format(...), 2) end

-- Tanh and an MSE loss keep every gradient of full rank (ReLU units dead for a whole batch, or
-- cross entropy's gradients summing to zero over the classes, would lower it). Weights 12x16,
-- 20x12 (more rows than columns) and 4x20.
local function net(dtype)
    ddpl.manual_seed(1)
    local m = nn.Sequential(nn.Linear(16, 12), nn.Tanh(), nn.Linear(12, 20), nn.Tanh(),
        nn.Linear(20, 4))
    return dtype and m:to(dtype) or m
end
local function batch(seed, dtype)
    ddpl.manual_seed(seed)
    local x, y = ddpl.randn({16, 16}), ddpl.randn({16, 4})
    if dtype then x, y = x:to(dtype), y:to(dtype) end
    return x, y
end
local function loss_of(model, x, y) return F.mse_loss(model(x), y) end

local function max_abs(t) return t:abs():max():item() end
local function rel(a, b) return max_abs(a - b) / math.max(max_abs(b), 1e-30) end

-- A DDP model and a plain twin with the same parameters, whose gradients are this rank's own.
local function pair(opts, dtype)
    local m = net(dtype)
    local model = nn.DDP(m, opts)
    local twin = net(dtype)
    for i, p in ipairs(twin:parameters()) do p.data = m:parameters()[i]:detach():clone() end
    return model, twin
end
local function average(grads)
    local out = {}
    for i, g in ipairs(grads) do
        out[i] = g:clone()
        dist.all_reduce(out[i])
        out[i]:div_(world)
    end
    return out
end
-- One backward of the model (DDP: the reduced gradients; the twin: this rank's own); copies.
local function grads_of(model, x, y)
    model:zero_grad()
    loss_of(model, x, y):backward()
    local g = {}
    for i, p in ipairs(model:parameters()) do g[i] = p.grad:clone() end
    return g
end

-- The error the state keeps, per parameter (the flat buckets cut along the bucket layout).
local function errors_per_param(model, state)
    local params, out = model:parameters(), {}
    for b, idx in ipairs(model:_reducer():buckets()) do
        local flat, at = state.error_dict[b], 0
        if not flat then fail('no error kept for bucket %d', b) end
        for _, k in ipairs(idx) do
            local n = params[k]:numel()
            out[k] = flat:narrow(0, at, n):view(table.unpack(params[k]:shape()))
            at = at + n
        end
    end
    return out
end

local info = ''
if case == 'vanilla' then
    local a, b = nn.DDP(net(), {bucket_cap_mb = cap}), nn.DDP(net(), {bucket_cap_mb = cap})
    local start = 4
    local state = a:register_comm_hook('powersgd', {start_powerSGD_iter = start})
    local full, plain, compressed = 0, 0, 0
    for _, p in ipairs(a:parameters()) do
        full = full + p:numel() * 4
        local n = p:size(0)
        local m = p:numel() // n
        -- rank 1: a matrix is compressed when (n + m) * 1 * 2 < n m (every weight here, no bias)
        if p:dim() == 2 and (n + m) * 2 < n * m then
            compressed = compressed + (n + m) * 4
        else
            plain = plain + p:numel() * 4
        end
    end
    local opt_a = ddpl.optim.SGD(a:parameters(), {lr = 0.05})
    local opt_b = ddpl.optim.SGD(b:parameters(), {lr = 0.05})
    for step = 1, start + 1 do
        local x, y = batch(100 * step + rank)
        local ga, gb = grads_of(a, x, y), grads_of(b, x, y)
        local diff = 0
        for i = 1, #ga do diff = math.max(diff, max_abs(ga[i] - gb[i])) end
        if step <= start then
            if diff ~= 0 then fail('step %d (plain allreduce): gradients differ by %g', step, diff) end
            if state.last_step_bytes ~= full then
                fail('step %d: %d bytes allreduced, expected the gradients\' %d', step,
                    state.last_step_bytes, full)
            end
        else
            if diff == 0 then fail('step %d: PowerSGD gave the plain allreduce\'s result', step) end
            if state.last_step_bytes ~= plain + compressed then
                fail('step %d: %d bytes allreduced, expected %d (biases %d, P and Q %d)', step,
                    state.last_step_bytes, plain + compressed, plain, compressed)
            end
        end
        if state.iter ~= step then fail('state.iter is %d after step %d', state.iter, step) end
        opt_a:step()
        opt_b:step()
    end
    info = ('buckets=%d bytes %d -> %d'):format(#a:buckets(), full, state.last_step_bytes)
elseif case == 'fullrank' then
    local worst = 0
    for _, flags in ipairs({{true, true}, {false, false}, {true, false}}) do
        local model, twin = pair({bucket_cap_mb = cap}, 'float64')
        local state = model:register_comm_hook('powersgd', {matrix_approximation_rank = 20,
            min_compression_rate = 0, use_error_feedback = flags[1], warm_start = flags[2]})
        local opt = ddpl.optim.SGD(model:parameters(), {lr = 0.05})
        for step = 1, 5 do
            local x, y = batch(100 * step + rank, 'float64')
            local exact = average(grads_of(twin, x, y))
            local got = grads_of(model, x, y)
            for i = 1, #got do
                local e = rel(got[i], exact[i])
                worst = math.max(worst, e)
                if e > 1e-9 then
                    fail('ef=%s ws=%s step %d parameter %d: relative error %.3g from the exact '
                        .. 'average', tostring(flags[1]), tostring(flags[2]), step, i, e)
                end
            end
            opt:step()
            for i, p in ipairs(twin:parameters()) do p.data = model:parameters()[i]:detach():clone() end
        end
        local _, before = state:compression_stats()
        if state.iter ~= 5 or before == 0 then fail('PowerSGD did not run (iter %d)', state.iter) end
    end
    info = ('worst=%.3g'):format(worst)
elseif case == 'feedback' then
    local model, twin = pair({bucket_cap_mb = cap})
    local state = model:register_comm_hook('powersgd', {start_powerSGD_iter = 2})
    local applied, own
    for step = 1, 6 do
        local x, y = batch(100 * step + rank)
        local g = grads_of(twin, x, y)
        local a = grads_of(model, x, y)
        if step > 2 then -- PowerSGD steps; no optimizer step, so twin and model stay equal
            applied = applied or {}
            own = own or {}
            for i = 1, #g do
                applied[i] = applied[i] and applied[i] + a[i] or a[i]
                own[i] = own[i] and own[i] + g[i] or g[i]
            end
        end
    end
    local err = errors_per_param(model, state)
    local worst, size = 0, 0
    for i = 1, #own do
        worst = math.max(worst, rel(applied[i] + err[i], own[i]))
        size = math.max(size, max_abs(err[i]) / max_abs(own[i]))
    end
    if worst > 1e-5 then fail('sum of applied + error differs from the own gradients by %.3g', worst) end
    if size < 1e-2 then fail('the error is %.3g of the gradients: no compression?', size) end
    local off = nn.DDP(net(), {bucket_cap_mb = cap})
    local st2 = off:register_comm_hook('powersgd', {use_error_feedback = false})
    for step = 1, 4 do grads_of(off, batch(100 * step + rank)) end
    if next(st2.error_dict) ~= nil then fail('use_error_feedback=false kept an error') end
    info = ('identity=%.3g error=%.3g'):format(worst, size)
elseif case == 'warmstart' then
    -- the result of one power iteration from q (m x 1) on the average w (n x m): p p^T w with
    -- p = w q / |w q|, q normalised first (rank 1: Gram-Schmidt is a normalisation)
    local function power_step(w, q)
        q = q / q:norm():item()
        local p = w:matmul(q)
        p = p / p:norm():item()
        return p:matmul(p:t():matmul(w))
    end
    for _, warm in ipairs({true, false}) do
        local model, twin = pair({bucket_cap_mb = cap})
        local state = model:register_comm_hook('powersgd', {use_error_feedback = false,
            warm_start = warm})
        local x, y = batch(7 + rank)
        local exact = average(grads_of(twin, x, y))
        local kept, kept_values, rng, prev, worst, moved = {}, {}, nil, nil, 0, math.huge
        for step = 1, 6 do
            local got = grads_of(model, x, y)
            for b, idx in ipairs(model:_reducer():buckets()) do
                local q_at = 0
                for _, k in ipairs(idx) do
                    local w = exact[k]
                    if w:dim() == 1 then -- biases are not compressed: the exact average
                        if rel(got[k], w) > 1e-6 then fail('bias %d is not the exact average', k) end
                    elseif step >= 4 then -- step 3 drew the first Q
                        local m = w:size(1)
                        if warm then
                            local q = kept_values[b]:narrow(0, q_at, m):view(m, 1)
                            worst = math.max(worst, rel(got[k], power_step(w, q)))
                        else
                            moved = math.min(moved, rel(got[k], prev[k]))
                        end
                        q_at = q_at + m
                    end
                end
            end
            if step >= 4 then
                for b in ipairs(model:buckets()) do
                    if warm and state.q_memory_dict[b] ~= kept[b] then
                        fail('warm start allocated a new Q for bucket %d at step %d', b, step)
                    end
                end
                if warm and state.rng ~= rng then fail('warm start drew a new Q at step %d', step) end
                if not warm and state.rng == rng then fail('no new random Q at step %d', step) end
            end
            if step >= 3 then
                if not warm and next(state.q_memory_dict) ~= nil then
                    fail('warm_start=false kept Q')
                end
                for b in ipairs(model:buckets()) do
                    kept[b] = state.q_memory_dict[b]
                    kept_values[b] = kept[b] and kept[b]:clone()
                end
                rng, prev = state.rng, got
            end
        end
        if warm and worst > 1e-4 then
            fail('a warm step differs from one power iteration from the kept Q by %.3g', worst)
        end
        -- a fresh random Q each step: the same gradients give another approximation each time
        if not warm and moved < 1e-3 then
            fail('warm_start=false repeated a result (%.3g): the same Q again?', moved)
        end
        info = info .. ('warm=%s:%.3g '):format(tostring(warm), warm and worst or moved)
    end
elseif case == 'errors' then
    local model = nn.DDP(net())
    local function expect(opts, needle)
        local ok, err = pcall(model.register_comm_hook, model, 'powersgd', opts)
        if ok then fail('%s was accepted', needle) end
        if not tostring(err):find(needle, 1, true) then
            fail('expected an error with "%s", got: %s', needle, tostring(err))
        end
    end
    expect({rank = 2}, "unknown option 'rank'")
    expect({matrix_approximation_rank = 0}, 'matrix_approximation_rank must be an integer >= 1, got 0')
    expect({matrix_approximation_rank = 1.5}, 'matrix_approximation_rank must be an integer >= 1, got 1.5')
    expect({start_powerSGD_iter = 1}, 'start_powerSGD_iter must be > 1 when use_error_feedback or warm_start is on, got 1')
    expect({start_powerSGD_iter = -1, use_error_feedback = false, warm_start = false},
        'start_powerSGD_iter must be an integer >= 0, got -1')
    expect({min_compression_rate = -1}, 'min_compression_rate must be a finite number >= 0, got -1')
    expect({use_error_feedback = 'yes'}, 'use_error_feedback must be a boolean, got yes')
    expect(5, 'expected an options table, got number')
    local ok, err = pcall(model.register_comm_hook, model, 'powerSGD')
    if ok or not tostring(err):find("'bf16_compress', 'powersgd' or a function, got 'powerSGD'",
        1, true) then
        fail('an unknown hook name gave %s', tostring(err))
    end
    -- without error feedback or warm start PowerSGD may start at once
    local st = model:register_comm_hook('powersgd', {start_powerSGD_iter = 0,
        use_error_feedback = false, warm_start = false})
    grads_of(model, batch(1 + rank))
    if st.total_numel_before_compression == 0 then fail('start_powerSGD_iter=0 did not compress') end
    for _, c in ipairs({{{device_ids = {0}}, 'device_ids and output_device only work with a module '
        .. 'on one CUDA device'}, {{output_device = 0}, 'but got device_ids nil, output_device 0 '
        .. 'and module parameters on cpu'}, {{device_ids = 0}, 'device_ids must be nil or a list '
        .. 'holding one device'}}) do
        local ok, err = pcall(nn.DDP, net(), c[1])
        if ok or not tostring(err):find(c[2], 1, true) then
            fail('DDP(%s) gave %s', next(c[1]), tostring(err))
        end
    end
    nn.DDP(net(), {device_ids = {}}) -- an empty list is nil, as in PyTorch
    info = 'messages ok'
else
    fail('unknown case')
end
print(('POWERSGD_OK %s %d %s'):format(case, rank, info))
dist.destroy_process_group()
