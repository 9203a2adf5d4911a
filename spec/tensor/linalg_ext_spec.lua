-- spec/tensor/linalg_ext_spec.lua: products (outer, dot, inner, kron, tensordot, cross,
-- einsum, baddbmm, addbmm, addmv, addr, cdist), the linalg norms and the decompositions (inv,
-- solve, det, slogdet, cholesky, qr, svd, svdvals, eigh, eigvalsh, pinv, matrix_rank) against
-- PyTorch (spec/fixtures/linalg_ext.lua, tools/gen_linalg_fixtures.py): values and gradients in
-- float32 and float64, gradcheck in float64, PyTorch's errors, and the same cases on CUDA.
local H = require 'helpers'
local ddpl = H.ddpl
local L = ddpl.linalg

local cases = H.fixture('linalg_ext')

-- the sign-invariant views of the decompositions, as tools/gen_linalg_fixtures.py records them
local function svd_inv(U, S, Vh, k)
    local u, vh = U:narrow(-1, 0, k), Vh:narrow(-2, 0, k)
    return ddpl.cat({S:flatten(), (u * u):flatten(), (vh * vh):flatten()}),
        (u * S:unsqueeze(-2)):matmul(vh), U:transpose(-2, -1):matmul(U),
        Vh:matmul(Vh:transpose(-2, -1))
end

local function scaled(o) return {beta = o.beta, alpha = o.alpha} end

local runners = {
    outer = function(i) return i[1]:outer(i[2]) end,
    dot = function(i) return ddpl.dot(i[1], i[2]) end,
    inner = function(i) return ddpl.inner(i[1], i[2]) end,
    kron = function(i) return i[1]:kron(i[2]) end,
    tensordot = function(i, o) return ddpl.tensordot(i[1], i[2], o.dims) end,
    linalg_cross = function(i, o) return L.cross(i[1], i[2], {dim = o.dim}) end,
    cross = function(i, o) return ddpl.cross(i[1], i[2], o.dim) end,
    einsum = function(i, o) return ddpl.einsum(o.eq, table.unpack(i)) end,
    baddbmm = function(i, o) return ddpl.baddbmm(i[1], i[2], i[3], scaled(o)) end,
    addbmm = function(i, o) return i[1]:addbmm(i[2], i[3], scaled(o)) end,
    addmv = function(i, o) return ddpl.addmv(i[1], i[2], i[3], scaled(o)) end,
    addr = function(i, o) return ddpl.addr(i[1], i[2], i[3], scaled(o)) end,
    addmm = function(i, o) return ddpl.addmm(i[1], i[2], i[3], scaled(o)) end,
    cdist = function(i, o) return ddpl.cdist(i[1], i[2], o.p) end,
    vector_norm = function(i, o)
        return L.vector_norm(i[1], o.ord, o.dim, o.keepdim, {dtype = o.dtype})
    end,
    matrix_norm = function(i, o) return L.matrix_norm(i[1], o.ord, o.dim, o.keepdim) end,
    norm = function(i, o) return L.norm(i[1], o.ord, o.dim, o.keepdim) end,
    inv = function(i) return L.inv(i[1]) end,
    solve = function(i, o) return L.solve(i[1], i[2], {left = o.left}) end,
    det = function(i) return L.det(i[1]) end,
    slogdet = function(i)
        local sign, logabs = L.slogdet(i[1])
        return logabs, sign
    end,
    cholesky = function(i, o) return L.cholesky(i[1], {upper = o.upper}) end,
    svd = function(i, o)
        local U, S, Vh = L.svd(i[1], o.full_matrices)
        return svd_inv(U, S, Vh, o.k)
    end,
    svdvals = function(i) return L.svdvals(i[1]) end,
    eigh = function(i, o)
        local w, V = L.eigh(i[1], o.UPLO)
        return ddpl.cat({w:flatten(), (V * V):flatten()}),
            (V * w:unsqueeze(-2)):matmul(V:transpose(-2, -1))
    end,
    eigvalsh = function(i) return L.eigvalsh(i[1]) end,
    qr = function(i, o)
        local Q, R = L.qr(i[1], o.mode)
        return ddpl.cat({(Q * Q):flatten(), (R * R):flatten()}), Q:matmul(R),
            Q:transpose(-2, -1):matmul(Q)
    end,
    pinv = function(i, o)
        return L.pinv(i[1], {atol = o.atol, rtol = o.rtol, hermitian = o.hermitian})
    end,
    matrix_rank = function(i, o)
        return L.matrix_rank(i[1], {atol = o.atol, rtol = o.rtol, hermitian = o.hermitian})
    end,
    qr_r = function(i)
        local Q, R = L.qr(i[1], 'r')
        assert.are.same({0}, H.shape(Q))
        return R:abs()
    end,
}

