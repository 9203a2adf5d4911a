-- spec/cuda/cuda_parity_spec.lua: backend parity (ggml's test-backend-ops idea): every op of
-- API.md's tensor and F sections runs on cuda and on cpu from the same inputs, forward and (where
-- differentiable) backward, and the results are compared with per-dtype tolerances.
-- defines: the op table CASES and two describe blocks:
--   'cuda parity: cuda against cpu'       float32, float64, bfloat16 (where the case allows) on
--                                         cuda against the cpu in the same dtype (bfloat16:
--                                         float32 where the cpu op has no bfloat16); pending
--                                         without a CUDA device
--   'cuda parity: the table on the cpu'   the same cases in float32 and bfloat16 against a
--                                         float64 cpu reference, always run, so a slip in the
--                                         table fails here rather than on a GPU machine
--
-- A case: { name, ins = {input specs}, f = function(inputs..., ctx) -> tensor(s), grad = false
-- (no backward), dtypes = {...} (default float32, float64, bfloat16), tol = factor, random = true
-- (random ops: mean and std only, as cuda need not draw the cpu's numbers) }.
-- ctx = {dtype = , device = } of the run, for creation ops.
-- Input specs (values drawn in float64 on the cpu from a per-case seed, then rounded to the run's
-- dtype; both sides start from the same rounded values):
--   R(shape) normal; P(shape) in [0.5, 1.5); Z(shape) small integers as floats (comparisons);
--   T(shape) normal, a transposed (non-contiguous) view; S(shape) normal, a narrowed view with an
--   offset and a row stride; E(shape, to) normal, expanded (stride 0) to `to`;
--   I(shape, high) int64 in [0, high); M(shape) bool; K(shape, v) constant float (no grad).
-- Backward: loss = sum(out * w) for a fixed random w of out's shape; gradients of the leaves
-- (the tensors before any view) are compared. Tolerances: rtol per dtype, atol per dtype times
-- max(1, max |expected|); integer and bool results must match exactly.
local H = require 'helpers'
local ddpl = H.ddpl
local F = ddpl.F

local HAVE_CUDA = ddpl.cuda.is_available()
-- DDPLUA_PARITY_DEVICE=cpu runs the first block cpu against cpu: a check of this file's same-dtype
-- path on machines without a GPU
local DEVICE = os.getenv('DDPLUA_PARITY_DEVICE') or 'cuda'

local TOL = { -- {rtol, atol}
    float64 = { 1e-9, 1e-11 },
    float32 = { 1e-4, 1e-5 },
    bfloat16 = { 3e-2, 3e-2 },
}
local FLOAT = { float32 = true, float64 = true, bfloat16 = true, float16 = true }

---------------------------------------------------------------------------------------------------
-- input specs
---------------------------------------------------------------------------------------------------
local function R(shape) return { kind = 'R', shape = shape } end
local function P(shape) return { kind = 'P', shape = shape } end
local function Z(shape) return { kind = 'Z', shape = shape } end
local function T(shape) return { kind = 'T', shape = shape } end
local function S(shape) return { kind = 'S', shape = shape } end
local function E(shape, to) return { kind = 'E', shape = shape, to = to } end
local function I(shape, high) return { kind = 'I', shape = shape, high = high } end
local function M(shape) return { kind = 'M', shape = shape } end
local function K(shape, v) return { kind = 'K', shape = shape, value = v } end

local function copy(t)
    local c = {}
    for i, v in ipairs(t) do c[i] = v end
    return c
end

-- the stored (physical) shape of a spec's leaf
local function physical(s)
    local shape = copy(s.shape)
    local n = #shape
    if s.kind == 'T' then
        shape[n - 1], shape[n] = shape[n], shape[n - 1]
    elseif s.kind == 'S' then
        shape[n] = 2 * shape[n] + 1
    end
    return shape
end

-- the spec's values on the cpu: float64 for float kinds, int64 or bool otherwise
local function make_base(s)
    local o = { dtype = 'float64' }
    local shape = physical(s)
    if s.kind == 'P' then return ddpl.rand(shape, o) + 0.5 end
    if s.kind == 'Z' then return ddpl.randint(-2, 3, shape, o) end
    if s.kind == 'I' then return ddpl.randint(0, s.high, shape, { dtype = 'int64' }) end
    if s.kind == 'M' then return ddpl.rand(shape):lt(0.5) end
    if s.kind == 'K' then return ddpl.full(shape, s.value, o) end
    return ddpl.randn(shape, o)
end

local function is_float_spec(s) return s.kind ~= 'I' and s.kind ~= 'M' end

-- the argument a case's f sees, from its leaf
local function view_of(leaf, s)
    local n = #s.shape
    if s.kind == 'T' then return leaf:transpose(n - 2, n - 1) end
    if s.kind == 'S' then return leaf:narrow(n - 1, 1, s.shape[n]) end
    if s.kind == 'E' then return leaf:expand(table.unpack(s.to)) end
    return leaf
end

---------------------------------------------------------------------------------------------------
-- the op table
---------------------------------------------------------------------------------------------------
local FP = { 'float32', 'float64' } -- ops whose results may tie or flip in bfloat16
local CASES = {}
local function case(c) CASES[#CASES + 1] = c end

-- pointwise unary, as methods, on a plain, a transposed and a narrowed input
for _, op in ipairs({ 'neg', 'exp', 'abs', 'sin', 'cos', 'tanh', 'sigmoid', 'relu', 'gelu',
    'silu' }) do
    case { name = op, ins = { R { 3, 4 } }, f = function(x) return x[op](x) end }
    case { name = op .. ' transposed', ins = { T { 3, 4 } }, f = function(x) return x[op](x) end }
end
for _, op in ipairs({ 'log', 'sqrt', 'rsqrt' }) do
    case { name = op, ins = { P { 3, 4 } }, f = function(x) return x[op](x) end }
    case { name = op .. ' narrowed', ins = { S { 3, 4 } }, f = function(x)
        local y = x:abs() + 0.5
        return y[op](y)
    end }
end
case { name = 'unary minus', ins = { S { 2, 5 } }, f = function(x) return -x end }
case { name = 'F.relu', ins = { R { 4, 5 } }, f = function(x) return F.relu(x) end }
case { name = 'F.gelu', ins = { R { 4, 5 } }, f = function(x) return F.gelu(x) end }
case { name = 'F.gelu tanh', ins = { R { 4, 5 } },
    f = function(x) return F.gelu(x, { approximate = 'tanh' }) end }
case { name = 'F.silu', ins = { R { 4, 5 } }, f = function(x) return F.silu(x) end }
case { name = 'F.sigmoid', ins = { R { 4, 5 } }, f = function(x) return F.sigmoid(x) end }
case { name = 'F.tanh', ins = { R { 4, 5 } }, f = function(x) return F.tanh(x) end }
case { name = 'clamp', ins = { R { 3, 5 } }, f = function(x) return x:clamp(-0.5, 0.7) end }
case { name = 'clamp min only', ins = { T { 3, 5 } }, f = function(x) return x:clamp(0.1) end }

-- binary arithmetic: same shapes, broadcasting, numbers on either side, views
local binary = {
    add = function(a, b) return a + b end,
    sub = function(a, b) return a - b end,
    mul = function(a, b) return a * b end,
    div = function(a, b) return a / b end,
}
for _, op in ipairs({ 'add', 'sub', 'mul', 'div' }) do
    local fn = binary[op]
    local den = op == 'div' and P or R -- keep divisors away from 0
    case { name = op, ins = { R { 3, 4 }, den { 3, 4 } }, f = fn }
    case { name = op .. ' broadcast (3,1) (1,4)', ins = { R { 3, 1 }, den { 1, 4 } }, f = fn }
    case { name = op .. ' broadcast (2,3,4) (4)', ins = { R { 2, 3, 4 }, den { 4 } }, f = fn }
    case { name = op .. ' transposed and expanded', ins = { T { 4, 3 }, E({ 4, 1 }, { 4, 3 }) },
        f = function(a, b) return fn(a, op == 'div' and b:abs() + 0.5 or b) end }
    case { name = op .. ' narrowed', ins = { S { 3, 4 }, R { 3, 4 } },
        f = function(a, b) return fn(a, op == 'div' and b:abs() + 0.5 or b) end }
    case { name = op .. ' number right', ins = { R { 3, 4 } },
        f = function(a) return fn(a, 1.5) end }
    case { name = op .. ' number left', ins = { den { 3, 4 } },
        f = function(a) return fn(2.5, a) end }
    case { name = op .. ' method', ins = { R { 2, 3 }, den { 2, 3 } },
        f = function(a, b) return a[op](a, b) end }
end
case { name = 'pow number', ins = { R { 3, 4 } }, f = function(x) return x ^ 2 end }
case { name = 'pow method', ins = { P { 3, 4 } }, f = function(x) return x:pow(1.5) end }
case { name = 'pow tensor', ins = { P { 3, 4 }, R { 3, 4 } }, f = function(a, b) return a ^ b end }
case { name = 'pow broadcast', ins = { P { 3, 1 }, R { 4 } },
    f = function(a, b) return a:pow(b) end }
case { name = 'where', ins = { M { 3, 4 }, R { 3, 4 }, R { 3, 4 } },
    f = function(c, a, b) return ddpl.where(c, a, b) end }
case { name = 'where broadcast', ins = { M { 3, 1 }, T { 3, 4 }, R { 4 } },
    f = function(c, a, b) return ddpl.where(c, a, b) end }
case { name = 'masked_fill', ins = { R { 3, 4 }, M { 3, 4 } },
    f = function(x, m) return x:masked_fill(m, -2.5) end }
case { name = 'masked_fill broadcast mask', ins = { T { 3, 4 }, M { 4 } },
    f = function(x, m) return x:masked_fill(m, 0) end }

-- comparisons (small integers, so equality happens)
for _, op in ipairs({ 'eq', 'ne', 'lt', 'le', 'gt', 'ge' }) do
    case { name = op, ins = { Z { 3, 4 }, Z { 3, 4 } }, grad = false,
        f = function(a, b) return a[op](a, b) end }
    case { name = op .. ' broadcast and number', ins = { Z { 3, 1 }, Z { 4 } }, grad = false,
        f = function(a, b) return a[op](a, b), a[op](a, 0) end }
end

-- reductions: all elements, a dimension, keepdim, on a transposed 3-D view
for _, op in ipairs({ 'sum', 'mean', 'var', 'std', 'prod', 'logsumexp', 'norm' }) do
    local tol = op == 'prod' and 3 or 1
    -- (dim [, keepdim]); norm takes its order p first, as PyTorch's
    local function reduce(x, ...)
        if op == 'norm' then return x:norm(2, ...) end
        return x[op](x, ...)
    end
    if op ~= 'logsumexp' then -- logsumexp takes a dim
        case { name = op .. ' all', ins = { R { 3, 4 } }, tol = tol,
            f = function(x) return x[op](x) end }
    end
    case { name = op .. ' dim 1', ins = { R { 3, 4, 5 } }, tol = tol,
        f = function(x) return reduce(x, 1) end }
    case { name = op .. ' dim -1 keepdim, transposed', ins = { T { 2, 3, 4 } }, tol = tol,
        f = function(x) return reduce(x, -1, true) end }
    case { name = op .. ' dim 0 narrowed', ins = { S { 4, 3 } }, tol = tol,
        f = function(x) return reduce(x, 0) end }
end
case { name = 'norm p=1 dim 1', ins = { R { 3, 4 } },
    f = function(x) return x:norm(1, 1) end }
case { name = 'sum large (reduction tree)', ins = { R { 4, 3000 } }, tol = 10,
    f = function(x) return x:sum(1), x:sum() end }
case { name = 'mean large columns', ins = { T { 3000, 5 } }, tol = 10,
    f = function(x) return x:mean(0) end }
for _, op in ipairs({ 'max', 'min' }) do
    case { name = op .. ' all', ins = { R { 3, 4 } }, f = function(x) return x[op](x) end }
    case { name = op .. ' dim (values, indices)', ins = { R { 3, 4, 5 } }, dtypes = FP,
        f = function(x) return x[op](x, 1) end }
    case { name = op .. ' dim keepdim transposed', ins = { T { 3, 4 } }, dtypes = FP,
        f = function(x) return x[op](x, 1, true) end }
end
for _, op in ipairs({ 'argmax', 'argmin' }) do
    case { name = op .. ' all', ins = { R { 3, 4 } }, grad = false, dtypes = FP,
        f = function(x) return x[op](x) end }
    case { name = op .. ' dim', ins = { T { 3, 4, 5 } }, grad = false, dtypes = FP,
        f = function(x) return x[op](x, 2) end }
end

-- linear algebra
case { name = 'matmul 1-D . 1-D', ins = { R { 7 }, R { 7 } },
    f = function(a, b) return a:matmul(b) end }
case { name = 'matmul 2-D @ 1-D', ins = { R { 3, 7 }, R { 7 } },
    f = function(a, b) return a:matmul(b) end }
case { name = 'matmul 1-D @ 2-D', ins = { R { 7 }, R { 7, 4 } },
    f = function(a, b) return a:matmul(b) end }
case { name = 'matmul 2-D', ins = { R { 5, 7 }, R { 7, 6 } },
    f = function(a, b) return ddpl.matmul(a, b) end }
case { name = 'matmul transposed operands', ins = { T { 5, 7 }, T { 7, 6 } },
    f = function(a, b) return a:matmul(b) end }
case { name = 'matmul narrowed operand', ins = { S { 5, 7 }, R { 7, 6 } },
    f = function(a, b) return a:matmul(b) end }
case { name = 'matmul batched', ins = { R { 2, 3, 5, 7 }, R { 2, 3, 7, 4 } },
    f = function(a, b) return a:matmul(b) end }
case { name = 'matmul broadcast batch', ins = { R { 2, 1, 5, 7 }, R { 3, 7, 4 } },
    f = function(a, b) return a:matmul(b) end }
case { name = 'matmul 3-D @ 2-D (a Linear)', ins = { R { 2, 5, 7 }, T { 4, 7 } },
    f = function(a, w) return a:matmul(w:t()) end }
case { name = 'matmul K=300', ins = { R { 9, 300 }, R { 300, 11 } }, tol = 10,
    f = function(a, b) return a:matmul(b) end }
case { name = 'mm', ins = { R { 4, 6 }, R { 6, 3 } }, f = function(a, b) return a:mm(b) end }
case { name = 'bmm', ins = { R { 3, 4, 6 }, R { 3, 6, 5 } },
    f = function(a, b) return a:bmm(b) end }
case { name = 'bmm transposed', ins = { T { 3, 4, 6 }, R { 3, 6, 5 } },
    f = function(a, b) return a:bmm(b) end }
case { name = 'addmm', ins = { R { 4, 5 }, R { 4, 6 }, R { 6, 5 } },
    f = function(c, a, b) return ddpl.addmm(c, a, b) end }
case { name = 'addmm broadcast bias', ins = { R { 5 }, R { 4, 6 }, T { 6, 5 } },
    f = function(c, a, b) return ddpl.addmm(c, a, b) end }

-- joining and picking
case { name = 'cat dim 0', ins = { R { 2, 3 }, R { 4, 3 } },
    f = function(a, b) return ddpl.cat({ a, b }, 0) end }
case { name = 'cat dim 1 views', ins = { T { 3, 2 }, S { 3, 4 } },
    f = function(a, b) return ddpl.cat({ a, b }, 1) end }
case { name = 'stack dim 0', ins = { R { 2, 3 }, R { 2, 3 } },
    f = function(a, b) return ddpl.stack({ a, b }, 0) end }
case { name = 'stack dim 2 views', ins = { T { 2, 3 }, R { 2, 3 } },
    f = function(a, b) return ddpl.stack({ a, b }, 2) end }
case { name = 'index_select dim 0', ins = { R { 5, 3 }, I({ 7 }, 5) },
    f = function(x, i) return x:index_select(0, i) end }
case { name = 'index_select dim 1 transposed', ins = { T { 4, 6 }, I({ 3 }, 6) },
    f = function(x, i) return x:index_select(1, i) end }
case { name = 'gather dim 1', ins = { R { 3, 5 }, I({ 3, 4 }, 5) },
    f = function(x, i) return x:gather(1, i) end }
case { name = 'gather dim 0', ins = { T { 4, 3 }, I({ 2, 3 }, 4) },
    f = function(x, i) return x:gather(0, i) end }
case { name = 'topk', ins = { R { 3, 8 } }, dtypes = FP,
    f = function(x) return ddpl.topk(x, 3) end }
case { name = 'topk smallest dim 0', ins = { T { 6, 4 } }, dtypes = FP,
    f = function(x) return ddpl.topk(x, 2, { dim = 0, largest = false }) end }

-- views (their results read through the strides) and copies
case { name = 'transpose contiguous', ins = { R { 3, 4, 5 } },
    f = function(x) return x:transpose(0, 2):contiguous() end }
case { name = 'permute', ins = { R { 2, 3, 4 } },
    f = function(x) return x:permute(2, 0, 1) * 1 end }
case { name = 'narrow select', ins = { R { 4, 5 } },
    f = function(x) return x:narrow(1, 1, 3), x:select(0, 2), x[1] end }
case { name = 'expand', ins = { R { 3, 1 } }, f = function(x) return x:expand(3, 4) * 2 end }
case { name = 'view reshape flatten', ins = { R { 2, 3, 4 } },
    f = function(x) return x:view(6, 4), x:transpose(0, 1):reshape(3, 8), x:flatten(1) end }
case { name = 'unsqueeze squeeze t', ins = { R { 3, 1, 4 } },
    f = function(x) return x:squeeze(1):t():unsqueeze(0) + 0 end }
case { name = 'chunk split', ins = { R { 6, 4 } }, f = function(x)
    local c, s = x:chunk(3, 0), x:split(3, 1)
    return c[1], c[3], s[1], s[2]
end }
case { name = 'clone contiguous detach', ins = { T { 3, 4 } }, grad = false,
    f = function(x) return x:clone(), x:contiguous(), x:detach() end }
case { name = 'to float64 and back', ins = { R { 3, 4 } },
    f = function(x) return x:double():float() * 1 end }
case { name = 'to int64 (truncation)', ins = { R { 3, 4 } }, grad = false, dtypes = FP,
    f = function(x) return (x * 3):long() end }
case { name = 'to bool and bfloat16', ins = { Z { 3, 4 } }, grad = false,
    f = function(x) return x:to('bool'), x:bfloat16() end }

-- in place (on copies, so no leaf is modified)
case { name = 'zero_ fill_', ins = { R { 3, 4 } }, grad = false,
    f = function(x) return x:clone():zero_(), x:clone():fill_(1.25) end }
case { name = 'copy_ from a transposed view', ins = { R { 4, 3 }, T { 4, 3 } }, grad = false,
    f = function(x, y) return x:clone():copy_(y) end }
case { name = 'copy_ into a narrowed view', ins = { R { 3, 8 }, R { 3, 2 } }, grad = false,
    f = function(x, y)
        local c = x:clone()
        c:narrow(1, 2, 2):copy_(y)
        return c
    end }
case { name = 'add_ with alpha, mul_, div_', ins = { R { 3, 4 }, R { 3, 4 }, P { 4 } },
    grad = false,
    f = function(x, y, z) return x:clone():add_(y, 2):mul_(z):div_(z + 1) end }
case { name = 'clamp_', ins = { R { 3, 4 } }, grad = false,
    f = function(x) return x:clone():clamp_(-0.3, 0.3) end }

-- creation on the run's device
case { name = 'zeros ones full eye', ins = {}, grad = false, f = function(ctx)
    local o = { dtype = ctx.dtype, device = ctx.device }
    return ddpl.zeros(2, 3, o), ddpl.ones({ 3, 2 }, o), ddpl.full({ 2, 2 }, 1.5, o), ddpl.eye(3, o)
end }
case { name = 'arange', ins = {}, grad = false, f = function(ctx)
    local o = { dtype = ctx.dtype, device = ctx.device }
    return ddpl.arange(5, o), ddpl.arange(1, 4, 0.5, o)
end }
case { name = 'tensor from a Lua table', ins = {}, grad = false, f = function(ctx)
    return ddpl.tensor({ { 1.5, -2 }, { 3.25, 4 } }, { dtype = ctx.dtype, device = ctx.device })
end }
case { name = 'to float16', ins = { Z { 3, 4 } }, grad = false, dtypes = { 'float32' },
    f = function(x) return x:half(), (x / 4):half():float() end }
case { name = 'zeros_like ones_like', ins = { R { 2, 3 } }, grad = false,
    f = function(x) return ddpl.zeros_like(x), ddpl.ones_like(x) end }

-- random (same seed on both sides; compared by mean and standard deviation only)
case { name = 'rand randn', ins = {}, random = true, f = function(ctx)
    local o = { dtype = ctx.dtype, device = ctx.device }
    return ddpl.rand(64, 64, o), ddpl.randn(64, 64, o)
end }
case { name = 'uniform_ normal_ bernoulli_', ins = { K({ 64, 64 }, 0) }, random = true,
    f = function(x)
        return x:clone():uniform_(-1, 1), x:clone():normal_(2, 0.5), x:clone():bernoulli_(0.3)
    end }
case { name = 'rand_like randn_like', ins = { K({ 64, 64 }, 0) }, random = true,
    f = function(x) return ddpl.rand_like(x), ddpl.randn_like(x) end }
case { name = 'randint', ins = {}, random = true, f = function(ctx)
    return ddpl.randint(0, 10, { 64, 64 }, { device = ctx.device })
end }
case { name = 'F.dropout training', ins = { K({ 64, 64 }, 1) }, random = true,
    f = function(x) return F.dropout(x, 0.25, true) end }

-- nn.functional
case { name = 'F.dropout eval', ins = { R { 3, 4 } },
    f = function(x) return F.dropout(x, 0.5, false) end }
case { name = 'F.linear', ins = { R { 3, 5 }, R { 4, 5 }, R { 4 } },
    f = function(x, w, b) return F.linear(x, w, b) end }
case { name = 'F.linear 3-D no bias', ins = { R { 2, 3, 5 }, R { 4, 5 } },
    f = function(x, w) return F.linear(x, w) end }
for _, dim in ipairs({ 1, 0, -1 }) do
    case { name = 'F.softmax dim ' .. dim, ins = { R { 3, 4, 5 } },
        f = function(x) return F.softmax(x, dim) end }
    case { name = 'F.log_softmax dim ' .. dim, ins = { R { 3, 4, 5 } },
        f = function(x) return F.log_softmax(x, dim) end }
end
case { name = 'F.softmax transposed, wide rows', ins = { T { 700, 3 } }, tol = 3,
    f = function(x) return F.softmax(x, 1), F.log_softmax(x, 1) end }
case { name = 'F.cross_entropy', ins = { R { 6, 5 }, I({ 6 }, 5) },
    f = function(x, y) return F.cross_entropy(x, y) end }
case { name = 'F.cross_entropy sum, none', ins = { R { 6, 5 }, I({ 6 }, 5) },
    f = function(x, y)
        local ce = F.cross_entropy
        return ce(x, y, { reduction = 'sum' }), ce(x, y, { reduction = 'none' })
    end }
case { name = 'F.cross_entropy ignore_index, label_smoothing', ins = { R { 8, 5 }, I({ 8 }, 5) },
    f = function(x, y)
        return F.cross_entropy(x, y, { ignore_index = 2, label_smoothing = 0.1 })
    end }
case { name = 'F.cross_entropy (N,C,d)', ins = { R { 2, 5, 3 }, I({ 2, 3 }, 5) },
    f = function(x, y) return F.cross_entropy(x, y) end }
case { name = 'F.cross_entropy large vocab', ins = { R { 4, 3000 }, I({ 4 }, 3000) }, tol = 3,
    f = function(x, y) return F.cross_entropy(x, y) end }
case { name = 'F.nll_loss', ins = { R { 6, 5 }, I({ 6 }, 5) },
    f = function(x, y) return F.nll_loss(F.log_softmax(x, 1), y) end }
case { name = 'F.mse_loss mean, sum', ins = { R { 3, 4 }, T { 3, 4 } },
    f = function(a, b) return F.mse_loss(a, b), F.mse_loss(a, b, { reduction = 'sum' }) end }
case { name = 'F.embedding', ins = { R { 10, 4 }, I({ 2, 6 }, 10) },
    f = function(w, i) return F.embedding(i, w) end }
case { name = 'F.layer_norm', ins = { R { 3, 4, 6 }, R { 6 }, R { 6 } },
    f = function(x, w, b) return F.layer_norm(x, { 6 }, w, b) end }
case { name = 'F.layer_norm no affine, 2 dims, transposed', ins = { T { 3, 4, 6 } },
    f = function(x) return F.layer_norm(x, { 4, 6 }) end }
case { name = 'F.layer_norm wide rows', ins = { R { 3, 1000 }, R { 1000 }, R { 1000 } }, tol = 3,
    f = function(x, w, b) return F.layer_norm(x, { 1000 }, w, b) end }
case { name = 'F.batch_norm training (running stats updated)',
    ins = { R { 4, 3, 5 }, K({ 3 }, 0), K({ 3 }, 1), R { 3 }, R { 3 } }, tol = 3,
    f = function(x, rm, rv, w, b)
        local y = F.batch_norm(x, rm, rv, w, b, true, 0.1, 1e-5)
        return y, rm, rv
    end }
case { name = 'F.batch_norm eval 4-D',
    ins = { R { 2, 3, 2, 2 }, R { 3 }, P { 3 }, R { 3 }, R { 3 } },
    f = function(x, rm, rv, w, b) return F.batch_norm(x, rm, rv, w, b, false) end }
case { name = 'F.conv2d', ins = { R { 2, 3, 7, 7 }, R { 4, 3, 3, 3 }, R { 4 } }, tol = 3,
    f = function(x, w, b) return F.conv2d(x, w, b) end }
case { name = 'F.conv2d stride 2 padding 1', ins = { R { 2, 3, 8, 8 }, R { 4, 3, 3, 3 }, R { 4 } },
    tol = 3,
    f = function(x, w, b) return F.conv2d(x, w, b, { stride = 2, padding = 1 }) end }
case { name = 'F.conv2d dilation 2 groups 2 no bias', ins = { R { 1, 4, 9, 9 }, R { 6, 2, 3, 3 } },
    tol = 3,
    f = function(x, w) return F.conv2d(x, w, nil, { dilation = 2, groups = 2 }) end }
case { name = 'F.conv2d 1x1 on a transposed input', ins = { T { 2, 3, 5, 4 }, R { 2, 3, 1, 1 } },
    tol = 3,
    f = function(x, w) return F.conv2d(x, w) end }
case { name = 'F.max_pool2d', ins = { R { 2, 3, 6, 6 } }, dtypes = FP,
    f = function(x) return F.max_pool2d(x, 2) end }
case { name = 'F.max_pool2d 3 stride 2 padding 1', ins = { R { 2, 2, 7, 7 } }, dtypes = FP,
    f = function(x) return F.max_pool2d(x, 3, { stride = 2, padding = 1 }) end }
case { name = 'F.avg_pool2d', ins = { R { 2, 3, 6, 6 } },
    f = function(x) return F.avg_pool2d(x, 2) end }
case { name = 'F.avg_pool2d 3 stride 2 padding 1', ins = { R { 1, 2, 7, 7 } },
    f = function(x) return F.avg_pool2d(x, 3, { stride = 2, padding = 1 }) end }
case { name = 'F.adaptive_avg_pool2d', ins = { R { 2, 3, 7, 5 } },
    f = function(x) return F.adaptive_avg_pool2d(x, { 3, 2 }), F.adaptive_avg_pool2d(x, 1) end }
case { name = 'F.scaled_dot_product_attention',
    ins = { R { 2, 2, 5, 4 }, R { 2, 2, 5, 4 }, R { 2, 2, 5, 4 } },
    tol = 3, f = function(q, k, v) return F.scaled_dot_product_attention(q, k, v) end }
case { name = 'F.scaled_dot_product_attention causal',
    ins = { R { 2, 3, 6, 8 }, R { 2, 3, 6, 8 }, R { 2, 3, 6, 8 } }, tol = 3,
    f = function(q, k, v) return F.scaled_dot_product_attention(q, k, v, { is_causal = true }) end }
case { name = 'F.scaled_dot_product_attention causal, heads as a transposed view',
    ins = { R { 2, 7, 3, 8 }, R { 2, 7, 3, 8 }, R { 2, 7, 3, 8 } }, tol = 3,
    f = function(q, k, v)
        local function heads(t) return t:transpose(1, 2) end
        return F.scaled_dot_product_attention(heads(q), heads(k), heads(v), { is_causal = true })
    end }

-- issue 16's additions (nn.functional_*.lua, ops/nn_conv_transpose.c)
case { name = 'F.binary_cross_entropy weight', ins = { P { 3, 4 }, P { 3, 4 }, P { 4 } },
    dtypes = FP,
    f = function(x, y, w) return F.binary_cross_entropy(x * 0.5, y - 0.5, { weight = w }) end }
case { name = 'F.binary_cross_entropy_with_logits pos_weight', dtypes = FP,
    ins = { R { 3, 4 }, P { 3, 4 }, P { 4 } },
    f = function(x, y, pw)
        return F.binary_cross_entropy_with_logits(x * 3, y - 0.5, { pos_weight = pw,
                                                                    reduction = 'none' })
    end }
case { name = 'F.l1, smooth_l1, huber losses', ins = { R { 4, 5 }, R { 4, 5 } }, dtypes = FP,
    f = function(a, b)
        return F.l1_loss(a, b), F.smooth_l1_loss(a, b, { beta = 0.5, reduction = 'sum' }),
            F.huber_loss(a, b, { delta = 0.7, reduction = 'none' })
    end }
case { name = 'F.kl_div batchmean and log_target', ins = { R { 3, 5 }, R { 3, 5 } }, dtypes = FP,
    f = function(x, t)
        local lp, q = F.log_softmax(x, 1), F.softmax(t, 1)
        return F.kl_div(lp, q, { reduction = 'batchmean' }),
            F.kl_div(lp, q:log(), { reduction = 'sum', log_target = true })
    end }
case { name = 'F.leaky_relu, elu, softplus', ins = { R { 4, 6 } }, dtypes = FP,
    f = function(x)
        return F.leaky_relu(x, 0.2), F.elu(x * 3, 0.5), F.softplus(x * 10, 2, 5)
    end }
case { name = 'F.one_hot', ins = { I({ 2, 5 }, 4) }, grad = false, dtypes = FP,
    f = function(t) return F.one_hot(t, 6) end }
case { name = 'F.pad constant, reflect, replicate, circular', ins = { R { 2, 3, 4, 5 } },
    f = function(x)
        return F.pad(x, { 1, -1, 2, 0 }, { value = 0.5 }),
            F.pad(x, { 2, 1, 1, 2 }, { mode = 'reflect' }),
            F.pad(x, { 3, 0, 1, 1 }, { mode = 'replicate' }),
            F.pad(x, { 1, 2, 2, 1 }, { mode = 'circular' })
    end }
case { name = 'F.group_norm and rms_norm', ins = { R { 2, 6, 3, 2 }, R { 6 }, R { 6 }, R { 3, 2 } },
    dtypes = FP,
    f = function(x, w, b, g)
        return F.group_norm(x, 3, w, b), F.rms_norm(x, { 3, 2 }, g)
    end }
case { name = 'F.conv1d same, groups', ins = { R { 2, 4, 9 }, R { 6, 2, 4 }, R { 6 } }, tol = 3,
    f = function(x, w, b) return F.conv1d(x, w, b, { padding = 'same', groups = 2 }) end }
case { name = 'F.conv_transpose2d stride, output_padding, groups, dilation',
    ins = { R { 2, 4, 4, 3 }, R { 4, 3, 3, 2 }, R { 6 } }, tol = 3,
    f = function(x, w, b)
        return F.conv_transpose2d(x, w, b, { stride = 2, padding = 1, output_padding = 1,
                                             groups = 2, dilation = { 1, 2 } })
    end }

-- the fused optimizer steps: two steps on a parameter whose gradient is g
local function two_steps(make)
    return function(x, g)
        local p = x:detach():clone()
        p.requires_grad = true
        local opt = make({ p })
        for _ = 1, 2 do
            opt:zero_grad()
            ;(p * g):sum():backward()
            opt:step()
        end
        return p:detach()
    end
end
case { name = 'optim.SGD momentum nesterov weight_decay', ins = { R { 5, 4 }, R { 5, 4 } },
    grad = false, dtypes = FP, f = two_steps(function(ps)
        local o = { lr = 0.1, momentum = 0.9, nesterov = true, weight_decay = 0.01 }
        return ddpl.optim.SGD(ps, o)
    end) }
case { name = 'optim.Adam', ins = { R { 5, 4 }, R { 5, 4 } }, grad = false, dtypes = FP,
    f = two_steps(function(ps) return ddpl.optim.Adam(ps, { lr = 0.01, weight_decay = 0.01 }) end) }
case { name = 'optim.AdamW', ins = { R { 7 }, T { 3, 7 } }, grad = false, dtypes = FP,
    f = two_steps(function(ps)
        return ddpl.optim.AdamW(ps, { lr = 0.01, betas = { 0.9, 0.95 }, weight_decay = 0.1 })
    end) }

-- the recurrent cells and layer recurrences of nn.LSTM/nn.GRU (ops/nn_rnn_cell.c, nn_rnn_layer.c)
case { name = 'F._fused_lstm_cell and F._fused_gru_cell',
    ins = { R { 3, 16 }, R { 3, 16 }, R { 3, 4 }, R { 3, 12 }, R { 3, 12 }, R { 3, 4 } },
    f = function(ig, hg, c, ig3, hg3, h)
        local h1, c1 = F._fused_lstm_cell(ig, hg, c)
        return h1, c1, F._fused_gru_cell(ig3, hg3, h)
    end }
case { name = 'F._lstm_layer forward and reverse', tol = 3,
    ins = { R { 5, 3, 16 }, R { 16, 4 }, R { 3, 4 }, R { 3, 4 } },
    f = function(g, w, h0, c0)
        return F._lstm_layer(g, w * 0.5, h0, c0), F._lstm_layer(g, w * 0.5, h0, c0, true)
    end }
case { name = 'F._gru_layer forward and reverse', tol = 3,
    ins = { R { 5, 3, 12 }, R { 12, 4 }, R { 12 }, R { 3, 4 } },
    f = function(g, w, b, h0)
        return F._gru_layer(g, w * 0.5, b, h0), F._gru_layer(g, w * 0.5, nil, h0, true)
    end }

---------------------------------------------------------------------------------------------------
-- running and comparing
---------------------------------------------------------------------------------------------------
local function is_tensor(v) return ddpl.is_tensor(v) end

-- the tensors among a case's results, in order
local function results(...)
    local out = {}
    for i = 1, select('#', ...) do
        local v = select(i, ...)
        if is_tensor(v) then out[#out + 1] = v end
    end
    return out
end

-- one run: inputs from the rounded bases, converted to (dtype, device); returns the results and
-- the leaves
local function run(c, bases, dtype, device, seed)
    local leaves, args = {}, {}
    for i, s in ipairs(c.ins) do
        local b = bases[i]
        if is_float_spec(s) then
            local leaf = b:to(device):to(dtype):clone()
            if c.grad ~= false and not c.random and s.kind ~= 'K' then leaf.requires_grad = true end
            leaves[i] = leaf
            args[i] = view_of(leaf, s)
        else
            args[i] = b:to(device)
        end
    end
    args[#c.ins + 1] = { dtype = dtype, device = device }
    ddpl.manual_seed(seed + 1) -- random ops draw from the same stream on both sides
    local outs = results(c.f(table.unpack(args, 1, #c.ins + 1)))
    assert(#outs > 0, c.name .. ': the case returned no tensor')
    return outs, leaves
end

local function flat(t) return H.values(t:to('cpu'):to('float64')) end

local function compare(got, expected, dtype, tol, what)
    assert.same(H.shape(expected), H.shape(got), what .. ': shape')
    local rtol, atol = 0, 0
    if FLOAT[H.dtype_name(expected.dtype)] then
        rtol, atol = TOL[dtype][1] * tol, TOL[dtype][2] * tol
    end
    local e = flat(expected)
    local scale = 1
    for _, v in ipairs(e) do
        if math.abs(v) > scale and math.abs(v) < math.huge then scale = math.abs(v) end
    end
    H.assert_values(flat(got), e, H.shape(expected), rtol, atol * scale, what)
end

-- an error that says the op does not take bfloat16 (as opposed to a wrong result or a crash)
local function refused_bf16(err) return tostring(err):match('bfloat16') ~= nil end

local function moments(t)
    local x = t:to('cpu'):to('float64')
    return x:mean():item(), x:numel() > 1 and x:std():item() or 0
end

-- Runs case c (number k) in `dtype` on `device` and compares with the reference run in
-- (ref_dtype, ref_device); both start from the same values rounded to `dtype`.
local function check(c, k, dtype, device, ref_dtype, ref_device)
    local seed = 1000 * k
    ddpl.manual_seed(seed)
    local bases = {}
    for i, s in ipairs(c.ins) do
        local b = make_base(s)
        if is_float_spec(s) then b = b:to(dtype):to('float64') end
        bases[i] = b
    end
    local ok, outs, leaves = pcall(run, c, bases, dtype, device, seed)
    local ref_ok, ref_outs, ref_leaves = pcall(run, c, bases, ref_dtype, ref_device, seed)
    local cpu_refused = false
    if not ref_ok and ref_dtype == 'bfloat16' and refused_bf16(ref_outs) then
        -- the cpu has no bfloat16 for this op: the cuda result is compared with float32
        cpu_refused, ref_dtype = true, 'float32'
        ref_ok, ref_outs, ref_leaves = pcall(run, c, bases, ref_dtype, ref_device, seed)
    end
    if not ok then
        if dtype == 'bfloat16' and refused_bf16(outs) and (device == 'cpu' or cpu_refused) then
            pending(('bfloat16 is refused on %s: %s'):format(device == 'cpu' and 'the cpu' or
                'the cpu and ' .. device, tostring(outs)))
            return
        end
        error(outs, 0)
    end
    if not ref_ok then error(ref_outs, 0) end
    assert.equals(#ref_outs, #outs, c.name .. ': number of results')
    local tol = c.tol or 1
    for j, o in ipairs(outs) do
        local what = ('%s [%s on %s] result %d'):format(c.name, dtype, device, j)
        if device ~= ref_device then
            assert.truthy(tostring(o.device):match('^' .. device),
                what .. ': on ' .. tostring(o.device) .. ', expected ' .. device)
        end
        if ref_dtype == dtype then
            assert.equals(H.dtype_name(ref_outs[j].dtype), H.dtype_name(o.dtype), what .. ': dtype')
        end
        if c.random then
            local m, sd = moments(o)
            local rm, rsd = moments(ref_outs[j])
            -- 4096 draws: the means of two independent streams differ by about 0.02 std
            local band = 0.1 * math.max(1, rsd)
            assert.is_true(math.abs(m - rm) < band and math.abs(sd - rsd) < band,
                ('%s: mean %g, std %g; reference %g, %g'):format(what, m, sd, rm, rsd))
        else
            compare(o, ref_outs[j], dtype, tol, what)
        end
    end

    -- backward through the first result: loss = sum(out * w), w the same on both sides
    local out, ref_out = outs[1], ref_outs[1]
    if c.grad == false or c.random or not out.requires_grad then return end
    ddpl.manual_seed(seed + 2)
    local w = ddpl.randn(H.shape(out), { dtype = 'float64' }):to(dtype):to('float64')
    ;(out * w:to(out.device):to(out.dtype)):sum():backward()
    ;(ref_out * w:to(ref_out.device):to(ref_out.dtype)):sum():backward()
    for i, leaf in pairs(leaves) do
        if leaf.requires_grad then
            local what = ('%s [%s on %s] gradient of input %d'):format(c.name, dtype, device, i)
            local g, rg = leaf.grad, ref_leaves[i].grad
            assert.equals(rg == nil, g == nil, what .. ': present on one side only')
            if g then compare(g, rg, dtype, 2 * tol, what) end
        end
    end
end

local function dtypes_of(c)
    return c.dtypes or { 'float32', 'float64', 'bfloat16' }
end

describe('cuda parity: cuda against cpu', function()
    for k, c in ipairs(CASES) do
        for _, dt in ipairs(dtypes_of(c)) do
            it(('%s, %s'):format(c.name, dt), function()
                if DEVICE ~= 'cpu' and not HAVE_CUDA then
                    pending('no CUDA device')
                    return
                end
                check(c, k, dt, DEVICE, dt, 'cpu')
            end)
        end
    end
end)

describe('cuda parity: the table on the cpu', function()
    for k, c in ipairs(CASES) do
        for _, dt in ipairs(dtypes_of(c)) do
            if dt ~= 'float64' then
                it(('%s, %s against float64'):format(c.name, dt), function()
                    check(c, k, dt, 'cpu', 'float64', 'cpu')
                end)
            end
        end
    end
end)
