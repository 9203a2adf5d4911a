-- bench/attention.lua: the CPU fused (flash) attention kernel (engine/cpu/cpu_attention.c)
-- against the composition of matmul, softmax and matmul, A/B in one process: run it through
-- bench/attention, which sets the paths.
--
--   bench/attention [--threads 1,2] [--rounds 7] [--inner 10] [--gpt-steps 3] [--no-gpt]
--
-- For each thread count and each shape (default: the GPT config of models/gpt.lua's benchmark,
-- B=4, H=4, T=256, head size 64, causal and not, float32), round after round, alternating which
-- path goes first: `inner` calls of the forward (inputs that require grad, as in training) and
-- `inner` calls of forward + backward, per path. Then whole GPT training steps (models/gpt.lua:
-- 4 layers, 256 wide, 4 heads, T=256, batch 4, vocab 8192, AdamW; forward, cross-entropy,
-- zero_grad, backward, step, loss:item()), `gpt-steps` per path per round, alternating.
-- Prints medians over rounds in ms, [min-max], and composed/fused (> 1: the fused kernel is
-- faster). The path is forced with ddpl._sdpa_cpu_fused_min_bytes: 0 fuses everything, a huge
-- value composes everything; the default is restored at the end.

local util = dofile((arg[0]:match('^(.*)/[^/]*$') or '.') .. '/util.lua')
local median = util.median
local o = util.parse_args(arg, { threads = '1,2', rounds = 7, inner = 10, gpt_steps = 3,
    no_gpt = false, shapes = '4x4x256x64', root = '.' }, 'bench/attention')

local ddpl = require 'ddplua'
local F = ddpl.F
local DEFAULT = ddpl._sdpa_cpu_fused_min_bytes()
local PATHS = { fused = 0, composed = math.maxinteger }

local function use(path) ddpl._sdpa_cpu_fused_min_bytes(PATHS[path]) end

local function leaf(shape)
    local t = ddpl.randn(shape)
    t.requires_grad = true
    return t
end

-- ms per call of fn over `inner` calls
local function timed(fn, inner)
    local t0 = ddpl.time()
    for _ = 1, inner do fn() end
    return (ddpl.time() - t0) * 1000 / inner
end

local function summary(v)
    local lo, hi = math.huge, -math.huge
    for _, x in ipairs(v) do lo, hi = math.min(lo, x), math.max(hi, x) end
    return string.format('%8.2f [%.2f-%.2f]', median(v), lo, hi)
end

local function report(name, r)
    print(string.format('  %-28s fused %s  composed %s  composed/fused %.2fx', name,
        summary(r.fused), summary(r.composed), median(r.composed) / median(r.fused)))
end

-- Alternating A/B: rounds x {fused, composed} (order flipped each round) of measure(path).
local function ab(measure)
    local r = { fused = {}, composed = {} }
    for round = 1, o.rounds do
        local order = round % 2 == 1 and { 'fused', 'composed' } or { 'composed', 'fused' }
        for _, path in ipairs(order) do
            use(path)
            r[path][#r[path] + 1] = measure(path)
        end
    end
    return r
end

local function bench_op(B, Hh, T, E, causal)
    local q, k, v = leaf({ B, Hh, T, E }), leaf({ B, Hh, T, E }), leaf({ B, Hh, T, E })
    local gy = ddpl.randn({ B, Hh, T, E })
    local opts = { is_causal = causal }
    local function fwd() return F.scaled_dot_product_attention(q, k, v, opts) end
    local function fwd_bwd()
        q.grad, k.grad, v.grad = nil, nil, nil
        fwd():backward(gy)
    end
    for _, p in ipairs({ 'fused', 'composed' }) do use(p); fwd_bwd() end -- warm-up
    local tag = string.format('B%d H%d T%d E%d%s', B, Hh, T, E, causal and ' causal' or '')
    report(tag .. ' fwd', ab(function() return timed(fwd, o.inner) end))
    report(tag .. ' fwd+bwd', ab(function() return timed(fwd_bwd, o.inner) end))
end

local function bench_gpt()
    local gpt = dofile(o.root .. '/models/gpt.lua')
    ddpl.manual_seed(0)
    local model = gpt({ vocab_size = 8192, block_size = 256, n_layer = 4, n_head = 4,
        n_embd = 256 })
    local opt = ddpl.optim.AdamW(model:parameters(), { lr = 3e-4 })
    local idx = ddpl.randint(0, 8192, { 4, 256 })
    local tgt = ddpl.randint(0, 8192, { 4, 256 })
    local function step()
        local _, loss = model(idx, tgt)
        opt:zero_grad()
        loss:backward()
        opt:step()
        loss:item()
    end
    for _, p in ipairs({ 'fused', 'composed' }) do use(p); step(); step() end -- warm-up
    report('GPT training step', ab(function() return timed(step, o.gpt_steps) end))
end

for th in o.threads:gmatch('%d+') do
    ddpl.set_num_threads(tonumber(th))
    print(string.format('threads %s, rounds %d (medians in ms, [min-max])', th, o.rounds))
    for shape in o.shapes:gmatch('[%dx]+') do
        local B, Hh, T, E = shape:match('^(%d+)x(%d+)x(%d+)x(%d+)$')
        assert(B, 'bench/attention: --shapes takes BxHxTxE[,...]')
        for _, causal in ipairs({ true, false }) do
            bench_op(tonumber(B), tonumber(Hh), tonumber(T), tonumber(E), causal)
        end
    end
    if not o.no_gpt then bench_gpt() end
end
ddpl._sdpa_cpu_fused_min_bytes(DEFAULT)
