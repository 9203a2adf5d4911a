-- spec/tensor/tensor_binding_spec.lua: the mechanics of the Lua binding (engine/lua), not op
-- numerics: the userdata's lifecycle (<close>, closed-tensor errors), operators with numbers on
-- either side, #x and x[i], fields, PyTorch's printed text, errors that name the function, Lua
-- hooks (replacing and erroring), grad-mode restoring, lazy submodules and GC pacing.
local ddpl = require 'ddplua'
local F = ddpl.F

-- pcall that must fail; returns the message
local function error_of(fn, ...)
    local ok, err = pcall(fn, ...)
    assert(not ok, 'expected an error, but the call succeeded')
    return tostring(err)
end

local function values(t) return t:double():reshape(-1):tolist() end

describe('tensor userdata', function()
    it('is a ddplua.Tensor userdata; == is identity, eq is elementwise', function()
        local x = ddpl.ones(2)
        assert.are.equal('userdata', type(x))
        assert.are.equal('ddplua.Tensor', getmetatable(x).__name)
        assert.is_true(ddpl.is_tensor(x))
        assert.is_false(ddpl.is_tensor({}))
        assert.is_true(x == x)
        assert.is_false(x == x:clone())
        assert.are.same({ true, true }, x:eq(x:clone()):tolist())
    end)

    it('<close> frees the memory at scope exit and leaves a closed tensor behind', function()
        collectgarbage()
        collectgarbage('stop') -- only <close> may free anything here
        local before = ddpl.memory_allocated()
        local escaped
        do
            local x <close> = ddpl.zeros(1024, 1024) -- 4 MiB
            assert.are.equal(before + 4 * 2 ^ 20, ddpl.memory_allocated())
            escaped = x
        end
        local after = ddpl.memory_allocated()
        collectgarbage('restart')
        assert.are.equal(before, after)
        assert.truthy(error_of(function() return escaped + 1 end):find('attempt to use a closed tensor', 1, true))
        assert.truthy(error_of(function() return escaped:sum() end):find('sum: attempt to use a closed tensor', 1, true))
        assert.truthy(error_of(tostring, escaped):find('closed tensor', 1, true))
        assert.truthy(error_of(function() return escaped.dtype end):find('closed tensor', 1, true))
        assert.truthy(error_of(function() return ddpl.cat({ escaped }) end):find('closed tensor', 1, true))
        getmetatable(escaped).__close(escaped) -- closing twice is harmless
        collectgarbage()                       -- and so is the GC afterwards
    end)

    it('a view keeps the storage alive after the viewed tensor is closed', function()
        local v
        do
            local x <close> = ddpl.arange(6.)
            v = x:view(2, 3)
        end
        assert.are.same({ { 0, 1, 2 }, { 3, 4, 5 } }, v:tolist())
    end)
end)

describe('operators', function()
    local x = ddpl.tensor({ 1., 2., 4. })

    it('take tensors or numbers on either side', function()
        assert.are.same({ 3, 4, 6 }, values(x + 2))
        assert.are.same({ 3, 4, 6 }, values(2 + x))
        assert.are.same({ 1, 0, -2 }, values(2 - x))
        assert.are.same({ -1, 0, 2 }, values(x - 2))
        assert.are.same({ 2, 4, 8 }, values(2 * x))
        assert.are.same({ 4, 2, 1 }, values(4 / x))
        assert.are.same({ 1, 4, 16 }, values(x ^ 2))
        assert.are.same({ 2, 4, 16 }, values(2 ^ x))
        assert.are.same({ -1, -2, -4 }, values(-x))
        assert.are.same({ 2, 4, 8 }, values(x + x))
    end)

    it('treat Lua numbers as PyTorch treats Python scalars', function()
        local i = ddpl.tensor({ 1, 2 })
        assert.are.equal('int64', (i + 1).dtype)       -- an integer keeps int64
        assert.are.equal('float32', (i + 1.5).dtype)   -- a float makes the default float
        assert.are.equal('float32', (x * 2).dtype)     -- a number never widens float32
        assert.are.equal('float64', (x:double() * 2.5).dtype)
        assert.are.equal('float32', (i / 2).dtype)     -- true division
    end)

    it('raise an error naming the op for other operand types', function()
        local msg = error_of(function() return x + 'a' end)
        assert.truthy(msg:find('add: expected a tensor or number as argument 2, got string', 1, true), msg)
        msg = error_of(function() return {} * x end)
        assert.truthy(msg:find('mul: expected a tensor or number as argument 1, got table', 1, true), msg)
        msg = error_of(function() return x:add('a') end)
        assert.truthy(msg:find('add: expected a tensor or number as argument 2, got string', 1, true), msg)
    end)
end)

