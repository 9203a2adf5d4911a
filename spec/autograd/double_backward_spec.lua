-- spec/autograd/double_backward_spec.lua: create_graph=true (backward and autograd.grad record the
-- backward pass, so gradients of gradients work) and autograd.gradgradcheck: second derivatives
-- of the differentiable-twice ops against central differences of the first, a gradient penalty
-- trained a few steps against values derived by hand, .grad keeping its graph, PyTorch's second
-- derivatives of composite functions (spec/fixtures/double_backward.lua, from
-- tools/gen_autograd_fixtures.py), and the refusal of backward formulas that run native kernels.
local H = require 'helpers'
local ddpl = H.ddpl
local F = ddpl.F
local grad = ddpl.autograd.grad
local gradgradcheck = ddpl.autograd.gradgradcheck

ddpl.manual_seed(4321)

local grad_inputs = require 'grad_inputs'
local U, A, D = grad_inputs.U, grad_inputs.A, grad_inputs.D

local function ok_gradgradcheck(fn, inputs, opts)
    local ok, res = pcall(gradgradcheck, fn, inputs, opts)
    if not ok then error('gradgradcheck raised: ' .. tostring(res), 2) end
    assert.is_true(res, 'gradgradcheck returned ' .. tostring(res))
end

local function suite(title, checks)
    describe(title, function()
        for _, c in ipairs(checks) do
            it(c[1], function() ok_gradgradcheck(c[2], c[3]()) end)
        end
    end)
end

describe('gradgradcheck itself', function()
    it('passes correct second derivatives', function()
        ok_gradgradcheck(function(x) return x * x * x end, {U({3})})
    end)

    it('fails a wrong second derivative (a Function whose backward ignores x)', function()
        -- f(x) = x^3 with backward g * 3 * x0^2 for a detached x0: right first derivative,
        -- second derivative 0 instead of 6x
        local Cube = ddpl.autograd.Function:extend('WrongCube')
        function Cube.forward(ctx, x) ctx:save_for_backward(x); return x * x * x end
        function Cube.backward(ctx, g)
            local x = ctx.saved_tensors[1]:detach()
            return g * 3 * x * x
        end
        local x = U({3}, 0.5, 1)
        assert.is_true(ddpl.autograd.gradcheck(function(a) return Cube.apply(a) end, {x}))
        local ok, res = pcall(gradgradcheck, function(a) return Cube.apply(a) end, {x})
        assert.is_true(not ok or res == false, 'gradgradcheck accepted a wrong second derivative')
        local ok2, res2, msg = pcall(gradgradcheck, function(a) return Cube.apply(a) end, {x},
                                     {raise_exception = false})
        assert.is_true(ok2)
        assert.is_false(res2)
        assert.matches('gradgradcheck: Jacobian mismatch', msg)
    end)

    it('rejects unknown options and bad grad_outputs', function()
        H.assert_error(function() gradgradcheck(function(x) return x end, {U({2})}, {foo = 1}) end,
                       "gradgradcheck: unknown option 'foo'")
        H.assert_error(function()
            gradgradcheck(function(x) return x * x end, {U({2})}, {grad_outputs = {ddpl.ones(3)}})
        end, 'gradgradcheck: grad_outputs[1] must be a tensor of shape [2]')
        H.assert_error(function() gradgradcheck(function(x) return x end, {ddpl.ones(2)}) end,
                       'gradgradcheck: no input requires grad')
    end)
end)

