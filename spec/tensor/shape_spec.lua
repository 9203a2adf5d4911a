-- spec/tensor/shape_spec.lua: the shape functions (repeat, tile, repeat_interleave, flip, roll,
-- rot90, movedim, unflatten, tensor_split, tril/triu, tril_indices, diag, diagonal, diag_embed,
-- trace, broadcast_to/tensors/shapes, block_diag, cartesian_prod, meshgrid), F.pad's modes and
-- F.one_hot against PyTorch (spec/fixtures/shape.lua, tools/gen_shape_fixtures.py): values,
-- dtypes, shapes, gradients; then empty inputs, views, in-place forms, argument forms, errors,
-- gradchecks, and the same fixtures on CUDA (pending without a device; the emulation build runs
-- them).
local H = require 'helpers'
local ddpl = H.ddpl
local F = ddpl.F

local function unpack_list(l) return table.unpack(l) end

-- runners: a case's non-tensor arguments are in its opts (tools/gen_shape_fixtures.py)
local runners = {
    ['repeat'] = function(ins, o) return ins[1]['repeat'](ins[1], o.sizes) end,
    tile = function(ins, o) return ins[1]:tile(o.dims) end,
    repeat_interleave = function(ins, o)
        local opts = o.output_size and {output_size = o.output_size} or nil
        local r = ins[2] or o.repeats
        if o.dim then return ins[1]:repeat_interleave(r, o.dim, opts) end
        return ins[1]:repeat_interleave(r, opts)
    end,
    repeat_interleave_indices = function(ins) return ddpl.repeat_interleave(ins[1]) end,
    flip = function(ins, o) return ins[1]:flip(o.dims) end,
    fliplr = function(ins) return ins[1]:fliplr() end,
    flipud = function(ins) return ddpl.flipud(ins[1]) end,
    roll = function(ins, o) return ins[1]:roll(o.shifts, o.dims) end,
    rot90 = function(ins, o) return ins[1]:rot90(o.k, o.dims) end,
    movedim = function(ins, o) return ins[1]:movedim(o.source, o.destination) end,
    moveaxis = function(ins, o) return ddpl.moveaxis(ins[1], o.source, o.destination) end,
    unflatten = function(ins, o) return ins[1]:unflatten(o.dim, o.sizes) end,
    tensor_split = function(ins, o)
        local what = ins[2] or o.sections or o.indices
        return unpack_list(ins[1]:tensor_split(what, o.dim and {dim = o.dim} or nil))
    end,
    tril = function(ins, o) return ins[1]:tril(o.diagonal) end,
    triu = function(ins, o) return ddpl.triu(ins[1], {diagonal = o.diagonal}) end,
    tril_indices = function(_, o)
        return ddpl.tril_indices(o.row, o.col, o.offset, {dtype = o.dtype})
    end,
    triu_indices = function(_, o)
        return ddpl.triu_indices(o.row, o.col, {offset = o.offset, dtype = o.dtype})
    end,
    diag = function(ins, o) return ins[1]:diag(o.diagonal) end,
    diagonal = function(ins, o) return ins[1]:diagonal(o.offset, o.dim1, o.dim2) end,
    diag_embed = function(ins, o)
        return ddpl.diag_embed(ins[1], {offset = o.offset, dim1 = o.dim1, dim2 = o.dim2})
    end,
    trace = function(ins) return ins[1]:trace() end,
    broadcast_to = function(ins, o) return ins[1]:broadcast_to(o.sizes) end,
    broadcast_tensors = function(ins) return unpack_list(ddpl.broadcast_tensors(table.unpack(ins))) end,
    block_diag = function(ins) return ddpl.block_diag(table.unpack(ins)) end,
    cartesian_prod = function(ins) return ddpl.cartesian_prod(ins) end,
    meshgrid = function(ins, o)
        return unpack_list(ddpl.meshgrid(ins, o.indexing and {indexing = o.indexing} or nil))
    end,
    pad = function(ins, o) return F.pad(ins[1], o.pad, {mode = o.mode, value = o.value}) end,
    one_hot = function(ins, o) return F.one_hot(ins[1], o.num_classes) end,
}

