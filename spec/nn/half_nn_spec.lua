-- spec/nn/half_nn_spec.lua: float16 and bfloat16 inputs of the CPU nn ops that compute through
-- float32 (engine/cpu/cpu_widen.c): layer_norm, batch_norm (with its running statistics),
-- group_norm, max/avg/adaptive pooling, log_softmax, nll_loss and cross_entropy, forward and
-- backward, against spec/fixtures/half_nn.lua (tools/gen_dtype_fixtures.py: PyTorch 1.13's CPU
-- bfloat16 kernels; float16 as float32 computation rounded to float16, since PyTorch 1.13 has
-- no CPU float16 kernels for these ops; and bfloat16 cases where PyTorch's kernel accumulates in
-- bfloat16, as each such case's note says). Tolerances are H.tolerance's for the dtype: about
-- two units in the last place, the room for a statistic rounded once in another order.
local H = require 'helpers'
local ddpl = H.ddpl
local F = ddpl.F

local function loss_opts(o) return {reduction = o.reduction} end

local runners = {
    layer_norm = function(ins, o) return F.layer_norm(ins[1], o.normalized_shape, ins[2], ins[3]) end,
    batch_norm = function(ins, o)
        local y = F.batch_norm(ins[1], ins[2], ins[3], ins[4], ins[5],
                               {training = o.training, momentum = o.momentum, eps = o.eps})
        return y, ins[2], ins[3] -- training updates the running statistics in place
    end,
    group_norm = function(ins, o) return F.group_norm(ins[1], o.num_groups, ins[2], ins[3]) end,
    max_pool2d = function(ins, o) return F.max_pool2d(ins[1], ins[2], o) end,
    avg_pool2d = function(ins, o) return F.avg_pool2d(ins[1], ins[2], o) end,
    adaptive_avg_pool2d = function(ins) return F.adaptive_avg_pool2d(ins[1], ins[2]) end,
    log_softmax = function(ins, o) return F.log_softmax(ins[1], o.dim) end,
    cross_entropy = function(ins, o) return F.cross_entropy(ins[1], ins[2], loss_opts(o)) end,
    nll_loss = function(ins, o) return F.nll_loss(ins[1], ins[2], loss_opts(o)) end,
}

describe('16-bit inputs of the nn ops against PyTorch', function()
    H.run_cases(H.fixture('half_nn'), runners, it)
end)

describe('16-bit nn layers', function()
    for _, dtype in ipairs({'bfloat16', 'float16'}) do
        it(dtype .. ' BatchNorm2d, LayerNorm, pools and cross_entropy train end to end', function()
            ddpl.manual_seed(1)
            local bn = ddpl.nn.BatchNorm2d(4)
            local net = ddpl.nn.Sequential(ddpl.nn.Conv2d(1, 4, 3, {padding = 1}), bn,
                                           ddpl.nn.ReLU(),
                                           ddpl.nn.MaxPool2d(2), ddpl.nn.Flatten(),
                                           ddpl.nn.LayerNorm(16), ddpl.nn.Linear(16, 3))
            net:to(dtype)
            local x = ddpl.randn(6, 1, 4, 4):to(dtype)
            local y = ddpl.tensor({0, 1, 2, 0, 1, 2})
            local loss = F.cross_entropy(net(x), y)
            assert.are.equal(dtype, H.dtype_name(loss.dtype))
            loss:backward()
            for _, np in ipairs(net:named_parameters()) do
                assert.is_not_nil(np[2].grad, np[1])
                assert.are.equal(dtype, H.dtype_name(np[2].grad.dtype), np[1])
            end
            assert.are.equal(dtype, H.dtype_name(bn.running_mean.dtype))
            assert.is_true(bn.running_mean:float():abs():sum():item() > 0, 'running mean moved')
        end)
    end

    it('still refuses integer inputs, naming the dtype', function()
        H.assert_error(function() return F.layer_norm(ddpl.ones(2, 3, {dtype = 'int16'}), {3}) end,
                       'layer_norm', 'int16')
        H.assert_error(function() return F.max_pool2d(ddpl.ones(1, 1, 2, 2, {dtype = 'int8'}), 2) end,
                       'max_pool2d', 'int8')
    end)

    it('refuses a float32 weight with a bfloat16 input', function()
        H.assert_error(function()
            return F.batch_norm(ddpl.ones(2, 3):bfloat16(), nil, nil, ddpl.ones(3), nil,
                                {training = true})
        end, 'batch_norm', 'float32', 'bfloat16')
    end)
end)
