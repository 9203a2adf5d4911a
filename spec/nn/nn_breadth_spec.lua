-- spec/nn/nn_breadth_spec.lua: issue 16's nn.functional additions against PyTorch
-- (spec/fixtures/nn_breadth.lua, tools/gen_nn_fixtures.py): binary_cross_entropy(_with_logits),
-- l1/smooth_l1/huber losses, kl_div, leaky_relu, elu, softplus, one_hot, pad, group_norm,
-- rms_norm, conv1d, conv_transpose2d (values and input gradients, float64 to 1e-9); then their
-- argument errors
-- and the containers ModuleDict, ParameterList, ParameterDict. The module forms are cases of
-- spec/nn/nn_modules_spec.lua (fixture nn_modules.lua).
local H = require 'helpers'
local ddpl = H.ddpl
local nn = ddpl.nn
local F = ddpl.F

local function loss(name)
    return function(ins, o)
        return F[name](ins[1], ins[2], {reduction = o.reduction, weight = ins[3]})
    end
end

local runners = {
    binary_cross_entropy = loss('binary_cross_entropy'),
    binary_cross_entropy_with_logits = function(ins, o)
        return F.binary_cross_entropy_with_logits(ins[1], ins[2], {reduction = o.reduction,
                                                                   weight = ins[3],
                                                                   pos_weight = ins[4]})
    end,
    l1_loss = loss('l1_loss'),
    smooth_l1_loss = function(ins, o)
        return F.smooth_l1_loss(ins[1], ins[2], {reduction = o.reduction, beta = o.beta})
    end,
    huber_loss = function(ins, o)
        return F.huber_loss(ins[1], ins[2], {reduction = o.reduction, delta = o.delta})
    end,
    kl_div = function(ins, o)
        return F.kl_div(ins[1], ins[2], {reduction = o.reduction, log_target = o.log_target})
    end,
    leaky_relu = function(ins, o) return F.leaky_relu(ins[1], o.negative_slope) end,
    elu = function(ins, o) return F.elu(ins[1], {alpha = o.alpha}) end,
    softplus = function(ins, o) return F.softplus(ins[1], o.beta, o.threshold) end,
    one_hot = function(ins, o) return F.one_hot(ins[1], o.num_classes) end,
    pad = function(ins, o) return F.pad(ins[1], o.pad, {mode = o.mode, value = o.value}) end,
    group_norm = function(ins, o)
        return F.group_norm(ins[1], o.num_groups, ins[2], ins[3], {eps = o.eps})
    end,
    rms_norm = function(ins, o)
        return F.rms_norm(ins[1], o.normalized_shape, ins[2], {eps = o.eps})
    end,
    conv1d = function(ins, o) return F.conv1d(ins[1], ins[2], ins[3], o) end,
    conv_transpose2d = function(ins, o) return F.conv_transpose2d(ins[1], ins[2], ins[3], o) end,
}

describe('nn.functional (issue 16) matches PyTorch', function()
    H.run_cases(H.fixture('nn_breadth'), runners, it)
end)

