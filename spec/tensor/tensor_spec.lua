-- spec/tensor/tensor_spec.lua: tensors as API.md describes them, with PyTorch's semantics: creation
-- functions and their options, seeding, shape methods, views that share storage, conversions,
-- item/tolist, in-place ops (values, and that they return the tensor itself), and dtype
-- promotion of binary ops against PyTorch's table (spec/fixtures/promotion.lua).
local H = require 'helpers'
local ddpl = H.ddpl

local function dt(x) return H.dtype_name(x.dtype) end

describe('creation', function()
    it('ddpl.tensor infers dtype and shape like torch.tensor', function()
        local s = ddpl.tensor(2.5)
        assert.are.equal(0, s:dim())
        assert.are.equal('float32', dt(s))
        assert.are.equal(2.5, s:item())
        local f = ddpl.tensor({{1.5, 2}, {3, 4}})
        assert.are.same({2, 2}, H.shape(f))
        assert.are.equal('float32', dt(f))
        local i = ddpl.tensor({1, 2, 3})
        assert.are.equal('int64', dt(i))
        assert.are.equal('bool', dt(ddpl.tensor({true, false})))
        assert.are.same({true, false}, ddpl.tensor({true, false}):tolist())
    end)

    it('ddpl.tensor takes dtype, device and requires_grad options', function()
        local x = ddpl.tensor({1, 2}, {dtype = 'float64', device = 'cpu', requires_grad = true})
        assert.are.equal('float64', dt(x))
        assert.are.equal('cpu', tostring(x.device))
        assert.is_true(x.requires_grad)
        H.assert_close(x, {1, 2})
    end)

    it('ddpl.tensor refuses ragged tables', function()
        H.assert_error(function() return ddpl.tensor({{1, 2}, {3}}) end, 'tensor')
    end)

    it('zeros, ones and empty take sizes or a table, and options', function()
        local z = ddpl.zeros(2, 3)
        assert.are.same({2, 3}, H.shape(z))
        assert.are.equal('float32', dt(z))
        H.assert_close(z, {0, 0, 0, 0, 0, 0})
        local o = ddpl.ones({3, 1}, {dtype = 'int64'})
        assert.are.same({3, 1}, H.shape(o))
        assert.are.equal('int64', dt(o))
        assert.are.same({{1}, {1}, {1}}, o:tolist())
        local e = ddpl.empty(4, 2, {dtype = 'float64'})
        assert.are.same({4, 2}, H.shape(e))
        assert.are.equal('float64', dt(e))
        assert.are.equal(0, ddpl.zeros({}):dim())
    end)

    it('full takes its dtype from the value unless given', function()
        local f = ddpl.full({2, 2}, 1.5)
        assert.are.equal('float32', dt(f))
        H.assert_close(f, {1.5, 1.5, 1.5, 1.5})
        assert.are.equal('int64', dt(ddpl.full({2}, 7)))
        assert.are.equal('float64', dt(ddpl.full({2}, 7, {dtype = 'float64'})))
    end)

    it('eye is the identity', function()
        H.assert_close(ddpl.eye(3), {1, 0, 0, 0, 1, 0, 0, 0, 1})
        assert.are.equal('float64', dt(ddpl.eye(2, {dtype = 'float64'})))
    end)

    it('arange is half-open, with PyTorch dtypes', function()
        local a = ddpl.arange(5)
        assert.are.equal('int64', dt(a))
        assert.are.same({0, 1, 2, 3, 4}, a:tolist())
        assert.are.same({1, 2, 3}, ddpl.arange(1, 4):tolist())
        assert.are.same({0, 3, 6, 9}, ddpl.arange(0, 10, 3):tolist())
        assert.are.same({5, 3, 1}, ddpl.arange(5, 0, -2):tolist())
        local f = ddpl.arange(0, 1, 0.25)
        assert.are.equal('float32', dt(f))
        H.assert_close(f, {0, 0.25, 0.5, 0.75}, 0, 0)
        assert.are.equal('float32', dt(ddpl.arange(5.0)))
        assert.are.equal('float64', dt(ddpl.arange(3, {dtype = 'float64'})))
    end)

    it('rand is uniform in [0, 1) and randn is standard normal', function()
        ddpl.manual_seed(0)
        local n = 20000
        local u = ddpl.rand(n)
        assert.are.equal('float32', dt(u))
        assert.is_true(u:min():item() >= 0 and u:max():item() < 1)
        assert.is_true(math.abs(u:mean():item() - 0.5) < 0.01)
        local g = ddpl.randn(n, {dtype = 'float64'})
        assert.are.equal('float64', dt(g))
        assert.is_true(math.abs(g:mean():item()) < 0.04)
        assert.is_true(math.abs(g:std():item() - 1) < 0.03)
        assert.are.same({2, 3, 4}, H.shape(ddpl.randn(2, 3, 4)))
    end)

    it('randint draws int64 values in [low, high)', function()
        local r = ddpl.randint(-3, 4, {1000})
        assert.are.equal('int64', dt(r))
        assert.are.equal(-3, r:min():item())
        assert.are.equal(3, r:max():item())
        assert.are.same({2, 5}, H.shape(ddpl.randint(0, 2, {2, 5})))
    end)

    it('randperm is an int64 permutation', function()
        local p = ddpl.randperm(50)
        assert.are.equal('int64', dt(p))
        local seen = {}
        for _, v in ipairs(p:tolist()) do seen[v] = true end
        for i = 0, 49 do assert.is_true(seen[i], 'missing ' .. i) end
    end)

    it('manual_seed makes every generator reproducible', function()
        local function draw()
            return {H.values(ddpl.rand(5)), H.values(ddpl.randn(5)), H.values(ddpl.randperm(8)),
                    H.values(ddpl.randint(0, 100, {5})), H.values(ddpl.zeros(5):uniform_(-1, 1))}
        end
        ddpl.manual_seed(42)
        local a = draw()
        ddpl.manual_seed(42)
        local b = draw()
        assert.are.same(a, b)
        ddpl.manual_seed(43)
        local c = draw()
        assert.are_not.same(a[1], c[1])
        assert.are_not.same(a[2], c[2])
    end)

    it('*_like functions copy shape and dtype, options override', function()
        local x = ddpl.zeros(2, 3, {dtype = 'float64'})
        for _, f in ipairs({'zeros_like', 'ones_like', 'rand_like', 'randn_like'}) do
            local y = ddpl[f](x)
            assert.are.same({2, 3}, H.shape(y), f)
            assert.are.equal('float64', dt(y), f)
        end
        H.assert_close(ddpl.ones_like(x), {1, 1, 1, 1, 1, 1})
        assert.are.equal('float32', dt(ddpl.zeros_like(x, {dtype = 'float32'})))
    end)

    it('unknown dtypes and devices raise', function()
        H.assert_error(function() return ddpl.zeros(2, {dtype = 'float8'}) end, 'float8')
        H.assert_error(function() return ddpl.zeros(2, {device = 'tpu'}) end, 'tpu')
    end)
end)

