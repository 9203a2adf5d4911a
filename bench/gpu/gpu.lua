-- bench/gpu/gpu.lua: the GPU benchmark behind bench/gpu/run: training step time of GPT-2 small
-- (models/gpt.lua) and of the cnn (models/lenet.lua), and matmul TFLOP/s, in ddplua on CUDA and
-- in PyTorch eager (bench/gpu/gpu_torch.py), side by side in one invocation.
--
-- Two roles, chosen by the first argument:
--   lua5.4 bench/gpu/gpu.lua [options]             the driver (run it through bench/gpu/run): runs
--                                                 the workers round after round, prints the table
--   lua5.4 bench/gpu/gpu.lua --worker [options]    the ddplua worker: prints one RESULT line per
--                                                 measurement
-- Workloads (the torch worker builds the same ones):
--   gpt     GPT-2 small: 12 layers, 768 wide, 12 heads, T 1024, vocab 50304 (GPT-2's 50257
--           padded to a multiple of 64, as nanoGPT/llm.c), batch --batch (8), random tokens,
--           bf16 autocast around forward and loss, float32 master weights, AdamW (lr 6e-4,
--           betas 0.9/0.95, weight_decay 0.1); one step = forward, loss, zero_grad, backward, step.
--   cnn     models/lenet.lua at batch 256 on random 1x28x28 images, float32, SGD (lr 0.02,
--           momentum 0.9); one step as above.
--   matmul  (n,n) @ (n,n) for n = 4096 and 8192, bfloat16 and float32 (float32 at the engines'
--           default precision: no TF32 in either); TFLOP/s = 2 n^3 / seconds / 1e12.
-- Timing: warm-up steps first; then each rep is `inner` steps between two device synchronisations
-- (ddpl.cuda.synchronize / torch.cuda.synchronize), and a figure is the median over reps of the
-- time per step. A rep loop stops early once --max-time seconds have passed (at least 2 reps).

local TARGETS = { gpt = 1.0, matmul_bf16 = 0.70 } -- ddplua speed / PyTorch speed, issue 6

local here = arg[0]:match('^(.*)/[^/]*$') or '.'
local util = dofile(here .. '/../util.lua')
local median, sh_quote = util.median, util.sh_quote
local function parse_args(argv, defaults) return util.parse_args(argv, defaults, 'bench/gpu') end

local DEFAULTS = { worker = false, only = 'gpt,cnn,matmul', batch = 8, seq = 1024, layers = 12,
    gpt_reps = 10, cnn_reps = 10, cnn_inner = 20, mm_reps = 10, warmup = 3, max_time = 30,
    mm_sizes = '4096,8192', root = '.', rounds = 1, quick = false, no_torch = false,
    python = 'python3', seed = 0, device = 'cuda', worker_timeout = 150 }

local function wanted(o, name)
    for w in o.only:gmatch('[%w_]+') do if w == name then return true end end
    return false
end

