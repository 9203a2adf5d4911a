-- spec/autograd/inplace_spec.lua: in-place ops under autograd, as PyTorch (issue 29, item 4;
-- engine/ops/inplace.c). An in-place op on a non-leaf that requires grad, or with an operand that
-- does, is recorded and the tensor takes its history; version counters count every write; backward
-- fails with PyTorch's message only when a value it saved was overwritten; leaves that require
-- grad (and views of them) are refused; a write into a view rewrites its base's history
-- (CopySlices); a gradient through a view whose base was written after it was taken is refused.
-- inplace=true modules write into their input. A residual block with `out += identity` trains as its out-of-place twin.
local H = require 'helpers'
local ddpl = H.ddpl
local nn, F = ddpl.nn, ddpl.nn.functional

local function leaf(values)
    return ddpl.tensor(values, {dtype = 'float64', requires_grad = true})
end

local VERSION_ERROR = 'one of the variables needed for gradient computation has been modified ' ..
                      'by an inplace operation'

local function devices()
    local list = {'cpu'}
    if ddpl.cuda.is_available() then list[#list + 1] = 'cuda' end
    return list
end

for _, dev in ipairs(devices()) do
    describe('in-place ops that autograd records (' .. dev .. ')', function()
        local function dleaf(values)
            return ddpl.tensor(values, {dtype = 'float64', device = dev, requires_grad = true})
        end

        it('rebase the history: x*2 then add_(x) has gradient 3 and grad_fn AddBackward', function()
            local x = dleaf({1, -2, 3})
            local y = x * 2
            local r = y:add_(x)
            assert.is_true(rawequal(r, y))
            assert.matches('^AddBackward', y.grad_fn)
            assert.are.equal(1, y._version)
            y:sum():backward()
            H.assert_close(x.grad:cpu(), {3, 3, 3})
        end)

        it('mul_ by a tensor that requires grad differentiates both (x keeps its old value)',
           function()
            local a, b = dleaf({1, 2, 3}), dleaf({4, 5, 6})
            local y = a * 1
            y:mul_(b)
            y:mul_(b) -- y = a b^2
            y:sum():backward()
            H.assert_close(a.grad:cpu(), {16, 25, 36})
            H.assert_close(b.grad:cpu(), {8, 20, 36})
        end)

        it('give history to a tensor that did not require grad when an operand does', function()
            local w = dleaf({1, 2})
            local z = ddpl.zeros({3, 2}, {dtype = 'float64', device = dev})
            assert.is_false(z.requires_grad)
            z:add_(w, 2):div_(w)
            assert.is_true(z.requires_grad)
            z:sum():backward()
            -- z = 2w / w: dz/dw = 2/w - 2w/w^2 = 0, summed over 3 rows
            H.assert_close(w.grad:cpu(), {0, 0})
        end)

        it('clamp_, relu_, sigmoid_, tanh_ and copy_ give PyTorch gradients', function()
            local x = dleaf({-1.5, 0.5, 2.5})
            local y = x * 1
            y:clamp_(-1, 1):relu_()
            y:sum():backward()
            H.assert_close(x.grad:cpu(), {0, 1, 0})
            x.grad = nil
            local s = (x * 1):sigmoid_()
            local t = (x * 1):tanh_()
            ;(s + t):sum():backward()
            local sx, tx = x:detach():sigmoid(), x:detach():tanh()
            H.assert_close(x.grad, (sx * (1 - sx) + (1 - tx * tx)))
            x.grad = nil
            local dst = ddpl.zeros({2, 3}, {dtype = 'float64', device = dev})
            dst:copy_(x * 3) -- broadcast over rows
            dst:sum():backward()
            H.assert_close(x.grad:cpu(), {6, 6, 6})
        end)

        it('fill_ and zero_ cut the gradient of the old value (ZeroBackward0, FillBackward0)',
           function()
            local x = dleaf({1, 2})
            local y = x * 5
            y:zero_()
            assert.are.equal('ZeroBackward0', y.grad_fn)
            local z = (x * 5):fill_(7)
            assert.are.equal('FillBackward0', z.grad_fn)
            ;(y + z + x):sum():backward()
            H.assert_close(x.grad:cpu(), {1, 1})
        end)

        it('differentiate twice through a recorded in-place op (create_graph)', function()
            local x = dleaf({1.5, -2})
            local y = x * 1
            y:mul_(x):mul_(x) -- x^3
            local g = ddpl.autograd.grad(y:sum(), {x}, {create_graph = true})[1]
            H.assert_close(g:cpu(), {3 * 1.5 ^ 2, 3 * 4})
            local gg = ddpl.autograd.grad(g:sum(), {x})[1]
            H.assert_close(gg:cpu(), {6 * 1.5, -12})
        end)
    end)
end

describe('version counters (x._version)', function()
    it('count each in-place write, shared by views, untouched by out-of-place ops', function()
        local x = ddpl.zeros({4})
        assert.are.equal(0, x._version)
        local v = x:narrow(0, 1, 2)
        x:add_(1)
        x:mul_(2)
        assert.are.equal(2, x._version)
        assert.are.equal(2, v._version)
        v:fill_(3)
        assert.are.equal(3, x._version)
        local _ = x + 1
        assert.are.equal(3, x._version)
        assert.is_true(v:_is_view())
        assert.is_false(x:_is_view())
    end)
end)

describe('backward after an in-place write (PyTorch examples)', function()
    it('fails naming the saved output, its version and the expected one', function()
        local a = leaf({1, 2, 3})
        local b = a:exp()
        local c = b * 2 -- saves nothing of b
        b:mul_(2) -- b's own node saved b (exp saves its output)
        local ok, err = pcall(function() (b + c):sum():backward() end)
        assert.is_false(ok)
        assert.truthy(err:find(VERSION_ERROR, 1, true), err)
        assert.truthy(err:find('[torch.DoubleTensor [3]], which is output 0 of ExpBackward', 1,
                               true), err)
        assert.truthy(err:find('is at version 1; expected version 0 instead', 1, true), err)
    end)

    it('fails for a saved input that was overwritten, also one without history', function()
        local x = leaf({1, 2})
        local w = ddpl.tensor({3.0, 4.0}, {dtype = 'float64'})
        local y = (x * w):sum() -- saves w for x's gradient
        w:add_(1)
        w:add_(1)
        local ok, err = pcall(function() y:backward() end)
        assert.is_false(ok)
        assert.truthy(err:find('[torch.DoubleTensor [2]] is at version 2; expected version 0 ' ..
                               'instead', 1, true), err)
    end)

    it('succeeds when no saved value was overwritten', function()
        local x = leaf({1, 2})
        local y = x * 3 -- a scalar factor: nothing of x is saved
        local z = y * 1
        y:add_(10)
        ;(z + y):sum():backward()
        H.assert_close(x.grad, {6, 6})
    end)
end)

describe('in-place writes that are refused', function()
    it('on a leaf that requires grad (unchanged), but not under no_grad', function()
        local x = leaf({1, 2})
        H.assert_error(function() x:mul_(2) end, 'mul_', 'leaf Variable that requires grad')
        H.assert_error(function() F.relu(x, {inplace = true}) end, 'relu_', 'leaf')
        H.assert_close(x, {1, 2})
        ddpl.no_grad(function() x:mul_(2) end)
        H.assert_close(x, {2, 4})
    end)

    it('into a view of a leaf that requires grad, or a view taken under no_grad', function()
        local x = leaf({1, 2, 3})
        H.assert_error(function() x:narrow(0, 0, 2):mul_(2) end, 'mul_', 'view of a leaf')
        local y = x * 1
        local v = ddpl.no_grad(function() return y:narrow(0, 0, 2) end)
        H.assert_error(function() v:add_(1) end, 'add_', 'grad mode was off')
        H.assert_close(y:detach(), {1, 2, 3})
        local plain = ddpl.zeros({3})
        plain:narrow(0, 1, 2):add_(1) -- nothing records: a plain write
        H.assert_close(plain, {0, 1, 1})
    end)

    it('gradients through a view taken before its base was written', function()
        local x = leaf({1, 2, 3})
        local base = x * 1
        local v = base:narrow(0, 0, 2)
        local early = v * 2 -- used before the write: fine
        base:mul_(3)
        local late = v * 1 -- used after the write: its history misses the mul_
        H.assert_error(function() (late:sum() + early:sum()):backward() end,
                       'view whose base was modified by an in-place operation')
        x.grad = nil
        local again = x * 1
        local v2 = again:narrow(0, 0, 2)
        local e2 = v2 * 2
        again:mul_(3)
        ;(e2:sum() + again:sum()):backward() -- the stale view is not used after the write
        H.assert_close(x.grad, {5, 5, 3})
    end)
end)

describe('in-place writes into views (CopySlices)', function()
    it('h[i] = f(x) into a buffer that needs no grad gives h a history to x', function()
        local x = leaf({1, 2, 3, 4})
        local h = ddpl.zeros({2, 4}, {dtype = 'float64'})
        h[0] = x * 2
        h[1] = x:exp()
        assert.are.equal('CopySlices', h.grad_fn)
        local w = ddpl.tensor({{1, 1, 1, 1}, {2, 2, 2, 2}}, {dtype = 'float64'})
        ;(h * w):sum():backward()
        local want = {}
        for i = 1, 4 do want[i] = 2 + 2 * math.exp(i) end
        H.assert_close(x.grad, want)
    end)

    it('a view written in place sends the region to the op and the rest to the base', function()
        local x = leaf({1, 2, 3, 4})
        local y = x * 1
        local v = y:narrow(0, 1, 2)
        v:mul_(10)
        assert.are.equal('CopySlices', y.grad_fn)
        assert.are.equal('AsStridedBackward0', v.grad_fn)
        ;(y:sum() + v:sum()):backward()
        H.assert_close(x.grad, {1, 20, 20, 1})
        x.grad = nil
        local z = x * 1
        z:narrow(0, 0, 2):zero_()
        ;(z * z):sum():backward()
        H.assert_close(x.grad, {0, 0, 6, 8})
    end)

    it('a transposed column view and an operand that requires grad', function()
        local a = ddpl.tensor({{1, 2}, {3, 4}}, {dtype = 'float64', requires_grad = true})
        local b = ddpl.tensor({5, 6}, {dtype = 'float64', requires_grad = true})
        local m = a * 1
        m:t()[1]:add_(b) -- column 1 of m += b
        ;(m * m):sum():backward()
        -- m = {{1, 7}, {3, 10}}: dL/dm = 2m; a's gradient 2m, b's the column 1 part
        H.assert_close(a.grad, {{2, 14}, {6, 20}})
        H.assert_close(b.grad, {14, 20})
    end)
end)

describe('inplace=true modules and functions', function()
    local cases = {
        {'ReLU', function() return nn.ReLU(true) end, function() return nn.ReLU() end},
        {'SiLU', function() return nn.SiLU({inplace = true}) end, function() return nn.SiLU() end},
        {'LeakyReLU', function() return nn.LeakyReLU(0.2, true) end,
         function() return nn.LeakyReLU(0.2) end},
        {'ELU', function() return nn.ELU({alpha = 0.5, inplace = true}) end,
         function() return nn.ELU(0.5) end},
    }
    for _, c in ipairs(cases) do
        it(c[1] .. ' writes into its input, with the out-of-place values and gradients', function()
            local m, ref = c[2](), c[3]()
            assert.matches('inplace=True', tostring(m))
            local x1, x2 = leaf({-2, -0.5, 0.25, 3}), leaf({-2, -0.5, 0.25, 3})
            local h1, h2 = x1 * 1.5, x2 * 1.5
            local y1 = m(h1)
            local y2 = ref(h2)
            assert.is_true(rawequal(y1, h1))
            assert.are.equal(1, h1._version)
            H.assert_close(y1:detach(), y2:detach():tolist())
            ;(y1 * y1):sum():backward()
            ;(y2 * y2):sum():backward()
            H.assert_close(x1.grad, x2.grad:tolist())
        end)
    end

    it('Dropout(p, true) zeroes the input itself, scales the rest, and passes the mask back',
       function()
        ddpl.manual_seed(3)
        local x = leaf({1, 2, 3, 4, 5, 6, 7, 8})
        local h = x * 1
        local y = nn.Dropout(0.5, true)(h)
        assert.is_true(rawequal(y, h))
        y:sum():backward()
        local g, v = x.grad:tolist(), y:detach():tolist()
        for i = 1, 8 do
            assert.is_true(g[i] == 0 and v[i] == 0 or (g[i] == 2 and v[i] == 2 * i))
        end
        local m = nn.Dropout({p = 0.5, inplace = true})
        m:eval()
        local e = x * 1
        assert.is_true(rawequal(m(e), e))
        assert.are.equal(0, e._version)
    end)

    it('refuse a non-boolean inplace and unknown options', function()
        H.assert_error(function() nn.ReLU('yes') end, 'ReLU', 'inplace')
        H.assert_error(function() nn.ReLU({foo = true}) end, 'ReLU', 'foo')
    end)
end)

describe('a residual block with out += identity', function()
    -- y = relu(relu(x W1 + b1) W2 + b2 + x); the in-place form adds the identity into the
    -- second linear layer's output and applies relu in place, as torchvision's BasicBlock
    local function block(inplace)
        ddpl.manual_seed(11)
        local m = {l1 = nn.Linear(6, 6), l2 = nn.Linear(6, 6)}
        function m.forward(x)
            local out = F.relu(m.l1(x), {inplace = inplace})
            out = m.l2(out)
            if inplace then
                out:add_(x) -- out += identity
                return F.relu(out, {inplace = true})
            end
            return F.relu(out + x)
        end
        m.params = {m.l1.weight, m.l1.bias, m.l2.weight, m.l2.bias}
        return m
    end

    it('trains to the same parameters as its out-of-place twin', function()
        local a, b = block(true), block(false)
        local oa = ddpl.optim.SGD(a.params, {lr = 0.1})
        local ob = ddpl.optim.SGD(b.params, {lr = 0.1})
        ddpl.manual_seed(5)
        for _ = 1, 5 do
            local x = ddpl.randn({4, 6})
            for _, p in ipairs({{a, oa}, {b, ob}}) do
                p[2]:zero_grad()
                local loss = (p[1].forward(x) - 1):pow(2):mean()
                loss:backward()
                p[2]:step()
            end
        end
        for i = 1, 4 do H.assert_close(a.params[i]:detach(), b.params[i]:detach():tolist(), 1e-6) end
        assert.are_not.same(a.params[1]:tolist(), block(false).params[1]:tolist()) -- it trained
    end)
end)