suite('gradgradcheck: pointwise', {
    {'neg, exp', function(x) return (-x):exp() end, function() return {U({2, 3})} end},
    {'log', function(x) return x:log() end, function() return {U({2, 3}, 0.2, 2)} end},
    {'sqrt', function(x) return x:sqrt() end, function() return {U({2, 3}, 0.2, 2)} end},
    {'rsqrt', function(x) return x:rsqrt() end, function() return {U({2, 3}, 0.2, 2)} end},
    {'abs', function(x) return x:abs() * x end, function() return {A({2, 3})} end},
    {'sin, cos', function(x) return x:sin() * x:cos() end, function() return {U({2, 3}, -3, 3)} end},
    {'tanh', function(x) return x:tanh() end, function() return {U({2, 3}, -2, 2)} end},
    {'sigmoid', function(x) return x:sigmoid() end, function() return {U({2, 3}, -3, 3)} end},
    {'relu', function(x) return x:relu() * x end, function() return {A({2, 3})} end},
    {'gelu', function(x) return x:gelu() end, function() return {U({2, 3}, -3, 3)} end},
    {'gelu tanh approximation', function(x) return F.gelu(x, {approximate = 'tanh'}) end,
     function() return {U({2, 3}, -3, 3)} end},
    {'silu', function(x) return x:silu() end, function() return {U({2, 3}, -3, 3)} end},
    {'clamp', function(x) return x:clamp(-0.5, 0.5) * x end, function() return {A({2, 3})} end},
    {'add, sub broadcast', function(a, b) return (a + b) * (a - b) end,
     function() return {U({2, 3}), U({3})} end},
    {'mul broadcast', function(a, b) return a * b * a end, function() return {U({2, 3}), U({1, 3})} end},
    {'div broadcast', function(a, b) return a / b end, function() return {U({2, 3}), U({3}, 0.5, 2)} end},
    {'pow tensor^tensor', function(a, b) return a ^ b end,
     function() return {U({2, 3}, 0.5, 2), U({2, 3}, -1, 2)} end},
    {'pow tensor^number', function(a) return a ^ 2.5 end, function() return {U({2, 3}, 0.5, 2)} end},
    {'number ^ tensor', function(a) return 1.7 ^ a end, function() return {U({2, 3})} end},
    {'where', function(a, b) return ddpl.where(a:gt(0), a * a, b * a) end,
     function() return {A({2, 3}), U({2, 3})} end},
})

suite('gradgradcheck: reductions', {
    {'sum', function(x) return x:sum() * x:sum() end, function() return {U({2, 3})} end},
    {'sum dim', function(x) return x:sum(1) * x:sum(1) end, function() return {U({2, 3})} end},
    {'mean dim keepdim', function(x) return x:mean(0, true) * x end, function() return {U({2, 3})} end},
    {'prod', function(x) return x:prod(1) end, function() return {U({2, 3}, 0.5, 1.5)} end},
    {'var', function(x) return x:var(1) end, function() return {U({2, 4})} end},
    {'std', function(x) return x:std() end, function() return {U({2, 4})} end},
    {'norm', function(x) return x:norm() end, function() return {U({2, 3})} end},
    {'logsumexp', function(x) return x:logsumexp(1) end, function() return {U({2, 3})} end},
    {'max of everything', function(x) return x:max() * x end, function() return {A({2, 3})} end},
})

suite('gradgradcheck: matmul forms', {
    {'mm', function(a, b) return a:mm(b) end, function() return {U({2, 3}), U({3, 2})} end},
    {'matmul 2-D x 1-D', function(a, b) return a:matmul(b) end, function() return {U({2, 3}), U({3})} end},
    {'matmul batched broadcast', function(a, b) return a:matmul(b) end,
     function() return {U({2, 2, 3}), U({3, 2})} end},
    {'bmm', function(a, b) return a:bmm(b) end, function() return {U({2, 2, 3}), U({2, 3, 2})} end},
    {'addmm', function(c, a, b) return ddpl.addmm(c, a, b) end,
     function() return {U({2, 2}), U({2, 3}), U({3, 2})} end},
    {'matmul transposed operands', function(a, b) return a:t():matmul(b:t()) end,
     function() return {U({3, 2}), U({2, 3})} end},
    {'linear', function(x, w, b) return F.linear(x, w, b):tanh() end,
     function() return {U({3, 4}), U({2, 4}), U({2})} end},
})

