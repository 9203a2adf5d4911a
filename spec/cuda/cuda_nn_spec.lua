-- spec/cuda/cuda_nn_spec.lua: the CUDA normalisation, pooling and optimizer kernels against the CPU
-- ones (ggml's test-backend-ops idea): layer_norm, batch_norm (training with running-stat
-- updates, eval), max_pool2d (ties, NaN, padding), avg_pool2d (count_include_pad),
-- adaptive_avg_pool2d (uneven and overlapping windows), and SGD/Adam/AdamW steps in float32,
-- float64 and bfloat16, and LSTM/GRU under autocast. Each case runs on both devices from the same inputs and upstream
-- gradient and compares outputs, updated buffers and gradients. Pending without a CUDA device.
local H = require 'helpers'
local ddpl = H.ddpl
local F = ddpl.F
local optim = ddpl.optim

local function no_cuda()
    if ddpl.cuda.is_available() then return false end
    pending('no CUDA device')
    return true
end

-- A float tensor of `shape` with values f(i) (i = 0-based flat index).
local function data(shape, f, dtype)
    local flat, n = {}, 1
    for _, s in ipairs(shape) do n = n * s end
    for i = 1, n do flat[i] = f(i - 1) end
    return ddpl.tensor(flat, {dtype = dtype or 'float32'}):reshape(shape)
end

-- Deterministic pseudo-random values in [-2, 2), quantised to 1/8 when `ties` (so windows
-- have equal maxima).
local function noise(seed, ties)
    local s = seed
    return function()
        s = (s * 1103515245 + 12345) % 2147483648
        local v = s / 2147483648 * 4 - 2
        if ties then v = math.floor(v * 8) / 8 end
        return v
    end
end

local function compare(got, want, rtol, atol, what)
    assert.are.equal(want.dtype, got.dtype, what .. ': dtype')
    assert.are.equal('cuda', tostring(got.device):sub(1, 4), what .. ': device')
    H.assert_values(H.values(got:cpu()), H.values(want), H.shape(want), rtol, atol, what)
end

-- Runs fn on cpu and on cuda copies of `inputs` (a list with holes; n = its length); entries
-- of `leaves` (indices) require grad. Backpropagates the same upstream gradient through the
-- first result and compares every result, every leaf's gradient and every input (buffers
-- updated in place).
local function parity(what, n, inputs, leaves, fn, rtol, atol)
    rtol, atol = rtol or 1e-4, atol or 1e-5
    local is_leaf = {}
    for _, i in ipairs(leaves) do is_leaf[i] = true end
    local gy
    local function run(dev)
        local args = {}
        for i = 1, n do
            if inputs[i] then
                args[i] = inputs[i]:clone():to(dev)
                if is_leaf[i] then args[i].requires_grad = true end
            end
        end
        local outs = {fn(table.unpack(args, 1, n))}
        if #leaves > 0 then
            if not gy then
                local k = 0
                gy = data(H.shape(outs[1]), function() k = k + 1; return math.sin(k) end,
                          outs[1].dtype)
            end
            outs[1]:backward(gy:to(dev))
        end
        return outs, args
    end
    local want, want_args = run('cpu')
    local got, got_args = run('cuda')
    for k = 1, #want do compare(got[k], want[k], rtol, atol, what .. ' result ' .. k) end
    for i = 1, n do
        if want_args[i] then
            compare(got_args[i]:detach(), want_args[i]:detach(), rtol, atol,
                    what .. ' input ' .. i)
            if is_leaf[i] then
                compare(got_args[i].grad, want_args[i].grad, rtol, atol, what .. ' grad ' .. i)
            end
        end
    end
end