describe('length, indexing and fields', function()
    it('#x is size(0); x[i] is select(0, i), 0-based, negative from the end', function()
        local x = ddpl.arange(6):view(3, 2)
        assert.are.equal(3, #x)
        assert.are.same({ 0, 1 }, x[0]:tolist())
        assert.are.same({ 4, 5 }, x[-1]:tolist())
        assert.are.equal(3, x[1][1]:item())
        assert.truthy(error_of(function() return x[3] end):find('select', 1, true))
        assert.truthy(error_of(function() return #ddpl.tensor(1) end):find('0-d', 1, true))
    end)

    it('x[i] = v fills or copies a row', function()
        local x = ddpl.zeros(2, 2)
        x[0] = 5
        x[-1] = ddpl.tensor({ 1., 2. })
        assert.are.same({ { 5, 5 }, { 1, 2 } }, x:tolist())
    end)

    it('has the fields dtype, device, requires_grad, grad, grad_fn', function()
        local w = ddpl.ones(2, { dtype = 'float64' })
        assert.are.equal('float64', w.dtype)
        assert.are.equal('cpu', w.device)
        assert.is_false(w.requires_grad)
        assert.is_nil(w.grad)
        assert.is_nil(w.grad_fn)
        assert.is_true(w:is_leaf())
        w.requires_grad = true
        local y = (w * 3):sum()
        assert.are.equal('SumBackward0', y.grad_fn)
        assert.is_false(y:is_leaf())
        y:backward()
        assert.are.same({ 3, 3 }, w.grad:tolist())
        w.grad = nil
        assert.is_nil(w.grad)
        w.grad = ddpl.zeros(2, { dtype = 'float64' })
        assert.are.same({ 0, 0 }, w.grad:tolist())
        assert.truthy(error_of(function() w.grad = ddpl.zeros(3, { dtype = 'float64' }) end):find('shape', 1, true))
        assert.truthy(error_of(function() w.foo = 1 end):find("cannot set field 'foo'", 1, true))
        assert.truthy(error_of(function() ddpl.tensor({ 1, 2 }).requires_grad = true end):find('floating', 1, true))
    end)

    it('item, tolist and size return Lua values of the right kind', function()
        assert.are.equal('integer', math.type(ddpl.tensor(7):item()))
        assert.are.equal('float', math.type(ddpl.tensor(7.):item()))
        assert.are.equal(true, ddpl.tensor(true):item())
        assert.are.same({ { true, false } }, ddpl.tensor({ { true, false } }):tolist())
        assert.are.equal(2.5, ddpl.tensor(2.5):tolist())
        local x = ddpl.zeros(2, 3)
        assert.are.same({ 2, 3 }, x:size())
        assert.are.same({ 2, 3 }, x:shape())
        assert.are.equal(3, x:size(-1))
        local v, i = ddpl.tensor({ { 1., 5. }, { 7., 2. } }):max(1)
        assert.are.same({ 5, 7 }, v:tolist())
        assert.are.same({ 1, 0 }, i:tolist())
        local parts = ddpl.arange(5):split(2)
        assert.are.equal(3, #parts)
        assert.are.same({ 4 }, parts[3]:tolist())
        assert.are.equal(2, #ddpl.arange(4):chunk(2))
    end)
end)

describe('ddpl.tensor and ddpl.frombytes', function()
    it('infer dtypes from Lua values as PyTorch does from Python ones', function()
        assert.are.equal('int64', ddpl.tensor({ 1, 2 }).dtype)
        assert.are.equal('float32', ddpl.tensor({ 1, 2.5 }).dtype)
        assert.are.equal('bool', ddpl.tensor({ true, false }).dtype)
        assert.are.equal('float32', ddpl.tensor({}).dtype)
        assert.are.equal('float64', ddpl.tensor({ 1, 2 }, { dtype = 'float64' }).dtype)
        assert.are.same({ 2, 0 }, ddpl.tensor({ {}, {} }):size())
    end)

    it('name the depth of a ragged nested table', function()
        local msg = error_of(ddpl.tensor, { { 1, 2 }, { 3 } })
        assert.truthy(msg:find('tensor: ragged nested table at depth 2', 1, true), msg)
        msg = error_of(ddpl.tensor, { 1, 'x' })
        assert.truthy(msg:find('tensor: expected a number or boolean at depth 1, got string', 1, true), msg)
    end)

    it('frombytes copies a string into a tensor of any dtype and shape', function()
        local t = ddpl.frombytes(string.pack('<i4i4i4i4', 1, -2, 3, 4), 'int32', { 2, 2 })
        assert.are.same({ { 1, -2 }, { 3, 4 } }, t:tolist())
        assert.are.same({ 1.5, -2 }, ddpl.frombytes(string.pack('<dd', 1.5, -2), 'float64'):tolist())
        assert.truthy(error_of(ddpl.frombytes, 'abc', 'int32'):find('frombytes', 1, true))
        assert.truthy(error_of(ddpl.frombytes, 'abcd', 'int32', { 2 }):find('frombytes', 1, true))
    end)
end)

describe('tostring', function()
    -- each expected text is what PyTorch 1.13 prints for the same tensor (dtype names without
    -- the "torch." prefix, grad_fn names without PyTorch's version digit)
    local cases = {
        { function() return ddpl.arange(6.):view(2, 3) end,
          'tensor([[0., 1., 2.],\n        [3., 4., 5.]])' },
        { function() return ddpl.tensor(3.) end, 'tensor(3.)' },
        { function() return ddpl.tensor(-0.5) end, 'tensor(-0.5000)' },
        { function() return ddpl.tensor({ true, false }) end, 'tensor([ True, False])' },
        { function() return ddpl.tensor({ 1e-5, 1. }) end, 'tensor([1.0000e-05, 1.0000e+00])' },
        { function() return ddpl.tensor({ 123456789, -5 }) end, 'tensor([123456789,        -5])' },
        { function() return ddpl.tensor({ 0 / 0, 1 / 0, 1.5 }) end, 'tensor([   nan,    inf, 1.5000])' },
        { function() return ddpl.tensor({ 1., 2. }, { dtype = 'float64', requires_grad = true }) end,
          'tensor([1., 2.], dtype=float64, requires_grad=True)' },
        { function() return ddpl.ones(2, { requires_grad = true }) * 2 end,
          'tensor([2., 2.], grad_fn=<MulBackward0>)' },
        { function() return ddpl.zeros(0, 3) end, 'tensor([], size=(0, 3))' },
        { function() return ddpl.zeros(0, { dtype = 'int64' }) end, 'tensor([], dtype=int64)' },
        { function() return ddpl.ones(2, { dtype = 'uint8' }) end, 'tensor([1, 1], dtype=uint8)' },
        { function() return ddpl.ones(3, { dtype = 'float16' }) end, 'tensor([1., 1., 1.], dtype=float16)' },
        { function() return ddpl.arange(30.) * 1.5 end,
          'tensor([ 0.0000,  1.5000,  3.0000,  4.5000,  6.0000,  7.5000,  9.0000, 10.5000,\n' ..
          '        12.0000, 13.5000, 15.0000, 16.5000, 18.0000, 19.5000, 21.0000, 22.5000,\n' ..
          '        24.0000, 25.5000, 27.0000, 28.5000, 30.0000, 31.5000, 33.0000, 34.5000,\n' ..
          '        36.0000, 37.5000, 39.0000, 40.5000, 42.0000, 43.5000])' },
        { function() return ddpl.arange(2000.):view(2, 1000) end,
          'tensor([[0.0000e+00, 1.0000e+00, 2.0000e+00,  ..., 9.9700e+02, 9.9800e+02,\n' ..
          '         9.9900e+02],\n' ..
          '        [1.0000e+03, 1.0010e+03, 1.0020e+03,  ..., 1.9970e+03, 1.9980e+03,\n' ..
          '         1.9990e+03]])' },
    }
    for i, c in ipairs(cases) do
        it(('prints like PyTorch (%d)'):format(i), function()
            assert.are.equal(c[2], tostring(c[1]()))
        end)
    end

    it('summarises more than 1000 elements with 3 edge items per dimension', function()
        local s = tostring(ddpl.arange(1200):view(10, 10, 12))
        local lines = {}
        for l in (s .. '\n'):gmatch('(.-)\n') do lines[#lines + 1] = l end
        assert.are.equal('tensor([[[   0,    1,    2,  ...,    9,   10,   11],', lines[1])
        assert.are.equal('         ...,', lines[4])
        assert.are.equal('        ...,', lines[25])
        assert.are.equal('         [1188, 1189, 1190,  ..., 1197, 1198, 1199]]])', lines[#lines])
        assert.are.equal(49, #lines) -- as PyTorch prints it
    end)
end)

describe('errors name the function', function()
    local x = ddpl.ones(2, 3)
    local cases = {
        { function() return ddpl.zeros('a') end, 'zeros: expected integer sizes or a table of sizes as argument 1, got string' },
        { function() return ddpl.zeros(2, -3) end, 'zeros: negative size' },
        { function() return x:view('a') end, 'view: expected integer sizes' },
        { function() return ddpl.cat('a') end, 'cat: expected a list of tensors as argument 1, got string' },
        { function() return ddpl.cat({ x, 1 }) end, 'cat: expected a list of tensors, got number at position 2' },
        { function() return x:sum('a') end, "sum: expected an integer for 'dim', got string" },
        { function() return x:matmul(x) end, 'matmul: shapes [2,3] and [2,3]' },
        { function() return ddpl.ones(2, { dtype = 'float128' }) end, "ones: unknown dtype 'float128'" },
        { function() return ddpl.ones(2, { dtyp = 'float32' }) end, "ones: unknown option 'dtyp'" },
        { function() return F.conv2d(ddpl.zeros(1, 1, 3, 3), ddpl.zeros(1, 1, 2, 2), nil, { stride = 'a' }) end,
          "conv2d: expected an integer or a pair {h, w} for 'stride', got string" },
        { function() return F.conv2d(ddpl.zeros(1, 1, 3, 3), ddpl.zeros(1, 1, 2, 2), nil, { strid = 1 }) end,
          "conv2d: unknown option 'strid'" },
        { function() return F.cross_entropy(x, ddpl.tensor({ 0, 1 }), { reduction = 'avg' }) end,
          "cross_entropy: expected 'mean', 'sum' or 'none' for 'reduction', got 'avg'" },
        { function() return F.linear(x) end, 'linear: expected a tensor as argument 2, got no value' },
        { function() return ddpl.no_grad(42) end, 'no_grad: expected a function as argument 1, got number' },
        { function() return x:register_hook(1) end, 'register_hook: expected a function as argument 2, got number' },
        { function() return ddpl.ones(2):zero_(), ddpl.ones(2, { requires_grad = true }):zero_() end, 'zero_:' },
    }
    for i, c in ipairs(cases) do
        it(('case %d: %s'):format(i, c[2]), function()
            local msg = error_of(c[1])
            assert.truthy(msg:find(c[2], 1, true), msg)
        end)
    end
end)

describe('Lua hooks', function()
    it('see the gradient and may replace it', function()
        local w = ddpl.ones(3, { requires_grad = true })
        local seen
        w:register_hook(function(g) seen = g:tolist() end)       -- returns nil: keeps it
        local h = w:register_hook(function(g) return g * 10 end); -- replaces it
        (w * 2):sum():backward()
        assert.are.same({ 2, 2, 2 }, seen)
        assert.are.same({ 20, 20, 20 }, w.grad:tolist())
        h:remove()
        w.grad = nil;
        (w * 2):sum():backward()
        assert.are.same({ 2, 2, 2 }, w.grad:tolist())
    end)

    it('work on non-leaf tensors', function()
        local w = ddpl.ones(2, { requires_grad = true })
        local y = w * 3
        y:register_hook(function(g) return g + 1 end)
        y:sum():backward()
        assert.are.same({ 6, 6 }, w.grad:tolist())
    end)

    it('raise their error from backward, unchanged, and leave the engine usable', function()
        local w = ddpl.ones(2, { requires_grad = true })
        local h = w:register_hook(function() error('boom in hook') end)
        local msg = error_of(function() (w * 2):sum():backward() end)
        assert.truthy(msg:find('boom in hook', 1, true), msg)
        local obj = {}
        h:remove()
        h = w:register_hook(function() error(obj) end)
        local ok, err = pcall(function() (w * 2):sum():backward() end)
        assert.is_false(ok)
        assert.are.equal(obj, err) -- error objects pass through as they are
        h:remove()
        assert.is_true(ddpl.is_grad_enabled())
        w.grad = nil;
        (w * 2):sum():backward()
        assert.are.same({ 2, 2 }, w.grad:tolist())
    end)

    it('must return a tensor of the same shape, or nil', function()
        local w = ddpl.ones(2, { requires_grad = true })
        w:register_hook(function() return 'x' end)
        local msg = error_of(function() (w * 2):sum():backward() end)
        assert.truthy(msg:find('register_hook: the hook must return a tensor or nil, got string', 1, true), msg)
        local v = ddpl.ones(2, { requires_grad = true })
        v:register_hook(function() return ddpl.ones(3) end)
        msg = error_of(function() (v * 2):sum():backward() end)
        assert.truthy(msg:find('register_hook', 1, true), msg)
    end)

end)

describe('grad mode', function()
    it('no_grad returns fn results and restores the mode, even when fn raises', function()
        local w = ddpl.ones(2, { requires_grad = true })
        local a, b = ddpl.no_grad(function(k) return (w * k).requires_grad, k end, 3)
        assert.is_false(a)
        assert.are.equal(3, b)
        assert.is_true(ddpl.is_grad_enabled())
        local ok, err = pcall(ddpl.no_grad, function() error('inside') end)
        assert.is_false(ok)
        assert.truthy(tostring(err):find('inside', 1, true))
        assert.is_true(ddpl.is_grad_enabled())
        ddpl.no_grad(function()
            assert.is_false(ddpl.is_grad_enabled())
            ddpl.enable_grad(function() assert.is_true(ddpl.is_grad_enabled()) end)
            assert.is_false(ddpl.is_grad_enabled())
        end)
    end)
end)

describe('library layout', function()
    it('loads submodules lazily and reports the ones not built yet', function()
        assert.are.equal(require 'ddplua.data', ddpl.data)
        assert.are.equal(require 'ddplua.distributed', ddpl.distributed)
        assert.are.equal(ddpl.dist, ddpl.distributed)
        assert.are.equal(ddpl.F, ddpl.nn.functional)
        assert.are.equal(ddpl.F, require 'ddplua.nn.functional')
        assert.are.equal('function', type(ddpl.autograd.gradcheck))
        assert.are.equal(require 'ddplua.optim', ddpl.optim)
        assert.are.equal('table', type(ddpl.nn.parallel.DistributedDataParallel))
        assert.is_false(ddpl.cuda.is_available() and not ddpl.config().cuda)
        assert.are.equal(ddpl.version, ddpl.config().version)
        local t0 = ddpl.time()
        assert.is_true(ddpl.time() >= t0)
    end)

    it('gradcheck passes a correct gradient and describes a wrong one', function()
        local x = ddpl.randn(3, { requires_grad = true, dtype = 'float64' })
        assert.is_true(ddpl.autograd.gradcheck(function(a) return (a * a):sum() end, { x }))
        -- a hook that scales the gradient makes backward disagree with finite differences
        local y = ddpl.randn(3, { requires_grad = true })
        local function wrong(a)
            local b = a * 1
            if b.requires_grad then b:register_hook(function(g) return g * 2 end) end
            return b:sum()
        end
        local ok, msg = ddpl.autograd.gradcheck(wrong, { y }, { raise_exception = false })
        assert.is_false(ok)
        assert.truthy(msg:find('numerical 1, analytical 2', 1, true), msg)
        assert.truthy(error_of(ddpl.autograd.gradcheck, wrong, { y }):find('Jacobian mismatch', 1, true))
    end)
end)

describe('GC pacing', function()
    it('keeps dead tensors made by operators from piling up, without collectgarbage', function()
        collectgarbage()
        local base, peak = ddpl.memory_allocated(), 0
        local x = ddpl.ones(1024, 1024) -- 4 MiB; each x * 2 below makes another
        local function step() local y = x * 2 end
        for _ = 1, 300 do                -- 1.2 GB in total
            step()
            peak = math.max(peak, ddpl.memory_allocated() - base)
        end
        assert.is_true(peak < 200 * 2 ^ 20, ('peak %.0f MiB of live tensors'):format(peak / 2 ^ 20))
    end)
end)