suite('gradgradcheck: conv2d (double backward written with convolutions)', {
    {'with bias', function(x, w, b) return F.conv2d(x, w, b) end,
     function() return {U({1, 2, 5, 5}), U({3, 2, 3, 3}), U({3})} end},
    {'stride and padding', function(x, w) return F.conv2d(x, w, nil, {stride = 2, padding = 1}) end,
     function() return {U({2, 2, 5, 5}), U({2, 2, 3, 3})} end},
    {'groups and dilation', function(x, w)
        return F.conv2d(x, w, nil, {groups = 2, dilation = 2, padding = 2})
    end, function() return {U({1, 4, 5, 5}), U({4, 2, 3, 3})} end},
    {'non-contiguous input, then tanh', function(x, w) return F.conv2d(x:transpose(2, 3), w):tanh() end,
     function() return {U({1, 2, 5, 5}), U({3, 2, 3, 3})} end},
    {'unbatched input', function(x, w) return F.conv2d(x, w) end,
     function() return {U({2, 5, 5}), U({3, 2, 3, 3})} end},
})

suite('gradgradcheck: batch_norm (written with ops under create_graph)', {
    {'training', function(x) return F.batch_norm(x, nil, nil, {training = true}) end,
     function() return {U({4, 3})} end},
    {'training, weight and bias, spatial dims', function(x, w, b)
        return F.batch_norm(x, nil, nil, {weight = w, bias = b, training = true})
    end, function() return {U({3, 2, 2, 2}), U({2}), U({2})} end},
    {'evaluation (running statistics are constants), then tanh', function(x, w, b)
        local rm = ddpl.tensor({0.1, -0.2}, {dtype = 'float64'})
        local rv = ddpl.tensor({0.7, 1.3}, {dtype = 'float64'})
        return F.batch_norm(x, rm, rv, {weight = w, bias = b, training = false}):tanh()
    end, function() return {U({3, 2, 2}), U({2}), U({2})} end},
})

suite('gradgradcheck: layer_norm (written with ops under create_graph)', {
    {'plain', function(x) return F.layer_norm(x, {3}) end, function() return {U({2, 3})} end},
    {'weight and bias', function(x, w, b) return F.layer_norm(x, {3}, w, b) end,
     function() return {U({2, 3}), U({3}), U({3})} end},
    {'two normalized dims, then tanh', function(x, w, b) return F.layer_norm(x, {2, 3}, w, b):tanh() end,
     function() return {U({2, 2, 3}), U({2, 3}), U({2, 3})} end},
    {'non-contiguous input', function(x) return F.layer_norm(x:transpose(0, 1), {2}) end,
     function() return {U({2, 3})} end},
})

suite('gradgradcheck: pooling (linear in the gradient)', {
    {'max_pool2d', function(x) return F.max_pool2d(x, 2) end, function() return {D({1, 2, 4, 4})} end},
    {'max_pool2d strided, padded, times a sum', function(x)
        return F.max_pool2d(x, 3, {stride = 2, padding = 1}) * x:sum()
    end, function() return {D({2, 1, 5, 5})} end},
    {'max_pool2d unbatched', function(x) return F.max_pool2d(x, 2) end, function() return {D({2, 4, 4})} end},
    {'avg_pool2d', function(x) return F.avg_pool2d(x, 2) end, function() return {U({1, 2, 4, 4})} end},
    {'avg_pool2d strided, padded, tanh', function(x)
        return F.avg_pool2d(x, 3, {stride = 2, padding = 1}):tanh()
    end, function() return {U({1, 2, 5, 5})} end},
    {'adaptive_avg_pool2d squared', function(x) return F.adaptive_avg_pool2d(x, {2, 3}) ^ 2 end,
     function() return {U({1, 2, 5, 7})} end},
})

