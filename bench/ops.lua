-- bench/ops.lua: the ops benchmark behind bench/ops: sgemm, elementwise bandwidth and tiny-op
-- cost for raw OpenBLAS (bench/blas_raw.c), ddplua and PyTorch (bench/ops_torch.py), side by side.
--
-- Two roles, chosen by the first argument:
--   lua5.4 bench/ops.lua [options]            the driver (run it through bench/ops, which builds
--                                            blas_raw and sets the paths): runs the workers in
--                                            alternating rounds and prints the tables
--   lua5.4 bench/ops.lua --worker [options]   the ddplua worker: one measurement of every
--                                            workload, printed as "RESULT <metric> <value> <unit>"
-- Every worker prints the same metrics, each the median of --reps timed loops of about
-- --min-time seconds; the driver takes the median over rounds. Bandwidth is bytes read + bytes
-- written per second (GB = 1e9), sgemm is 2*M*N*K flops per call.

local N_ELEM = 16 * 1024 * 1024 -- 16M float32 = 64 MiB per tensor

local util = dofile((arg[0]:match('^(.*)/[^/]*$') or '.') .. '/util.lua')
local median, sh_quote = util.median, util.sh_quote
local function parse_args(argv, defaults) return util.parse_args(argv, defaults, 'bench/ops') end

