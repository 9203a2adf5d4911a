-- bench/gpt_kernels.lua: the non-GEMM ops of a GPT step (bench/gpt's shapes) timed one by one
-- in ddplua, fused kernels against the compositions they replace (run it as
-- `bench/gpt --kernels [--reps 15] [--threads 1]`, which sets the paths).
--
-- Each case is forward + backward of one op on the shapes of models/gpt.lua at batch 4 x 256
-- tokens (rows = 1024): cross_entropy over the 8192-word vocabulary (fused, against
-- F.log_softmax + F.nll_loss, the composition it replaced), layer_norm (1024 x 256), GELU
-- (1024 x 1024), the embedding lookup of 1024 tokens in the (8192, 256) table and the head
-- split/merge copy (transpose(1, 2):contiguous() of (4, 256, 4, 64)). A and B of a pair run in
-- alternation in this one process, `reps` times each after a warm-up; the table gives the median
-- ms and, for pairs, B / A (above 1: the fused kernel is faster).
local util = dofile((arg[0]:match('^(.*)/[^/]*$') or '.') .. '/util.lua')
local o = util.parse_args(arg, { kernels = false, reps = 15, threads = 1 }, 'bench/gpt --kernels')
local ddpl = require 'ddplua'
local F = ddpl.F
ddpl.set_num_threads(o.threads)
ddpl.manual_seed(0)

local ROWS, C, V = 1024, 256, 8192

-- ms of one call of fn (forward and backward), timed
local function time_ms(fn)
    local t = ddpl.time()
    fn()
    return (ddpl.time() - t) * 1e3
end

-- a leaf of the given sizes with requires_grad, and a closure running forward + backward
local function leaf(...) return ddpl.randn(...):requires_grad_(true) end
local function fwd_bwd(x, f)
    return function()
        x.grad = nil
        local y = f(x)
        if y:dim() == 0 then y:backward() else y:backward(ddpl.ones_like(y)) end
    end
end

local logits = leaf(ROWS, V)
local targets = ddpl.randint(V, { ROWS })
local h = leaf(ROWS, C)
local ln_w, ln_b = leaf(C), leaf(C)
local u = leaf(ROWS, 4 * C)
local wte = leaf(V, C)
local ids = ddpl.randint(V, { 4, 256 })
local qkv = leaf(4, 256, 4, 64)

-- {label, A (reference), B (or nil)}
local cases = {
    { 'cross_entropy 1024x8192 f32 (B fused, A log_softmax + nll_loss)',
        fwd_bwd(logits, function(x) return F.nll_loss(F.log_softmax(x, 1), targets) end),
        fwd_bwd(logits, function(x) return F.cross_entropy(x, targets) end) },
    { 'layer_norm 1024x256', fwd_bwd(h, function(x) return F.layer_norm(x, C, ln_w, ln_b) end) },
    { 'gelu 1024x1024', fwd_bwd(u, function(x) return F.gelu(x) end) },
    { 'embedding 1024 of 8192x256', fwd_bwd(wte, function(w) return F.embedding(ids, w) end) },
    { 'head merge transpose+contiguous', fwd_bwd(qkv, function(x)
        return x:transpose(1, 2):contiguous()
    end) },
}

io.write(('bench/gpt --kernels: threads %d, %d reps, forward + backward, median ms\n'):format(
    o.threads, o.reps))
io.write(('%-62s %9s %9s %7s\n'):format('op', 'A ms', 'B ms', 'A/B'))
for _, c in ipairs(cases) do
    local a, b = {}, {}
    c[2]()
    if c[3] then c[3]() end
    for _ = 1, o.reps do
        a[#a + 1] = time_ms(c[2])
        if c[3] then b[#b + 1] = time_ms(c[3]) end
    end
    local ma, mb = util.median(a), util.median(b)
    io.write(('%-62s %9.3f %9s %7s\n'):format(c[1], ma, mb and ('%.3f'):format(mb) or '-',
        mb and ('%.2f'):format(ma / mb) or '-'))
end