describe('shape methods', function()
    local x
    before_each(function() x = ddpl.zeros(2, 3, 4) end)

    it('size, shape, dim, numel and #x', function()
        assert.are.equal(3, x:size(1))
        assert.are.equal(4, x:size(-1))
        assert.are.same({2, 3, 4}, H.shape(x))
        assert.are.equal(x:size(0), x:shape()[1])
        assert.are.equal(3, x:dim())
        assert.are.equal(24, x:numel())
        assert.are.equal(2, #x)
        local s = x:size()
        assert.are.equal(3, s[2])
    end)

    it('stride and is_contiguous', function()
        assert.are.same({12, 4, 1}, x:stride())
        assert.are.equal(4, x:stride(1))
        assert.is_true(x:is_contiguous())
        local t = x:transpose(0, 2)
        assert.are.same({1, 4, 12}, t:stride())
        assert.is_false(t:is_contiguous())
    end)

    it('dtype and device fields', function()
        assert.are.equal('float32', dt(x))
        assert.are.equal('cpu', tostring(x.device))
    end)

    it('size of a dim out of range raises', function()
        H.assert_error(function() return x:size(3) end, 'size')
    end)
end)

describe('views share storage with their base', function()
    local base
    before_each(function() base = ddpl.arange(12):double():view(3, 4) end)

    local function writes_through(v, fill, expected_base)
        v:fill_(fill)
        H.assert_close(base, expected_base, 0, 0)
    end

    it('view', function()
        local v = base:view(2, 6)
        assert.are.same({2, 6}, H.shape(v))
        assert.are.same({4, 3}, H.shape(base:view(-1, 3)))
        v:narrow(1, 0, 1):fill_(-1) -- elements 0 and 6 of the base
        H.assert_close(base, {-1, 1, 2, 3, 4, 5, -1, 7, 8, 9, 10, 11}, 0, 0)
    end)

    it('view of incompatible strides raises; reshape copies instead', function()
        H.assert_error(function() return base:t():view(12) end, 'view')
        local r = base:t():reshape(12)
        H.assert_close(r, {0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11}, 0, 0)
        r:fill_(0)
        assert.are.equal(11, base:max():item()) -- the copy is independent
    end)

    it('reshape of a contiguous tensor is a view', function()
        local r = base:reshape(12)
        writes_through(r:narrow(0, 11, 1), 100,
                       {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 100})
    end)

    it('flatten', function()
        local x = ddpl.zeros(2, 3, 4)
        assert.are.same({24}, H.shape(x:flatten()))
        assert.are.same({2, 12}, H.shape(x:flatten(1)))
        assert.are.same({6, 4}, H.shape(x:flatten(0, 1)))
        writes_through(base:flatten():narrow(0, 0, 2), 9,
                       {9, 9, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11})
    end)

    it('unsqueeze and squeeze', function()
        assert.are.same({3, 1, 4}, H.shape(base:unsqueeze(1)))
        assert.are.same({3, 4, 1}, H.shape(base:unsqueeze(-1)))
        local y = ddpl.zeros(1, 3, 1)
        assert.are.same({3}, H.shape(y:squeeze()))
        assert.are.same({3, 1}, H.shape(y:squeeze(0)))
        assert.are.same({1, 3, 1}, H.shape(y:squeeze(1))) -- size 3: unchanged
        writes_through(base:unsqueeze(0)[0][2], 5, {0, 1, 2, 3, 4, 5, 6, 7, 5, 5, 5, 5})
    end)

    it('t and transpose', function()
        local t = base:t()
        assert.are.same({4, 3}, H.shape(t))
        assert.are.equal(9, t[1][2]:item()) -- base[2][1]
        local x = ddpl.zeros(2, 3, 4)
        assert.are.same({4, 3, 2}, H.shape(x:transpose(0, 2)))
        assert.are.same({2, 4, 3}, H.shape(x:transpose(-1, 1)))
        writes_through(base:transpose(0, 1)[3], 1, {0, 1, 2, 1, 4, 5, 6, 1, 8, 9, 10, 1})
        H.assert_error(function() return x:t() end, 't')
    end)

    it('permute', function()
        local x = ddpl.arange(24):view(2, 3, 4)
        local p = x:permute(2, 0, 1)
        assert.are.same({4, 2, 3}, H.shape(p))
        assert.are.equal(x[1][2][3]:item(), p[3][1][2]:item())
        p[0]:fill_(-1) -- x[..][..][0]
        assert.are.equal(-1, x[1][2][0]:item())
        assert.are.equal(13, x[1][0][1]:item())
    end)

    it('narrow and select', function()
        local n = base:narrow(1, 1, 2)
        assert.are.same({3, 2}, H.shape(n))
        H.assert_close(n, {1, 2, 5, 6, 9, 10}, 0, 0)
        local s = base:select(1, 3)
        H.assert_close(s, {3, 7, 11}, 0, 0)
        H.assert_close(base:select(0, -1), {8, 9, 10, 11}, 0, 0)
        writes_through(n:select(0, 0), -2, {0, -2, -2, 3, 4, 5, 6, 7, 8, 9, 10, 11})
    end)

    it('x[i] is select(0, i), negative i counts from the end', function()
        H.assert_close(base[1], {4, 5, 6, 7}, 0, 0)
        H.assert_close(base[-1], {8, 9, 10, 11}, 0, 0)
        writes_through(base[2], 0, {0, 1, 2, 3, 4, 5, 6, 7, 0, 0, 0, 0})
        H.assert_error(function() return base[3] end, 'select')
    end)

    it('expand repeats with stride 0', function()
        local c = ddpl.tensor({{1.0}, {2.0}})
        local e = c:expand(2, 3)
        assert.are.same({2, 3}, H.shape(e))
        assert.are.same({1, 0}, e:stride())
        H.assert_close(e, {1, 1, 1, 2, 2, 2}, 0, 0)
        assert.are.same({2, 3}, H.shape(c:expand(-1, 3)))
        c:fill_(4)
        H.assert_close(e, {4, 4, 4, 4, 4, 4}, 0, 0)
        H.assert_error(function() return c:expand(3, 3) end, 'expand')
    end)

    it('chunk and split', function()
        local parts = ddpl.ones(4):chunk(3) -- PyTorch: chunks of ceil(4/3) = 2
        assert.are.equal(2, #parts)
        local sp = ddpl.arange(5):split(2)
        assert.are.equal(3, #sp)
        assert.are.same({4}, sp[3]:tolist())
        local cols = base:chunk(2, 1)
        assert.are.same({3, 2}, H.shape(cols[2]))
        writes_through(cols[2], 7, {0, 1, 7, 7, 4, 5, 7, 7, 8, 9, 7, 7})
        local rows = base:split(2, 0)
        assert.are.same({1, 4}, H.shape(rows[2]))
    end)
end)

describe('conversions', function()
    it('to a dtype, and the shorthand methods', function()
        local x = ddpl.tensor({1.7, -1.7, 2.5})
        assert.are.equal('float64', dt(x:to('float64')))
        assert.are.equal('float64', dt(x:double()))
        assert.are.equal('float32', dt(x:double():float()))
        local l = x:long()
        assert.are.equal('int64', dt(l))
        assert.are.same({1, -1, 2}, l:tolist()) -- truncation toward zero
        assert.are.equal('integer', math.type(l:tolist()[1]))
    end)

    it('half and bfloat16 round as PyTorch does', function()
        local x = ddpl.tensor({0.1, 1 / 3, 65504, 70000})
        local h = x:half()
        assert.are.equal('float16', dt(h))
        H.assert_close(h:double(), {0.0999755859375, 0.333251953125, 65504.0, math.huge}, 0, 0)
        local b = ddpl.tensor({0.1, 1 / 3}):bfloat16()
        assert.are.equal('bfloat16', dt(b))
        H.assert_close(b:double(), {0.10009765625, 0.333984375}, 0, 0)
    end)

    it('to the same dtype and device shares storage', function()
        local x = ddpl.zeros(3)
        local y = x:to('float32')
        y:fill_(1)
        H.assert_close(x, {1, 1, 1})
        assert.are.equal('cpu', tostring(x:cpu().device))
    end)

    it('clone copies, detach shares', function()
        local x = ddpl.tensor({1.0, 2.0})
        local c, d = x:clone(), x:detach()
        x:fill_(5)
        H.assert_close(c, {1, 2})
        H.assert_close(d, {5, 5})
    end)

    it('contiguous copies a non-contiguous tensor and returns a contiguous one as it is', function()
        local x = ddpl.arange(6):view(2, 3)
        local c = x:t():contiguous()
        assert.is_true(c:is_contiguous())
        assert.are.same({{0, 3}, {1, 4}, {2, 5}}, c:tolist())
        local same = x:contiguous()
        same:fill_(1)
        assert.are.equal(6, x:sum():item())
    end)

    it('item and tolist', function()
        assert.are.equal(3, ddpl.tensor({{3}}):item())
        assert.are.equal(1.5, ddpl.tensor({1.5}, {dtype = 'float64'}):item())
        assert.are.equal(true, ddpl.tensor(true):item())
        H.assert_error(function() return ddpl.zeros(2):item() end, 'item')
        assert.are.same({{1, 2}, {3, 4}}, ddpl.tensor({{1, 2}, {3, 4}}):tolist())
        assert.are.equal(2.5, ddpl.tensor(2.5):tolist())
    end)

    it('tostring prints shape-aware values and elides large tensors', function()
        local s = tostring(ddpl.tensor({1.5, -2}))
        assert.truthy(s:find('1.5', 1, true), s)
        local big = tostring(ddpl.zeros(5000))
        assert.truthy(big:find('...', 1, true), 'not elided')
        assert.is_true(#big < 2000, 'printed ' .. #big .. ' characters')
        assert.truthy(tostring(ddpl.zeros(2, {dtype = 'float64'})):find('float64', 1, true))
    end)
end)

describe('in-place ops', function()
    it('return the tensor itself', function()
        local x = ddpl.zeros(3)
        local y = ddpl.ones(3)
        for name, call in pairs({
            zero_ = function() return x:zero_() end,
            fill_ = function() return x:fill_(2) end,
            copy_ = function() return x:copy_(y) end,
            add_ = function() return x:add_(y) end,
            mul_ = function() return x:mul_(y) end,
            div_ = function() return x:div_(y) end,
            clamp_ = function() return x:clamp_(0, 1) end,
            uniform_ = function() return x:uniform_() end,
            normal_ = function() return x:normal_() end,
            bernoulli_ = function() return x:bernoulli_(0.5) end,
        }) do
            assert.is_true(rawequal(call(), x), name .. ' did not return its tensor')
        end
    end)

    it('zero_, fill_ and copy_ (broadcasting and converting)', function()
        local x = ddpl.ones(2, 3)
        x:zero_()
        H.assert_close(x, {0, 0, 0, 0, 0, 0}, 0, 0)
        x:fill_(2.5)
        H.assert_close(x, {2.5, 2.5, 2.5, 2.5, 2.5, 2.5}, 0, 0)
        x:copy_(ddpl.tensor({1, 2, 3})) -- int64 row broadcast into float32
        H.assert_close(x, {1, 2, 3, 1, 2, 3}, 0, 0)
        assert.are.equal('float32', dt(x))
        H.assert_error(function() x:copy_(ddpl.zeros(4)) end, 'copy_')
    end)

    it('add_ with alpha, mul_, div_ with tensors and numbers', function()
        local x = ddpl.tensor({1.0, 2.0, 3.0})
        x:add_(ddpl.tensor({1.0, 1.0, 1.0}), 2)
        H.assert_close(x, {3, 4, 5}, 0, 0)
        x:add_(1)
        x:mul_(ddpl.tensor({2.0, 0.5, 1.0}))
        H.assert_close(x, {8, 2.5, 6}, 0, 0)
        x:mul_(2)
        x:div_(4)
        H.assert_close(x, {4, 1.25, 3}, 0, 0)
        x:div_(ddpl.tensor({2.0}))
        H.assert_close(x, {2, 0.625, 1.5}, 0, 0)
    end)

    it('refuses results that do not fit the dtype, as PyTorch does', function()
        local i = ddpl.tensor({1, 2})
        H.assert_error(function() i:div_(2) end, 'div_')
        H.assert_error(function() i:add_(1.5) end, 'add_')
        H.assert_close(i, {1, 2}, 0, 0)
        H.assert_error(function() ddpl.zeros(3):add_(ddpl.zeros(2)) end, 'add_')
        H.assert_error(function() ddpl.zeros(1):add_(ddpl.zeros(3)) end, 'add_')
    end)

    it('clamp_', function()
        local x = ddpl.tensor({-2.0, 0.5, 3.0})
        x:clamp_(-1, 1)
        H.assert_close(x, {-1, 0.5, 1}, 0, 0)
        x:clamp_(0)
        H.assert_close(x, {0, 0.5, 1}, 0, 0)
        x:clamp_(nil, 0.25)
        H.assert_close(x, {0, 0.25, 0.25}, 0, 0)
    end)

    it('uniform_, normal_ and bernoulli_ have the right statistics', function()
        ddpl.manual_seed(3)
        local n = 20000
        local u = ddpl.empty(n):uniform_(2, 5)
        assert.is_true(u:min():item() >= 2 and u:max():item() < 5)
        assert.is_true(math.abs(u:mean():item() - 3.5) < 0.05)
        local g = ddpl.empty(n, {dtype = 'float64'}):normal_(1, 2)
        assert.is_true(math.abs(g:mean():item() - 1) < 0.08)
        assert.is_true(math.abs(g:std():item() - 2) < 0.06)
        local b = ddpl.empty(n):bernoulli_(0.25)
        assert.are.equal(n, b:eq(0):sum():item() + b:eq(1):sum():item())
        assert.is_true(math.abs(b:mean():item() - 0.25) < 0.02)
    end)

    it('on a view writes into the base', function()
        local x = ddpl.zeros(2, 3)
        x[1]:add_(1)
        x:select(1, 0):mul_(5)
        H.assert_close(x, {0, 0, 0, 5, 1, 1}, 0, 0)
    end)
end)

describe('dtype promotion matches PyTorch', function()
    local table_ = H.fixture('promotion')
    local ops = {
        add = function(a, b) return a + b end,
        sub = function(a, b) return a - b end,
        mul = function(a, b) return a * b end,
        div = function(a, b) return a / b end,
    }
    local function operand(o)
        if o.number then return o.number end
        if o.zero_dim then return ddpl.ones({}, {dtype = o.dtype}) end
        return ddpl.ones(2, {dtype = o.dtype})
    end
    local function name(o)
        if o.number then return math.type(o.number) == 'integer' and 'integer' or 'float' end
        return o.dtype .. (o.zero_dim and '(0-dim)' or '')
    end
    -- one test per op so a failure lists every wrong pair at once
    for _, op in ipairs({'add', 'sub', 'mul', 'div'}) do
        it(op, function()
            local wrong = {}
            for _, c in ipairs(table_) do
                if c.op == op then
                    local ok, r = pcall(ops[op], operand(c.a), operand(c.b))
                    local got = ok and dt(r) or 'error'
                    if got ~= c.result then
                        wrong[#wrong + 1] = string.format('%s %s %s: got %s, PyTorch %s', name(c.a),
                                                          op, name(c.b), got, c.result)
                    end
                end
            end
            assert.are.equal(0, #wrong, table.concat(wrong, '\n'))
        end)
    end
end)