local cases = H.fixture('shape')

describe('shape functions match PyTorch', function()
    H.run_cases(cases, runners, it)
end)

local function same(t, expected) assert.are.same(expected, t:tolist()) end

describe('shape functions on empty and 0-dim tensors', function()
    it('keep the right shapes', function()
        local e = ddpl.zeros(0, 3)
        assert.are.same({0, 6}, e['repeat'](e, 1, 2):shape())
        assert.are.same({0, 3}, e:flip(0):shape())
        assert.are.same({0, 3}, e:roll(2, 0):shape())
        assert.are.same({0, 3}, e:roll(1):shape())
        assert.are.same({3, 0}, e:rot90():shape())
        assert.are.same({0, 3}, e:tril():shape())
        assert.are.same({0}, e:diagonal():shape())
        assert.are.same({0, 0}, ddpl.zeros(0):diag():shape())
        assert.are.equal(0, e:trace():item())
        assert.are.same({0, 3}, e:repeat_interleave(2, 0):shape())
        assert.are.same({0, 2, 3}, e:unflatten(0, {-1, 2}):shape())
        local parts = e:tensor_split(2)
        assert.are.equal(2, #parts)
        assert.are.same({0, 3}, parts[2]:shape())
        assert.are.same({2, 0}, ddpl.tril_indices(0, 3):shape())
        assert.are.same({2, 0}, ddpl.triu_indices(3, 4, 10):shape())
        assert.are.same({1, 0}, ddpl.block_diag():shape())
        assert.are.same({0, 3}, ddpl.block_diag(e):shape())
        local s = ddpl.tensor(2.5)
        assert.are.same({}, s:flip(0):shape())
        assert.are.equal(2.5, s:roll(1):item())
        assert.are.same({3, 2}, s['repeat'](s, 3, 2):shape())
        assert.are.same({2}, s:repeat_interleave(2):shape())
        assert.are.same({2}, s:tile({2}):shape())
        assert.are.same({}, s:movedim(0, 0):shape())
        assert.are.same({0}, ddpl.repeat_interleave(ddpl.tensor({0, 0}, {dtype = 'int64'})):shape())
    end)

    it('diag of a matrix with an offset past it is empty (PyTorch 1.13 fails on overflow)',
       function()
        assert.are.same({0}, ddpl.ones(2, 3):diag(5):shape())
        assert.are.same({0}, ddpl.ones(2, 3):diagonal(-2):shape())
        assert.are.same({2, 3}, ddpl.ones(2, 3):triu(-10):shape())
        assert.are.equal(0, ddpl.ones(2, 3):triu(2 ^ 62 // 1):sum():item())
        assert.are.equal(6, ddpl.ones(2, 3):tril(2 ^ 62 // 1):sum():item())
    end)

    it('copies where PyTorch copies, and gives fresh storage', function()
        local x = ddpl.ones(2, 3)
        for _, y in ipairs({x['repeat'](x, 1, 1), x:flip({}), x:roll(3, 1), x:rot90(4),
                            x:tile({1}), x:repeat_interleave(1, 0)}) do
            y:fill_(5)
            assert.are.equal(6, x:sum():item())
        end
    end)
end)

describe('diagonal is a view', function()
    it('writes through it reach the base, and the base shows in it', function()
        local x = ddpl.zeros(3, 4)
        local d = x:diagonal(1)
        assert.are.same({3}, d:shape())
        d:fill_(7)
        same(x, {{0, 7, 0, 0}, {0, 0, 7, 0}, {0, 0, 0, 7}})
        x:fill_(1)
        same(d, {1, 1, 1})
        local b = ddpl.zeros(2, 3, 3)
        b:diagonal(0, -2, -1):copy_(ddpl.tensor({{1, 2, 3}, {4, 5, 6}}))
        assert.are.equal(21, b:sum():item())
        assert.are.equal(5, b[1][1][1]:item())
    end)

    it('has a gradient of the base shape with the diagonal filled', function()
        local x = ddpl.zeros(2, 3, {requires_grad = true})
        x:diagonal(-1):sum():backward()
        same(x.grad, {{0, 0, 0}, {1, 0, 0}})
        assert.are.equal('DiagonalBackward0', x:diagonal().grad_fn)
    end)
end)

describe('tril_ and triu_', function()
    it('write in place, return the tensor, and bump the version', function()
        local x = ddpl.ones(3, 3)
        local r = x:tril_(-1)
        assert.are.equal(x, r)
        same(x, {{0, 0, 0}, {1, 0, 0}, {1, 1, 0}})
        local y = ddpl.ones(2, 4):t() -- non-contiguous
        y:triu_({diagonal = 1})
        same(y, {{0, 1}, {0, 0}, {0, 0}, {0, 0}})
        assert.are.equal(1, ddpl.ones(3, 3):triu_(2):sum():item())
    end)

    it('follow the in-place rules', function()
        local leaf = ddpl.ones(3, 3, {requires_grad = true})
        H.assert_error(function() leaf:tril_() end, 'tril_', 'leaf')
        H.assert_error(function() ddpl.ones(3):expand(3, 3):triu_() end, 'triu_', 'memory location')
        H.assert_error(function() ddpl.ones(3):tril_() end, 'tril_', '2 dimensions')
        -- a non-leaf: recorded, so backward sees the masked gradient
        local w = ddpl.ones(2, 2, {requires_grad = true})
        local h = w * 3
        h:triu_()
        h:sum():backward()
        same(w.grad, {{3, 3}, {0, 3}})
        ddpl.no_grad(function() leaf:tril_() end)
        same(leaf, {{1, 0, 0}, {1, 1, 0}, {1, 1, 1}})
    end)
end)

-- roll along an inner dim of a contiguous tensor without a graph is a roll of the flat
-- tensor and a copy of each row's tail (ops/shape_flip.c): every dim, shift and dtype against
-- an index_select of the wrapped positions, and with a graph (the cat path) alike
describe('roll along inner dims', function()
    it('matches the wrapped index_select', function()
        ddpl.manual_seed(5)
        local xs = {ddpl.randn(5, 6, 7), ddpl.randn(3, 100), ddpl.randint(0, 9, {4, 33, 2}),
                    ddpl.randn(2, 3, 2):double(), ddpl.randn(6, 1, 4)}
        for _, x in ipairs(xs) do
            for d = 0, x:dim() - 1 do
                for _, sh in ipairs({1, 2, 3, -1, -2, 9, 17, 0}) do
                    local n, idx = x:size(d), {}
                    for i = 0, n - 1 do idx[#idx + 1] = (i - sh) % n end
                    local ref = x:index_select(d, ddpl.tensor(idx, {dtype = 'int64'}))
                    assert.is_true(x:roll(sh, d):equal(ref), ('dim %d shift %d'):format(d, sh))
                end
            end
        end
        local g = ddpl.randn(4, 8, {requires_grad = true})
        local r = g:roll(3, 1)
        assert.is_true(r:equal(g:detach():roll(3, 1)))
        r:backward(ddpl.arange(32):reshape(4, 8):float())
        assert.is_true(g.grad:equal(ddpl.arange(32):reshape(4, 8):float():roll(-3, 1)))
    end)
end)

describe('argument forms', function()
    local x = ddpl.arange(6):reshape(2, 3)
    it('take sizes and dims as varargs or lists, and ddpl.* forms', function()
        same(x['repeat'](x, {1, 2}), x['repeat'](x, 1, 2):tolist())
        same(ddpl['repeat'](x, 2, 1), x['repeat'](x, {2, 1}):tolist())
        same(x:tile(2, 1), x:tile({2, 1}):tolist())
        same(x:flip(0, 1), x:flip({0, 1}):tolist())
        same(x:roll({1, 1}, {0, 1}), x:roll(1, 0):roll(1, 1):tolist())
        same(x:roll({shifts = 1, dims = 1}), x:roll(1, 1):tolist())
        same(x:rot90({k = 2}), x:rot90(2, {0, 1}):tolist())
        same(ddpl.rot90(x, -1, {1, 0}), x:rot90(1):tolist())
        same(x:movedim({0, 1}, {1, 0}), x:t():tolist())
        same(x:moveaxis(-1, 0), x:t():tolist())
        same(x:tril({diagonal = 1}), x:tril(1):tolist())
        same(x:diagonal({offset = 1}), {1, 5})
        same(x:diagonal(0, 1, 0), {0, 4})
        same(ddpl.diag(x, -1), {3})
        same(x:broadcast_to(2, 2, 3), x:broadcast_to({2, 2, 3}):tolist())
        same(x:repeat_interleave(2, {dim = 1}), x:repeat_interleave(2, 1):tolist())
        same(x:repeat_interleave({repeats = 2, dim = 0, output_size = 4}),
             x:repeat_interleave(2, 0):tolist())
        local a, b = ddpl.arange(2), ddpl.arange(3)
        local g1, g2 = ddpl.meshgrid(a, b), ddpl.meshgrid({a, b}, {indexing = 'ij'})
        same(g1[2], g2[2]:tolist())
        same(ddpl.block_diag({a, b}), ddpl.block_diag(a, b):tolist())
        same(ddpl.cartesian_prod(a, b), ddpl.cartesian_prod({a, b}):tolist())
        local bt = ddpl.broadcast_tensors({a:unsqueeze(1), b})
        assert.are.same({2, 3}, bt[1]:shape())
        assert.are.same({2, 3, 4}, ddpl.broadcast_shapes({2, 1, 1}, {3, 1}, 4, {}))
        assert.are.same({}, ddpl.broadcast_shapes())
        assert.are.same({2, 6}, ddpl.tril_indices(3, 3, {device = 'cpu'}):shape())
    end)

    it('return Lua lists for tensor_split and meshgrid', function()
        local parts = ddpl.tensor_split(x, 3, 1)
        assert.are.equal(3, #parts)
        same(parts[2], {{1}, {4}})
        assert.are.equal(2, #ddpl.meshgrid(ddpl.arange(2), ddpl.arange(3)))
    end)
end)

describe('errors name the function and the problem', function()
    local x = ddpl.zeros(2, 3)
    it('for bad arguments', function()
        H.assert_error(function() x['repeat'](x, 2) end, 'repeat', 'smaller')
        H.assert_error(function() x['repeat'](x, -1, 2) end, 'repeat', 'negative')
        H.assert_error(function() x['repeat'](x, 2 ^ 40 // 1, 2 ^ 40 // 1) end, 'repeat')
        H.assert_error(function() x:tile({-1}) end, 'tile', 'negative')
        H.assert_error(function() x:repeat_interleave(-1) end, 'repeat_interleave', 'negative')
        H.assert_error(function() x:repeat_interleave(ddpl.tensor({1, 2}, {dtype = 'int64'}), 1) end,
                       'repeat_interleave', 'same size')
        H.assert_error(function() x:repeat_interleave(ddpl.tensor({1.0, 2.0}), 0) end,
                       'repeat_interleave', 'int64')
        H.assert_error(function() x:repeat_interleave(ddpl.tensor({-1, 2}, {dtype = 'int64'}), 0) end,
                       'repeat_interleave', 'negative')
        H.assert_error(function() x:repeat_interleave(2, 0, {output_size = 3}) end,
                       'repeat_interleave', 'allocated size')
        H.assert_error(function() ddpl.repeat_interleave(ddpl.ones(2, 2):long()) end,
                       'repeat_interleave', '1-D')
        H.assert_error(function() x:repeat_interleave(2, 0, {foo = 1}) end, 'unknown option')
        H.assert_error(function() x:flip(0, 0) end, 'flip', 'multiple times')
        H.assert_error(function() x:flip(2) end, 'flip', 'out of range')
        H.assert_error(function() ddpl.zeros(3):fliplr() end, 'fliplr', '2-d')
        H.assert_error(function() ddpl.tensor(1):flipud() end, 'flipud')
        H.assert_error(function() x:roll({1, 2}) end, 'roll', 'align')
        H.assert_error(function() x:roll({1, 2}, {0}) end, 'roll', 'align')
        H.assert_error(function() x:roll() end, 'roll', 'shifts')
        H.assert_error(function() x:rot90(1, {0, 0}) end, 'rot90', 'different')
        H.assert_error(function() x:rot90(1, {0}) end, 'rot90', 'dims = 1')
        H.assert_error(function() ddpl.zeros(3):rot90() end, 'rot90', 'dims >= 2')
        H.assert_error(function() x:movedim({0, 0}, {0, 1}) end, 'movedim', 'repeated dim')
        H.assert_error(function() x:movedim({0}, {0, 1}) end, 'movedim', 'same number')
        H.assert_error(function() x:unflatten(1, {2, 2}) end, 'unflatten', "multiply up")
        H.assert_error(function() x:unflatten(1, {}) end, 'unflatten', 'non-empty')
        H.assert_error(function() x:unflatten(1, {-1, -1}) end, 'unflatten', '-1')
        H.assert_error(function() x:tensor_split(0) end, 'tensor_split', 'larger than 0')
        H.assert_error(function() ddpl.tensor(1):tensor_split(2) end, 'tensor_split', '0 dims')
        H.assert_error(function() x:tensor_split(ddpl.ones(2)) end, 'tensor_split', 'int64')
        H.assert_error(function() ddpl.zeros(3):tril() end, 'tril', '2 dimensions')
        H.assert_error(function() x:triu(1, 2) end, 'triu', 'argument')
        H.assert_error(function() ddpl.tril_indices(-1, 3) end, 'tril_indices', 'non-negative')
        H.assert_error(function() ddpl.triu_indices(3, 3, {dtype = 'float32'}) end,
                       'triu_indices', 'float32')
        H.assert_error(function() ddpl.tril_indices(2 ^ 40 // 1, 2 ^ 40 // 1) end,
                       'tril_indices', 'too many')
        H.assert_error(function() ddpl.zeros(2, 2, 2):diag() end, 'diag', 'matrix or a vector')
        H.assert_error(function() x:diagonal(0, 1, 1) end, 'diagonal', 'identical')
        H.assert_error(function() ddpl.zeros(3):diagonal() end, 'diagonal', '2 dimensions')
        H.assert_error(function() ddpl.zeros(3):diag_embed(0, 0, 0) end, 'diag_embed', 'identical')
        H.assert_error(function() ddpl.zeros(3):diag_embed(2 ^ 62 // 1) end, 'diag_embed')
        H.assert_error(function() ddpl.zeros(3):trace() end, 'trace', 'matrix')
        H.assert_error(function() x:bool():trace() end, 'trace', 'bool')
        H.assert_error(function() ddpl.zeros(3):broadcast_to({2}) end, 'broadcast_to')
        H.assert_error(function() ddpl.broadcast_tensors(ddpl.zeros(2), ddpl.zeros(3)) end,
                       'broadcast_tensors')
        H.assert_error(function() ddpl.broadcast_shapes({2}, {3}) end, 'broadcast_shapes')
        H.assert_error(function() ddpl.broadcast_shapes({-2}) end, 'broadcast_shapes', 'negative')
        H.assert_error(function() ddpl.block_diag(ddpl.zeros(1, 1, 1)) end, 'block_diag', '2 or fewer')
        H.assert_error(function() ddpl.cartesian_prod(ddpl.zeros(2, 2)) end, 'cartesian_prod', '1-D')
        H.assert_error(function() ddpl.cartesian_prod(ddpl.zeros(2), ddpl.zeros(2):long()) end,
                       'cartesian_prod', 'same dtype')
        H.assert_error(function() ddpl.meshgrid() end, 'meshgrid', 'non-empty')
        H.assert_error(function() ddpl.meshgrid(ddpl.zeros(2, 2)) end, 'meshgrid', '0-D or 1-D')
        H.assert_error(function() ddpl.meshgrid(ddpl.zeros(2), {indexing = 'yx'}) end,
                       'meshgrid', 'indexing')
        H.assert_error(function() ddpl.meshgrid(ddpl.zeros(2), {foo = 1}) end, 'unknown option')
        H.assert_error(function() F.pad(ddpl.zeros(1, 1, 4), {4, 0}, {mode = 'reflect'}) end,
                       'pad', 'reflect')
        H.assert_error(function() F.pad(ddpl.zeros(1, 1, 4), {5, 0}, {mode = 'circular'}) end,
                       'pad', 'circular')
        H.assert_error(function() F.pad(ddpl.zeros(1, 4), {1, 1}, {mode = 'circular'}) end,
                       'pad', 'circular')
        H.assert_error(function() F.pad(ddpl.zeros(1, 2, 4), {1, 1, 1, 1}, {mode = 'circular'}) end,
                       'pad', 'circular')
        H.assert_error(function() F.pad(ddpl.zeros(4), {1, 1}, {mode = 'replicate'}) end,
                       'pad', 'replicate')
        H.assert_error(function() F.one_hot(ddpl.tensor({1, -2}, {dtype = 'int64'}), 5) end,
                       'one_hot', 'non-negative')
        H.assert_error(function() F.one_hot(ddpl.tensor({1, 7}, {dtype = 'int64'}), 5) end,
                       'one_hot', 'smaller than num_classes')
        H.assert_error(function() F.one_hot(ddpl.tensor({1, 2}, {dtype = 'int32'}), 5) end,
                       'one_hot', 'int64')
    end)
end)

describe('gradcheck in float64', function()
    local gc = ddpl.autograd.gradcheck
    local function leaf(shape, seed)
        local x = H.lcg(shape, seed, 4, 'float64')
        x.requires_grad = true
        return x
    end
    it('for each differentiable function', function()
        local x, v = leaf({3, 4}, 1), leaf({3}, 2)
        local fns = {
            function(a) return a['repeat'](a, 2, 1, 2) end,
            function(a) return a:tile({2}) end,
            function(a) return a:repeat_interleave(2, 1) end,
            function(a) return a:repeat_interleave(ddpl.tensor({1, 0, 2}, {dtype = 'int64'}), 0) end,
            function(a) return a:flip(0, 1) end,
            function(a) return a:fliplr() end,
            function(a) return a:flipud() end,
            function(a) return a:roll({1, -1}, {0, 1}) end,
            function(a) return a:roll(5) end,
            function(a) return a:rot90(1) end,
            function(a) return a:rot90(-1) end,
            function(a) return a:movedim(0, 1) end,
            function(a) return a:unflatten(1, {2, 2}) end,
            function(a) return a:tensor_split({1, 3}, 1)[2] end,
            function(a) return a:tril(1) end,
            function(a) return a:triu(-1) end,
            function(a) return a:diag(1) end,
            function(a) return a:diagonal(-1) end,
            function(a) return a:diag_embed(1, 0, 2) end,
            function(a) return a:trace() end,
            function(a) return a:broadcast_to({2, 3, 4}) end,
            function(a) return ddpl.broadcast_tensors(a, ddpl.zeros(2, 1, 1, {dtype = 'float64'}))[1] end,
            function(a) return ddpl.block_diag(a, a:narrow(0, 0, 1)) end,
            function(a) return ddpl.meshgrid(a:select(0, 0), a:select(1, 1), {indexing = 'xy'})[1] end,
            function(a) return ddpl.cartesian_prod(a:select(0, 0), a:select(1, 1)) end,
            function(a) return F.pad(a:unsqueeze(0), {2, 1}, {mode = 'reflect'}) end,
            function(a) return F.pad(a:unsqueeze(0), {3, -1}, {mode = 'replicate'}) end,
            function(a) return F.pad(a:unsqueeze(0):unsqueeze(0), {1, 2, 2, 1}, {mode = 'circular'}) end,
        }
        for i, f in ipairs(fns) do
            local ok, res = pcall(gc, f, {x})
            assert(ok and res == true, 'gradcheck ' .. i .. ': ' .. tostring(res))
        end
        assert.is_true(gc(function(a) return a:diag(-1) end, {v}))
        assert.is_true(gc(function(a) return a:diag_embed() end, {v}))
    end)

    it('and second derivatives through diagonal and tril', function()
        local x = leaf({3, 3}, 5)
        assert.is_true(ddpl.autograd.gradgradcheck(function(a) return (a:diagonal() ^ 2) end, {x}))
        assert.is_true(ddpl.autograd.gradgradcheck(function(a) return (a:tril() ^ 2) end, {x}))
    end)
end)

-- ---- the fixtures on CUDA (pending without a device) ----
local function no_cuda()
    if ddpl.cuda.is_available() then return false end
    pending('no CUDA device')
    return true
end

local function to_cpu(v)
    if type(v) == 'userdata' then return v:cpu() end
    return v
end

describe('shape functions on cuda match PyTorch', function()
    for _, case in ipairs(cases) do
        it(case.name, function()
            if no_cuda() then return end
            local ins = H.inputs(case)
            local args = {}
            for i, v in ipairs(ins) do
                args[i] = type(v) == 'userdata' and v:to('cuda') or v
                if type(v) == 'userdata' and (case.t_inputs or {})[1] == i then args[i] = args[i]:t() end
            end
            local opts = {}
            for k, v in pairs(case.opts or {}) do opts[k] = v end
            local runner = runners[case.op]
            if case.op == 'tril_indices' or case.op == 'triu_indices' then
                runner = function(_, o)
                    local f = case.op == 'tril_indices' and ddpl.tril_indices or ddpl.triu_indices
                    local r = f(o.row, o.col, o.offset, {dtype = o.dtype, device = 'cuda'})
                    assert.are.equal('cuda', tostring(r.device):sub(1, 4))
                    return r
                end
            end
            local outs = table.pack(runner(args, opts))
            for i, e in ipairs(case.outputs) do
                assert.are.equal('cuda', tostring(outs[i].device):sub(1, 4))
                local rtol, atol = H.tolerance(e.dtype)
                H.assert_close(to_cpu(outs[i]), e, case.rtol or rtol, case.atol or atol,
                               case.name .. ': output ' .. i)
            end
            if case.grads then
                outs[1]:backward(H.tensor(case.grad_out):to('cuda'))
                for i, e in pairs(case.grads) do
                    local rtol, atol = H.tolerance(e.dtype)
                    H.assert_close(ins[i].grad, e, rtol * 2, atol * 2,
                                   case.name .. ': gradient of input ' .. i)
                end
            end
        end)
    end

    it('tril_/triu_ and diagonal views work in place on cuda', function()
        if no_cuda() then return end
        local x = ddpl.ones(3, 3):cuda()
        x:tril_()
        assert.are.equal(6, x:sum():item())
        x:diagonal():fill_(5)
        assert.are.equal(18, x:sum():item())
        local idx = ddpl.repeat_interleave(ddpl.tensor({1, 2}, {dtype = 'int64'}):cuda())
        assert.are.equal('cuda', tostring(idx.device):sub(1, 4))
        assert.are.same({0, 1, 1}, idx:cpu():tolist())
        local r = ddpl.arange(4):reshape(2, 2):cuda():repeat_interleave(ddpl.tensor({2, 1}):long():cuda(), 0)
        assert.are.same({{0, 1}, {0, 1}, {2, 3}}, r:cpu():tolist())
    end)
end)