---------------------------------------------------------------------------------------------------
-- the ddplua worker
---------------------------------------------------------------------------------------------------
local function worker(argv)
    local o = parse_args(argv, DEFAULTS)
    local ok_req, ddpl = pcall(require, 'ddplua')
    if not ok_req then
        print('RESULT bench=load error=' .. tostring(ddpl):gsub('\n', ' '))
        return
    end
    local F = ddpl.F
    -- --device cpu (worker only) is a smoke test of this file on machines without a GPU
    local dev, on_cuda = o.device, o.device:match('^cuda') ~= nil
    if on_cuda and not ddpl.cuda.is_available() then
        print('RESULT bench=none error=no CUDA device (ddpl.cuda.is_available() is false)')
        return
    end
    ddpl.manual_seed(o.seed)
    local sync = on_cuda and ddpl.cuda.synchronize or function() end
    local function autocast(fn)
        if not on_cuda then return fn() end
        return ddpl.autocast('cuda', { dtype = 'bfloat16' }, fn)
    end

    -- seconds per call of fn: warm-up calls, then reps of `inner` calls between syncs
    local function measure(fn, warmup, reps, inner)
        for _ = 1, warmup do fn() end
        sync()
        local per, t_start = {}, ddpl.time()
        for r = 1, reps do
            local t0 = ddpl.time()
            for _ = 1, inner do fn() end
            sync()
            per[#per + 1] = (ddpl.time() - t0) / inner
            if r >= 2 and ddpl.time() - t_start > o.max_time then break end
        end
        return median(per), #per
    end

    local function report(fields, err)
        local parts = { 'RESULT', 'engine=ddplua' }
        local keys = {}
        for k in pairs(fields) do keys[#keys + 1] = k end
        table.sort(keys)
        for _, k in ipairs(keys) do
            local v = fields[k]
            local text = type(v) == 'number' and ('%.6g'):format(v) or tostring(v)
            parts[#parts + 1] = k .. '=' .. text
        end
        if err then parts[#parts + 1] = 'error=' .. tostring(err):gsub('%s+', ' ') end
        print(table.concat(parts, ' '))
        io.stdout:flush()
    end

    -- fields name the workload in the error line if fn fails
    local function run(fields, fn)
        local ok, err = xpcall(fn, debug.traceback)
        if not ok then report(fields, err) end
        collectgarbage()
        collectgarbage()
        if on_cuda then ddpl.cuda.empty_cache() end
    end

    if wanted(o, 'gpt') then
        run({ bench = 'gpt' }, function()
            local B, T, V = o.batch, o.seq, 50304
            local model = dofile(o.root .. '/models/gpt.lua')({ vocab_size = V, block_size = T,
                n_layer = o.layers, n_head = 12, n_embd = 768 })
            model:to(dev)
            local opt = ddpl.optim.AdamW(model:parameters(),
                { lr = 6e-4, betas = { 0.9, 0.95 }, weight_decay = 0.1 })
            -- inputs drawn on the cpu: this measures training, not the device's generators
            local x = ddpl.randint(0, V, { B, T }, { dtype = 'int64' }):to(dev)
            local y = ddpl.randint(0, V, { B, T }, { dtype = 'int64' }):to(dev)
            local loss
            local function step()
                loss = autocast(function()
                    local _, l = model(x, y)
                    return l
                end)
                opt:zero_grad()
                loss:backward()
                opt:step()
            end
            local t, n = measure(step, o.warmup, o.gpt_reps, 1)
            report({ bench = 'gpt', ms = t * 1e3, tokens_per_s = B * T / t, reps = n, batch = B,
                seq = T, layers = o.layers, loss = loss:item(),
                max_mem_gib = on_cuda and ddpl.cuda.max_memory_allocated() / 2 ^ 30 or 0 })
        end)
    end

    if wanted(o, 'cnn') then
        run({ bench = 'cnn' }, function()
            local B = 256
            local model = dofile(o.root .. '/models/lenet.lua')()
            model:to(dev)
            local opt = ddpl.optim.SGD(model:parameters(), { lr = 0.02, momentum = 0.9 })
            local x = ddpl.randn(B, 1, 28, 28):to(dev)
            local y = ddpl.randint(0, 10, { B }, { dtype = 'int64' }):to(dev)
            local loss
            local function step()
                loss = F.cross_entropy(model(x), y)
                opt:zero_grad()
                loss:backward()
                opt:step()
            end
            local t, n = measure(step, 10, o.cnn_reps, o.cnn_inner)
            report({ bench = 'cnn', ms = t * 1e3, samples_per_s = B / t, reps = n, batch = B,
                loss = loss:item() })
        end)
    end

    if wanted(o, 'matmul') then
        for _, dtype in ipairs({ 'bfloat16', 'float32' }) do
            for n in o.mm_sizes:gmatch('%d+') do
                n = tonumber(n)
                run({ bench = 'matmul', dtype = dtype, n = n }, function()
                    local a = ddpl.randn(n, n):to(dev):to(dtype)
                    local b = ddpl.randn(n, n):to(dev):to(dtype)
                    local function mm()
                        local c <close> = ddpl.matmul(a, b) -- freed at once, as torch does
                    end
                    local inner = n == 4096 and 10 or 3
                    local t, reps = measure(mm, 2, o.mm_reps, inner)
                    report({ bench = 'matmul', dtype = dtype, n = n, ms = t * 1e3,
                        tflops = 2 * n ^ 3 / t / 1e12, reps = reps })
                end)
            end
        end
    end
end

---------------------------------------------------------------------------------------------------
-- the driver
---------------------------------------------------------------------------------------------------

-- RESULT lines of a worker's output as tables (error= takes the rest of the line)
local function parse_results(out)
    local rows = {}
    for line in out:gmatch('[^\n]+') do
        local body = line:match('^RESULT (.*)$')
        if body then
            local row = {}
            local head, err = body:match('^(.-)%s*error=(.*)$')
            if head then
                row.error = err
                body = head
            end
            for k, v in body:gmatch('([%w_]+)=(%S+)') do row[k] = tonumber(v) or v end
            rows[#rows + 1] = row
        end
    end
    return rows
end

local function key_of(row)
    if row.bench == 'matmul' then return ('matmul %s %s'):format(row.dtype, row.n) end
    return row.bench
end

local function json_value(v)
    if type(v) == 'number' then return v ~= v and 'null' or ('%.6g'):format(v) end
    local s = tostring(v):gsub('[%c"\\]', function(c) return ('\\u%04x'):format(c:byte()) end)
    return '"' .. s .. '"'
end

local function driver(argv)
    local o = parse_args(argv, DEFAULTS)
    if o.quick then
        o.gpt_reps, o.cnn_reps, o.mm_reps, o.max_time = 5, 5, 5, 15
    end
    local root = assert(os.getenv('BENCH_ROOT'), 'run through bench/gpu/run (sets BENCH_ROOT)')
    local lua_bin = os.getenv('BENCH_LUA') or 'lua5.4'

    -- the device, asked of a throwaway interpreter so a broken build reports rather than crashes
    local probe = io.popen(('%s -e %s 2>&1'):format(lua_bin, sh_quote(
        "local d = require 'ddplua'; io.write(d.cuda.is_available() and 'yes' or 'no', ' ', " ..
        "tostring(d.config().cuda))")))
    local answer = probe:read('a')
    probe:close()
    if not answer:match('^yes') then
        local built = answer:match('^no (%S+)') or answer:gsub('\n', ' ')
        io.write(('bench/gpu: no CUDA device (ddpl.cuda.is_available() is false; CUDA built ' ..
            'in: %s); nothing measured\n'):format(built))
        return 0
    end
    local probe_torch = ' -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)"'
    local have_torch = not o.no_torch and
        os.execute(sh_quote(o.python) .. probe_torch .. ' >/dev/null 2>&1') == true

    local common = ('--batch %d --seq %d --layers %d --gpt-reps %d --cnn-reps %d ' ..
        '--cnn-inner %d --mm-reps %d --mm-sizes %s --warmup %d --max-time %g --seed %d'):format(
        o.batch, o.seq, o.layers, o.gpt_reps, o.cnn_reps, o.cnn_inner, o.mm_reps,
        o.mm_sizes, o.warmup, o.max_time, o.seed)
    local engines = { { 'ddplua', ('%s %s --worker --root %s %s'):format(lua_bin,
        sh_quote(root .. '/bench/gpu/gpu.lua'), sh_quote(root), common) } }
    if have_torch then
        engines[#engines + 1] = { 'torch', ('%s %s %s'):format(sh_quote(o.python),
            sh_quote(root .. '/bench/gpu/gpu_torch.py'), common) }
    end
    io.write(('bench/gpu: %d round(s), %s; gpt batch %d x %d, %d layers; torch %s\n'):format(
        o.rounds, o.only, o.batch, o.seq, o.layers, have_torch and 'yes' or 'no (not measured)'))
    io.flush()

    -- figures[key][engine] = list over rounds; one process per workload and engine (a crash
    -- loses one figure, and each starts with an empty device); the engine order alternates
    local workloads = {}
    for w in o.only:gmatch('[%w_]+') do workloads[#workloads + 1] = w end
    local figures, order, errors, extra = {}, {}, {}, {}
    local function run_one(r, w, e)
        local t0 = os.time()
        -- a hung worker (a device fault, a deadlock) costs worker_timeout seconds, not the run
        local limit = o.worker_timeout > 0 and ('timeout -k 5 %d '):format(o.worker_timeout) or ''
        local p = assert(io.popen(limit .. e[2] .. ' --only ' .. w .. ' 2>&1'))
        local out = p:read('a')
        local ok, _, code = p:close()
        local rows = parse_results(out)
        if #rows == 0 then
            errors[#errors + 1] = ('%s %s round %d: no results (exit %s):\n%s'):format(e[1], w, r,
                tostring(code), out:sub(-3000))
        end
        for _, row in ipairs(rows) do
            local key = key_of(row)
            if row.error then
                errors[#errors + 1] = ('%s %s: %s'):format(e[1], key, row.error)
            else
                if not figures[key] then
                    figures[key] = {}
                    order[#order + 1] = key
                end
                local list = figures[key][e[1]] or {}
                figures[key][e[1]] = list
                -- time per step for training, TFLOP/s for matmul
                list[#list + 1] = row.bench == 'matmul' and row.tflops or row.ms
                extra[key .. ' ' .. e[1]] = row
            end
        end
        io.write(('  round %d  %-6s %-6s %d results in %d s%s\n'):format(r, w, e[1], #rows,
            os.time() - t0, ok and '' or ' (exit ' .. tostring(code) .. ')'))
        -- the raw lines as they come, so a run stopped before the table still tells something
        for line in out:gmatch('[^\n]+') do
            if line:match('^RESULT ') and not line:match(' error=') then
                io.write('    ', line, '\n')
            end
        end
        io.flush()
    end
    for r = 1, o.rounds do
        for _, w in ipairs(workloads) do
            for k = 0, #engines - 1 do run_one(r, w, engines[(k + r - 1) % #engines + 1]) end
        end
    end

    io.write('\nmedians over rounds; training: ms per step (lower is better), matmul: TFLOP/s\n')
    io.write(('%-22s %-10s %-10s %-7s %-8s %s\n'):format('bench', 'ddplua', 'torch', 'ratio',
        'target', 'status'))
    local json = {}
    for _, key in ipairs(order) do
        local mine, theirs = median(figures[key].ddplua or {}), median(figures[key].torch or {})
        local is_mm = key:match('^matmul')
        -- ratio: ddplua's speed over PyTorch's (> 1: ddplua is faster)
        local ratio = (mine and theirs) and (is_mm and mine / theirs or theirs / mine) or nil
        local target = key == 'gpt' and TARGETS.gpt or key:match('^matmul bfloat16') and
            TARGETS.matmul_bf16 or nil
        local status = (ratio and target) and (ratio >= target and 'ok' or 'BELOW') or ''
        local label = is_mm and key or key .. ' step ms'
        local function f(v) return v and ('%.3g'):format(v) or '-' end
        io.write(('%-22s %-10s %-10s %-7s %-8s %s\n'):format(label, f(mine), f(theirs),
            ratio and ('%.2f'):format(ratio) or '-', target and ('>= ' .. target) or '', status))
        json[#json + 1] = ('{"bench": %s, "ddplua": %s, "torch": %s, "ratio": %s, "target": %s, ' ..
            '"status": %s}'):format(json_value(key), mine and json_value(mine) or 'null',
            theirs and json_value(theirs) or 'null', ratio and json_value(ratio) or 'null',
            target and json_value(target) or 'null', json_value(status))
    end
    for _, key in ipairs({ 'gpt ddplua', 'gpt torch' }) do
        local row = extra[key]
        if row then
            io.write(('%s: %.0f tokens/s, final loss %s, peak memory %s GiB\n'):format(key,
                row.tokens_per_s or 0, tostring(row.loss), tostring(row.max_mem_gib)))
        end
    end
    if #errors > 0 then
        io.write('\nerrors:\n')
        for _, e in ipairs(errors) do io.write('  ', e, '\n') end
    end
    local path = os.getenv('BENCH_JSON')
    if path then
        local f = io.open(path, 'w')
        if f then
            f:write('[\n  ', table.concat(json, ',\n  '), '\n]\n')
            f:close()
        end
    end
    return #errors > 0 and 1 or 0
end

if arg[1] == '--worker' then
    worker(arg)
else
    os.exit(driver(arg))
end
