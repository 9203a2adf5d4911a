-- spec/nn/nn_modules_spec.lua: nn.Module, the layers, losses, nn.init and nn.utils.
-- PyTorch reference values come from spec/fixtures/nn_modules.lua (tools/gen_nn_fixtures.py).
local H = require 'helpers'
local ddpl = H.ddpl
local nn = ddpl.nn
local F = ddpl.F

-- A fixture module description -> the module.
local function build(desc)
    if desc.children then
        local kids = {}
        for i, c in ipairs(desc.children) do kids[i] = build(c) end
        return nn[desc.ctor](table.unpack(kids))
    end
    if desc.entries then -- ModuleDict, ParameterDict: {key, module spec or tensor} pairs
        local pairs_ = {}
        for i, e in ipairs(desc.entries) do
            pairs_[i] = {e[1], e[2].shape and H.tensor(e[2]) or build(e[2])}
        end
        return nn[desc.ctor](pairs_)
    end
    local args = {}
    for i, a in ipairs(desc.args or {}) do
        if type(a) == 'table' and not a.shape and next(a) and a[1] == nil then
            local opts = {}
            for k, v in pairs(a) do
                opts[k] = type(v) == 'table' and v.shape and H.tensor(v) or v
            end
            a = opts
        elseif type(a) == 'table' and type(a[1]) == 'table' and a[1].shape then
            local list = {} -- a ParameterList's tensors
            for j, t in ipairs(a) do list[j] = H.tensor(t) end
            a = list
        end
        args[i] = a
    end
    return nn[desc.ctor](table.unpack(args, 1, #(desc.args or {})))
end

local function keys_of(pairs_list)
    local out = {}
    for i, p in ipairs(pairs_list) do out[i] = p[1] end
    return out
end

local function sd_keys(sd)
    return nn.Module.state_dict_keys(sd)
end

local function mlp()
    return nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(),
                         nn.Linear(256, 10))
end

local function cnn()
    return nn.Sequential(nn.Conv2d(1, 32, 3, {padding = 1}), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(32, 64, 3, {padding = 1}), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Flatten(), nn.Linear(3136, 128), nn.ReLU(), nn.Linear(128, 10))
end

-- A user model as in PyTorch tutorials.
local Net = nn.Module:extend('Net')
function Net:init(hidden)
    self.fc1 = nn.Linear(6, hidden or 5)
    self.act = nn.ReLU()
    self.drop = nn.Dropout(0.5)
    self.bn = nn.BatchNorm1d(hidden or 5)
    self.fc2 = nn.Linear(hidden or 5, 3)
    self.scale = nn.Parameter(ddpl.ones(1))
    self:register_buffer('steps', ddpl.zeros(1))
end
function Net:forward(x)
    return self.fc2(self.drop(self.act(self.bn(self.fc1(x))))) * self.scale
end

describe('nn modules against PyTorch (fixture)', function()
    for _, c in ipairs(H.fixture('nn_modules')) do
        it(c.name, function()
            local m = build(c.module)
            assert.are.equal(table.concat(c.repr, '\n'), tostring(m))
            assert.are.same(keys_of(c.state), sd_keys(m:state_dict()))
            local sd = {}
            for _, kv in ipairs(c.state) do sd[kv[1]] = H.tensor(kv[2]) end
            m:load_state_dict(sd)
            for k, v in pairs(m:state_dict()) do -- the shapes too (load_state_dict checks them)
                assert.are.same(H.shape(sd[k]), H.shape(v), k)
            end
            if not c.inputs then return end -- a container: names, shapes and printed form
            m:train(c.train)
            local ins = {}
            for i, e in ipairs(c.inputs) do
                local rg = c.input_grads ~= nil and c.input_grads[i] ~= nil
                ins[i] = H.tensor(e, {requires_grad = rg})
            end
            local out = m(table.unpack(ins))
            H.assert_close(out, c.output, c.rtol, c.atol, c.name .. ': output')
            if c.grad_out then
                out:backward(H.tensor(c.grad_out))
                for i, e in pairs(c.input_grads) do
                    H.assert_close(ins[i].grad, e, c.rtol, c.atol, c.name .. ': input grad ' .. i)
                end
                local named = {}
                for name, p in m:named_parameters() do named[#named + 1] = {name, p} end
                assert.are.same(keys_of(c.param_grads), keys_of(named))
                for i, kv in ipairs(c.param_grads) do
                    H.assert_close(named[i][2].grad, kv[2], c.rtol, c.atol, c.name .. ': grad of '
                                   .. kv[1])
                end
            end
            local after = m:state_dict()
            for _, kv in ipairs(c.state_after) do
                H.assert_close(after[kv[1]], kv[2], c.rtol, c.atol, c.name .. ': ' .. kv[1]
                               .. ' after the forward')
            end
        end)
    end
end)

describe('nn.Module registration', function()
    it('registers parameters, buffers and children in assignment order', function()
        local net = Net()
        assert.are.same({'scale', 'fc1.weight', 'fc1.bias', 'bn.weight', 'bn.bias', 'fc2.weight',
                         'fc2.bias'}, keys_of(net:named_parameters()))
        -- PyTorch lists a module's own parameters before its children's; parameters() agrees
        local ps = net:parameters()
        assert.are.equal(7, #ps)
        assert.is_true(rawequal(ps[1], net.scale))
        assert.is_true(rawequal(ps[2], net.fc1.weight))
        assert.are.same({'steps', 'bn.running_mean', 'bn.running_var', 'bn.num_batches_tracked'},
                        keys_of(net:named_buffers()))
        assert.are.same({'fc1', 'act', 'drop', 'bn', 'fc2'}, keys_of(net:named_children()))
        assert.are.equal(6, #net:modules())
        assert.are.equal('', net:named_modules()[1][1])
        assert.is_true(net.scale.requires_grad)
        assert.is_false(net.steps.requires_grad)
    end)

    it('named lists work in a for loop and as sequences', function()
        local net = Net()
        local names = {}
        for name, p in net:named_parameters() do
            assert.is_true(ddpl.is_tensor(p))
            names[#names + 1] = name
        end
        assert.are.same(keys_of(net:named_parameters()), names)
    end)

    it('re-assignment keeps the place; plain values and nil behave as in PyTorch', function()
        local net = Net()
        net.fc1 = nn.Linear(6, 5, {bias = false})
        assert.are.same({'fc1', 'act', 'drop', 'bn', 'fc2'}, keys_of(net:named_children()))
        assert.are.equal(6, #net:parameters())
        net.note = 'plain value'
        assert.are.equal('plain value', net.note)
        net.note = nn.Identity() -- a module assigned over a plain value is registered
        assert.are.equal('note', net:named_children()[6][1])
        H.assert_error(function() net.scale = ddpl.ones(1) end, "parameter 'scale'", 'nn.Parameter')
        net.scale = nil
        assert.is_nil(net.scale)
        assert.are.equal(5, #net:parameters())
        H.assert_error(function() net.fc2 = 3 end, "child module 'fc2'")
        H.assert_error(function() net:register_buffer('a.b', ddpl.zeros(1)) end, "'.'")
        H.assert_error(function() net:register_buffer('forward', ddpl.zeros(1)) end,
                       "'forward' is already a method")
        H.assert_error(function() net:register_parameter('p', ddpl.zeros(1)) end,
                       'register_parameter', 'nn.Parameter')
    end)

    it('shared modules and parameters are listed once', function()
        local lin = nn.Linear(3, 3)
        local seq = nn.Sequential(lin, nn.ReLU(), lin)
        assert.are.equal(2, #seq:parameters())
        assert.are.equal(3, #seq:modules())
        assert.are.equal(3, #seq)
    end)

    it('non-persistent buffers stay out of the state dict', function()
        local m = nn.Module()
        m:register_buffer('kept', ddpl.zeros(2))
        m:register_buffer('scratch', ddpl.zeros(2), {persistent = false})
        assert.are.same({'kept'}, sd_keys(m:state_dict()))
        assert.are.equal(2, #m:buffers())
    end)

    it('a subclass of a layer inherits and can extend it', function()
        local Scaled = nn.Linear:extend('ScaledLinear')
        function Scaled:init(i, o) nn.Linear.init(self, i, o); self.k = 2 end
        function Scaled:forward(x) return nn.Linear.forward(self, x) * self.k end
        local m = Scaled(4, 2)
        local x = ddpl.randn(3, 4)
        H.assert_close(m(x), F.linear(x, m.weight, m.bias) * 2)
        assert.are.equal('ScaledLinear(in_features=4, out_features=2, bias=True)', tostring(m))
    end)

    it('bad constructor arguments name the class and the value', function()
        H.assert_error(function() nn.Linear(3, 4, {biass = false}) end, 'Linear', "'biass'")
        -- reported at the caller's line, not inside the library
        H.assert_error(function() nn.Linear(-1, 4) end, 'nn_modules_spec.lua:', 'Linear', 'in_features',
                       '-1')
        H.assert_error(function() nn.Conv2d(3, 4, 3, {groups = 2}) end, 'Conv2d', 'groups')
        H.assert_error(function() nn.Dropout(1.5) end, 'Dropout', '1.5')
        H.assert_error(function() nn.Sequential(nn.ReLU(), 3) end, 'Sequential', 'argument 2')
        H.assert_error(function() nn.BatchNorm2d(3)(ddpl.randn(2, 3)) end, 'BatchNorm2d', '4-D',
                       '[2,3]')
        H.assert_error(function() nn.Module()(ddpl.ones(1)) end, 'forward is not defined')
    end)

    it('nn.parallel is available (DDP itself: ddp_spec.lua)', function()
        assert.are.equal(nn.DDP, nn.parallel.DistributedDataParallel)
    end)
end)

describe('nn.Module state dicts', function()
    it('round trip: load into a different instance gives equal outputs', function()
        ddpl.manual_seed(1)
        local a, b = Net(), Net()
        a:train()
        a(ddpl.randn(8, 6)) -- moves the BatchNorm running statistics
        a:eval(); b:eval()
        local x = ddpl.randn(4, 6)
        local sd = a:state_dict()
        assert.are.same({'scale', 'steps', 'fc1.weight', 'fc1.bias', 'bn.weight', 'bn.bias',
                         'bn.running_mean', 'bn.running_var', 'bn.num_batches_tracked',
                         'fc2.weight', 'fc2.bias'}, sd_keys(sd))
        assert.is_false(sd['fc1.weight'].requires_grad)
        assert.are.equal('int64', sd['bn.num_batches_tracked'].dtype)
        local w = b.fc1.weight
        local res = b:load_state_dict(sd)
        assert.are.same({}, res.missing_keys)
        assert.is_true(rawequal(w, b.fc1.weight)) -- copied into, not replaced
        H.assert_close(b(x), a(x))
        assert.are.equal(1, b.bn.num_batches_tracked:item())
    end)

    it('strict loading lists missing and unexpected keys in one error, changing nothing', function()
        local a, b = Net(), Net()
        local sd = a:state_dict()
        sd['fc2.bias'] = nil
        sd['extra.weight'] = ddpl.zeros(1)
        local before = b.fc1.weight:clone()
        H.assert_error(function() b:load_state_dict(sd) end, 'Net', 'missing', '"fc2.bias"',
                       'unexpected', '"extra.weight"')
        H.assert_close(b.fc1.weight, before)
        local res = b:load_state_dict(sd, {strict = false})
        assert.are.same({'fc2.bias'}, res.missing_keys)
        assert.are.same({'extra.weight'}, res.unexpected_keys)
        H.assert_close(b.fc1.weight, a.fc1.weight)
    end)

    it('a shape mismatch names the key and both shapes', function()
        local sd = Net(7):state_dict()
        H.assert_error(function() Net():load_state_dict(sd) end, 'fc1.weight', '[7,6]', '[5,6]')
    end)

    it('pairs visits a state dict in order, then keys added later', function()
        local sd = nn.Linear(2, 2):state_dict()
        sd.extra = ddpl.zeros(1)
        local seen = {}
        for k in pairs(sd) do seen[#seen + 1] = k end
        assert.are.same({'weight', 'bias', 'extra'}, seen)
    end)
end)

describe('nn.Module modes and conversions', function()
    it('train and eval switch Dropout and BatchNorm', function()
        ddpl.manual_seed(2)
        local net = Net()
        assert.is_true(net.training and net.fc1.training)
        local x = ddpl.randn(16, 6)
        local d = nn.Dropout(0.5)
        local y = d(ddpl.ones(1000))
        local zeros = y:eq(0):sum():item()
        assert.is_true(zeros > 400 and zeros < 600)
        H.assert_close(y:sum(), 1000, 0.15)
        assert.are.equal(net, net:eval())
        assert.is_false(net.training or net.bn.training or net.drop.training)
        H.assert_close(net.drop(x), x)
        local rm = net.bn.running_mean:clone()
        local y1 = net(x)
        H.assert_close(net.bn.running_mean, rm) -- eval: running stats untouched
        H.assert_close(net(x), y1)               -- and deterministic
        net:train()
        net(x)
        assert.are.equal(1, net.bn.num_batches_tracked:item())
        assert.is_true((net.bn.running_mean - rm):abs():sum():item() > 0)
        H.assert_error(function() net:train('yes') end, 'train', 'boolean')
    end)

    it("to('float64') converts in place, keeping the parameter objects", function()
        local net = Net()
        net.fc1.weight.grad = ddpl.ones(5, 6)
        local held = net:parameters()
        assert.are.equal(net, net:to('float64'))
        local now = net:parameters()
        for i = 1, #held do
            assert.is_true(rawequal(held[i], now[i]))
            assert.are.equal('float64', held[i].dtype)
            assert.is_true(held[i].requires_grad)
            assert.is_true(held[i]:is_leaf())
        end
        assert.are.equal('float64', net.fc1.weight.grad.dtype)
        assert.are.equal('float64', net.bn.running_mean.dtype)
        assert.are.equal('int64', net.bn.num_batches_tracked.dtype)
        local y = net(ddpl.randn(4, 6, {dtype = 'float64'}))
        assert.are.equal('float64', y.dtype)
        y:sum():backward()
        assert.are.equal('float64', held[2].grad.dtype)
        net:float()
        assert.are.equal('float32', held[1].dtype)
        H.assert_error(function() net:to('int64') end, 'floating point')
    end)

    it('zero_grad drops gradients (or zeroes them with set_to_none=false)', function()
        local net = Net()
        net(ddpl.randn(4, 6)):sum():backward()
        assert.is_not_nil(net.fc1.weight.grad)
        net:zero_grad({set_to_none = false})
        H.assert_close(net.fc1.weight.grad:abs():sum(), 0)
        net:zero_grad()
        for _, p in ipairs(net:parameters()) do assert.is_nil(p.grad) end
        assert.has_error(function() net:zero_grad(0) end,
            'zero_grad: expected a boolean or {set_to_none = boolean}, got number')
    end)

    it('apply visits children before their parent and returns the module', function()
        local seq = nn.Sequential(nn.Linear(2, 2), nn.Sequential(nn.ReLU(), nn.Tanh()))
        local order = {}
        assert.are.equal(seq, seq:apply(function(m) order[#order + 1] = m.__name end))
        assert.are.same({'Linear', 'ReLU', 'Tanh', 'Sequential', 'Sequential'}, order)
        seq:apply(function(m) if m.__name == 'Linear' then nn.init.zeros_(m.weight) end end)
        H.assert_close(seq[0].weight:abs():sum(), 0)
    end)

    it('requires_grad_ freezes and unfreezes the parameters', function()
        local net = Net()
        assert.are.equal(net.fc1, net.fc1:requires_grad_(false))
        assert.is_false(net.fc1.weight.requires_grad or net.fc1.bias.requires_grad)
        assert.is_true(net.fc2.weight.requires_grad)
        net(ddpl.randn(4, 6)):sum():backward()
        assert.is_nil(net.fc1.weight.grad)
        assert.is_not_nil(net.fc2.weight.grad)
        net:requires_grad_()
        assert.is_true(net.fc1.weight.requires_grad)
    end)

    it('num_parameters counts like PyTorch', function()
        assert.are.equal(269322, mlp():num_parameters())
        assert.are.equal(421642, cnn():num_parameters())
    end)
end)

describe('nn.Module printing and error locations', function()
    it('tostring matches PyTorch for a user model', function()
        local M = nn.Module:extend('MLP')
        function M:init()
            self.fc1 = nn.Linear(784, 256)
            self.fc2 = nn.Linear(256, 10, {bias = false})
            self.body = nn.Sequential(nn.Dropout(0.1), nn.GELU())
        end
        assert.are.equal(table.concat({
            'MLP(',
            '  (fc1): Linear(in_features=784, out_features=256, bias=True)',
            '  (fc2): Linear(in_features=256, out_features=10, bias=False)',
            '  (body): Sequential(',
            '    (0): Dropout(p=0.1, inplace=False)',
            "    (1): GELU(approximate='none')",
            '  )',
            ')'}, '\n'), tostring(M()))
    end)

    it('repr of numbers follows Python', function()
        local R = nn.Module.repr
        assert.are.same({'1e-05', '0.1', '100.0', '1.5e+16', '(3, 3)', '(64,)', 'True', "'x'"},
                        {R(1e-5), R(0.1), R(100.0), R(1.5e16), R({3, 3}), R({64}), R(true), R('x')})
    end)

    it("a child's error is rethrown with its location", function()
        local seq = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(5, 2))
        H.assert_error(function() seq(ddpl.randn(2, 4)) end, 'In module 2 (Linear) of Sequential:',
                       'linear:', '[2,3]')
        local net = Net()
        H.assert_error(function() net(ddpl.randn(2, 4)) end, 'in Net.fc1 (Linear): linear:')
        local Outer = nn.Module:extend('Outer')
        function Outer:init() self.inner = nn.Sequential(nn.Identity(), nn.Linear(3, 3)) end
        function Outer:forward(x) return self.inner(x) end
        local msg = H.assert_error(function() Outer()(ddpl.randn(2, 2)) end,
                                   'In module 1 (Linear) of Outer.inner:')
        local first = msg:find('In module', 1, true)
        assert.is_nil(msg:find('In module', first + 1, true)) -- located once, not at every level
        -- at the line that called the outermost module, not at a line of a layer file
        assert.truthy(msg:find('^[^\n]*nn_modules_spec%.lua:%d+: In module'), msg)
        -- an error in the called module itself is left as it is, at the caller's line too
        msg = H.assert_error(function() nn.Linear(4, 3)(ddpl.randn(2, 5)) end, 'linear:')
        assert.truthy(msg:find('^[^\n]*nn_modules_spec%.lua:%d+: linear:'), msg)
        assert.is_nil(msg:find('Linear.lua', 1, true), msg)
    end)
end)

describe('default initialisation', function()
    it('Linear and Conv2d use U(-1/sqrt(fan_in), 1/sqrt(fan_in))', function()
        ddpl.manual_seed(3)
        local lin = nn.Linear(784, 256)
        local bound = 1 / math.sqrt(784)
        assert.is_true(lin.weight:abs():max():item() <= bound)
        assert.is_true(lin.weight:abs():max():item() > 0.95 * bound)
        assert.is_true(math.abs(lin.weight:mean():item()) < 0.02 * bound)
        H.assert_close(lin.weight:std(), bound / math.sqrt(3), 0.02)
        assert.is_true(lin.bias:abs():max():item() <= bound)
        local conv = nn.Conv2d(16, 32, 3)
        local cb = 1 / math.sqrt(16 * 9)
        assert.is_true(conv.weight:abs():max():item() <= cb)
        assert.is_true(conv.weight:abs():max():item() > 0.95 * cb)
        assert.is_true(conv.bias:abs():max():item() <= cb)
    end)

    it('Embedding is N(0, 1), norms are ones and zeros, and manual_seed reproduces', function()
        ddpl.manual_seed(4)
        local e = nn.Embedding(1000, 64)
        assert.is_true(math.abs(e.weight:mean():item()) < 0.02)
        H.assert_close(e.weight:std(), 1, 0.02)
        local bn, ln = nn.BatchNorm2d(4), nn.LayerNorm(4)
        H.assert_close(bn.weight, {1, 1, 1, 1})
        H.assert_close(ln.bias, {0, 0, 0, 0})
        ddpl.manual_seed(5)
        local a = nn.Linear(3, 3)
        ddpl.manual_seed(5)
        local b = nn.Linear(3, 3)
        H.assert_close(a.weight, b.weight, 0, 0)
    end)

    it('nn.init follows torch.nn.init formulas', function()
        local init = nn.init
        ddpl.manual_seed(6)
        assert.are.equal(math.sqrt(2), init.calculate_gain('relu'))
        assert.are.equal(5 / 3, init.calculate_gain('tanh'))
        assert.is_true(math.abs(init.calculate_gain('leaky_relu', math.sqrt(5)) - math.sqrt(1 / 3))
                       < 1e-12)
        local w = ddpl.empty(200, 100)
        assert.are.equal(w, init.xavier_uniform_(w, {gain = 2}))
        local xb = 2 * math.sqrt(6 / 300)
        assert.is_true(w:abs():max():item() <= xb and w:abs():max():item() > 0.95 * xb)
        init.kaiming_uniform_(w, 0, 'fan_out', 'relu')
        local kb = math.sqrt(2) * math.sqrt(3 / 200)
        assert.is_true(w:abs():max():item() <= kb and w:abs():max():item() > 0.95 * kb)
        init.kaiming_normal_(w)
        H.assert_close(w:std(), math.sqrt(2 / 100), 0.05)
        init.normal_(w, 3, 0.5)
        H.assert_close(w:mean(), 3, 0.01)
        init.uniform_(w, {a = 2, b = 3})
        assert.is_true(w:min():item() >= 2 and w:max():item() <= 3)
        local p = nn.Parameter(ddpl.empty(3)) -- in place on a parameter works (no autograd)
        H.assert_close(init.ones_(p), {1, 1, 1})
        H.assert_close(init.constant_(p, 0.5), {0.5, 0.5, 0.5})
        H.assert_close(init.zeros_(p), {0, 0, 0})
        H.assert_error(function() init.xavier_uniform_(ddpl.empty(3)) end, 'fewer than 2')
        H.assert_error(function() init.kaiming_uniform_(w, {mode = 'fan'}) end, 'mode', 'fan')
    end)
end)

describe('layers equal their functional form', function()
    it('each layer forward is the F call with its own weights', function()
        ddpl.manual_seed(7)
        local x4 = ddpl.randn(2, 3, 8, 8)
        local conv = nn.Conv2d(3, 4, 3, {stride = 2, padding = 1})
        H.assert_close(conv(x4), F.conv2d(x4, conv.weight, conv.bias, {stride = 2, padding = 1}))
        H.assert_close(nn.MaxPool2d(2)(x4), F.max_pool2d(x4, 2))
        H.assert_close(nn.AvgPool2d(2, {stride = 1})(x4), F.avg_pool2d(x4, 2, 1))
        H.assert_close(nn.AdaptiveAvgPool2d(1)(x4), F.adaptive_avg_pool2d(x4, 1))
        local bn = nn.BatchNorm2d(3):eval()
        H.assert_close(bn(x4), F.batch_norm(x4, bn.running_mean, bn.running_var, bn.weight,
                                            bn.bias))
        local x = ddpl.randn(5, 6)
        local lin = nn.Linear(6, 4)
        H.assert_close(lin(x), F.linear(x, lin.weight, lin.bias))
        local ln = nn.LayerNorm(6)
        H.assert_close(ln(x), F.layer_norm(x, {6}, ln.weight, ln.bias))
        local emb = nn.Embedding(7, 3)
        local ids = ddpl.tensor({{1, 6}, {0, 1}}, {dtype = 'int64'})
        H.assert_close(emb(ids), F.embedding(ids, emb.weight))
        for name, f in pairs({ReLU = F.relu, GELU = F.gelu, SiLU = F.silu, Tanh = F.tanh,
                              Sigmoid = F.sigmoid}) do
            H.assert_close(nn[name]()(x), f(x), nil, nil, name)
        end
        H.assert_close(nn.Flatten()(x4), x4:reshape(2, 192))
        assert.are.equal(x, nn.Identity(3, {any = true})(x))
        local y = ddpl.tensor({0, 3, 1, 2, 5}, {dtype = 'int64'})
        H.assert_close(nn.CrossEntropyLoss({label_smoothing = 0.2})(x, y),
                       F.cross_entropy(x, y, {label_smoothing = 0.2}))
        H.assert_close(nn.NLLLoss()(x:log_softmax(1), y), F.nll_loss(x:log_softmax(1), y))
        H.assert_close(nn.MSELoss({reduction = 'sum'})(x, x * 0.5),
                       F.mse_loss(x, x * 0.5, {reduction = 'sum'}))
    end)

    it('ModuleList registers its elements and indexes from 0', function()
        local list = nn.ModuleList({nn.Linear(2, 2), nn.ReLU()})
        list:append(nn.Linear(2, 1))
        assert.are.equal(3, #list)
        assert.are.equal('ReLU', list[1].__name)
        assert.are.equal('Linear', list[-1].__name)
        assert.are.same({'0.weight', '0.bias', '2.weight', '2.bias'},
                        keys_of(list:named_parameters()))
        local x = ddpl.randn(3, 2)
        for _, m in list:iter() do x = m(x) end
        assert.are.same({3, 1}, x:shape())
        H.assert_error(function() list(x) end, 'ModuleList', 'no forward')
        H.assert_error(function() return list[3] end, 'out of range')
    end)
end)

describe('module gradients', function()
    -- gradcheck perturbs copies of its inputs, so this checks the input gradient; parameter
    -- gradients are compared with PyTorch's in the fixture cases above
    it('of the input agree with finite differences in float64', function()
        ddpl.manual_seed(9)
        local cases = {
            {nn.Linear(3, 2), {4, 3}},
            {nn.Conv2d(2, 2, 3, {padding = 1, stride = 2}), {1, 2, 5, 5}},
            {nn.BatchNorm2d(2), {3, 2, 2, 2}},
            {nn.LayerNorm(3), {2, 3}},
            {nn.Sequential(nn.Linear(3, 4), nn.GELU(), nn.Linear(4, 2), nn.Tanh()), {2, 3}},
        }
        for _, c in ipairs(cases) do
            local m = c[1]:double()
            local x = ddpl.randn(c[2], {dtype = 'float64', requires_grad = true})
            local ok = ddpl.autograd.gradcheck(function(a) return m(a) end, {x})
            assert.is_true(ok, m.__name)
        end
    end)
end)

describe('nn.utils.clip_grad_norm_', function()
    it('returns the total norm before clipping and scales the gradients to max_norm', function()
        local a = nn.Parameter(ddpl.zeros(2))
        local b = nn.Parameter(ddpl.zeros(2, 2))
        local c = nn.Parameter(ddpl.zeros(3)) -- no gradient: ignored
        a.grad = ddpl.tensor({3.0, 4.0})
        b.grad = ddpl.tensor({{12.0, 0.0}, {0.0, 0.0}})
        local total = nn.utils.clip_grad_norm_({a, b, c}, 6.5)
        H.assert_close(total, 13) -- sqrt(9 + 16 + 144)
        local s = 6.5 / (13 + 1e-6)
        H.assert_close(a.grad, {3 * s, 4 * s})
        H.assert_close(b.grad, {{12 * s, 0}, {0, 0}})
        -- below max_norm nothing changes
        H.assert_close(nn.utils.clip_grad_norm_({a, b}, 100), 6.5, 1e-5)
        H.assert_close(a.grad, {3 * s, 4 * s})
        -- other orders and a single tensor
        a.grad = ddpl.tensor({3.0, -4.0})
        H.assert_close(nn.utils.clip_grad_norm_(a, 1, {norm_type = math.huge}), 4)
        H.assert_close(a.grad, {0.75, -1}, 1e-5)
        a.grad = ddpl.tensor({0 / 0, 1.0})
        H.assert_error(function()
            nn.utils.clip_grad_norm_(a, 1, {error_if_nonfinite = true})
        end, 'clip_grad_norm_', 'nan')
        H.assert_error(function() nn.utils.clip_grad_norm_({a, 3}, 1) end, 'element 2')
    end)
end)

describe('training', function()
    it('a small Sequential learns a toy problem', function()
        ddpl.manual_seed(8)
        local x = ddpl.randn(64, 2)
        local y = (x:select(1, 0) * x:select(1, 1)):gt(0):long() -- XOR of the signs
        local net = nn.Sequential(nn.Linear(2, 16), nn.Tanh(), nn.Linear(16, 2))
        local loss_fn = nn.CrossEntropyLoss()
        local first, last
        for step = 1, 150 do
            net:zero_grad()
            local loss = loss_fn(net(x), y)
            loss:backward()
            nn.utils.clip_grad_norm_(net:parameters(), 5)
            ddpl.no_grad(function()
                for _, p in ipairs(net:parameters()) do p:add_(p.grad, -0.5) end
            end)
            first = first or loss:item()
            last = loss:item()
        end
        assert.is_true(last < 0.5 * first, string.format('loss %g -> %g', first, last))
    end)
end)