---------------------------------------------------------------------------------------------
-- the ddplua worker
---------------------------------------------------------------------------------------------
local function worker(argv)
  local o = parse_args(argv, {worker = false, threads = 1, min_time = 0.2, reps = 3,
                              tiny_calls = 1000000, only = ''})
  local wanted = util.selector(o.only)
  local ddpl = require 'ddplua'
  local now = assert(ddpl.time, 'ddpl.time is missing (API.md, Utilities)')
  ddpl.set_num_threads(o.threads)
  io.write(('INFO ddplua %s, threads %d\n'):format(tostring(ddpl.version),
                                                   ddpl.get_num_threads()))
  ddpl.manual_seed(0)

  local function time_per_call(body)
    body() -- warm-up
    local calls = 1
    while true do
      local t = now()
      for _ = 1, calls do body() end
      local dt = now() - t
      if dt >= o.min_time / 4 or calls >= 1 << 24 then
        if dt > 0 then calls = math.floor(calls * o.min_time / dt) + 1 end
        break
      end
      calls = calls * 2
    end
    local per_call = {}
    for r = 1, o.reps do
      local t = now()
      for _ = 1, calls do body() end
      per_call[r] = (now() - t) / calls
    end
    return median(per_call)
  end

  local function result(name, fn)
    if not wanted(name) then return end
    local ok, value, unit = pcall(fn)
    if ok then
      io.write(('RESULT %s %.4f %s\n'):format(name, value, unit))
    else
      io.write(('ERROR %s %s\n'):format(name, tostring(value):gsub('\n', ' ')))
    end
    io.flush()
  end

  -- Results are closed right away when tensors support <close>: the Lua equivalent of Python
  -- freeing a result as soon as its last reference goes, which is what the torch worker gets.
  -- Without __close they are left to the garbage collector.
  local probe = ddpl.zeros(1)
  local closable = (getmetatable(probe) or {}).__close ~= nil
  io.write(('INFO results freed by %s\n'):format(closable and '<close>' or 'the GC'))
  local function producing(f)
    if closable then
      return function() local r <close> = f() end
    end
    return function() local r = f() end
  end
  -- every result of a multi-result op freed at once, as producing() does for one (one <close>
  -- per local; a nil is skipped)
  local function all_closed(f)
    if not closable then return function() local a, b, c = f() end end
    return function()
      local a, b, c = f()
      local ca <close> = a
      local cb <close> = b
      local cc <close> = c
    end
  end

  for _, mkn in ipairs({{1024, 1024, 1024}, {64, 784, 256}}) do
    local m, k, n = mkn[1], mkn[2], mkn[3]
    result(('sgemm_%dx%dx%d'):format(m, k, n), function()
      local a, b = ddpl.randn(m, k), ddpl.randn(k, n)
      local s = time_per_call(producing(function() return ddpl.matmul(a, b) end))
      return 2.0 * m * n * k / s / 1e9, 'GFLOP/s'
    end)
  end

  local nbytes = 4 * N_ELEM
  if wanted.any({'add', 'add_', 'gelu', 'clone', 'copy_'}) then
      local a, b, x, dst = ddpl.randn(N_ELEM), ddpl.randn(N_ELEM), ddpl.randn(N_ELEM),
      ddpl.empty(N_ELEM)
    local cases = {
      {'add', producing(function() return a + b end), 3},    -- reads a, b; writes a new tensor
      {'add_', function() x:add_(b) end, 3},                  -- reads x, b; writes x
      {'gelu', producing(function() return a:gelu() end), 2}, -- exact (erf) GELU, as PyTorch
      {'clone', producing(function() return a:clone() end), 2},
      {'copy_', function() dst:copy_(a) end, 2},
    }
    for _, c in ipairs(cases) do
      result(c[1], function() return c[3] * nbytes / time_per_call(c[2]) / 1e9, 'GB/s' end)
    end
    a, b, x, dst = nil, nil, nil, nil
  end

  -- ---- scans and reductions, in GB/s of bytes read + written (same workloads in
  -- bench/ops_torch.py). 16M float32 as one row, and a 4096x4096 matrix along each dim: a scan
  -- of rows (dim 1) and of columns (dim 0), and amax along a row. any runs on zeros and all on
  -- ones, so both read every element (they stop at the first deciding one).
  if wanted.any({'cumsum', 'cumsum_rows', 'cumsum_cols', 'any', 'all', 'amax_rows'}) then
    local v, m = ddpl.randn(N_ELEM), ddpl.randn(4096, 4096)
    local zeros, ones = ddpl.zeros(N_ELEM), ddpl.ones(N_ELEM)
    local scans = {
      {'cumsum', producing(function() return v:cumsum(0) end), 2},
      {'cumsum_rows', producing(function() return m:cumsum(1) end), 2},
      {'cumsum_cols', producing(function() return m:cumsum(0) end), 2},
      {'any', producing(function() return zeros:any() end), 1},
      {'all', producing(function() return ones:all() end), 1},
      {'amax_rows', producing(function() return m:amax(1) end), 1},
    }
    for _, c in ipairs(scans) do
      result(c[1], function() return c[3] * nbytes / time_per_call(c[2]) / 1e9, 'GB/s' end)
    end
  end

  -- ---- sorting and unique, in ms per call (same workloads in bench/ops_torch.py):
  -- 1M float32 as one slice, 1024 rows of 1024 along the last dim, argsort of the 1M, and
  -- unique of 1M int64 in [0, 100000) with and without the inverse and counts
  if wanted.any({'sort_1m', 'sort_rows', 'argsort_1m', 'unique_1m', 'unique_1m_inv'}) then
    local v, m = ddpl.randn(1 << 20), ddpl.randn(1024, 1024)
    local u = ddpl.randint(0, 100000, {1 << 20})
    local sorts = {
      {'sort_1m', all_closed(function() return v:sort() end)},
      {'sort_rows', all_closed(function() return m:sort() end)},
      {'argsort_1m', producing(function() return v:argsort() end)},
      {'unique_1m', producing(function() return u:unique() end)},
      {'unique_1m_inv', all_closed(function()
        return u:unique({return_inverse = true, return_counts = true})
      end)},
    }
    for _, c in ipairs(sorts) do
      result(c[1], function() return time_per_call(c[2]) * 1e3, 'ms' end)
    end
  end

  -- ---- the reductions, selections and index ops of issue 29, in ms per call (same workloads
  -- in bench/ops_torch.py; keys in SELECT_KEYS): v 1M float32, m 1024x1024 along the rows
  -- (dim -1 or 1) or the columns (dim 0), m4 4096x1024, big 16M; u 1M int64 in [0, 1000) (the
  -- bins of bincount and the index of scatter_add/index_add into 1000 slots), a bool mask of v
  -- about half true, 1000 sorted boundaries for searchsorted.
  do
    local v, m, m4 = ddpl.randn(1 << 20), ddpl.randn(1024, 1024), ddpl.randn(4096, 1024)
    local big = ddpl.randn(N_ELEM)
    local q3 = ddpl.tensor({0.25, 0.5, 0.75})
    local u, z = ddpl.randint(0, 1000, {1 << 20}), ddpl.zeros(1000)
    local gi = ddpl.randint(0, 1024, {1024, 1024})
    local mask = v:gt(0)
    local bounds = ddpl.linspace(-3, 3, 1000)
    local cases = {
      {'median_1m', producing(function() return v:median() end)},
      {'median_rows', all_closed(function() return m:median(-1) end)},
      {'quantile_rows', producing(function() return ddpl.quantile(m, 0.5, -1) end)},
      {'quantile3_rows', producing(function() return ddpl.quantile(m, q3, -1) end)},
      {'kthvalue_rows', all_closed(function() return m:kthvalue(256, -1) end)},
      {'topk_rows', all_closed(function() return m:topk(10, -1) end)},
      {'topk_rows_small', all_closed(function() return m:topk(10, -1, {largest = false}) end)},
      {'cumprod_1m', producing(function() return v:cumprod(0) end)},
      {'cummax_1m', all_closed(function() return v:cummax(0) end)},
      {'logsumexp_rows', producing(function() return m:logsumexp(1) end)},
      {'std_rows', producing(function() return m:std(1) end)}, -- correction 1, as torch's
      {'var_cols', producing(function() return m:var(0) end)},
      {'norm2_rows', producing(function() return m:norm(2, 1) end)},
      {'norm1_rows', producing(function() return m:norm(1, 1) end)},
      {'prod_cols', producing(function() return m4:prod(0) end)},
      {'sum_cols', producing(function() return m4:sum(0) end)},
      {'max_rows', all_closed(function() return m4:max(1) end)},
      {'count_nonzero', producing(function() return m4:count_nonzero() end)},
      {'aminmax', all_closed(function() return m4:aminmax() end)},
      {'nansum', producing(function() return m4:nansum() end)},
      {'bincount_1m', producing(function() return u:bincount() end)},
      {'histc_1m', producing(function() return v:histc({bins = 100, min = -3, max = 3}) end)},
      {'searchsorted_1m', producing(function() return ddpl.searchsorted(bounds, v) end)},
      {'scatter_add_1m', producing(function() return z:scatter_add(0, u, v) end)},
      {'index_add_1m', producing(function() return z:index_add(0, u, v) end)},
      {'gather_rows', producing(function() return m:gather(1, gi) end)},
      {'masked_select_1m', producing(function() return v:masked_select(mask) end)},
      {'nonzero_1m', producing(function() return mask:nonzero() end)},
      {'remainder_16m', producing(function() return big % 1.5 end)},
      {'fmod_16m', producing(function() return big:fmod(1.5) end)},
      {'roll_rows', producing(function() return m4:roll(7, 0) end)},
      {'roll_cols', producing(function() return m4:roll(7, 1) end)},
      {'repeat_interleave_1m', producing(function() return v:repeat_interleave(2) end)},
    }
    for _, c in ipairs(cases) do
      result(c[1], function() return time_per_call(c[2]) * 1e3, 'ms' end)
    end
  end

  -- tiny op: 1-element add from Lua, loop of N calls minus an empty loop of N calls; results
  -- are dropped to the garbage collector as in ordinary code
  result('tiny_add', function()
    local t1, t2 = ddpl.ones(1), ddpl.ones(1)
    local n = o.tiny_calls
    local t = now()
    for _ = 1, n do local c = t1 + t2 end
    local t_op = now() - t
    t = now()
    for _ = 1, n do end
    local t_empty = now() - t
    return (t_op - t_empty) / n * 1e6, 'us'
  end)
