-- bench/bf16.lua: the bfloat16 benchmark behind bench/bf16 (issue 34).
--
-- Two roles, chosen by the first argument:
--   lua5.4 bench/bf16.lua [options]            the driver (run it through bench/bf16, which sets
--                                             the paths): fresh worker processes in rotating
--                                             order, round after round, then the tables
--   lua5.4 bench/bf16.lua --worker [options]   the ddplua worker: one JSON line
-- A worker measures, in its dtype (float32, or bfloat16: bf16 operands for the matmul, the MLP
-- block under ddpl.autocast('cpu', {dtype='bfloat16'}) with float32 weights):
--   matmul_gflops: (n,n) @ (n,n), best of reps, 2n^3 flops;
--   mlp_ms: x (1024,768) -> Linear(768,3072) -> GELU -> Linear(3072,768) + x, forward and
--           backward of the sum, median of reps after 2 warm-up steps (24.2 GFLOP of GEMMs: the
--           forward's two products and the backward's three, x needing no gradient).
-- bench/bf16_torch.py is the PyTorch worker, the same measurements.

local util = dofile((arg[0]:match('^(.*)/[^/]*$') or '.') .. '/util.lua')
local median, sh_quote, loadavg = util.median, util.sh_quote, util.loadavg
local function parse_args(argv, defaults) return util.parse_args(argv, defaults, 'bench/bf16') end