describe('nn.functional (issue 16) arguments', function()
    local x = ddpl.randn(3, 4, {dtype = 'float64'})

    it('options are taken positionally or by name, and checked', function()
        local y = ddpl.randn(3, 4, {dtype = 'float64'})
        H.assert_close(F.smooth_l1_loss(x, y, 'sum', 0.5),
                       F.smooth_l1_loss(x, y, {reduction = 'sum', beta = 0.5}))
        H.assert_error(function() F.l1_loss(x, y, {reductoin = 'sum'}) end, 'l1_loss',
                       "unknown option 'reductoin'")
        H.assert_error(function() F.huber_loss(x, y, 'avg') end, 'huber_loss', 'reduction',
                       "'avg'")
        H.assert_error(function() F.kl_div(x, 3) end, 'kl_div', 'target', 'tensor')
        H.assert_error(function() F.huber_loss(x, y, {delta = 0}) end, 'huber_loss', 'delta')
        H.assert_error(function() F.smooth_l1_loss(x, y, {beta = -1}) end, 'beta')
        H.assert_error(function() F.softplus(x, 0) end, 'softplus', 'beta')
        H.assert_error(function() F.l1_loss(x, y, 'sum', 'sum') end, 'at most')
        H.assert_error(function() F.l1_loss(x, ddpl.zeros(5)) end, 'l1_loss', 'input [3,4]',
                       'target [5]', 'broadcast')
        H.assert_error(function() F.kl_div(x, ddpl.zeros(2, 4)) end, 'kl_div', 'broadcast')
        H.assert_error(function() F.leaky_relu(ddpl.zeros(2, {dtype = 'int64'})) end,
                       'leaky_relu', 'floating point', 'int64')
        H.assert_error(function() F.group_norm(ddpl.zeros(2, 4, {dtype = 'int64'}), 2) end,
                       'group_norm', 'floating point')
    end)

    it('the BCE losses refuse other target shapes and probabilities outside [0, 1]', function()
        local p = ddpl.rand(3, 4, {dtype = 'float64'})
        H.assert_error(function() F.binary_cross_entropy(p, ddpl.rand(4, 3)) end,
                       'binary_cross_entropy', 'target size [4,3]', '[3,4]')
        H.assert_error(function()
            F.binary_cross_entropy_with_logits(x, ddpl.rand(3, 1, {dtype = 'float64'}))
        end, 'binary_cross_entropy_with_logits', 'target size [3,1]')
        H.assert_error(function() F.binary_cross_entropy(p * 2 - 0.5, p) end,
                       'between 0 and 1')
        H.assert_error(function()
            F.binary_cross_entropy(ddpl.tensor({0.5, 0 / 0}), ddpl.tensor({1.0, 0.0}))
        end, 'between 0 and 1')
        H.assert_error(function() F.binary_cross_entropy(ddpl.tensor({0, 1}), ddpl.tensor({0, 1}))
        end, 'floating point')
    end)

    it('BCE at probabilities 0 and 1: clamped logs, finite gradients', function()
        local x = ddpl.tensor({0.0, 1.0, 0.0, 1.0}, {dtype = 'float64', requires_grad = true})
        local y = ddpl.tensor({0.0, 1.0, 1.0, 0.0}, {dtype = 'float64'})
        local l = F.binary_cross_entropy(x, y, {reduction = 'none'})
        H.assert_close(l, {0, 0, 100, 100})
        l:sum():backward()
        H.assert_close(x.grad, {1, -1, 0, 0}) -- d/dx of the unclamped term; 0 from the clamped
    end)

    it('BCE with logits stays finite and exact for huge logits (the naive form overflows)',
       function()
        local z = ddpl.tensor({-1000.0, 1000.0, 0.0}, {dtype = 'float64', requires_grad = true})
        local y = ddpl.tensor({1.0, 0.0, 1.0}, {dtype = 'float64'})
        local l = F.binary_cross_entropy_with_logits(z, y, {reduction = 'none'})
        H.assert_close(l, {1000, 1000, math.log(2)})
        l:sum():backward()
        H.assert_close(z.grad, {-1, 1, -0.5}) -- sigmoid(z) - y, also at z = 0
    end)

    it('one_hot: int64 out, errors for bad classes', function()
        local t = ddpl.tensor({1, 0, 2})
        local oh = F.one_hot(t)
        assert.are.equal('int64', H.dtype_name(oh.dtype))
        H.assert_close(oh, {{0, 1, 0}, {1, 0, 0}, {0, 0, 1}})
        H.assert_error(function() F.one_hot(ddpl.tensor({1, -1})) end, 'one_hot', 'non-negative')
        H.assert_error(function() F.one_hot(t, 2) end, 'one_hot', 'smaller than num_classes (2)')
        H.assert_error(function() F.one_hot(ddpl.tensor({1.0})) end, 'one_hot', 'int64')
        H.assert_error(function() F.one_hot(ddpl.zeros(0, {dtype = 'int64'})) end, 'empty')
        assert.are.same({0, 3}, F.one_hot(ddpl.zeros(0, {dtype = 'int64'}), 3):shape())
    end)

    it('pad: argument errors name the problem', function()
        H.assert_error(function() F.pad(x, {1}) end, 'pad', 'divisible by 2')
        H.assert_error(function() F.pad(x, {1, 1, 1, 1, 1, 1}) end, 'pad', 'too large')
        H.assert_error(function() F.pad(x, {1, 1}, {mode = 'mirror'}) end, 'pad', "'mirror'")
        H.assert_error(function() F.pad(x, {4, 0}, {mode = 'reflect'}) end, 'reflect',
                       'too large')
        H.assert_error(function() F.pad(x, {-3, -2}) end, 'pad', 'negative or empty')
        H.assert_error(function() F.pad(ddpl.randn(4), {1, 1}, {mode = 'replicate'}) end,
                       'replicate', '1-D input')
        H.assert_error(function() F.pad(x, {1, 1}, {mode = 'reflect', value = 2}) end,
                       "only used by mode 'constant'")
        H.assert_error(function() F.pad(x, {1.5, 1}) end, 'pad[1]', 'integer')
    end)

    it('group_norm, rms_norm and conv1d check shapes', function()
        H.assert_error(function() F.group_norm(ddpl.randn(2, 6, 3), 4) end, 'group_norm',
                       'divisible by num_groups (4)')
        H.assert_error(function() F.group_norm(ddpl.randn(2, 6), 2, ddpl.ones(5)) end,
                       'group_norm', 'weight', '[6]', '[5]')
        H.assert_error(function() F.rms_norm(ddpl.randn(2, 6), {5}) end, 'rms_norm',
                       'normalized_shape [5]', '[2,6]')
        H.assert_error(function() F.rms_norm(ddpl.randn(2, 6), 6, ddpl.ones(5)) end,
                       'rms_norm', 'weight')
        H.assert_error(function() F.conv1d(ddpl.randn(2, 3, 8), ddpl.randn(4, 2, 3)) end,
                       'conv1d', '3 channels')
        H.assert_error(function() F.conv1d(ddpl.randn(2, 3, 8), ddpl.randn(4, 3, 3, 1)) end,
                       'conv1d', '3-D weight')
        H.assert_error(function() F.conv1d(ddpl.randn(8), ddpl.randn(4, 3, 3)) end,
                       'conv1d', 'input')
        H.assert_error(function()
            F.conv1d(ddpl.randn(2, 3, 8), ddpl.randn(4, 3, 3), nil, {stride = {1, 2}})
        end, 'conv1d', 'stride')
    end)

    it('conv_transpose2d checks shapes and sizes; positional order is PyTorch\'s', function()
        local x, w = ddpl.randn(1, 4, 3, 3), ddpl.randn(4, 3, 2, 2)
        H.assert_close(F.conv_transpose2d(x, w, nil, 2, 0, 1, 1, 1),
                       F.conv_transpose2d(x, w, {stride = 2, output_padding = 1}))
        assert.are.same({1, 3, 7, 7}, F.conv_transpose2d(x, w, nil, 2, 0, 1):shape())
        H.assert_error(function() F.conv_transpose2d(ddpl.randn(1, 3, 3, 3), w) end,
                       'conv_transpose2d', '3 channels', 'expects 4')
        H.assert_error(function() F.conv_transpose2d(x, w, nil, {output_padding = 2}) end,
                       'conv_transpose2d', 'output_padding', 'smaller than either stride')
        H.assert_error(function() F.conv_transpose2d(x, w, nil, {groups = 3}) end,
                       'conv_transpose2d', 'groups=3')
        H.assert_error(function() F.conv_transpose2d(x, w, ddpl.randn(4)) end,
                       'conv_transpose2d', 'bias')
        H.assert_error(function() F.conv_transpose2d(x, w, nil, {padding = 3}) end,
                       'conv_transpose2d', 'empty output')
        H.assert_error(function() F.conv_transpose2d(x, w, nil, {stride = 0}) end,
                       'conv_transpose2d', 'stride')
        H.assert_error(function() F.conv_transpose2d(x:long(), w) end, 'floating point')
        H.assert_error(function() F.conv_transpose2d(x, w, {outpad = 1}) end,
                       "'outpad'")
    end)

    it('conv_transpose2d is the adjoint of conv2d: <conv2d(u, w), v> = <u, conv_t(v, w)>',
       function()
        local u = ddpl.randn(2, 3, 7, 6, {dtype = 'float64'})
        local w = ddpl.randn(4, 3, 3, 2, {dtype = 'float64'})
        local o = {stride = 2, padding = 1, dilation = {1, 2}}
        local cu = F.conv2d(u, w, nil, o)
        local v = ddpl.randn(table.unpack(cu:shape())):double()
        o.output_padding = {0, 1} -- makes the transposed output (7, 6) again
        local tv = F.conv_transpose2d(v, w, nil, o)
        assert.are.same(u:shape(), tv:shape())
        H.assert_close((cu * v):sum(), (u * tv):sum():item(), 1e-12, 1e-10)
    end)

    it('rms_norm of a 16-bit input computes in float32 and returns its dtype', function()
        local h = ddpl.randn(2, 8):to('bfloat16')
        local y = F.rms_norm(h, 8)
        assert.are.equal('bfloat16', H.dtype_name(y.dtype))
        H.assert_close(y:float(), F.rms_norm(h:float(), 8):to('bfloat16'):float(), 0, 0)
    end)
end)