describe('cuda layer_norm', function()
    local shapes = {{4, 7, 33}, {3, 1500}, {2, 2048}, {600, 40}, {5, 1}}
    for _, dtype in ipairs({'float32', 'float64'}) do
        for _, s in ipairs(shapes) do
            local name = string.format('%s %s', dtype, table.concat(s, 'x'))
            it('matches the cpu with weight and bias, ' .. name, function()
                if no_cuda() then return end
                local N = s[#s]
                local r = noise(#s * 7 + N)
                local x = data(s, function() return r() * 3 + 1 end, dtype)
                local w = data({N}, function() return r() end, dtype)
                local b = data({N}, function() return r() end, dtype)
                parity('layer_norm ' .. name, 3, {x, w, b}, {1, 2, 3}, function(x, w, b)
                    return F.layer_norm(x, {N}, w, b, {eps = 1e-5})
                end, dtype == 'float64' and 1e-9 or 2e-4, dtype == 'float64' and 1e-10 or 2e-4)
            end)
        end
        it('matches the cpu without weight and bias, ' .. dtype, function()
            if no_cuda() then return end
            local r = noise(3)
            local x = data({6, 5, 24}, function() return r() end, dtype)
            parity('layer_norm (no affine) ' .. dtype, 1, {x}, {1}, function(x)
                return F.layer_norm(x, {5, 24}, nil, nil, {eps = 1e-3})
            end, dtype == 'float64' and 1e-9 or 2e-4, dtype == 'float64' and 1e-10 or 2e-4)
        end)
    end
end)

describe('cuda batch_norm', function()
    -- S = 42 (the flattened per-channel loop), 300 (rows of S), 1 (BatchNorm1d)
    local shapes = {{8, 5, 6, 7}, {4, 3, 300}, {16, 4}}
    for _, dtype in ipairs({'float32', 'float64'}) do
        local rtol, atol = dtype == 'float64' and 1e-9 or 2e-4, dtype == 'float64' and 1e-10 or 2e-4
        for _, s in ipairs(shapes) do
            local name = string.format('%s %s', dtype, table.concat(s, 'x'))
            local C = s[2]
            local function inputs(seed)
                local r = noise(seed)
                return data(s, function() return r() * 2 + 0.5 end, dtype),
                       data({C}, function() return r() * 0.1 end, dtype),
                       data({C}, function() return 1 + r() * 0.2 end, dtype),
                       data({C}, function() return r() end, dtype),
                       data({C}, function() return r() end, dtype)
            end
            it('matches the cpu in training (running stats updated), ' .. name, function()
                if no_cuda() then return end
                local x, rm, rv, w, b = inputs(11)
                parity('batch_norm train ' .. name, 5, {x, rm, rv, w, b}, {1, 4, 5},
                       function(x, rm, rv, w, b)
                    return F.batch_norm(x, rm, rv, w, b,
                                        {training = true, momentum = 0.3, eps = 1e-5})
                end, rtol, atol)
            end)
            it('matches the cpu in eval, ' .. name, function()
                if no_cuda() then return end
                local x, rm, rv, w, b = inputs(12)
                parity('batch_norm eval ' .. name, 5, {x, rm, rv, w, b}, {1, 4, 5},
                       function(x, rm, rv, w, b)
                    return F.batch_norm(x, rm, rv, w, b, {training = false, eps = 1e-5})
                end, rtol, atol)
            end)
            it('matches the cpu in training without affine or running stats, ' .. name,
               function()
                if no_cuda() then return end
                local x = inputs(13)
                parity('batch_norm bare ' .. name, 1, {x}, {1}, function(x)
                    return F.batch_norm(x, nil, nil, nil, nil, {training = true})
                end, rtol, atol)
            end)
        end
    end
end)

describe('cuda pooling', function()
    -- kernel, stride, padding
    local windows = {{{2, 2}, {2, 2}, {0, 0}}, {{3, 3}, {2, 2}, {1, 1}},
                     {{3, 2}, {1, 2}, {1, 0}}, {{2, 3}, {2, 1}, {1, 1}}}
    for _, dtype in ipairs({'float32', 'float64'}) do
        for wi, k in ipairs(windows) do
            local name = string.format('%s window %d', dtype, wi)
            it('max_pool2d matches the cpu (ties, NaN), ' .. name, function()
                if no_cuda() then return end
                local r = noise(wi, true)
                local x = data({2, 3, 9, 11}, function(i)
                    if i % 37 == 5 then return 0 / 0 end
                    return r()
                end, dtype)
                parity('max_pool2d ' .. name, 1, {x}, {1}, function(x)
                    return F.max_pool2d(x, k[1], {stride = k[2], padding = k[3]})
                end, 0, 0)
            end)
            for _, cip in ipairs({true, false}) do
                it('avg_pool2d matches the cpu, count_include_pad=' .. tostring(cip) .. ', ' ..
                   name, function()
                    if no_cuda() then return end
                    local r = noise(wi + 10)
                    local x = data({2, 3, 9, 11}, function() return r() end, dtype)
                    parity('avg_pool2d ' .. name, 1, {x}, {1}, function(x)
                        return F.avg_pool2d(x, k[1], {stride = k[2], padding = k[3],
                                                      count_include_pad = cip})
                    end, 1e-5, 1e-6)
                end)
            end
        end
        -- input (H, W) -> output: even, uneven, global, and larger than the input
        local adaptive = {{{8, 6}, {4, 3}}, {{10, 7}, {3, 5}}, {{5, 5}, {1, 1}}, {{5, 5}, {7, 9}}}
        for ai, a in ipairs(adaptive) do
            it('adaptive_avg_pool2d matches the cpu, ' .. dtype .. ' case ' .. ai, function()
                if no_cuda() then return end
                local r = noise(ai + 20)
                local x = data({2, 3, a[1][1], a[1][2]}, function() return r() end, dtype)
                parity('adaptive_avg_pool2d ' .. ai, 1, {x}, {1}, function(x)
                    return F.adaptive_avg_pool2d(x, a[2])
                end, 1e-5, 1e-6)
            end)
        end
    end
    it('unbatched (C,H,W) inputs match the cpu', function()
        if no_cuda() then return end
        local r = noise(99)
        local x = data({3, 7, 7}, function() return r() end)
        parity('max_pool2d unbatched', 1, {x}, {1}, function(x)
            return F.max_pool2d(x, {3, 3}, {stride = {2, 2}})
        end, 0, 0)
    end)
end)

describe('cuda GradScaler', function()
    -- unscale_ is one native pass per gradient (the amp_unscale kernel): values divided by the
    -- scale, and any inf or NaN flagged so that step() is skipped, as on the cpu
    for _, bad in ipairs({false, true}) do
        it('unscales cuda gradients like the cpu' .. (bad and ', with an inf' or ''), function()
            if no_cuda() then return end
            local function run(dev)
                local r = noise(bad and 7 or 5)
                local p = data({3, 70001}, function() return r() end, 'float32'):to(dev)
                p.requires_grad = true
                local g = data({3, 70001}, function() return r() * 1024 end, 'float32')
                if bad then g[1][70000] = math.huge end
                p.grad = g:to(dev)
                local opt = optim.SGD({p}, {lr = 0.1})
                local scaler = ddpl.amp.GradScaler({init_scale = 1024})
                scaler:scale(p:sum()) -- sets the scale, as a training step would
                scaler:unscale_(opt)
                local unscaled = p.grad:cpu()
                scaler:step(opt)
                scaler:update()
                return p:detach():cpu(), unscaled, scaler:get_scale()
            end
            local wp, wg, ws = run('cpu')
            local gp, gg, gs = run('cuda')
            H.assert_values(H.values(gg), H.values(wg), H.shape(wg), 0, 0, 'unscaled gradient')
            H.assert_values(H.values(gp), H.values(wp), H.shape(wp), 2e-6, 1e-6, 'parameter')
            assert.are.equal(ws, gs)
            if bad then assert.are.equal(512, gs) end -- the step was skipped and the scale halved
        end)
    end
end)

describe('cuda LSTM and GRU under autocast', function()
    -- the layers are on autocast's lower-precision list on both device types (PyTorch's
    -- cudnn_rnn / mkldnn_rnn_layer): the same bfloat16 output and float32 gradients as the cpu
    for _, ctor in ipairs({'LSTM', 'GRU'}) do
        it(ctor .. ' runs in bfloat16 like the cpu', function()
            if no_cuda() then return end
            local r = noise(31)
            local x = data({6, 3, 5}, function() return r() end)
            local function run(dev)
                ddpl.manual_seed(4)
                local m = ddpl.nn[ctor](5, 8, {num_layers = 2, bidirectional = true}):to(dev)
                local y = ddpl.autocast(dev, {dtype = 'bfloat16'}, function() return m(x:to(dev)) end)
                y:float():sum():backward()
                return y, m.weight_hh_l0.grad, m.weight_ih_l1.grad
            end
            local wy, wg1, wg2 = run('cpu')
            local gy, gg1, gg2 = run('cuda')
            compare(gy, wy, 2e-2, 2e-2, ctor .. ' output')
            compare(gg1, wg1, 3e-2, 3e-2, ctor .. ' weight_hh_l0 grad')
            compare(gg2, wg2, 3e-2, 3e-2, ctor .. ' weight_ih_l1 grad')
            assert.are.equal('float32', H.dtype_name(gg1.dtype))
        end)
    end
end)

describe('cuda optimizer steps', function()
    local configs = {
        {'SGD', {lr = 0.1}},
        {'SGD', {lr = 0.05, momentum = 0.9, dampening = 0.1, weight_decay = 0.01}},
        {'SGD', {lr = 0.05, momentum = 0.9, nesterov = true, maximize = true}},
        {'Adam', {lr = 1e-2}},
        {'Adam', {lr = 1e-2, betas = {0.8, 0.99}, eps = 1e-6, weight_decay = 0.1}},
        {'AdamW', {lr = 1e-2, weight_decay = 0.1, maximize = true}},
        {'RMSprop', {lr = 1e-2}},
        {'RMSprop', {lr = 1e-2, alpha = 0.9, weight_decay = 0.01, momentum = 0.9, centered = true}},
        {'Adagrad', {lr = 0.1}},
        {'Adagrad', {lr = 0.1, lr_decay = 0.01, weight_decay = 0.01, initial_accumulator_value = 0.1,
                     maximize = true}},
    }
    local tol = {float32 = {2e-6, 1e-6}, float64 = {1e-12, 1e-14}, bfloat16 = {1e-2, 1e-2}}
    for _, dtype in ipairs({'float32', 'float64', 'bfloat16'}) do
        for ci, c in ipairs(configs) do
            it(string.format('%s (config %d) matches the cpu over 3 steps, %s', c[1], ci, dtype),
               function()
                if no_cuda() then return end
                -- a small tensor and one spanning many blocks
                local shapes = {{7, 5}, {3, 70001}}
                local function run(dev)
                    local ps = {}
                    for i, s in ipairs(shapes) do
                        local r = noise(i * 31 + ci)
                        ps[i] = data(s, function() return r() end, dtype):to(dev)
                        ps[i].requires_grad = true
                    end
                    local opt = optim[c[1]](ps, c[2])
                    for step = 1, 3 do
                        for i, s in ipairs(shapes) do
                            local r = noise(i * 131 + step)
                            ps[i].grad = data(s, function() return r() end, dtype):to(dev)
                        end
                        opt:step()
                    end
                    return ps
                end
                local want, got = run('cpu'), run('cuda')
                for i = 1, #shapes do
                    compare(got[i]:detach(), want[i]:detach(), tol[dtype][1], tol[dtype][2],
                            string.format('%s param %d', c[1], i))
                end
            end)
        end
    end
end)