end

---------------------------------------------------------------------------------------------
-- the driver
---------------------------------------------------------------------------------------------
local METRICS = {
  {key = 'sgemm_1024x1024x1024', label = 'sgemm 1024x1024x1024', unit = 'GFLOP/s'},
  {key = 'sgemm_64x784x256', label = 'sgemm 64x784x256', unit = 'GFLOP/s'},
  {key = 'memcpy', label = 'memcpy 64 MiB (C)', unit = 'GB/s'},
  {key = 'add_c', label = 'a + b loop in C', unit = 'GB/s'},
  {key = 'copy_', label = 'copy_ 16M f32', unit = 'GB/s'},
  {key = 'clone', label = 'clone 16M f32', unit = 'GB/s'},
  {key = 'add', label = 'a + b 16M f32', unit = 'GB/s'},
  {key = 'add_', label = 'a:add_(b) 16M f32', unit = 'GB/s'},
  {key = 'gelu', label = 'gelu 16M f32', unit = 'GB/s'},
  {key = 'tiny_add', label = 'tiny add (1 elem)', unit = 'us/call'},
  -- scans and reductions
  {key = 'cumsum', label = 'cumsum 16M f32', unit = 'GB/s'},
  {key = 'cumsum_rows', label = 'cumsum 4096^2 dim 1', unit = 'GB/s'},
  {key = 'cumsum_cols', label = 'cumsum 4096^2 dim 0', unit = 'GB/s'},
  {key = 'any', label = 'any 16M f32', unit = 'GB/s'},
  {key = 'all', label = 'all 16M f32', unit = 'GB/s'},
  {key = 'amax_rows', label = 'amax 4096^2 dim 1', unit = 'GB/s'},
  -- sorting and unique (ms per call: lower is better)
  {key = 'sort_1m', label = 'sort 1M f32', unit = 'ms'},
  {key = 'sort_rows', label = 'sort 1024^2 dim -1', unit = 'ms'},
  {key = 'argsort_1m', label = 'argsort 1M f32', unit = 'ms'},
  {key = 'unique_1m', label = 'unique 1M i64', unit = 'ms'},
  {key = 'unique_1m_inv', label = 'unique 1M inv+counts', unit = 'ms'},
}

