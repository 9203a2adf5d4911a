-- spec/tensor/thread_determinism_spec.lua: the same training run twice gives the same bits at 2
-- threads. Every parallel kernel must split its work so that what a sum adds, and in which order,
-- does not depend on which thread takes which part: the pool hands parts to whichever thread claims
-- them first, so a sum kept per thread changes its rounding from run to run (the convolution
-- weight gradients did, until session 26). A few steps of each reference model (mlp, cnn,
-- resnet, a 2-layer bidirectional LSTM, a small GPT) are trained three times from the same seed and data; every parameter
-- must come out bit-for-bit the same. One step of each also runs at 1 thread, so that the
-- 1-thread path (one part) is exercised by the same comparison.
local H = require 'helpers'
local ddpl = H.ddpl
local F = ddpl.F

local source_dir = os.getenv('DDPLUA_SOURCE_DIR') or '.'
local function model_file(name) return dofile(source_dir .. '/models/' .. name .. '.lua') end

-- Each case: a model constructor, an optimizer and a batch function (same data every run).
local cases = {
    mlp = function()
        local m = model_file('mlp')()
        local x, y = ddpl.randn(64, 1, 28, 28), ddpl.randint(0, 10, {64})
        return m, ddpl.optim.SGD(m:parameters(), {lr = 0.05, momentum = 0.9}),
               function() return F.cross_entropy(m(x), y) end
    end,
    cnn = function()
        local m = model_file('lenet')()
        local x, y = ddpl.randn(64, 1, 28, 28), ddpl.randint(0, 10, {64})
        return m, ddpl.optim.SGD(m:parameters(), {lr = 0.02, momentum = 0.9}),
               function() return F.cross_entropy(m(x), y) end
    end,
    resnet = function()
        local m = model_file('resnet')({in_channels = 3})
        local x, y = ddpl.randn(8, 3, 32, 32), ddpl.randint(0, 10, {8})
        return m, ddpl.optim.SGD(m:parameters(), {lr = 0.02, momentum = 0.9}),
               function() return F.cross_entropy(m(x), y) end
    end,
    lstm = function()
        local rnn = ddpl.nn.LSTM(16, 32, {num_layers = 2, batch_first = true, bidirectional = true})
        local head = ddpl.nn.Linear(64, 10)
        local m = ddpl.nn.ModuleList({rnn, head})
        local x, y = ddpl.randn(8, 12, 16), ddpl.randint(0, 10, {8 * 12})
        return m, ddpl.optim.Adam(m:parameters(), {lr = 1e-3}),
               function()
                   local out = rnn(x)
                   return F.cross_entropy(head(out):reshape(8 * 12, 10), y)
               end
    end,
    gpt = function()
        local m = model_file('gpt')({vocab_size = 512, block_size = 64, n_layer = 2, n_head = 4,
                                     n_embd = 64})
        local idx, tgt = ddpl.randint(0, 512, {4, 64}), ddpl.randint(0, 512, {4, 64})
        return m, ddpl.optim.AdamW(m:parameters(), {lr = 1e-3, weight_decay = 0.1}),
               function()
                   local _, loss = m(idx, tgt)
                   return loss
               end
    end,
}

-- trains `steps` steps from seed 7 and returns every parameter's bytes, by name
local function train(case, steps)
    ddpl.manual_seed(7)
    local model, opt, batch = cases[case]()
    for _ = 1, steps do
        local loss = batch()
        opt:zero_grad()
        loss:backward()
        opt:step()
    end
    local out = {}
    for _, pair in ipairs(model:named_parameters()) do out[pair[1]] = pair[2]:detach():clone() end
    return out
end

local function assert_same(a, b, what)
    for name, t in pairs(a) do
        local d = (t:double() - b[name]:double()):abs():max():item()
        assert.are.equal(0, d, ('%s: parameter %s differs by %g'):format(what, name, d))
    end
end

describe('training runs', function()
    local threads
    before_each(function() threads = ddpl.get_num_threads() end)
    after_each(function() ddpl.set_num_threads(threads) end)

    for _, case in ipairs({'mlp', 'cnn', 'resnet', 'lstm', 'gpt'}) do
        it(case .. ': three runs at 2 threads give the same parameters, bit for bit', function()
            ddpl.set_num_threads(2)
            local steps = case == 'resnet' and 2 or 3
            local first = train(case, steps)
            for run = 2, 3 do assert_same(first, train(case, steps), case .. ' run ' .. run) end
        end)
        it(case .. ': two runs at 1 thread give the same parameters', function()
            ddpl.set_num_threads(1)
            assert_same(train(case, 1), train(case, 1), case .. ' at 1 thread')
        end)
    end
end)
