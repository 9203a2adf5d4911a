-- bench/gpt.lua: the GPT training benchmark behind bench/gpt: step time of models/gpt.lua in
-- ddplua and of the same model in PyTorch eager (bench/gpt_torch.py), against raw sgemm.
--
-- Two roles, chosen by the first argument:
--   lua5.4 bench/gpt.lua [options]            the driver (run it through bench/gpt, which sets the
--                                            paths): runs the workers in alternating order, round
--                                            after round, and prints the tables
--   lua5.4 bench/gpt.lua --worker [options]   the ddplua worker: one timed run, one JSON line
-- The workload (issue 17): models/gpt.lua with 4 layers, n_embd 256, 4 heads, block 256, vocab
-- 8192, dropout 0; batch 4 x 256 tokens of fixed random ids (4 batches drawn once, used in turn;
-- targets are the ids shifted by one); AdamW (lr 3e-4, weight_decay 0.1). One step: forward with
-- the loss | zero_grad, backward | optimizer step and loss:item(); the worker times the three
-- phases of each step after `warmup` and prints their medians, and the minor page faults of the
-- whole process per timed step (/proc/self/stat, field 10).
-- FLOPs per step (flops_per_step): the GEMMs only, 3x the forward's (the backward computes the
-- input and the weight gradient of each), with the attention scores and their weighted sum
-- counted over the full T x T (the composition computes them all and masks).

local util = dofile((arg[0]:match('^(.*)/[^/]*$') or '.') .. '/util.lua')
local median, sh_quote, loadavg = util.median, util.sh_quote, util.loadavg
local minor_faults = util.minor_faults
local function parse_args(argv, defaults) return util.parse_args(argv, defaults, 'bench/gpt') end

local MODEL = { vocab = 8192, layers = 4, embd = 256, heads = 4 }
local LR, WEIGHT_DECAY = 3e-4, 0.1

-- Floating-point operations of one training step: 2 per multiply-add of every GEMM, forward
-- and backward (twice the forward). B batch, T sequence, C width, L layers, V vocabulary.
local function flops_per_step(B, T)
    local C, L, V = MODEL.embd, MODEL.layers, MODEL.vocab
    local linear_weights = L * (C * 3 * C + C * C + C * 4 * C + 4 * C * C) + C * V -- + tied head
    local forward = 2 * B * T * linear_weights + L * 2 * (2 * B * T * T * C) -- q k^T and att v
    return 3 * forward
end

