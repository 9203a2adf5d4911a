-- spec/nn/nn_functional_spec.lua: ddpl.nn.functional against PyTorch
-- (spec/fixtures/nn_functional.lua): linear, conv2d (stride, padding, dilation, groups),
-- max/avg/adaptive pooling, batch_norm (training with running-stat updates, eval), layer_norm,
-- embedding, softmax, log_softmax, cross_entropy (reductions, ignore_index, label_smoothing,
-- class weights, (N,C,d...) inputs), nll_loss, mse_loss, gelu, silu, relu, dropout and
-- scaled_dot_product_attention (causal, bool and float masks); values and gradients.
local H = require 'helpers'
local ddpl = H.ddpl
local F = ddpl.F

local cases = H.fixture('nn_functional')

local function loss_opts(ins, o)
    return {reduction = o.reduction, ignore_index = o.ignore_index,
            label_smoothing = o.label_smoothing, weight = ins[3]}
end

local runners = {
    linear = function(ins) return F.linear(ins[1], ins[2], ins[3]) end,
    conv2d = function(ins, o) return F.conv2d(ins[1], ins[2], ins[3], o) end,
    max_pool2d = function(ins, o) return F.max_pool2d(ins[1], ins[2], o) end,
    avg_pool2d = function(ins, o) return F.avg_pool2d(ins[1], ins[2], o) end,
    adaptive_avg_pool2d = function(ins) return F.adaptive_avg_pool2d(ins[1], ins[2]) end,
    batch_norm = function(ins, o)
        -- returns the output and the running stats, which training updates in place
        local y = F.batch_norm(ins[1], ins[2], ins[3], ins[4], ins[5],
                               {training = o.training, momentum = o.momentum, eps = o.eps})
        return y, ins[2], ins[3]
    end,
    layer_norm = function(ins, o)
        return F.layer_norm(ins[1], o.normalized_shape, ins[2], ins[3], {eps = o.eps})
    end,
    embedding = function(ins) return F.embedding(ins[1], ins[2]) end,
    softmax = function(ins, o) return F.softmax(ins[1], o.dim) end,
    log_softmax = function(ins, o) return F.log_softmax(ins[1], o.dim) end,
    cross_entropy = function(ins, o) return F.cross_entropy(ins[1], ins[2], loss_opts(ins, o)) end,
    nll_loss = function(ins, o) return F.nll_loss(ins[1], ins[2], loss_opts(ins, o)) end,
    mse_loss = function(ins, o) return F.mse_loss(ins[1], ins[2], {reduction = o.reduction}) end,
    gelu = function(ins) return F.gelu(ins[1]) end,
    silu = function(ins) return F.silu(ins[1]) end,
    relu = function(ins) return F.relu(ins[1]) end,
    dropout = function(ins, o) return F.dropout(ins[1], ins[2], o.training) end,
    sdpa = function(ins, o)
        return F.scaled_dot_product_attention(ins[1], ins[2], ins[3],
                                              {attn_mask = ins[4], is_causal = o.is_causal,
                                               scale = o.scale})
    end,
}

describe('nn.functional matches PyTorch', function()
    H.run_cases(cases, runners, it)
end)

describe('nn.functional', function()
    it('is reachable as ddpl.nn.functional, ddpl.F and require "ddplua.nn"', function()
        assert.are.equal(ddpl.F, ddpl.nn.functional)
        assert.are.equal(ddpl.nn, require('ddplua.nn'))
    end)

    it('dropout in training zeroes about p of the values and scales the rest by 1/(1-p)',
       function()
        ddpl.manual_seed(7)
        local n, p = 20000, 0.3
        local x = ddpl.ones(n)
        x.requires_grad = true
        local y = F.dropout(x, p, true)
        local zeros = y:eq(0):sum():item()
        -- binomial: sd = sqrt(n p (1-p)) ~ 65; allow 5 sd
        assert.is_true(math.abs(zeros - n * p) < 5 * math.sqrt(n * p * (1 - p)),
                       'zeroed ' .. zeros .. ' of ' .. n)
        -- every value is 0 or 1/(1-p)
        H.assert_close(y:detach():masked_fill(y:eq(0), 1 / (1 - p)),
                       ddpl.full({n}, 1 / (1 - p)))
        -- the gradient is the same mask and scale
        y:sum():backward()
        H.assert_close(x.grad, y:detach())
    end)

    it('dropout draws from the seeded generator', function()
        ddpl.manual_seed(11)
        local a = F.dropout(ddpl.ones(1000), 0.5, true)
        ddpl.manual_seed(11)
        local b = F.dropout(ddpl.ones(1000), 0.5, true)
        H.assert_close(a, b, 0, 0)
        local c = F.dropout(ddpl.ones(1000), 0.5, true)
        assert.is_true(a:ne(c):sum():item() > 0, 'two draws gave the same mask')
    end)

    it('dropout with p = 1 in training gives zeros', function()
        local y = F.dropout(ddpl.ones(10), 1.0, true)
        H.assert_close(y, ddpl.zeros(10))
    end)

    it('softmax rows sum to one', function()
        local x = ddpl.randn(4, 7)
        H.assert_close(F.softmax(x, 1):sum(1), ddpl.ones(4))
    end)

    it('cross_entropy refuses a class index out of range', function()
        local x = ddpl.zeros(2, 3)
        H.assert_error(function() return F.cross_entropy(x, ddpl.tensor({0, 3})) end,
                       'cross_entropy')
        H.assert_error(function() return F.nll_loss(x, ddpl.tensor({-1, 0})) end, 'nll_loss')
    end)

    it('cross_entropy refuses targets of the wrong shape', function()
        H.assert_error(function()
            return F.cross_entropy(ddpl.zeros(2, 3), ddpl.tensor({0, 1, 2}))
        end, 'cross_entropy')
    end)

    it('conv2d refuses a channel mismatch, naming the shapes', function()
        H.assert_error(function() return F.conv2d(ddpl.zeros(1, 3, 5, 5), ddpl.zeros(4, 2, 3, 3)) end,
                       'conv2d', '[1,3,5,5]', '[4,2,3,3]')
    end)

    it('batch_norm in training needs more than one value per channel', function()
        H.assert_error(function()
            return F.batch_norm(ddpl.zeros(1, 3), ddpl.zeros(3), ddpl.ones(3), nil, nil,
                                {training = true})
        end, 'batch_norm')
    end)

    it('batch_norm in eval leaves the running stats alone', function()
        local rm, rv = ddpl.tensor({0.5, -0.5}), ddpl.tensor({2.0, 3.0})
        F.batch_norm(ddpl.randn(4, 2), rm, rv, nil, nil, {training = false})
        H.assert_close(rm, {0.5, -0.5}, 0, 0)
        H.assert_close(rv, {2.0, 3.0}, 0, 0)
    end)

    it('embedding refuses an id out of range', function()
        H.assert_error(function() return F.embedding(ddpl.tensor({0, 5}), ddpl.zeros(5, 2)) end,
                       'embedding')
    end)
end)