-- the reductions, selections and index ops of issue 29 (ms per call: lower is better), each
-- checked against torch in the targets table
local SELECT_METRICS = {
  {'median_1m', 'median 1M f32'},
  {'median_rows', 'median 1024^2 dim -1'},
  {'quantile_rows', 'quantile .5 1024^2 -1'},
  {'quantile3_rows', 'quantile 3q 1024^2 -1'},
  {'kthvalue_rows', 'kthvalue 1024^2 -1'},
  {'topk_rows', 'topk 10 1024^2 -1'},
  {'topk_rows_small', 'topk 10 smallest'},
  {'cumprod_1m', 'cumprod 1M f32'},
  {'cummax_1m', 'cummax 1M f32'},
  {'logsumexp_rows', 'logsumexp 1024^2 1'},
  {'std_rows', 'std 1024^2 dim 1'},
  {'var_cols', 'var 1024^2 dim 0'},
  {'norm2_rows', 'norm p=2 1024^2 dim 1'},
  {'norm1_rows', 'norm p=1 1024^2 dim 1'},
  {'prod_cols', 'prod 4096x1024 dim 0'},
  {'sum_cols', 'sum 4096x1024 dim 0'},
  {'max_rows', 'max+idx 4096x1024 1'},
  {'count_nonzero', 'count_nonzero 4M f32'},
  {'aminmax', 'aminmax 4M f32'},
  {'nansum', 'nansum 4M f32'},
  {'bincount_1m', 'bincount 1M i64'},
  {'histc_1m', 'histc 1M f32'},
  {'searchsorted_1m', 'searchsorted 1M/1000'},
  {'scatter_add_1m', 'scatter_add 1M->1000'},
  {'index_add_1m', 'index_add 1M->1000'},
  {'gather_rows', 'gather 1024^2 dim 1'},
  {'masked_select_1m', 'masked_select 1M'},
  {'nonzero_1m', 'nonzero 1M bool'},
  {'remainder_16m', 'remainder 16M f32'},
  {'fmod_16m', 'fmod 16M f32'},
  {'roll_rows', 'roll 4096x1024 dim 0'},
  {'roll_cols', 'roll 4096x1024 dim 1'},
  {'repeat_interleave_1m', 'repeat_interleave 1M'},
}
for _, s in ipairs(SELECT_METRICS) do METRICS[#METRICS + 1] = {key = s[1], label = s[2], unit = 'ms'} end


-- Runs one worker; returns {metric = value}, {info lines}, {error lines}.
local function run_worker(cmd)
  local p = assert(io.popen(cmd .. ' 2>&1', 'r'))
  local values, info, errors = {}, {}, {}
  for line in p:lines() do
    local name, value = line:match('^RESULT (%S+) (%S+)')
    if name then
      values[name] = tonumber(value)
    elseif line:match('^INFO ') then
      info[#info + 1] = line:sub(6)
    elseif line:match('^ERROR ') then
      errors[#errors + 1] = line:sub(7)
    elseif line ~= '' then
      errors[#errors + 1] = line
    end
  end
  local ok, how, code = p:close()
  if not ok then errors[#errors + 1] = ('worker exited (%s %s)'):format(how, code) end
  return values, info, errors
end

local function fmt(v)
  if v == nil then return '-' end
  if v >= 100 then return ('%.0f'):format(v) end
  if v >= 10 then return ('%.1f'):format(v) end
  return ('%.2f'):format(v)
end

-- "median [min-max]" of a list of round values
local function summary(v)
  if not v or #v == 0 then return '-' end
  local lo, hi = math.huge, -math.huge
  for _, x in ipairs(v) do lo, hi = math.min(lo, x), math.max(hi, x) end
  if #v == 1 then return fmt(v[1]) end
  return ('%s [%s-%s]'):format(fmt(median(v)), fmt(lo), fmt(hi))
end

local function pad(s, n) return s .. string.rep(' ', n - #s) end

local function driver(argv)
  local ok, o = pcall(parse_args, argv, {quick = false, rounds = 5, threads = '1,2',
    min_time = 0.2, reps = 3, tiny_calls = 1000000, no_torch = false, python = '/usr/bin/python3',
    blas_raw = os.getenv('BENCH_BLAS_RAW') or '', lua = os.getenv('BENCH_LUA') or 'lua5.4',
    only = '', base = ''})
  if not ok then
    io.stderr:write('bench/ops: ', tostring(o):gsub('^.-:%d+: ', ''), '\n',
      'usage: bench/ops [--quick] [--rounds R] [--threads 1,2] [--min-time S] [--reps K]\n',
      '                 [--tiny-calls N] [--no-torch] [--python PATH] [--only NAMES]\n',
      '                 [--base BUILD_DIR] (see bench/README.md)\n')
    os.exit(2)
  end
  if o.quick then
    local explicit = table.concat(argv, ' ')
    if not explicit:find('%-%-rounds') then o.rounds = 2 end
    if not explicit:find('%-%-min%-time') then o.min_time = 0.05 end
    if not explicit:find('%-%-reps') then o.reps = 1 end
    if not explicit:find('%-%-tiny%-calls') then o.tiny_calls = 100000 end
  end
  local here = (arg and arg[0] or 'bench/ops.lua'):match('^(.*)/[^/]*$') or '.'
  local threads = {}
  for t in o.threads:gmatch('%d+') do threads[#threads + 1] = tonumber(t) end

  local have_torch = not o.no_torch and
    os.execute(sh_quote(o.python) .. ' -c "import torch" >/dev/null 2>&1') == true
  local common = ('--min-time %g --reps %d'):format(o.min_time, o.reps)
  local common_raw = common -- blas_raw measures all of its few workloads
  if o.only ~= '' then common = common .. ' --only ' .. sh_quote(o.only) end
  local wanted = util.selector(o.only)
  -- --base: a second ddplua build (another ddplua.so) measured in the same rounds as
  -- "ddplua base", for before/after figures from one run
  local base_cpath
  if o.base ~= '' then
    local dir = o.base:sub(1, 1) == '/' and o.base or (os.getenv('PWD') or '.') .. '/' .. o.base
    local f = io.open(dir .. '/ddplua.so')
    if not f then
      io.stderr:write('bench/ops: --base ', o.base, ': no ddplua.so there\n')
      os.exit(2)
    end
    f:close()
    base_cpath = dir .. '/?.so;' .. (os.getenv('LUA_CPATH') or ''):gsub('^[^;]*;', '')
  end
  local clean = 'env -u OMP_NUM_THREADS -u OPENBLAS_NUM_THREADS -u OMP_WAIT_POLICY '

  io.write(('bench/ops: %d rounds, threads %s, loops of ~%gs, median of %d loops per round, '
            .. 'tiny op %d calls; torch %s\n'):format(o.rounds, o.threads, o.min_time, o.reps,
            o.tiny_calls, have_torch and 'yes' or o.no_torch and 'off (--no-torch)'
            or 'not importable by ' .. o.python .. ' (skipped)'))

  -- other processes on the machine skew every figure, 2-thread ones most: say how busy it was
  local loadavg = util.loadavg
  local load_start = loadavg()

  local results = {} -- results[T][engine][metric] = {round values}
  local engines_of = {}
  local notes = {}
  for _, T in ipairs(threads) do
    local envT = ('%sOMP_NUM_THREADS=%d OPENBLAS_NUM_THREADS=%d '):format(clean, T, T)
    local engines = {}
    local raw_keys = {'sgemm_1024x1024x1024', 'sgemm_64x784x256', 'memcpy', 'add_c'}
    if o.blas_raw ~= '' and wanted.any(raw_keys) then
      engines[#engines + 1] = {name = 'raw', cmd = envT .. sh_quote(o.blas_raw)
        .. (' --threads %d %s'):format(T, common_raw)}
    end
    -- ddplua gets its threads from ddpl.set_num_threads alone; at 2+ threads it also runs with
    -- DDPLUA_SPIN_US=0 (its pool's workers sleep at once), to show what the short spin buys (not
    -- used for the targets)
    local lua_worker = sh_quote(o.lua) .. ' ' .. sh_quote(here .. '/ops.lua')
      .. (' --worker --threads %d %s --tiny-calls %d'):format(T, common, o.tiny_calls)
    engines[#engines + 1] = {name = 'ddplua', cmd = clean .. lua_worker}
    if base_cpath then
      engines[#engines + 1] = {name = 'ddplua base', cmd = clean .. 'LUA_CPATH='
        .. sh_quote(base_cpath) .. ' ' .. lua_worker}
    end
    if T > 1 and not base_cpath then
      engines[#engines + 1] = {name = 'ddplua nospin', cmd = clean .. 'DDPLUA_SPIN_US=0 ' .. lua_worker}
    end
    if have_torch then
      local py = sh_quote(o.python) .. ' ' .. sh_quote(here .. '/ops_torch.py')
        .. (' --threads %d %s --tiny-calls %d'):format(T, common, o.tiny_calls)
      engines[#engines + 1] = {name = 'torch', cmd = envT .. py}
      if T > 1 then
        engines[#engines + 1] = {name = 'torch passive', cmd = envT .. 'OMP_WAIT_POLICY=passive ' .. py}
      end
    end
    engines_of[T] = engines
    results[T] = {}
    for _, e in ipairs(engines) do results[T][e.name] = {} end

    for r = 1, o.rounds do
      for j = 0, #engines - 1 do -- rotate the order each round: no engine always goes first
        local e = engines[(r - 1 + j) % #engines + 1]
        io.stderr:write(('  threads %d round %d/%d: %s\n'):format(T, r, o.rounds, e.name))
        local values, info, errors = run_worker(e.cmd)
        for k, v in pairs(values) do
          local list = results[T][e.name][k] or {}
          list[#list + 1] = v
          results[T][e.name][k] = list
        end
        for _, line in ipairs(info) do notes[e.name .. ': ' .. line] = true end
        for _, line in ipairs(errors) do notes[e.name .. ' ERROR: ' .. line] = true end
      end
    end
  end

  local h = io.popen('nproc')
  local ncpu = h and h:read('l') or '?'
  if h then h:close() end
  io.write(('\nload average (1, 5, 15 min) at start: %s, at end: %s; %s CPUs\n'):format(
    load_start, loadavg(), ncpu))
  local sorted_notes = {}
  for k in pairs(notes) do sorted_notes[#sorted_notes + 1] = k end
  table.sort(sorted_notes)
  io.write('\n')
  for _, n in ipairs(sorted_notes) do io.write('  ', n, '\n') end

  -- side-by-side tables: median [min-max] over rounds
  for _, T in ipairs(threads) do
    local engines = engines_of[T]
    io.write(('\nthreads = %d (median [min-max] over %d rounds)\n'):format(T, o.rounds))
    local header = pad('metric', 22) .. pad('unit', 9)
    for _, e in ipairs(engines) do header = header .. pad(e.name, 18) end
    header = header:gsub('%s+$', '')
    io.write(header, '\n', string.rep('-', #header), '\n')
    for _, m in ipairs(METRICS) do
      local line = pad(m.label, 22) .. pad(m.unit, 9)
      local any = false
      for _, e in ipairs(engines) do
        local v = results[T][e.name][m.key]
        any = any or v ~= nil
        line = line .. pad(summary(v), 18)
      end
      if any then io.write((line:gsub('%s+$', '')), '\n') end
    end
  end

  -- targets: ddplua against raw OpenBLAS, memcpy, and 1 us
  io.write('\ntargets (medians over rounds; ratio = engine / reference)\n')
  local header = pad('check', 24) .. pad('T', 3) .. pad('reference', 14) .. pad('ddplua', 9)
    .. pad('ratio', 8) .. pad('torch', 9) .. pad('ratio', 8) .. pad('target', 9) .. 'ddplua'
  io.write(header, '\n', string.rep('-', #header + 2), '\n')
  local function med(T, engine, key)
    local e = results[T][engine]
    return e and e[key] and median(e[key]) or nil
  end
  -- the better of torch and torch passive
  local function best_torch(T, key, higher_is_better)
    local a, b = med(T, 'torch', key), med(T, 'torch passive', key)
    if not a or not b then return a or b end
    if higher_is_better then return math.max(a, b) end
    return math.min(a, b)
  end
  local function ratio(x, ref) return x and ref and ('%.3f'):format(x / ref) or '-' end
  for _, T in ipairs(threads) do
    for _, c in ipairs({
      {'matmul 1024x1024x1024', 'sgemm_1024x1024x1024', 'sgemm_1024x1024x1024', 'raw', 0.95},
      {'matmul 64x784x256', 'sgemm_64x784x256', 'sgemm_64x784x256', 'raw', 0.95},
      {'a + b vs memcpy', 'add', 'memcpy', 'memcpy', 0.80},
      {'a:add_(b) vs memcpy', 'add_', 'memcpy', 'memcpy', 0.80},
      {'gelu vs memcpy', 'gelu', 'memcpy', 'memcpy', 0.80},
    }) do
      local d, ref, t = med(T, 'ddplua', c[2]), med(T, 'raw', c[3]), best_torch(T, c[2], true)
      if not (d or t) then goto skip end -- not measured (--only)
      io.write(pad(c[1], 24), pad(tostring(T), 3),
               pad(ref and (c[4] == 'raw' and 'raw ' or 'memcpy ') .. fmt(ref) or '-', 14),
               pad(fmt(d), 9), pad(ratio(d, ref), 8), pad(fmt(t), 9), pad(ratio(t, ref), 8),
               pad('>= ' .. c[5], 9),
               d and ref and (d / ref >= c[5] and 'ok' or 'BELOW') or 'n/a', '\n')
      ::skip::
    end
    local d, t = med(T, 'ddplua', 'tiny_add'), best_torch(T, 'tiny_add', false)
    if d or t then
      io.write(pad('tiny add, us per call', 24), pad(tostring(T), 3), pad('-', 14), pad(fmt(d), 9),
               pad('-', 8), pad(fmt(t), 9), pad('-', 8), pad('< 1 us', 9),
               d and (d < 1 and 'ok' or 'ABOVE') or 'n/a', '\n')
    end
  end
  -- sorting and the issue-29 reductions at least as fast as PyTorch (ratio = torch ms / ddplua
  -- ms)
  local vs_torch = {'sort_1m', 'sort_rows', 'argsort_1m'}
  for _, s in ipairs(SELECT_METRICS) do vs_torch[#vs_torch + 1] = s[1] end
  for _, T in ipairs(threads) do
    for _, k in ipairs(vs_torch) do
      local d, t = med(T, 'ddplua', k), best_torch(T, k, false)
      if d or t then
        io.write(pad(#k <= 14 and k .. ' vs torch' or k, 24), pad(tostring(T), 3),
                 pad('torch ' .. fmt(t), 14),
                 pad(fmt(d), 9), pad(ratio(t, d), 8), pad(fmt(t), 9), pad('-', 8),
                 pad('>= 1', 9), d and t and (t / d >= 1 and 'ok' or 'BELOW') or 'n/a', '\n')
      end
    end
  end
  io.write('torch: the better of torch and torch passive (OMP_WAIT_POLICY=passive).\n')
  if base_cpath then
    -- before/after from the same rounds: x = torch ms / ddplua ms (above 1: ddplua faster)
    -- also from the fastest round of each engine: on a loaded host the minimum is the figure
    -- least touched by other processes
    local function lowest(T, engine, key)
      local v = results[T][engine] and results[T][engine][key]
      if not v or #v == 0 then return nil end
      local m = math.huge
      for _, x in ipairs(v) do m = math.min(m, x) end
      return m
    end
    local function lowest_torch(T, key)
      local a, b = lowest(T, 'torch', key), lowest(T, 'torch passive', key)
      if a and b then return math.min(a, b) end
      return a or b
    end
    io.write(('\nbefore (--base %s) and after, against torch (ms per call, medians and the '
              .. 'fastest rounds; x = torch / ddplua)\n'):format(o.base))
    local hdr = pad('op', 22) .. pad('T', 3) .. pad('torch', 9) .. pad('before', 9) .. pad('x', 8)
      .. pad('after', 9) .. pad('x', 8) .. pad('min: torch', 12) .. pad('before', 9) .. pad('x', 8)
      .. pad('after', 9) .. 'x'
    io.write(hdr, '\n', string.rep('-', #hdr + 6), '\n')
    for _, T in ipairs(threads) do
      for _, k in ipairs(vs_torch) do
        local t, b, d = best_torch(T, k, false), med(T, 'ddplua base', k), med(T, 'ddplua', k)
        local tl, bl, dl = lowest_torch(T, k), lowest(T, 'ddplua base', k), lowest(T, 'ddplua', k)
        if b or d then
          io.write(pad(k, 22), pad(tostring(T), 3), pad(fmt(t), 9), pad(fmt(b), 9),
                   pad(ratio(t, b), 8), pad(fmt(d), 9), pad(ratio(t, d), 8), pad(fmt(tl), 12),
                   pad(fmt(bl), 9), pad(ratio(tl, bl), 8), pad(fmt(dl), 9), ratio(tl, dl), '\n')
        end
      end
    end
  end
end

if arg and arg[1] == '--worker' then
  worker(arg)
else
  driver(arg or {})
end