suite('gradgradcheck: views and joins', {
    {'reshape, permute', function(x) return (x:reshape(3, 2):permute(1, 0) * x) end,
     function() return {U({2, 3})} end},
    {'narrow, select', function(x) return x:narrow(1, 1, 2) * x:select(1, 0):unsqueeze(1) end,
     function() return {U({2, 3})} end},
    {'expand, transpose', function(x) return x:expand(3, 2, 3):transpose(0, 2) * 2 end,
     function() return {U({2, 3})} end},
    {'t, contiguous, clone', function(x) return x:t():contiguous():clone() ^ 2 end,
     function() return {U({2, 3})} end},
    {'cat', function(a, b) return ddpl.cat({a, b}, 0) ^ 2 end, function() return {U({2, 3}), U({1, 3})} end},
})

suite('gradgradcheck: softmax and losses', {
    {'softmax', function(x) return F.softmax(x, 1) end, function() return {U({2, 3})} end},
    {'log_softmax', function(x) return F.log_softmax(x, 0) end, function() return {U({2, 3})} end},
    {'mse_loss', function(a, b) return F.mse_loss(a, b) end, function() return {U({2, 3}), U({2, 3})} end},
    {'cross_entropy', function(x)
        return F.cross_entropy(x, ddpl.tensor({0, 2, 1}))
    end, function() return {U({3, 3})} end},
    {'cross_entropy reduction none', function(x)
        return F.cross_entropy(x, ddpl.tensor({2, 0}), {reduction = 'none'})
    end, function() return {U({2, 3})} end},
})