local function worker(argv)
    local o = parse_args(argv, { worker = false, threads = 1, dtype = 'float32', n = 1024, reps = 5 })
    local ddpl = require 'ddplua'
    local nn, F = ddpl.nn, ddpl.F
    ddpl.set_num_threads(o.threads)
    ddpl.manual_seed(0)
    local x, y = ddpl.randn(o.n, o.n):to(o.dtype), ddpl.randn(o.n, o.n):to(o.dtype)
    for _ = 1, 2 do x:matmul(y) end
    local best = math.huge
    for _ = 1, o.reps do
        local t = ddpl.time()
        x:matmul(y)
        best = math.min(best, ddpl.time() - t)
    end
    local gflops = 2 * o.n ^ 3 / best / 1e9

    local fc1, fc2 = nn.Linear(768, 3072), nn.Linear(3072, 768)
    local inp = ddpl.randn(1024, 768)
    local function block() return inp + fc2(F.gelu(fc1(inp))) end
    local function step()
        local out
        if o.dtype == 'float32' then
            out = block()
        else
            out = ddpl.autocast('cpu', { dtype = o.dtype }, block)
        end
        out:float():sum():backward()
        for _, m in ipairs({ fc1, fc2 }) do m.weight.grad, m.bias.grad = nil, nil end
    end
    for _ = 1, 2 do step() end
    local times = {}
    for _ = 1, o.reps do
        local t = ddpl.time()
        step()
        times[#times + 1] = (ddpl.time() - t) * 1e3
    end
    print(('{"engine": "ddplua", "threads": %d, "dtype": "%s", "path": "%s", ' ..
        '"matmul_gflops": %.17g, "mlp_ms": %.17g}'):format(o.threads, o.dtype,
        ddpl.config().cpu_bf16_gemm, gflops, median(times)))
end

local function driver(argv)
    local o = parse_args(argv, { rounds = 3, threads = '1,2', n = 1024, reps = 5,
        no_torch = false, python = '/usr/bin/python3' })
    if o.rounds < 1 then error('bench/bf16: --rounds must be at least 1', 0) end
    local root = assert(os.getenv('BENCH_ROOT'), 'run through bench/bf16 (sets BENCH_ROOT)')
    local peak_bin = assert(os.getenv('BENCH_PEAK'), 'run through bench/bf16 (sets BENCH_PEAK)')
    local lua_bin = os.getenv('BENCH_LUA') or 'lua5.4'
    local threads = {}
    for t in o.threads:gmatch('%d+') do threads[#threads + 1] = tonumber(t) end
    local have_torch = not o.no_torch and
        os.execute(sh_quote(o.python) .. ' -c "import torch" >/dev/null 2>&1') == true

    -- {label, engine, dtype, env}
    local configs = {
        { 'ddplua float32', 'ddplua', 'float32', '' },
        { 'ddplua bfloat16', 'ddplua', 'bfloat16', '' },
        { 'ddplua bf16 widened', 'ddplua', 'bfloat16', 'DDPLUA_CPU_BF16_GEMM=0' },
    }
    if have_torch then
        configs[#configs + 1] = { 'torch float32', 'torch', 'float32', '' }
        configs[#configs + 1] = { 'torch bfloat16', 'torch', 'bfloat16', '' }
    end

    local function run(t, cfg)
        local common = ('--threads %d --dtype %s --n %d --reps %d'):format(t, cfg[3], o.n, o.reps)
        local cmd
        if cfg[2] == 'ddplua' then
            cmd = ('env -u OMP_NUM_THREADS %s %s %s --worker %s'):format(cfg[4], lua_bin,
                sh_quote(root .. '/bench/bf16.lua'), common)
        else
            cmd = ('env OMP_NUM_THREADS=%d %s %s %s'):format(t, sh_quote(o.python),
                sh_quote(root .. '/bench/bf16_torch.py'), common)
        end
        local p = assert(io.popen(cmd .. ' 2>&1'))
        local out = p:read('a')
        p:close()
        local function field(k) return tonumber(out:match('"' .. k .. '": ([%d.eE+-]+)')) end
        local r = field('mlp_ms') and { gflops = field('matmul_gflops'), mlp = field('mlp_ms'),
            path = out:match('"path": "(%w+)"') }
        if not r then io.stderr:write(('bench/bf16: %s T%d failed:\n%s\n'):format(cfg[1], t, out)) end
        return r
    end

    local function peaks()
        local p = assert(io.popen(sh_quote(peak_bin)))
        local out = p:read('a')
        p:close()
        local function f(k) return tonumber(out:match('RESULT ' .. k .. ' ([%d.]+)')) or 0 end
        return { bf16 = f('bf16_dot_peak'), zmm = f('fma_zmm_peak'), ymm = f('fma_ymm_peak') }
    end

    io.write(('bench/bf16: %d rounds, threads %s, matmul %d^3, %d reps; torch %s; load average %s\n')
        :format(o.rounds, o.threads, o.n, o.reps, have_torch and 'yes' or 'no', loadavg()))
    local results, peak_list = {}, {}
    for r = 1, o.rounds do
        peak_list[#peak_list + 1] = peaks()
        for _, t in ipairs(threads) do
            results[t] = results[t] or {}
            for k = 0, #configs - 1 do
                local cfg = configs[(k + r - 1) % #configs + 1]
                local v = run(t, cfg)
                results[t][cfg[1]] = results[t][cfg[1]] or {}
                if v then table.insert(results[t][cfg[1]], v) end
                io.write(('  round %d  T%d  %-20s %s\n'):format(r, t, cfg[1], v and
                    ('matmul %.1f GFLOP/s, mlp %.1f ms%s'):format(v.gflops, v.mlp,
                        v.path and (' (' .. v.path .. ')') or '') or 'failed'))
                io.flush()
            end
        end
    end

    local med = util.median_of
    local pk = { bf16 = med(peak_list, 'bf16'), zmm = med(peak_list, 'zmm'), ymm = med(peak_list, 'ymm') }
    io.write(('\ncore peak (one thread, bench/bf16_peak.c): vdpbf16ps %.1f GFLOP/s, float32 FMA ' ..
        'zmm %.1f, ymm %.1f\n'):format(pk.bf16, pk.zmm, pk.ymm))
    for _, t in ipairs(threads) do
        local res = results[t]
        local function m(label, key) return med(res[label], key) end
        io.write(('\n%d thread%s, medians of %d rounds\n'):format(t, t > 1 and 's' or '', o.rounds))
        io.write('| configuration | matmul GFLOP/s | of the bf16 peak | mlp block ms |\n')
        io.write('| --- | --- | --- | --- |\n')
        for _, cfg in ipairs(configs) do
            local g, ms = m(cfg[1], 'gflops'), m(cfg[1], 'mlp')
            if g then
                io.write(('| %s | %.1f | %.0f%% | %.1f |\n'):format(cfg[1], g,
                    pk.bf16 > 0 and 100 * g / (pk.bf16 * t) or 0, ms))
            end
        end
        local bf, f32 = m('ddplua bfloat16', 'gflops'), m('ddplua float32', 'gflops')
        local tbf = m('torch bfloat16', 'gflops')
        local mbf, mf32, mtbf = m('ddplua bfloat16', 'mlp'), m('ddplua float32', 'mlp'),
            m('torch bfloat16', 'mlp')
        if bf and f32 then
            io.write(('matmul: bf16 / our float32 %.2fx (target >= 1.7)'):format(bf / f32))
            if tbf then io.write((', / torch bf16 %.2fx (target >= 0.9)'):format(bf / tbf)) end
            io.write('\n')
        end
        if mbf and mf32 then
            io.write(('mlp block: our float32 / autocast %.2fx (target >= 1.5)'):format(mf32 / mbf))
            if mtbf then io.write((', torch autocast / ours %.2fx (target >= 1)'):format(mtbf / mbf)) end
            io.write('\n')
        end
    end
end

if arg[1] == '--worker' then worker(arg) else driver(arg) end