describe('nn layers of issue 16', function()
    it('print as PyTorch', function()
        assert.are.equal('LeakyReLU(negative_slope=0.01)', tostring(nn.LeakyReLU()))
        assert.are.equal('ELU(alpha=1.0)', tostring(nn.ELU()))
        assert.are.equal('Softplus(beta=1, threshold=20)', tostring(nn.Softplus()))
        assert.are.equal('Softmax(dim=None)', tostring(nn.Softmax()))
        assert.are.equal('LogSoftmax(dim=1)', tostring(nn.LogSoftmax(1)))
        assert.are.equal('Conv1d(2, 3, kernel_size=(3,), stride=(1,))',
                         tostring(nn.Conv1d(2, 3, 3)))
        assert.are.equal('GroupNorm(2, 4, eps=1e-05, affine=True)', tostring(nn.GroupNorm(2, 4)))
        assert.are.equal('ConvTranspose2d(2, 3, kernel_size=(3, 3), stride=(2, 2), '
                         .. 'output_padding=(1, 1), bias=False)',
                         tostring(nn.ConvTranspose2d(2, 3, 3, {stride = 2, output_padding = 1,
                                                               bias = false})))
        assert.are.equal('RMSNorm((4,), eps=None, elementwise_affine=True)',
                         tostring(nn.RMSNorm(4)))
        assert.are.equal('KLDivLoss()', tostring(nn.KLDivLoss({reduction = 'batchmean'})))
    end)

    it('Softmax without dim uses PyTorch legacy choice', function()
        local x3 = ddpl.randn(2, 3, 4)
        H.assert_close(nn.Softmax()(x3), F.softmax(x3, 0))
        local x2 = ddpl.randn(2, 3)
        H.assert_close(nn.LogSoftmax()(x2), F.log_softmax(x2, 1))
    end)

    it('initialise as PyTorch: Conv1d kaiming_uniform(a=sqrt(5)), GroupNorm ones/zeros',
       function()
        ddpl.manual_seed(3)
        local c = nn.Conv1d(8, 16, 5)
        local bound = 1 / math.sqrt(8 * 5) -- kaiming_uniform(a=sqrt(5)) and the bias bound
        assert.is_true(c.weight:abs():max():item() <= bound)
        assert.is_true(c.weight:abs():max():item() > 0.9 * bound)
        assert.is_true(c.bias:abs():max():item() <= bound)
        local g = nn.GroupNorm(2, 4)
        H.assert_close(g.weight, {1, 1, 1, 1})
        H.assert_close(g.bias, {0, 0, 0, 0})
        assert.are.same({'weight'}, nn.Module.state_dict_keys(nn.RMSNorm({2, 3}):state_dict()))
        assert.are.same({}, nn.Module.state_dict_keys(nn.GroupNorm(1, 2, {affine = false})
            :state_dict()))
    end)

    it('loss modules keep weights as buffers (state_dict) and check options', function()
        local m = nn.BCEWithLogitsLoss({weight = ddpl.ones(3), pos_weight = ddpl.ones(3) * 2})
        assert.are.same({'weight', 'pos_weight'}, nn.Module.state_dict_keys(m:state_dict()))
        H.assert_error(function() nn.BCELoss({reduction = 'avg'}) end, 'BCELoss', 'reduction')
        H.assert_error(function() nn.BCELoss({weight = 2}) end, 'BCELoss', 'weight', 'tensor')
        H.assert_error(function() nn.HuberLoss({delta = -1}) end, 'HuberLoss', 'delta')
        H.assert_error(function() nn.SmoothL1Loss({bta = 1}) end, 'SmoothL1Loss', "'bta'")
        H.assert_error(function() nn.KLDivLoss({reduction = 'batch'}) end, 'batchmean')
        H.assert_error(function() nn.GroupNorm(3, 4) end, 'GroupNorm', 'divisible')
        H.assert_error(function() nn.Conv1d(3, 4, 3, {groups = 2}) end, 'Conv1d', 'groups')
    end)
end)