describe('linear algebra against PyTorch (cpu)', function()
    H.run_cases(cases, runners, it)
end)

local function f64(shape, seed) return H.lcg(shape, seed, 4, 'float64') end
local function leaf(x)
    x.requires_grad = true
    return x
end
-- a well-conditioned square (batch of) matrices: lcg values plus 3 I
local function well(shape, seed)
    local n = shape[#shape]
    return leaf((f64(shape, seed) + ddpl.eye(n, n, {dtype = 'float64'}) * 3):detach())
end

describe('linear algebra gradcheck (float64)', function()
    local gc = ddpl.autograd.gradcheck
    it('products and einsum', function()
        local a, b = leaf(f64({3, 4}, 1)), leaf(f64({4, 2}, 2))
        local u, v = leaf(f64({4}, 3)), leaf(f64({4}, 4))
        assert.is_true(gc(function(x, y) return x:outer(y) end, {u, v}))
        assert.is_true(gc(function(x, y) return ddpl.dot(x, y) end, {u, v}))
        assert.is_true(gc(function(x, y) return ddpl.kron(x, y) end, {a, b}))
        assert.is_true(gc(function(x, y) return ddpl.tensordot(x, y, 1) end, {a, b}))
        assert.is_true(gc(function(x, y) return ddpl.einsum('ij,jk->ik', x, y) end, {a, b}))
        local c = leaf(f64({4, 4}, 5))
        assert.is_true(gc(function(x) return ddpl.einsum('ii->i', x) end, {c}))
        assert.is_true(gc(function(x, y, z) return ddpl.einsum('ij,jk,kl->il', x, y, z) end,
                          {a, c, b}))
        local p, q = leaf(f64({5, 3}, 6)), leaf(f64({3, 3}, 7))
        assert.is_true(gc(function(x, y) return L.cross(x, y:narrow(0, 0, 1):expand(5, 3)) end,
                          {p, q}))
    end)
    it('cdist, including the matmul path and zero distances', function()
        local x, y = leaf(f64({4, 3}, 8)), leaf(f64({5, 3}, 9))
        for _, p in ipairs({1, 2, 1.5, math.huge}) do
            assert.is_true(gc(function(a, b) return ddpl.cdist(a, b, p) end, {x, y}))
        end
        local big, big2 = leaf(f64({27, 3}, 10)), leaf(f64({26, 3}, 11))
        assert.is_true(gc(function(a, b) return ddpl.cdist(a, b) end, {big, big2}))
        local z = ddpl.cdist(x, x:detach())
        z:sum():backward()
        for _, g in ipairs(H.values(x.grad)) do assert.is_true(g == g) end -- finite, no NaN
    end)
    it('norms', function()
        local x = leaf(f64({3, 4}, 12))
        assert.is_true(gc(function(a) return L.vector_norm(a, 3, {0, 1}) end, {x}))
        for _, o in ipairs({'fro', 'nuc', 1, -1, 2, -2, math.huge, -math.huge}) do
            assert.is_true(gc(function(a) return L.matrix_norm(a, o) end, {x}))
        end
    end)
    it('inv, solve, det, slogdet, cholesky', function()
        local a, b = well({3, 3}, 13), leaf(f64({3, 2}, 14))
        assert.is_true(gc(L.inv, {a}))
        assert.is_true(gc(L.solve, {a, b}))
        assert.is_true(gc(L.det, {a}))
        assert.is_true(gc(function(x) return select(2, L.slogdet(x)) end, {a}))
        local s = leaf((a:matmul(a:t()) + ddpl.eye(3, 3, {dtype = 'float64'})):detach())
        assert.is_true(gc(function(x)
            return L.cholesky((x + x:t()) * 0.5)
        end, {s}))
        -- second order through inv and solve (their backward is made of ops)
        assert.is_true(ddpl.autograd.gradgradcheck(L.inv, {a}))
    end)
    it('det of a singular matrix has the cofactor gradient', function()
        local a = leaf(ddpl.tensor({{1, 2, 3}, {2, 4, 6}, {1, 0, 1}}, {dtype = 'float64'}))
        local d = L.det(a)
        assert.are.equal(0, d:item())
        d:backward()
        -- cofactors of a, computed by hand
        H.assert_close(a.grad, {shape = {3, 3}, dtype = 'float64',
                                values = {4, 4, -4, -2, -2, 2, 0, 0, 0}}, 1e-9, 1e-9)
    end)
    it('qr, svd, svdvals, eigh, eigvalsh (sign-invariant losses)', function()
        local t, w = leaf(f64({5, 3}, 15)), leaf(f64({3, 5}, 16))
        local function qr_loss(x)
            local Q, R = L.qr(x)
            return ddpl.cat({(Q * Q):flatten(), (R * R):flatten()})
        end
        assert.is_true(gc(qr_loss, {t}))
        assert.is_true(gc(qr_loss, {w}))
        for _, x in ipairs({t, w}) do
            for _, full in ipairs({false, true}) do
                assert.is_true(gc(function(a)
                    local U, S, Vh = L.svd(a, full)
                    return (svd_inv(U, S, Vh, 3)) -- the first value only
                end, {x}))
            end
        end
        assert.is_true(gc(L.svdvals, {t}))
        assert.is_true(gc(L.pinv, {t}))
        assert.is_true(gc(L.pinv, {w}))
        local sq = leaf(f64({4, 4}, 17))
        local function eigh_loss(a)
            local l, V = L.eigh(a + a:t())
            return ddpl.cat({l, (V * V):flatten()})
        end
        assert.is_true(gc(eigh_loss, {sq}))
        assert.is_true(gc(function(a) return L.eigvalsh(a + a:t()) end, {sq}))
    end)
end)

describe('linear algebra second derivatives (gradgradcheck, float64)', function()
    -- every backward formula is written with ops, so it is differentiable again
    local gg = ddpl.autograd.gradgradcheck
    local a, b = well({3, 3}, 21), leaf(f64({3, 2}, 22))
    it('solve, det, cholesky, pinv', function()
        assert.is_true(gg(L.solve, {a, b}))
        assert.is_true(gg(L.det, {a}))
        assert.is_true(gg(function(x) return L.cholesky(x:matmul(x:t())) end, {a}))
        assert.is_true(gg(L.pinv, {a}))
    end)
    it('eigh, svd, qr, einsum, cdist', function()
        assert.is_true(gg(function(x)
            local l, v = L.eigh(x + x:t())
            return ddpl.cat({l, (v * v):flatten()})
        end, {a}))
        assert.is_true(gg(function(x)
            local u, s = L.svd(x)
            return ddpl.cat({s, (u * u):flatten()})
        end, {a}))
        assert.is_true(gg(function(x)
            local q, r = L.qr(x)
            return ddpl.cat({(q * q):flatten(), (r * r):flatten()})
        end, {a}))
        assert.is_true(gg(function(x, y) return ddpl.einsum('ij,jk->ik', x, y) end, {a, b}))
        assert.is_true(gg(function(x, y) return ddpl.cdist(x, y) end, {a, leaf(f64({4, 3}, 23))}))
    end)
end)

describe('linear algebra errors', function()
    local m = ddpl.tensor({{1, 2}, {2, 4}}, {dtype = 'float32'})
    it('singular and non positive-definite matrices, as PyTorch words them', function()
        H.assert_error(function() L.inv(m) end, 'linalg.inv: The diagonal element 2 is zero, '
                           .. 'the inversion could not be completed because the input matrix is '
                           .. 'singular.')
        H.assert_error(function() L.solve(m, ddpl.ones(2)) end, 'linalg.solve:', 'singular')
        H.assert_error(function() L.inv(ddpl.stack({ddpl.eye(2), m})) end,
                       '(Batch element 1): The diagonal element 2 is zero')
        local indefinite = ddpl.tensor({{1, 2}, {2, 1}}, {dtype = 'float32'})
        H.assert_error(function() L.cholesky(indefinite) end,
                       'linalg.cholesky: The factorization could not be completed because the '
                           .. 'input is not positive-definite (the leading minor of order 2 is '
                           .. 'not positive-definite).')
        assert.are.equal(0, L.det(m):item())
        local sign, logabs = L.slogdet(m)
        assert.are.equal(0, sign:item())
        assert.are.equal(-math.huge, logabs:item())
    end)
    it('shapes, dtypes and options', function()
        H.assert_error(function() L.inv(ddpl.zeros(2, 3)) end, 'linalg.inv',
                       'square matrices', '2 by 3')
        H.assert_error(function() L.det(ddpl.zeros(3)) end, 'linalg.det', 'at least 2 dimensions')
        H.assert_error(function() L.inv(ddpl.zeros(2, 2, {dtype = 'int64'})) end, 'linalg.inv',
                       'floating point', 'int64')
        H.assert_error(function() L.svd(ddpl.zeros(2, 2, {dtype = 'float16'})) end,
                       'linalg.svd', 'Low precision')
        H.assert_error(function() L.solve(ddpl.eye(3), ddpl.ones(4)) end, 'linalg.solve',
                       'Incompatible shapes')
        -- left=false with a vector B, as PyTorch: XA = B has no shape for it
        H.assert_error(function() L.solve(ddpl.eye(3), ddpl.ones(3), {left = false}) end,
                       'linalg.solve', 'equation XA = B (3x3 and 3x1)')
        H.assert_error(function() L.solve(ddpl.eye(3), ddpl.ones(2, 4), {left = false}) end,
                       'linalg.solve', 'Incompatible shapes')
        H.assert_error(function() L.qr(ddpl.eye(3), 'bad') end, 'linalg.qr', "mode 'bad'")
        H.assert_error(function() L.eigh(ddpl.eye(3), 'X') end, 'linalg.eigh', 'UPLO')
        H.assert_error(function() L.matrix_norm(ddpl.eye(3), 3) end, 'linalg.matrix_norm',
                       'Order 3 not supported')
        H.assert_error(function() L.svd(ddpl.eye(3), {bogus = 1}) end, "unknown option 'bogus'")
        H.assert_error(function() ddpl.outer(ddpl.eye(2), ddpl.ones(2)) end, 'outer',
                       'Expected 1-D')
        H.assert_error(function() ddpl.dot(ddpl.ones(3), ddpl.ones(4)) end, 'dot',
                       'inconsistent tensor size')
        H.assert_error(function()
            ddpl.dot(ddpl.ones(3), ddpl.ones(3, {dtype = 'float64'}))
        end, 'dot', 'same dtype')
        H.assert_error(function() ddpl.tensordot(ddpl.ones(2, 3), ddpl.ones(4, 2), 1) end,
                       'tensordot', 'contracted dimensions need to match')
        H.assert_error(function() L.cross(ddpl.ones(2, 2), ddpl.ones(2, 2)) end, 'linalg.cross',
                       'must have length 3')
        H.assert_error(function() ddpl.cross(ddpl.ones(2, 2), ddpl.ones(2, 2)) end, 'cross',
                       'no dimension of size 3')
        H.assert_error(function() ddpl.cdist(ddpl.ones(2, 3), ddpl.ones(2, 4)) end, 'cdist',
                       'same number of columns')
        H.assert_error(function() ddpl.cdist(ddpl.ones(2, 3), ddpl.ones(2, 3), -1) end, 'cdist',
                       'non-negative')
        local L2 = L.qr(ddpl.ones(3, 2), 'r')
        assert.are.same({0}, H.shape(L2))
        local x = ddpl.ones(4, 3, {requires_grad = true})
        local _, R = L.qr(x, 'r')
        H.assert_error(function() R:sum():backward() end, "mode='r'")
    end)
    it('einsum: malformed equations and mismatched operands', function()
        local a = ddpl.ones(2, 3)
        H.assert_error(function() ddpl.einsum('ij,jk', a) end, 'einsum', 'fewer operands')
        H.assert_error(function() ddpl.einsum('ij', a, a) end, 'einsum', 'more operands')
        H.assert_error(function() ddpl.einsum('ijk', a) end, 'einsum', 'number of subscripts')
        H.assert_error(function() ddpl.einsum('ij->k', a) end, 'einsum',
                       'output subscript k does not appear')
        H.assert_error(function() ddpl.einsum('ij->ii', a) end, 'einsum', 'more than once')
        H.assert_error(function() ddpl.einsum('ij,ij', a, ddpl.ones(2, 4)) end, 'einsum',
                       'subscript j has size')
        H.assert_error(function() ddpl.einsum('ii', a) end, 'einsum', 'repeated')
        H.assert_error(function() ddpl.einsum('i1', a) end, 'einsum', 'invalid subscript')
        H.assert_error(function() ddpl.einsum('i.j', a) end, 'einsum', 'ellipsis')
        H.assert_error(function() ddpl.einsum('ij') end, 'einsum', 'at least one operand')
        -- the operands may come as one list too
        H.assert_close(ddpl.einsum('ij,kj->ik', {a, a}), a:matmul(a:t()), 0, 0)
    end)
end)

-- ---- CUDA: the fixture cases again, inputs moved to the device ----
local function on_cuda(runner)
    return function(ins, o)
        local dev = {}
        for i, x in ipairs(ins) do dev[i] = ddpl.is_tensor(x) and x:cuda() or x end
        local outs = table.pack(runner(dev, o))
        for i = 1, outs.n do outs[i] = outs[i]:cpu() end
        return table.unpack(outs, 1, outs.n)
    end
end

describe('linear algebra on cuda matches PyTorch', function()
    if not ddpl.cuda.is_available() then
        it('needs a CUDA device', function() pending('no CUDA device') end)
        return
    end
    local cr = {}
    for k, f in pairs(runners) do cr[k] = on_cuda(f) end
    for _, case in ipairs(cases) do
        it(case.name, function() H.check_case(case, cr[case.op]) end)
    end
    it('results live on the device', function()
        local a = ddpl.eye(3):cuda()
        assert.are.equal('cuda', L.inv(a).device:sub(1, 4))
        local U, S, Vh = L.svd(a)
        assert.are.equal('cuda', S.device:sub(1, 4))
        assert.are.equal('cuda', ddpl.einsum('ij,jk', a, a).device:sub(1, 4))
    end)
end)
