-- spec/tensor/autocast_spec.lua: mixed precision on the CPU (ddpl.autocast('cpu', ...), bfloat16,
-- and float16 with a GradScaler training loop: its own describe block at the end) and
-- the float32 matmul precision switch. Inside autocast the "lower precision" ops (matmul, mm,
-- bmm, addmm, linear, conv2d) return bfloat16 and the "float32" ops of PyTorch 1.13's CPU list
-- (cross_entropy, nll_loss, mse_loss) upcast 16-bit inputs and return float32, while softmax,
-- log_softmax, layer_norm and batch_norm, on CUDA's float32 list only, keep a 16-bit input's
-- dtype on the CPU (computed in float32 inside, rounded once), as torch.autocast('cpu') does;
-- gradients reach float32 leaves in float32, close to the float32 computation within bfloat16
-- precision. The state is restored after fn returns or raises, and nests.
local H = require 'helpers'
local ddpl = H.ddpl
local F = ddpl.F

-- Deterministic values in [-1, 1): the same inputs on every run.
local function data(shape, seed, dtype) return H.lcg(shape, seed, 2, dtype or 'float32') end

local function cpu_autocast(fn, ...) return ddpl.autocast('cpu', {dtype = 'bfloat16'}, fn, ...) end

local function close(got, want, rtol, atol, what)
    H.assert_values(H.values(got:double()), H.values(want:double()), H.shape(want), rtol, atol,
                    what)
end