describe('nn containers: ModuleDict, ParameterList, ParameterDict', function()
    it('ModuleDict keeps the order of a list of pairs; a map is taken in sorted key order',
       function()
        local d = nn.ModuleDict({{'fc', nn.Linear(2, 3)}, {'act', nn.ReLU()}})
        assert.are.same({'fc', 'act'}, d:keys())
        assert.are.equal(2, #d)
        assert.are.same({'fc.weight', 'fc.bias'}, nn.Module.state_dict_keys(d:state_dict()))
        local m = nn.ModuleDict({b = nn.ReLU(), a = nn.Tanh()})
        assert.are.same({'a', 'b'}, m:keys())
        assert.are.equal('Tanh', m.a.__name)
        m.c = nn.SiLU() -- assignment adds an entry
        assert.are.same({'a', 'b', 'c'}, m:keys())
        assert.is_true(m:contains('c'))
        assert.are.equal('ReLU', m:pop('b').__name)
        assert.is_false(m:contains('b'))
        assert.are.same({'a', 'c'}, m:keys())
        local seen = {}
        for k, v in m:items() do seen[#seen + 1] = k .. '=' .. v.__name end
        assert.are.same({'a=Tanh', 'c=SiLU'}, seen)
        m:update({{'z', nn.Identity()}})
        assert.are.same({'a', 'c', 'z'}, m:keys())
        m:clear()
        assert.are.equal(0, #m)
        H.assert_error(function() m:pop('zz') end, 'ModuleDict', "'zz'")
        H.assert_error(function() nn.ModuleDict({a = 3}) end, 'ModuleDict', "'a'", 'Module')
        H.assert_error(function() nn.ModuleDict({{'keys', nn.ReLU()}}) end, "'keys'")
        H.assert_error(function() d(ddpl.ones(2)) end, 'no forward')
    end)

    it('ParameterList names its parameters 0, 1, ... and makes tensors parameters', function()
        local l = nn.ParameterList({ddpl.ones(2), nn.Parameter(ddpl.zeros(3))})
        l:append(ddpl.ones(4))
        assert.are.equal(3, #l)
        assert.are.same({'0', '1', '2'}, nn.Module.state_dict_keys(l:state_dict()))
        assert.is_true(nn.Parameter.is(l[0]) and l[0].requires_grad)
        assert.are.same({4}, l[-1]:shape())
        assert.are.equal(3, #l:parameters())
        H.assert_error(function() return l[3] end, 'ParameterList', 'out of range')
        H.assert_error(function() nn.ParameterList({1}) end, 'ParameterList', 'element 1')
        local n = 0
        for i, p in l:iter() do n = n + 1; assert.are.equal(l[i], p) end
        assert.are.equal(3, n)
    end)

    it('ParameterDict registers under its keys; a model using it trains them', function()
        local d = nn.ParameterDict({scale = ddpl.ones(3), shift = ddpl.zeros(3)})
        assert.are.same({'scale', 'shift'}, nn.Module.state_dict_keys(d:state_dict()))
        local x = ddpl.randn(2, 3)
        local out = (x * d.scale + d.shift):sum()
        out:backward()
        H.assert_close(d.shift.grad, {2, 2, 2})
        H.assert_error(function() nn.ParameterDict({a = 'x'}) end, 'ParameterDict', 'tensor')
    end)
end)