describe('create_graph', function()
    it('autograd.grad returns gradients with history; their backward gives the second derivative', function()
        local x = ddpl.tensor({0.5, -1.5, 2.0}, {dtype = 'float64', requires_grad = true})
        local g = grad({(x ^ 3):sum()}, {x}, {create_graph = true})[1]
        assert.is_true(g.requires_grad)
        assert.is_not_nil(g.grad_fn)
        H.assert_close(g, {0.75, 6.75, 12.0}, 0, 1e-12)
        g:sum():backward()
        H.assert_close(x.grad, {3.0, -9.0, 12.0}, 0, 1e-12) -- 6x
    end)

    it('without create_graph the gradient has no history', function()
        local x = ddpl.tensor({1.0, 2.0}, {dtype = 'float64', requires_grad = true})
        local g = grad({(x * x):sum()}, {x})[1]
        assert.is_false(g.requires_grad)
        assert.is_nil(g.grad_fn)
    end)

    it('backward keeps the graph in .grad (PyTorch: .grad has a grad_fn), and retains the graph', function()
        local x = ddpl.tensor({1.0, 2.0}, {dtype = 'float64', requires_grad = true})
        local y = (x * x * x):sum()
        y:backward({create_graph = true})
        assert.is_not_nil(x.grad.grad_fn)
        H.assert_close(x.grad, {3.0, 12.0}, 0, 1e-12)
        local first = x.grad
        x.grad = nil
        -- retain_graph defaults to create_graph: a second backward still works (it keeps the
        -- graph again, which the old .grad's graph goes through)
        y:backward({retain_graph = true})
        H.assert_close(x.grad, {3.0, 12.0}, 0, 1e-12)
        assert.is_nil(x.grad.grad_fn)
        x.grad = nil
        first:sum():backward() -- d/dx sum(3x^2) = 6x, through the graph kept in the old .grad
        H.assert_close(x.grad, {6.0, 12.0}, 0, 1e-12)
    end)

    it('accumulates into an existing .grad out of place', function()
        local x = ddpl.tensor({1.0, -1.0}, {dtype = 'float64', requires_grad = true})
        local y = (x * x):sum()
        y:backward({create_graph = true})
        local before = x.grad
        y:backward({create_graph = true})
        H.assert_close(x.grad, {4.0, -4.0}, 0, 1e-12)
        H.assert_close(before, {2.0, -2.0}, 0, 1e-12) -- the earlier .grad was not written into
    end)

    it('a gradient penalty trained three SGD steps equals the hand-derived values', function()
        -- f(x) = sum(x @ w), x (N, d), w (d, 1): df/dx has every row w^T, so the penalty
        -- P = |df/dx|^2 = N |w|^2 and dP/dw = 2 N w. Loss L = sum(x @ w) + lam * P:
        -- dL/dw = colsum(x) + 2 N lam w, and SGD gives w <- w - lr (colsum(x) + 2 N lam w).
        local N, d, lam, lr = 4, 3, 0.5, 0.1
        local x = ddpl.tensor({{1, 2, 3}, {0, -1, 2}, {4, 0, 1}, {-2, 1, 0}}, {dtype = 'float64'})
        x.requires_grad = true
        local w0 = {0.3, -0.2, 0.1}
        local w = ddpl.tensor({{w0[1]}, {w0[2]}, {w0[3]}}, {dtype = 'float64', requires_grad = true})
        local opt = ddpl.optim.SGD({w}, {lr = lr})
        local colsum = {1 + 0 + 4 - 2, 2 - 1 + 0 + 1, 3 + 2 + 1 + 0}
        local expect = {w0[1], w0[2], w0[3]}
        for _ = 1, 3 do
            opt:zero_grad()
            local f = x:matmul(w):sum()
            local g = grad({f}, {x}, {create_graph = true})[1]
            local loss = f + lam * (g ^ 2):sum()
            loss:backward()
            opt:step()
            for i = 1, d do expect[i] = expect[i] - lr * (colsum[i] + 2 * N * lam * expect[i]) end
        end
        H.assert_close(w:reshape(-1), expect, 0, 1e-12)
    end)

    it('a gradient penalty through a Linear + tanh network matches finite differences', function()
        local net = ddpl.nn.Sequential(ddpl.nn.Linear(3, 4), ddpl.nn.Tanh(), ddpl.nn.Linear(4, 1))
        net:double()
        local x = ddpl.randn(5, 3, {dtype = 'float64', requires_grad = true})
        local w = net:parameters()[1]
        local function penalty()
            local g = grad({net(x):sum()}, {x}, {create_graph = true})[1]
            return (g ^ 2):sum()
        end
        penalty():backward()
        local analytic = w.grad:clone()
        local eps = 1e-6
        for k = 0, 2 do -- three elements of the first weight, by central differences
            local e = w:view(-1):narrow(0, k, 1)
            local v = e:item()
            ddpl.no_grad(function() e:fill_(v + eps) end)
            local plus = penalty():item()
            ddpl.no_grad(function() e:fill_(v - eps) end)
            local minus = penalty():item()
            ddpl.no_grad(function() e:fill_(v) end)
            local numeric = (plus - minus) / (2 * eps)
            local a = analytic:view(-1):narrow(0, k, 1):item()
            assert.is_true(math.abs(a - numeric) < 1e-6, ('element %d: %g vs %g'):format(k, a, numeric))
        end
    end)
end)

describe('create_graph refuses backward formulas that are not differentiable', function()
    local function refused(op, fn, inputs)
        local ok, err = pcall(gradgradcheck, fn, inputs)
        assert.is_false(ok, op .. ': gradgradcheck passed')
        assert.matches('create_graph: the backward of ' .. op .. ' is not differentiable', err, 1, true)
    end

    it('conv2d, at the third derivative', function()
        local x, w = U({1, 1, 4, 4}), U({2, 1, 3, 3})
        local g1 = grad({(F.conv2d(x, w) ^ 2):sum()}, {x}, {create_graph = true})[1]
        local g2 = grad({(g1 ^ 2):sum()}, {w}, {create_graph = true})[1]
        H.assert_error(function() (g2 ^ 2):sum():backward() end,
                       'create_graph: the backward of conv2d is not differentiable')
    end)
    -- attention: the fused kernel (the CPU's default; forced here anyway) is refused, the composite
    -- passes
    local function with_fused_attention(fn)
        local previous = ddpl._sdpa_cpu_fused_min_bytes(0)
        local ok, err = pcall(fn)
        ddpl._sdpa_cpu_fused_min_bytes(previous)
        if not ok then error(err, 0) end
    end
    local function attention(q, k, v) return F.scaled_dot_product_attention(q, k, v) end

    it('scaled_dot_product_attention: the fused kernel', function()
        with_fused_attention(function()
            refused('scaled_dot_product_attention', attention,
                    {U({1, 1, 3, 2}), U({1, 1, 3, 2}), U({1, 1, 3, 2})})
        end)
    end)

    it('scaled_dot_product_attention: the composite (forced on the CPU) is differentiable twice', function()
        local previous = ddpl._sdpa_cpu_fused_min_bytes(1e12)
        local ok, err = pcall(ok_gradgradcheck, attention, {U({1, 1, 3, 2}), U({1, 1, 3, 2}), U({1, 1, 3, 2})})
        ddpl._sdpa_cpu_fused_min_bytes(previous)
        assert(ok, err)
    end)
    it('embedding (index_select)', function()
        refused('index_select', function(w) return F.embedding(ddpl.tensor({1, 0, 1}), w) end, {U({3, 2})})
    end)

    it('raises only when the second derivative goes through it', function()
        with_fused_attention(function()
            -- g depends on x through attention's backward: its use is fine, its backward is not
            local x = U({1, 1, 3, 3})
            local function attend(a) return F.scaled_dot_product_attention(a, a, a) end
            local g = grad({(attend(x) ^ 3):sum()}, {x}, {create_graph = true})[1]
            assert.is_true(g.requires_grad)
            local plain = grad({(attend(x) ^ 3):sum()}, {x})[1]
            H.assert_close(g:detach(), plain, 0, 0) -- the same values as without create_graph
            H.assert_error(function() (g ^ 2):sum():backward() end,
                           'create_graph: the backward of scaled_dot_product_attention is not differentiable')
            -- a penalty on the gradient of a layer after the attention does not go through it
            local w = U({3, 3})
            local y = attend(x)
            local gy = grad({(y:matmul(w):tanh()):sum()}, {w}, {create_graph = true})[1]
            ;(gy ^ 2):sum():backward()
            assert.is_not_nil(x.grad)
        end)
    end)
end)

describe('PyTorch second derivatives (spec/fixtures/double_backward.lua)', function()
    for _, case in ipairs(H.fixture('double_backward')) do
        it(case.name, function()
            local fns = {
                tanh_cube = function(x, w) return (x:matmul(w):tanh() ^ 3):sum() end,
                softmax_mse = function(x, w)
                    return F.mse_loss(F.softmax(x:matmul(w), 1), ddpl.full({3, 2}, 0.5, {dtype = 'float64'}))
                end,
                gelu_logsumexp = function(x, w) return F.gelu(x:matmul(w)):logsumexp(1):sum() end,
                sigmoid_ce = function(x, w)
                    return F.cross_entropy(x:matmul(w):sigmoid() * 3, ddpl.tensor({1, 0, 1}))
                end,
            }
            local x = H.tensor(case.x, {requires_grad = true})
            local w = H.tensor(case.w, {requires_grad = true})
            -- the gradient penalty's gradient: d/dw |dL/dx|^2
            local gx = grad({fns[case.fn](x, w)}, {x}, {create_graph = true})[1]
            H.assert_close(gx, case.grad_x, 1e-9, 1e-10)
            local gw = grad({(gx ^ 2):sum()}, {w})[1]
            H.assert_close(gw, case.penalty_grad_w, 1e-9, 1e-10)
        end)
    end
end)