describe('autocast dtypes', function()
    it('lower-precision ops return bfloat16 inside and float32 outside', function()
        local a, b = data({4, 5}, 1), data({5, 3}, 2)
        local w, bias = data({3, 5}, 3), data({3}, 4)
        local a3, b3 = data({2, 4, 5}, 5), data({2, 5, 3}, 6)
        local x4, k4 = data({1, 2, 6, 6}, 7), data({3, 2, 3, 3}, 8)
        local r = {cpu_autocast(function()
            return a:matmul(b), a:mm(b), a3:bmm(b3), ddpl.addmm(data({4, 3}, 9), a, b),
                   F.linear(a, w, bias), F.conv2d(x4, k4, nil, {padding = 1}), a3:matmul(b)
        end)}
        assert.are.equal(7, #r)
        for i, t in ipairs(r) do assert.are.equal('bfloat16', H.dtype_name(t.dtype), 'result ' .. i) end
        assert.are.equal('float32', H.dtype_name(a:matmul(b).dtype))
        assert.are.equal('float32', H.dtype_name(F.linear(a, w, bias).dtype))
    end)

    it('values of a bfloat16 matmul are the float32 ones within bfloat16 precision', function()
        local a, b = data({8, 16}, 11), data({16, 8}, 12)
        local y = cpu_autocast(function() return a:matmul(b) end)
        close(y, a:matmul(b), 2e-2, 3e-2, 'matmul')
        local x4, k4, kb = data({2, 3, 7, 7}, 13), data({4, 3, 3, 3}, 14), data({4}, 15)
        local c = cpu_autocast(function() return F.conv2d(x4, k4, kb, {stride = 2, padding = 1}) end)
        close(c, F.conv2d(x4, k4, kb, {stride = 2, padding = 1}), 2e-2, 5e-2, 'conv2d')
    end)

    it('the CPU float32 list (losses) upcasts 16-bit inputs and returns float32', function()
        local x16 = data({4, 6}, 21):bfloat16()
        local target = ddpl.tensor({0, 5, 2, 3}, {dtype = 'int64'})
        local r = {cpu_autocast(function()
            return F.cross_entropy(x16, target), F.nll_loss(x16:log_softmax(1), target),
                   F.mse_loss(x16, x16:flip(0))
        end)}
        for i, t in ipairs(r) do assert.are.equal('float32', H.dtype_name(t.dtype), 'result ' .. i) end
        close(r[3], F.mse_loss(x16:float(), x16:flip(0):float()), 1e-6, 1e-7, 'mse_loss')
    end)

    it('softmax, log_softmax, layer_norm and batch_norm keep a 16-bit dtype on the CPU', function()
        local x16 = data({4, 6}, 21):bfloat16()
        local w, b = data({6}, 22), data({6}, 23) -- float32 parameters, as a module's
        local r = {cpu_autocast(function()
            return x16:softmax(1), x16:log_softmax(1), F.layer_norm(x16, {6}, w, b),
                   F.batch_norm(x16, nil, nil, w, b, true)
        end)}
        for i, t in ipairs(r) do assert.are.equal('bfloat16', H.dtype_name(t.dtype), 'result ' .. i) end
        -- computed in float32 and rounded once: the float32 results rounded to bfloat16
        local xf = x16:float()
        local want = {xf:softmax(1), xf:log_softmax(1), F.layer_norm(xf, {6}, w, b),
            F.batch_norm(xf, nil, nil, w, b, true)}
        for i, t in ipairs(r) do
            assert.is_true(t:equal(want[i]:bfloat16()), 'result ' .. i .. ' rounded once')
        end
        -- and outside autocast softmax keeps the input's dtype too
        assert.are.equal('bfloat16', H.dtype_name(x16:softmax(1).dtype))
    end)

    it('a linear, softmax and cross_entropy chain ends in float32', function()
        local x, w = data({5, 8}, 31), data({4, 8}, 32)
        local target = ddpl.tensor({0, 1, 2, 3, 0}, {dtype = 'int64'})
        local h, loss = cpu_autocast(function()
            local h = F.linear(x, w)
            return h, F.cross_entropy(h, target)
        end)
        assert.are.equal('bfloat16', H.dtype_name(h.dtype))
        assert.are.equal('float32', H.dtype_name(loss.dtype))
    end)

    it('float64 operands stay float64', function()
        local a, b = data({3, 4}, 41, 'float64'), data({4, 2}, 42, 'float64')
        local y = cpu_autocast(function() return a:matmul(b) end)
        assert.are.equal('float64', H.dtype_name(y.dtype))
    end)
end)

describe('autocast gradients', function()
    it('reach float32 leaves in float32, close to the float32 computation', function()
        local function model(x, w1, b1, w2, target)
            local h = F.linear(x, w1, b1):relu()
            return F.cross_entropy(F.linear(h, w2), target)
        end
        local target = ddpl.tensor({0, 2, 1, 2, 0, 1}, {dtype = 'int64'})
        local function leaves()
            local t = {data({6, 10}, 51), data({12, 10}, 52), data({12}, 53), data({3, 12}, 54)}
            for _, l in ipairs(t) do l.requires_grad = true end
            return t
        end
        local p32, pmx = leaves(), leaves()
        model(p32[1], p32[2], p32[3], p32[4], target):backward()
        local loss = cpu_autocast(model, pmx[1], pmx[2], pmx[3], pmx[4], target)
        assert.are.equal('float32', H.dtype_name(loss.dtype))
        loss:backward()
        for i = 1, 4 do
            assert.are.equal('float32', H.dtype_name(pmx[i].grad.dtype), 'grad ' .. i)
            close(pmx[i].grad, p32[i].grad, 5e-2, 2e-2, 'grad ' .. i)
        end
    end)

    it('flow through conv2d into float32 weights', function()
        local x = data({2, 3, 6, 6}, 61)
        local w32, wmx = data({4, 3, 3, 3}, 62), data({4, 3, 3, 3}, 62)
        local b32, bmx = data({4}, 63), data({4}, 63)
        for _, t in ipairs({w32, wmx, b32, bmx}) do t.requires_grad = true end
        F.conv2d(x, w32, b32, {padding = 1}):sum():backward()
        local y = cpu_autocast(function() return F.conv2d(x, wmx, bmx, {padding = 1}) end)
        y:float():sum():backward()
        assert.are.equal('float32', H.dtype_name(wmx.grad.dtype))
        assert.are.equal('float32', H.dtype_name(bmx.grad.dtype))
        close(wmx.grad, w32.grad, 3e-2, 5e-2, 'conv weight grad')
        close(bmx.grad, b32.grad, 3e-2, 5e-2, 'conv bias grad')
    end)
end)

describe('autocast state', function()
    it('is on inside fn only, and fn gets its arguments and returns all its results', function()
        assert.is_false(ddpl.is_autocast_enabled('cpu'))
        local a, b, c = ddpl.autocast('cpu', {}, function(x, y)
            return ddpl.is_autocast_enabled('cpu'), x + y, ddpl.is_autocast_enabled('cuda')
        end, 1, 2)
        assert.is_true(a)
        assert.are.equal(3, b)
        assert.is_false(c)
        assert.is_false(ddpl.is_autocast_enabled('cpu'))
        -- options may be omitted
        assert.is_true(ddpl.autocast('cpu', function() return ddpl.is_autocast_enabled('cpu') end))
    end)

    it('is restored after an error inside fn', function()
        local ok, err = pcall(ddpl.autocast, 'cpu', {}, function() error('boom') end)
        assert.is_false(ok)
        assert.matches('boom', tostring(err))
        assert.is_false(ddpl.is_autocast_enabled('cpu'))
        -- an engine error inside fn too
        ok = pcall(ddpl.autocast, 'cpu', {}, function()
            return data({2, 3}, 1):matmul(data({4, 5}, 2))
        end)
        assert.is_false(ok)
        assert.is_false(ddpl.is_autocast_enabled('cpu'))
        local y = data({2, 3}, 1):matmul(data({3, 2}, 2))
        assert.are.equal('float32', H.dtype_name(y.dtype))
    end)

    it('nests: enabled=false inside runs plainly, and the outer state comes back', function()
        local a, b = data({3, 4}, 71), data({4, 2}, 72)
        local inner, after = cpu_autocast(function()
            local inner = ddpl.autocast('cpu', {enabled = false}, function()
                assert.is_false(ddpl.is_autocast_enabled('cpu'))
                return a:matmul(b)
            end)
            return inner, a:matmul(b)
        end)
        assert.are.equal('float32', H.dtype_name(inner.dtype))
        assert.are.equal('bfloat16', H.dtype_name(after.dtype))
        -- an error in the inner one restores the outer (enabled) state
        local still = cpu_autocast(function()
            pcall(ddpl.autocast, 'cpu', {enabled = false}, function() error('inner') end)
            return ddpl.is_autocast_enabled('cpu')
        end)
        assert.is_true(still)
    end)

    it('enabled=false alone runs fn plainly', function()
        local y = ddpl.autocast('cpu', {enabled = false}, function()
            return data({2, 3}, 1):matmul(data({3, 2}, 2))
        end)
        assert.are.equal('float32', H.dtype_name(y.dtype))
    end)

    it('cuda autocast does not touch cpu tensors', function()
        local y = ddpl.autocast('cuda', {dtype = 'bfloat16'}, function()
            assert.is_true(ddpl.is_autocast_enabled('cuda'))
            return data({2, 3}, 1):matmul(data({3, 2}, 2))
        end)
        assert.are.equal('float32', H.dtype_name(y.dtype))
        assert.is_false(ddpl.is_autocast_enabled('cuda'))
        assert.are.equal('float16', ddpl.autocast('cuda', {dtype = 'float16'}, function()
            return ddpl.get_autocast_dtype('cuda')
        end))
    end)

    it('rejects bad arguments with clear errors', function()
        H.assert_error(function() ddpl.autocast('tpu', {}, function() end) end, 'autocast')
        H.assert_error(function() ddpl.autocast('cpu', {dtype = 'float32'}, function() end) end,
                       'bfloat16')
        H.assert_error(function() ddpl.autocast('cpu', {dtype = 'float64'}, function() end) end,
                       'autocast')
        H.assert_error(function() ddpl.autocast('cpu', {bogus = 1}, function() end) end, 'bogus')
        H.assert_error(function() ddpl.autocast('cpu', {}) end, 'function')
        assert.is_false(ddpl.is_autocast_enabled('cpu'))
    end)
end)

describe('16-bit convolution on the cpu', function()
    it('bfloat16 conv2d and its gradients match float32 within bfloat16 precision', function()
        local x, w, b = data({2, 4, 5, 5}, 81), data({6, 2, 3, 3}, 82), data({6}, 83)
        local opts = {padding = 1, groups = 2}
        local xs, ws, bs = x:bfloat16(), w:bfloat16(), b:bfloat16()
        for _, t in ipairs({xs, ws, bs}) do t.requires_grad = true end
        local y = F.conv2d(xs, ws, bs, opts)
        assert.are.equal('bfloat16', H.dtype_name(y.dtype))
        close(y, F.conv2d(xs:detach():float(), ws:detach():float(), bs:detach():float(), opts),
              2e-2, 3e-2, 'conv2d bf16')
        y:sum():backward()
        for _, t in ipairs({xs, ws, bs}) do
            assert.are.equal('bfloat16', H.dtype_name(t.grad.dtype))
        end
        local x32, w32, b32 = xs:detach():float(), ws:detach():float(), bs:detach():float()
        for _, t in ipairs({x32, w32, b32}) do t.requires_grad = true end
        F.conv2d(x32, w32, b32, opts):sum():backward()
        close(xs.grad, x32.grad, 2e-2, 5e-2, 'dx')
        close(ws.grad, w32.grad, 2e-2, 1e-1, 'dw')
        close(bs.grad, b32.grad, 2e-2, 1e-1, 'dbias')
    end)
end)

describe('float32 matmul precision', function()
    it("defaults to 'highest' and accepts PyTorch's three settings", function()
        assert.are.equal('highest', ddpl.get_float32_matmul_precision())
        for _, p in ipairs({'high', 'medium', 'highest'}) do
            ddpl.set_float32_matmul_precision(p)
            assert.are.equal(p, ddpl.get_float32_matmul_precision())
        end
        H.assert_error(function() ddpl.set_float32_matmul_precision('low') end, 'highest')
        assert.are.equal('highest', ddpl.get_float32_matmul_precision())
    end)

    it('does not change float32 results on the cpu', function()
        local a, b = data({5, 7}, 91), data({7, 3}, 92)
        local y0 = a:matmul(b)
        ddpl.set_float32_matmul_precision('high')
        local y1 = a:matmul(b)
        ddpl.set_float32_matmul_precision('highest')
        close(y1, y0, 0, 0, 'matmul')
    end)
end)

describe('float16 autocast on the CPU', function()
    local function fp16(fn, ...) return ddpl.autocast('cpu', {dtype = 'float16'}, fn, ...) end

    it('lower-precision ops return float16, float32 ops float32, values within float16 precision',
       function()
        local target = ddpl.tensor({0, 2, 1, 2, 0, 1, 0, 1}, {dtype = 'int64'})
        local a, b = data({8, 16}, 81), data({16, 8}, 82)
        local w, bias = data({3, 16}, 83), data({3}, 84)
        local y, l, s, dt = fp16(function()
            return a:matmul(b), F.linear(a, w, bias), F.cross_entropy(a:matmul(b), target),
                   ddpl.get_autocast_dtype('cpu')
        end)
        assert.are.equal('float16', dt)
        assert.are.equal('float16', H.dtype_name(y.dtype))
        assert.are.equal('float16', H.dtype_name(l.dtype))
        assert.are.equal('float32', H.dtype_name(s.dtype))
        close(y, a:matmul(b), 2e-3, 5e-3, 'matmul')
        close(l, F.linear(a, w, bias), 2e-3, 5e-3, 'linear')
        assert.are.equal('bfloat16', ddpl.get_autocast_dtype('cpu')) -- restored
    end)

    it('trains with a GradScaler: float32 gradients close to the float32 run', function()
        local target = ddpl.tensor({0, 2, 1, 2, 0, 1}, {dtype = 'int64'})
        local function leaves()
            local t = {data({12, 10}, 91), data({12}, 92), data({3, 12}, 93)}
            for _, l in ipairs(t) do l.requires_grad = true end
            return t
        end
        local x = data({6, 10}, 94)
        local function loss_of(p)
            return F.cross_entropy(F.linear(F.linear(x, p[1], p[2]):relu(), p[3]), target)
        end
        local p32, pmx = leaves(), leaves()
        local o32 = ddpl.optim.SGD(p32, {lr = 0.1})
        local omx = ddpl.optim.SGD(pmx, {lr = 0.1})
        local scaler = ddpl.amp.GradScaler({init_scale = 2.0 ^ 12})
        for _ = 1, 3 do
            o32:zero_grad()
            loss_of(p32):backward()
            o32:step()
            omx:zero_grad()
            local loss = fp16(loss_of, pmx)
            assert.are.equal('float32', H.dtype_name(loss.dtype))
            scaler:scale(loss):backward()
            scaler:step(omx)
            scaler:update()
        end
        assert.are.equal(2.0 ^ 12, scaler:get_scale()) -- no overflow: no step skipped
        for i = 1, 3 do
            assert.are.equal('float32', H.dtype_name(pmx[i].dtype))
            close(pmx[i], p32[i], 1e-2, 5e-3, 'parameter ' .. i)
        end
    end)
end)
