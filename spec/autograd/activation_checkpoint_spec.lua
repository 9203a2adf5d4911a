-- spec/autograd/activation_checkpoint_spec.lua: activation checkpointing (ddpl.utils.checkpoint,
-- checkpoint_sequential; lua/ddplua/utils/checkpoint.lua): the same results and gradients as
-- without it (dropout repeats its mask), the activations it does not keep, the backward it
-- runs from inside the outer one (engine/autograd/engine.c sets aside the outer pass's scratch
-- on the nodes both use), and its errors.
local H = require 'helpers'
local ddpl = H.ddpl
local nn = ddpl.nn
local utils = ddpl.utils

-- grads of every parameter of m, cloned, in parameters() order
local function param_grads(m)
    local out = {}
    for i, p in ipairs(m:parameters()) do out[i] = p.grad and p.grad:clone() end
    return out
end

local function block(width)
    return nn.Sequential(nn.Linear(width, width), nn.GELU(), nn.Dropout(0.25),
                         nn.Linear(width, width), nn.Tanh())
end

describe('utils.checkpoint', function()
    it('gives the results and gradients of the plain run, dropout included', function()
        ddpl.manual_seed(11)
        local m = nn.Sequential(block(16), block(16), block(16), nn.Linear(16, 3))
        local x = ddpl.randn(8, 16)
        local function run(with_checkpoint)
            m:zero_grad()
            local xi = x:clone():requires_grad_()
            ddpl.manual_seed(5)
            local y = with_checkpoint and utils.checkpoint_sequential(m, 3, xi) or m(xi)
            local after = ddpl.rand(4) -- the RNG stream continues as without checkpointing
            ;(y * y):sum():backward()
            return y, xi.grad, param_grads(m), after
        end
        local y0, gx0, gp0, r0 = run(false)
        local y1, gx1, gp1, r1 = run(true)
        H.assert_close(y1, y0, 0, 0, 'output')
        H.assert_close(r1, r0, 0, 0, 'the RNG stream after forward')
        H.assert_close(gx1, gx0, 1e-6, 1e-6, 'input gradient')
        assert.are.equal(#gp0, #gp1)
        for i = 1, #gp0 do H.assert_close(gp1[i], gp0[i], 1e-6, 1e-6, 'parameter ' .. i) end
    end)

    it('gives a GPT (models/gpt.lua) the gradients of the plain run, blocks checkpointed',
       function()
        local gpt = dofile((os.getenv('DDPLUA_SOURCE_DIR') or '.') .. '/models/gpt.lua')
        local function run(checkpointed)
            ddpl.manual_seed(21)
            local net = gpt({vocab_size = 37, block_size = 8, n_layer = 2, n_head = 2,
                             n_embd = 16, dropout = 0.1})
            if checkpointed then -- each block behind utils.checkpoint_wrapper
                local wrapped = {}
                for i, b in ipairs(net.h:children()) do wrapped[i] = utils.checkpoint_wrapper(b) end
                net.h = nn.ModuleList(wrapped)
            end
            ddpl.manual_seed(22)
            local idx, tgt = ddpl.randint(0, 37, {3, 8}), ddpl.randint(0, 37, {3, 8})
            local _, loss = net(idx, tgt)
            loss:backward()
            local grads = {}
            for _, np in ipairs(net:named_parameters()) do
                grads[np[1]:gsub('%.module', '')] = np[2].grad
            end
            return loss, grads
        end
        local l0, g0 = run(false)
        local l1, g1 = run(true)
        H.assert_close(l1, l0, 0, 0, 'loss')
        local n = 0
        for name, g in pairs(g0) do
            H.assert_close(g1[name], g, 1e-6, 1e-6, name)
            n = n + 1
        end
        assert.is_true(n > 10)
    end)

    it('reaches the parameters inside when no argument requires grad', function()
        ddpl.manual_seed(3)
        local m = nn.Linear(4, 2)
        local x = ddpl.randn(3, 4)
        utils.checkpoint(m, x):sum():backward()
        local want = x:sum(0):view(1, 4):expand(2, 4)
        H.assert_close(m.weight.grad, want, 1e-6, 1e-6)
        H.assert_close(m.bias.grad, {3, 3}, 0, 0)
    end)

    it('handles a parameter used inside and outside (the passes share its node)', function()
        ddpl.manual_seed(4)
        local w = ddpl.randn(5, 5):requires_grad_()
        local x = ddpl.randn(2, 5)
        local function inner(h) return (h:matmul(w)):tanh():matmul(w) end
        local function loss(use_checkpoint)
            w.grad = nil
            local h = x:matmul(w) -- w before, inside twice, and after
            h = use_checkpoint and utils.checkpoint(inner, h) or inner(h)
            local out = h:matmul(w):sigmoid():sum() + (w * w):sum()
            out:backward()
            return w.grad:clone()
        end
        H.assert_close(loss(true), loss(false), 1e-6, 1e-6)
    end)

    it('passes several results and non-tensor values through', function()
        local a = ddpl.tensor({1.0, 2.0}, {requires_grad = true})
        local p, label, q = utils.checkpoint(function(t, k) return t * k, 'tag', t + k end, a, 3)
        assert.are.equal('tag', label)
        H.assert_close(p, {3, 6}, 0, 0)
        ;(p:sum() + (q * q):sum()):backward() -- 3 + 2 (a + 3)
        H.assert_close(a.grad, {11, 13}, 0, 0)
        -- a result nobody uses costs nothing and changes nothing
        a.grad = nil
        local r1 = utils.checkpoint(function(t) return t * 2, t * 5 end, a)
        r1:sum():backward()
        H.assert_close(a.grad, {2, 2}, 0, 0)
    end)

    it('keeps only the segment boundaries: at least 2x less activation memory', function()
        ddpl.manual_seed(6)
        local layers = {}
        for i = 1, 16 do
            layers[#layers + 1] = nn.Linear(256, 256)
            layers[#layers + 1] = nn.Tanh()
        end
        local m = nn.Sequential(table.unpack(layers))
        local x = ddpl.randn(512, 256):requires_grad_()
        local function kept_by_forward(fn)
            collectgarbage()
            collectgarbage()
            local before = ddpl.memory_allocated()
            local y = fn()
            collectgarbage()
            collectgarbage()
            local kept = ddpl.memory_allocated() - before
            y:sum():backward()
            m:zero_grad()
            x.grad = nil
            return kept
        end
        local plain = kept_by_forward(function() return m(x) end)
        local saved = kept_by_forward(function() return utils.checkpoint_sequential(m, 4, x) end)
        -- plain keeps an activation of 512 KiB per Linear-Tanh pair (tanh's output, which the
        -- next Linear reads too), checkpointed one per segment boundary and the last segment's
        assert.is_true(plain >= 2 * saved, ('plain %d bytes, checkpointed %d'):format(plain, saved))
        assert.is_true(plain >= 16 * 512 * 1024, 'the plain run kept ' .. plain .. ' bytes')
    end)

    it('runs the function plainly under no_grad', function()
        local calls = 0
        local y = ddpl.no_grad(function()
            return utils.checkpoint(function(t) calls = calls + 1; return t * 2 end, ddpl.ones(2))
        end)
        assert.are.equal(1, calls)
        assert.is_false(y.requires_grad)
    end)

    it('names what is wrong', function()
        H.assert_error(function() utils.checkpoint(42, ddpl.ones(1)) end,
                       'checkpoint', 'expected a function')
        H.assert_error(function() utils.checkpoint_wrapper(print) end,
                       'checkpoint_wrapper', 'expected a module')
        H.assert_error(function() utils.checkpoint_sequential(nn.Sequential(nn.ReLU()), 0,
                                                              ddpl.ones(1)) end,
                       'checkpoint_sequential', 'segments must be a positive integer')
        local a = ddpl.ones(2):requires_grad_()
        local y = utils.checkpoint(function(t) return t * t end, a)
        H.assert_error(function()
            ddpl.autograd.grad(y:sum(), {a}, {create_graph = true})
        end, 'checkpoint', 'create_graph')
        -- an error inside the recomputation comes out of backward, and the RNG is given back
        local fail = false
        local z = utils.checkpoint(function(t)
            if fail then error('recompute failed') end
            return t * 3
        end, a)
        fail = true
        local state = ddpl.get_rng_state()
        H.assert_error(function() z:sum():backward() end, 'recompute failed')
        H.assert_close(ddpl.get_rng_state(), state, 0, 0)
    end)
end)

describe('autograd._queue_callback (the end of the outermost backward pass)', function()
    it('runs queued functions once the outermost pass has ended, in order', function()
        local log = {}
        local x = ddpl.ones(3):requires_grad_()
        local y = x * 2
        y:register_hook(function(g)
            ddpl.autograd._queue_callback(function(ok) log[#log + 1] = {'first', ok, x.grad} end)
            ddpl.autograd._queue_callback(function(ok) log[#log + 1] = {'second', ok} end)
            log[#log + 1] = {'hook'}
            return g
        end)
        -- a checkpointed segment runs a backward inside this one: still one end
        utils.checkpoint(function(t) return t * 1 end, y):sum():backward()
        assert.are.equal(3, #log)
        assert.are.equal('hook', log[1][1])
        assert.are.same({'first', true}, {log[2][1], log[2][2]})
        H.assert_close(log[2][3], {2, 2, 2}, 0, 0) -- .grad is complete when it runs
        assert.are.same({'second', true}, log[3])
        -- nothing left queued for the next pass
        x.grad = nil
        ;(x * 3):sum():backward()
        assert.are.equal(3, #log)
    end)

    it('runs them with false after a failed pass, then raises the pass error', function()
        local got
        local x = ddpl.ones(2):requires_grad_()
        local y = x * 2
        y:register_hook(function()
            ddpl.autograd._queue_callback(function(ok) got = ok end)
            error('hook failed')
        end)
        H.assert_error(function() y:sum():backward() end, 'hook failed')
        assert.is_false(got)
    end)

    it('is refused outside backward', function()
        H.assert_error(function() ddpl.autograd._queue_callback(function() end) end,
                       '_queue_callback', 'during backward')
    end)
end)