---------------------------------------------------------------------------------------------------
-- the ddplua worker
---------------------------------------------------------------------------------------------------
local function worker(argv)
    local o = parse_args(argv, { worker = false, threads = 1, steps = 20, warmup = 5, batch = 4,
        seq = 256, seed = 0, root = '.', dtype = 'float32' })
    if o.steps <= o.warmup then error('bench/gpt: --steps must exceed --warmup', 0) end
    local ddpl = require 'ddplua'
    ddpl.set_num_threads(o.threads)
    ddpl.manual_seed(o.seed)
    local model = dofile(o.root .. '/models/gpt.lua')({ vocab_size = MODEL.vocab,
        block_size = o.seq, n_layer = MODEL.layers, n_head = MODEL.heads, n_embd = MODEL.embd })
    local opt = ddpl.optim.AdamW(model:parameters(), { lr = LR, weight_decay = WEIGHT_DECAY })
    local batches = {}
    for i = 1, 4 do
        local ids = ddpl.randint(MODEL.vocab, { o.batch, o.seq + 1 })
        batches[i] = { ids:narrow(1, 0, o.seq):contiguous(), ids:narrow(1, 1, o.seq):contiguous() }
    end

    local fwd, bwd, upd, total, loss, losses = {}, {}, {}, {}, nil, {}
    local faults0
    for step = 1, o.steps do
        if step == o.warmup + 1 then faults0 = minor_faults() end
        local b = batches[(step - 1) % #batches + 1]
        local t0 = ddpl.time()
        local l
        if o.dtype == 'float32' then
            l = select(2, model(b[1], b[2]))
        else -- forward and loss under autocast, as PyTorch's recipe (float32 master weights)
            ddpl.autocast('cpu', { dtype = o.dtype }, function() l = select(2, model(b[1], b[2])) end)
        end
        local t1 = ddpl.time()
        opt:zero_grad()
        l:backward()
        local t2 = ddpl.time()
        opt:step()
        loss = l:item()
        local t3 = ddpl.time()
        losses[#losses + 1] = ('%.9g'):format(loss)
        if step > o.warmup then
            fwd[#fwd + 1], bwd[#bwd + 1] = (t1 - t0) * 1e3, (t2 - t1) * 1e3
            upd[#upd + 1], total[#total + 1] = (t3 - t2) * 1e3, (t3 - t0) * 1e3
        end
    end
    local faults1 = minor_faults()
    local timed = o.steps - o.warmup
    print(('{"engine": "ddplua", "threads": %d, "steps": %d, "warmup": %d, "batch": %d, ' ..
        '"seq": %d, "step_ms": %.17g, "forward_ms": %.17g, "backward_ms": %.17g, ' ..
        '"optimizer_ms": %.17g, "faults_per_step": %.17g, "final_loss": %.17g, "losses": [%s]}')
        :format(o.threads, o.steps, o.warmup, o.batch, o.seq, median(total), median(fwd),
            median(bwd), median(upd), faults0 and faults1 and (faults1 - faults0) / timed or -1,
            loss, table.concat(losses, ', ')))
end

---------------------------------------------------------------------------------------------------
-- the driver
---------------------------------------------------------------------------------------------------

-- glibc's malloc settings that keep PyTorch's large blocks on the heap and the heap's top from
-- being trimmed, so a step reuses pages it has already faulted in (issue 17). mmap_threshold's
-- maximum is 32 MiB on 64-bit glibc (a larger value is ignored), which still leaves the 32 MiB
-- logits and their gradients to mmap (measured: ~35,000 faults per step, as without tunables);
-- mmap_max=0 puts every block on the heap (~8,200 per step)
local TUNABLES = 'GLIBC_TUNABLES=glibc.malloc.mmap_threshold=33554432:' ..
    'glibc.malloc.trim_threshold=4294967296:glibc.malloc.mmap_max=0'

local function driver(argv)
    local o = parse_args(argv, { rounds = 5, threads = '1,2', steps = 20, warmup = 5, batch = 4,
        seq = 256, no_torch = false, no_raw = false, quick = false, python = '/usr/bin/python3',
        dtype = 'float32' })
    if o.dtype ~= 'float32' and o.dtype ~= 'bfloat16' then
        error('bench/gpt: --dtype must be float32 or bfloat16', 0)
    end
    -- --quick still warms up 5 steps: the host allocator's cache fills over the first ~5 GPT steps
    -- (docs/internals/allocators.md), and with 2 the timed steps took ~5,000 page faults each
    if o.quick then o.rounds, o.steps, o.warmup = 2, 9, 5 end
    if o.steps <= o.warmup then error('bench/gpt: --steps must exceed --warmup', 0) end
    if o.rounds < 1 then error('bench/gpt: --rounds must be at least 1', 0) end
    local root = assert(os.getenv('BENCH_ROOT'), 'run through bench/gpt (sets BENCH_ROOT)')
    local lua_bin = os.getenv('BENCH_LUA') or 'lua5.4'
    local blas_raw = not o.no_raw and os.getenv('BENCH_BLAS_RAW') or ''
    local threads = {}
    for t in o.threads:gmatch('%d+') do threads[#threads + 1] = tonumber(t) end
    local have_torch = not o.no_torch and
        os.execute(sh_quote(o.python) .. ' -c "import torch" >/dev/null 2>&1') == true
    local flops = flops_per_step(o.batch, o.seq)
    local tokens = o.batch * o.seq

    -- configurations {label, engine, env [, dtype]}; PyTorch's 2-thread default stalls on 2 vCPUs,
    -- so at T >= 2 it also runs with passive OpenMP waiting; ddplua without spinning is shown only.
    -- With --dtype bfloat16 every engine runs its forward under autocast, and ddplua in float32
    -- runs beside it (issue 34: the autocast step against our own float32 one)
    local function configs(t)
        local c = {}
        if blas_raw ~= '' then c[#c + 1] = { 'sgemm (raw)', 'raw', '' } end
        c[#c + 1] = { 'ddplua', 'ddplua', '' }
        if o.dtype ~= 'float32' then c[#c + 1] = { 'ddplua float32', 'ddplua', '', 'float32' } end
        if t >= 2 then c[#c + 1] = { 'ddplua nospin', 'ddplua', 'DDPLUA_SPIN_US=0' } end
        if have_torch then
            c[#c + 1] = { 'torch', 'torch', '' }
            if t >= 2 then c[#c + 1] = { 'torch passive', 'torch', 'OMP_WAIT_POLICY=passive' } end
            c[#c + 1] = { 'torch tunables', 'torch', TUNABLES }
        end
        return c
    end

    -- one fresh process; returns {step=, forward=, backward=, optimizer=, faults=} in ms, or
    -- {peak=} GFLOP/s for the raw sgemm; nil when it failed
    local function run(t, cfg)
        local cmd
        local common = ('--threads %d --steps %d --warmup %d --batch %d --seq %d --dtype %s')
            :format(t, o.steps, o.warmup, o.batch, o.seq, cfg[4] or o.dtype)
        if cfg[2] == 'raw' then
            cmd = ('env -u OMP_WAIT_POLICY OMP_NUM_THREADS=%d OPENBLAS_NUM_THREADS=%d %s ' ..
                '--threads %d --min-time 0.1 --reps 3'):format(t, t, sh_quote(blas_raw), t)
        elseif cfg[2] == 'ddplua' then
            -- only ddpl.set_num_threads: the engine sizes its pool and keeps OpenBLAS at 1 thread
            cmd = ('env -u OMP_NUM_THREADS -u OPENBLAS_NUM_THREADS -u OMP_WAIT_POLICY %s %s %s ' ..
                '--worker --root %s %s'):format(cfg[3], lua_bin, sh_quote(root .. '/bench/gpt.lua'),
                sh_quote(root), common)
        else
            cmd = ('env -u OMP_WAIT_POLICY OMP_NUM_THREADS=%d OPENBLAS_NUM_THREADS=%d %s %s %s %s')
                :format(t, t, cfg[3], sh_quote(o.python), sh_quote(root .. '/bench/gpt_torch.py'),
                    common)
        end
        local p = assert(io.popen(cmd .. ' 2>&1'))
        local out = p:read('a')
        p:close()
        local r
        if cfg[2] == 'raw' then
            local peak = tonumber(out:match('RESULT sgemm_1024x1024x1024 ([%d.eE+-]+)'))
            r = peak and { peak = peak }
        else
            local function field(k) return tonumber(out:match('"' .. k .. '": ([%d.eE+-]+)')) end
            local losses = {}
            for v in (out:match('"losses": %[([^%]]*)%]') or ''):gmatch('[^,%s]+') do
                losses[#losses + 1] = tonumber(v)
            end
            r = field('step_ms') and { step = field('step_ms'), forward = field('forward_ms'),
                backward = field('backward_ms'), optimizer = field('optimizer_ms'),
                faults = field('faults_per_step'), losses = losses }
        end
        if not r then io.stderr:write(('bench/gpt: %s T%d failed:\n%s\n'):format(cfg[1], t, out)) end
        return r
    end

    local load0 = loadavg()
    io.write(('bench/gpt: %d rounds, threads %s, %d steps (warmup %d), batch %d x %d tokens, ' ..
        '%.2f GFLOP per step, %s; torch %s; load average %s\n'):format(o.rounds, o.threads,
        o.steps, o.warmup, o.batch, o.seq, flops / 1e9, o.dtype == 'float32' and 'float32' or
        'forward under ' .. o.dtype .. ' autocast', have_torch and 'yes' or 'no', load0))
    io.flush()
    -- results[t][label] = list of per-round results; the order rotates each round, so no
    -- configuration always runs first (the machine drifts over minutes)
    local results = {}
    local own = {} -- own[t][round]: ddplua's step ms, for the thread scaling per round
    for r = 1, o.rounds do
        for _, t in ipairs(threads) do
            results[t] = results[t] or {}
            local c = configs(t)
            for k = 0, #c - 1 do
                local cfg = c[(k + r - 1) % #c + 1]
                local v = run(t, cfg)
                local list = results[t][cfg[1]] or {}
                results[t][cfg[1]] = list
                if v then list[#list + 1] = v end
                if v and cfg[1] == 'ddplua' then
                    own[t] = own[t] or {}
                    own[t][r] = v.step
                end
                io.write(('  round %d  T%d  %-15s %s\n'):format(r, t, cfg[1], not v and 'failed'
                    or v.peak and ('%.1f GFLOP/s'):format(v.peak)
                    or ('%.1f ms/step'):format(v.step)))
                io.flush()
            end
        end
    end

    local med = util.median_of
    local function range(list, key)
        local lo, hi
        for _, x in ipairs(list or {}) do
            lo, hi = math.min(lo or x[key], x[key]), math.max(hi or x[key], x[key])
        end
        return lo and ('[%.0f-%.0f]'):format(lo, hi) or ''
    end
    io.write(('\nmedians over rounds (step: [min-max] of the run medians); load average %s at ' ..
        'the start, %s at the end\n'):format(load0, loadavg()))
    io.write(('%-2s %-15s %-20s %8s %8s %8s %9s %8s %6s %9s\n'):format('T', 'engine', 'step ms',
        'fwd ms', 'bwd ms', 'opt ms', 'tokens/s', 'GFLOP/s', 'peak', 'faults'))
    for _, t in ipairs(threads) do
        local peak = med(results[t]['sgemm (raw)'], 'peak')
        if peak then io.write(('%-2d %-15s sgemm 1024^3: %.1f GFLOP/s\n'):format(t, 'raw', peak)) end
        for _, cfg in ipairs(configs(t)) do
            local list = results[t][cfg[1]]
            local step = cfg[2] ~= 'raw' and med(list, 'step')
            if step then
                local gf = flops / (step / 1e3) / 1e9
                io.write(('%-2d %-15s %-20s %8.1f %8.1f %8.1f %9.0f %8.1f %6s %9.0f\n'):format(t,
                    cfg[1], ('%.1f %s'):format(step, range(list, 'step')), med(list, 'forward'),
                    med(list, 'backward'), med(list, 'optimizer'), tokens / (step / 1e3), gf,
                    peak and ('%.0f%%'):format(100 * gf / peak) or '-', med(list, 'faults')))
            end
        end
    end
    local scaling = {}
    for _, t in ipairs(threads) do -- issue 17 item 3: 2 threads at least 1.7x one thread
        scaling[#scaling + 1] = t > 1 and own[1] and own[t] and
            util.scaling_line(('T%-2d'):format(t), own[1], own[t], o.rounds, 1.7, true) or nil
    end
    util.write_section('thread scaling: ddplua step at 1 thread / at T threads, same round ' ..
        '(median [min-max] over rounds)', scaling)
    if o.dtype ~= 'float32' then
        -- the loss curves of the first round's ddplua runs (same seed, same batches)
        local t1 = threads[1]
        local a = results[t1]['ddplua float32'] and results[t1]['ddplua float32'][1]
        local b = results[t1]['ddplua'] and results[t1]['ddplua'][1]
        if a and b and #a.losses > 0 then
            io.write(('\nloss curve, ddplua, same seed and batches: float32 | %s autocast | ' ..
                'relative difference\n'):format(o.dtype))
            local worst = 0
            for i = 1, math.min(#a.losses, #b.losses) do
                local d = math.abs(b.losses[i] - a.losses[i]) / math.abs(a.losses[i])
                worst = math.max(worst, d)
                io.write(('step %2d  %.5f  %.5f  %.2e\n'):format(i, a.losses[i], b.losses[i], d))
            end
            io.write(('largest relative difference over %d steps: %.2e\n'):format(
                math.min(#a.losses, #b.losses), worst))
        end
        io.write(('\ntargets (issue 34): the %s autocast step >= 1.5x our own float32 step and ' ..
            'at least as fast as PyTorch under its autocast\n'):format(o.dtype))
        for _, t in ipairs(threads) do
            local mine, f32 = med(results[t]['ddplua'], 'step'), med(results[t]['ddplua float32'], 'step')
            local torch = med(results[t]['torch'], 'step')
            if mine and f32 then
                io.write(('T%d: ddplua float32 / autocast %.2fx'):format(t, f32 / mine))
                if torch then io.write((', torch autocast / ddplua autocast %.2fx'):format(torch / mine)) end
                io.write('\n')
            end
        end
    end
    if have_torch then
        io.write('\ntargets (issue 17): ddplua step >= 1.5x the better PyTorch configuration; ' ..
            'at least PyTorch with the tunables; >= 75% of sgemm peak at 1 thread\n')
        io.write(('%-2s %-10s %-10s %-16s %-7s %-10s %-7s %s\n'):format('T', 'ddplua ms',
            'torch ms', '(config)', 'ratio', 'tunables', 'ratio', 'of peak'))
        for _, t in ipairs(threads) do
            local mine = med(results[t]['ddplua'], 'step')
            local best, which
            for _, label in ipairs({ 'torch', 'torch passive' }) do
                local v = med(results[t][label], 'step')
                if v and (not best or v < best) then best, which = v, label end
            end
            local tun = med(results[t]['torch tunables'], 'step')
            local peak = med(results[t]['sgemm (raw)'], 'peak')
            if mine and best then
                io.write(('%-2d %-10.1f %-10.1f %-16s %-7.2f %-10s %-7s %s\n'):format(t, mine, best,
                    '(' .. which .. ')', best / mine, tun and ('%.1f'):format(tun) or '-',
                    tun and ('%.2f'):format(tun / mine) or '-',
                    peak and ('%.0f%%'):format(100 * flops / (mine / 1e3) / 1e9 / peak) or '-'))
            end
        end
    end
end

if arg[1] == '--worker' then worker(arg) else driver(arg) end
