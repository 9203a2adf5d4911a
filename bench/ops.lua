-- bench/ops.lua: the ops benchmark behind bench/ops: sgemm, elementwise bandwidth, the reductions
-- and sorts of issue 29 and tiny-op cost for raw OpenBLAS (bench/blas_raw.c), ddplua and PyTorch
-- (bench/ops_torch.py), side by side.
--
-- Two roles, chosen by the first argument:
--   lua5.4 bench/ops.lua [options]            the driver (run it through bench/ops, which builds
--                                            blas_raw and sets the paths): starts one worker per
--                                            engine and thread count, asks them for each row in
--                                            turn, round after round, and prints the tables
--   lua5.4 bench/ops.lua --worker [options]   the ddplua worker
--
-- The row protocol, which the three workers speak on stdin and stdout: a worker prints "INFO"
-- lines and then "ROWS <name> <name> ...", the rows it has; the driver sends "<name> <calls>";
-- the worker times <calls> calls of the row (calls 0: a warm-up call and a calibration to a
-- loop of about --min-time seconds first) and answers "RESULT <name> <value> <unit> <calls>" or
-- "ERROR <name> <message>"; it exits at the end of its input. A row's inputs are made when it
-- is first asked for and kept while the next rows share them (rows come in groups).
-- Bandwidth is bytes read + bytes written per second (GB = 1e9), sgemm is 2*M*N*K flops per
-- call, the rest are ms per call.

local N_ELEM = 16 * 1024 * 1024 -- 16M float32 = 64 MiB per tensor

local util = dofile((arg[0]:match('^(.*)/[^/]*$') or '.') .. '/util.lua')
local median, sh_quote = util.median, util.sh_quote
local function parse_args(argv, defaults) return util.parse_args(argv, defaults, 'bench/ops') end

---------------------------------------------------------------------------------------------
-- the ddplua worker
---------------------------------------------------------------------------------------------
local function worker(argv)
  local o = parse_args(argv, {worker = false, threads = 1, min_time = 0.1, reps = 1,
                              tiny_calls = 1000000})
  local ddpl = require 'ddplua'
  local now = assert(ddpl.time, 'ddpl.time is missing (API.md, Utilities)')
  ddpl.set_num_threads(o.threads)
  io.write(('INFO ddplua %s, threads %d, bf16 GEMM %s\n'):format(tostring(ddpl.version),
           ddpl.get_num_threads(), ddpl.config().cpu_bf16_gemm))

  -- Seconds per call of body: the median of o.reps loops of `calls` calls; with calls 0 a
  -- warm-up call and a calibration to loops of about o.min_time seconds first. Returns the
  -- seconds and the calls.
  local function time_per_call(body, calls)
    if calls <= 0 then
      body()
      calls = 1
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
    end
    local per_call = {}
    for r = 1, o.reps do
      local t = now()
      for _ = 1, calls do body() end
      per_call[r] = (now() - t) / calls
    end
    return median(per_call), calls
  end

  -- Results are closed right away: the Lua equivalent of Python freeing a result as soon as its
  -- last reference goes, which is what the torch worker gets.
  local function producing(f)
    return function() local r <close> = f() end
  end
  -- every result of a multi-result op freed at once (one <close> per local; a nil is skipped)
  local function all_closed(f)
    return function()
      local a, b, c = f()
      local ca <close> = a
      local cb <close> = b
      local cc <close> = c
    end
  end

  -- the inputs of each group of rows (the same in bench/ops_torch.py)
  local groups = {
    gemm = function()
      return {big = {ddpl.randn(1024, 1024), ddpl.randn(1024, 1024)},
              small = {ddpl.randn(64, 784), ddpl.randn(784, 256)}}
    end,
    -- (1024,1024) @ (1024,1024) in bfloat16: the AVX512-BF16 GEMM where the CPU has it
    bf16 = function()
      return {a = ddpl.randn(1024, 1024):to('bfloat16'), b = ddpl.randn(1024, 1024):to('bfloat16')}
    end,
    elementwise = function()
      return {a = ddpl.randn(N_ELEM), b = ddpl.randn(N_ELEM), x = ddpl.randn(N_ELEM),
              dst = ddpl.empty(N_ELEM)}
    end,
    -- 16M float32 as one row and a 4096x4096 matrix along each dim; any runs on zeros and all
    -- on ones, so both read every element (they stop at the first deciding one)
    scan = function()
      return {v = ddpl.randn(N_ELEM), m = ddpl.randn(4096, 4096), zeros = ddpl.zeros(N_ELEM),
              ones = ddpl.ones(N_ELEM)}
    end,
    -- 1M float32 as one slice, 1024 rows of 1024; 1M int64 in [0, 100000) for unique
    sort = function()
      return {v = ddpl.randn(1 << 20), m = ddpl.randn(1024, 1024),
              u = ddpl.randint(0, 100000, {1 << 20})}
    end,
    -- v 1M float32, m 1024x1024, m4 4096x1024, big 16M; u 1M int64 in [0, 1000) (the bins of
    -- bincount, the index of scatter_add/index_add into 1000 slots), a bool mask of v about half
    -- true, 1000 sorted boundaries for searchsorted
    select = function()
      local t = {v = ddpl.randn(1 << 20), m = ddpl.randn(1024, 1024),
                 m4 = ddpl.randn(4096, 1024), big = ddpl.randn(N_ELEM),
                 q3 = ddpl.tensor({0.25, 0.5, 0.75}), u = ddpl.randint(0, 1000, {1 << 20}),
                 z = ddpl.zeros(1000), gi = ddpl.randint(0, 1024, {1024, 1024}),
                 bounds = ddpl.linspace(-3, 3, 1000)}
      t.mask = t.v:gt(0)
      return t
    end,
    tiny = function() return {a = ddpl.ones(1), b = ddpl.ones(1)} end,
  }

  -- rows in the driver's order: {name, group, make(inputs) -> body, unit, amount}; the value is
  -- amount / seconds per call for GB/s (amount in GB) and GFLOP/s, ms per call otherwise
  local GB, nbytes = 1e9, 4 * N_ELEM
  local rows = {
    {'sgemm_1024x1024x1024', 'gemm', function(t)
      return producing(function() return ddpl.matmul(t.big[1], t.big[2]) end)
    end, 'GFLOP/s', 2 * 1024 ^ 3 / 1e9},
    {'sgemm_64x784x256', 'gemm', function(t)
      return producing(function() return ddpl.matmul(t.small[1], t.small[2]) end)
    end, 'GFLOP/s', 2 * 64 * 784 * 256 / 1e9},
    {'matmul_bf16_1024', 'bf16', function(t)
      return producing(function() return ddpl.matmul(t.a, t.b) end)
    end, 'GFLOP/s', 2 * 1024 ^ 3 / 1e9},
    -- reads a, b; writes a new tensor (3 passes); add_ reads x, b and writes x
    {'add', 'elementwise', function(t) return producing(function() return t.a + t.b end) end,
      'GB/s', 3 * nbytes / GB},
    {'add_', 'elementwise', function(t) return function() t.x:add_(t.b) end end, 'GB/s',
      3 * nbytes / GB},
    {'gelu', 'elementwise', function(t) -- exact (erf) GELU, as PyTorch
      return producing(function() return t.a:gelu() end)
    end, 'GB/s', 2 * nbytes / GB},
    {'clone', 'elementwise', function(t) return producing(function() return t.a:clone() end) end,
      'GB/s', 2 * nbytes / GB},
    {'copy_', 'elementwise', function(t) return function() t.dst:copy_(t.a) end end, 'GB/s',
      2 * nbytes / GB},
    {'cumsum', 'scan', function(t) return producing(function() return t.v:cumsum(0) end) end,
      'GB/s', 2 * nbytes / GB},
    {'cumsum_rows', 'scan', function(t) return producing(function() return t.m:cumsum(1) end) end,
      'GB/s', 2 * nbytes / GB},
    {'cumsum_cols', 'scan', function(t) return producing(function() return t.m:cumsum(0) end) end,
      'GB/s', 2 * nbytes / GB},
    {'any', 'scan', function(t) return producing(function() return t.zeros:any() end) end, 'GB/s',
      nbytes / GB},
    {'all', 'scan', function(t) return producing(function() return t.ones:all() end) end, 'GB/s',
      nbytes / GB},
    {'amax_rows', 'scan', function(t) return producing(function() return t.m:amax(1) end) end,
      'GB/s', nbytes / GB},
    {'sort_1m', 'sort', function(t) return all_closed(function() return t.v:sort() end) end},
    {'sort_rows', 'sort', function(t) return all_closed(function() return t.m:sort() end) end},
    {'argsort_1m', 'sort', function(t) return producing(function() return t.v:argsort() end) end},
    {'unique_1m', 'sort', function(t) return producing(function() return t.u:unique() end) end},
    {'unique_1m_inv', 'sort', function(t)
      return all_closed(function()
        return t.u:unique({return_inverse = true, return_counts = true})
      end)
    end},
  }
  local function sel(name, f, multi)
    rows[#rows + 1] = {name, 'select', function(t)
      return (multi and all_closed or producing)(function() return f(t) end)
    end}
  end
  sel('median_1m', function(t) return t.v:median() end)
  sel('median_rows', function(t) return t.m:median(-1) end, true)
  sel('quantile_rows', function(t) return ddpl.quantile(t.m, 0.5, -1) end)
  sel('quantile3_rows', function(t) return ddpl.quantile(t.m, t.q3, -1) end)
  sel('kthvalue_rows', function(t) return t.m:kthvalue(256, -1) end, true)
  sel('topk_rows', function(t) return t.m:topk(10, -1) end, true)
  sel('topk_rows_small', function(t) return t.m:topk(10, -1, {largest = false}) end, true)
  sel('cumprod_1m', function(t) return t.v:cumprod(0) end)
  sel('cummax_1m', function(t) return t.v:cummax(0) end, true)
  sel('logsumexp_rows', function(t) return t.m:logsumexp(1) end)
  sel('std_rows', function(t) return t.m:std(1) end) -- correction 1, as torch's
  sel('var_cols', function(t) return t.m:var(0) end)
  sel('norm2_rows', function(t) return t.m:norm(2, 1) end)
  sel('norm1_rows', function(t) return t.m:norm(1, 1) end)
  sel('prod_cols', function(t) return t.m4:prod(0) end)
  sel('sum_cols', function(t) return t.m4:sum(0) end)
  sel('max_rows', function(t) return t.m4:max(1) end, true)
  sel('count_nonzero', function(t) return t.m4:count_nonzero() end)
  sel('aminmax', function(t) return t.m4:aminmax() end, true)
  sel('nansum', function(t) return t.m4:nansum() end)
  sel('bincount_1m', function(t) return t.u:bincount() end)
  sel('histc_1m', function(t) return t.v:histc({bins = 100, min = -3, max = 3}) end)
  sel('searchsorted_1m', function(t) return ddpl.searchsorted(t.bounds, t.v) end)
  sel('scatter_add_1m', function(t) return t.z:scatter_add(0, t.u, t.v) end)
  sel('index_add_1m', function(t) return t.z:index_add(0, t.u, t.v) end)
  sel('gather_rows', function(t) return t.m:gather(1, t.gi) end)
  sel('masked_select_1m', function(t) return t.v:masked_select(t.mask) end)
  sel('nonzero_1m', function(t) return t.mask:nonzero() end)
  sel('remainder_16m', function(t) return t.big % 1.5 end)
  sel('fmod_16m', function(t) return t.big:fmod(1.5) end)
  sel('roll_rows', function(t) return t.m4:roll(7, 0) end)
  sel('roll_cols', function(t) return t.m4:roll(7, 1) end)
  sel('repeat_interleave_1m', function(t) return t.v:repeat_interleave(2) end)

  local by_name, names = {}, {}
  for _, r in ipairs(rows) do
    by_name[r[1]], names[#names + 1] = r, r[1]
  end
  names[#names + 1] = 'tiny_add'
  io.write('ROWS ', table.concat(names, ' '), '\n')
  io.flush()

  local group, inputs, bodies = nil, nil, {}
  local function measure(name, calls)
    if name == 'tiny_add' then
      -- a loop of --tiny-calls 1-element adds minus an empty loop of as many; the results are
      -- left to the garbage collector as in ordinary code
      local t1, t2, n = ddpl.ones(1), ddpl.ones(1), o.tiny_calls
      local t = now()
      for _ = 1, n do local c = t1 + t2 end
      local t_op = now() - t
      t = now()
      for _ = 1, n do end
      return (t_op - (now() - t)) / n * 1e6, 'us', n
    end
    local r = by_name[name] or error('not a row of the ddplua worker', 0)
    if r[2] ~= group then
      group, inputs, bodies = nil, nil, {}
      collectgarbage()
      ddpl.manual_seed(0)
      inputs, group = groups[r[2]](), r[2]
    end
    bodies[name] = bodies[name] or r[3](inputs)
    local s, n = time_per_call(bodies[name], calls)
    if r[4] then return r[5] / s, r[4], n end
    return s * 1e3, 'ms', n
  end

  for line in io.lines() do
    local name, calls = line:match('^(%S+) (%d+)$')
    if name then
      local ok, value, unit, n = pcall(measure, name, tonumber(calls))
      if ok then
        io.write(('RESULT %s %.6g %s %d\n'):format(name, value, unit, n))
      else
        io.write(('ERROR %s %s\n'):format(name, (tostring(value):gsub('\n', ' '))))
      end
      io.flush()
    end
  end
end

---------------------------------------------------------------------------------------------
-- the driver
---------------------------------------------------------------------------------------------
-- the rows, in the order they are measured (the workers' groups stay together)
local METRICS = {
  {key = 'sgemm_1024x1024x1024', label = 'sgemm 1024x1024x1024', unit = 'GFLOP/s'},
  {key = 'sgemm_64x784x256', label = 'sgemm 64x784x256', unit = 'GFLOP/s'},
  {key = 'matmul_bf16_1024', label = 'matmul 1024^3 bfloat16', unit = 'GFLOP/s'},
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

-- A worker as a co-process: its stdin is a named pipe (fifo) that the driver writes, its stdout
-- and stderr a pipe the driver reads. Reads up to the worker's ROWS line; a worker that exits
-- first is returned with .dead set.
local function start_worker(cmd, fifo)
  assert(os.execute('mkfifo ' .. sh_quote(fifo)), 'bench/ops: mkfifo ' .. fifo .. ' failed')
  local w = {rows = {}, notes = {}}
  w.from = assert(io.popen(cmd .. ' <' .. sh_quote(fifo) .. ' 2>&1', 'r'))
  w.to = assert(io.open(fifo, 'w')) -- opens once the worker's shell has opened its end
  for line in w.from:lines() do
    local rows = line:match('^ROWS (.*)$')
    if rows then
      for n in rows:gmatch('%S+') do w.rows[n] = true end
      return w
    end
    w.notes[#w.notes + 1] = (line:gsub('^INFO ', ''))
  end
  w.dead = 'exited before listing its rows'
  return w
end

-- One measurement of row `name` in `calls` calls (0: the worker calibrates); returns the value
-- and the calls, or nil and a message. Lines other than the answer go to w.notes.
local function ask(w, name, calls)
  if w.dead then return nil, w.dead end
  w.to:write(name, ' ', calls, '\n')
  w.to:flush()
  for line in w.from:lines() do
    local n, v, c = line:match('^RESULT (%S+) (%S+) %S+ (%d+)$')
    if n == name then return tonumber(v), tonumber(c) end
    local en, msg = line:match('^ERROR (%S+) (.*)$')
    if en == name then return nil, msg end
    w.notes[#w.notes + 1] = line
  end
  w.dead = 'exited while measuring ' .. name
  return nil, w.dead
end

-- Ends the workers of one thread count. Every worker inherited the driver's write ends of the
-- fifos opened before it started (io.open sets no close-on-exec), so all write ends are closed
-- first and the workers waited for from the last started: each exit releases earlier fifos.
local function stop_workers(ws)
  for _, w in ipairs(ws) do w.to:close() end
  for i = #ws, 1, -1 do
    local ok, how, code = ws[i].from:close()
    if not ok and not ws[i].dead then ws[i].dead = ('exited (%s %s)'):format(how, code) end
  end
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

local USAGE = 'usage: bench/ops [--quick] [--rounds R] [--threads 1,2] [--min-time S] [--reps K]\n'
  .. '                 [--tiny-calls N] [--no-torch] [--python PATH] [--only NAMES]\n'
  .. '                 [--base BUILD_DIR] (see bench/README.md)\n'

local function driver(argv)
  local ok, o = pcall(parse_args, argv, {quick = false, rounds = 5, threads = '1,2',
    min_time = 0.1, reps = 1, tiny_calls = 1000000, no_torch = false, python = '/usr/bin/python3',
    blas_raw = os.getenv('BENCH_BLAS_RAW') or '', lua = os.getenv('BENCH_LUA') or 'lua5.4',
    only = '', base = ''})
  if not ok then
    io.stderr:write('bench/ops: ', tostring(o):gsub('^.-:%d+: ', ''), '\n', USAGE)
    os.exit(2)
  end
  if o.quick then
    local explicit = table.concat(argv, ' ')
    if not explicit:find('%-%-rounds') then o.rounds = 2 end
    if not explicit:find('%-%-min%-time') then o.min_time = 0.05 end
    if not explicit:find('%-%-tiny%-calls') then o.tiny_calls = 100000 end
  end
  if o.rounds < 1 or o.reps < 1 or not (o.min_time > 0) then
    io.stderr:write('bench/ops: --rounds and --reps must be >= 1, --min-time > 0\n', USAGE)
    os.exit(2)
  end
  local here = (arg and arg[0] or 'bench/ops.lua'):match('^(.*)/[^/]*$') or '.'
  local threads = {}
  for t in o.threads:gmatch('%d+') do threads[#threads + 1] = tonumber(t) end

  -- --only: the rows whose names match (a worker only makes the inputs of the rows asked for)
  local wanted = util.selector(o.only)
  local rows = {}
  for _, m in ipairs(METRICS) do
    if wanted(m.key) then rows[#rows + 1] = m end
  end
  if #rows == 0 then
    local names = {}
    for _, m in ipairs(METRICS) do names[#names + 1] = m.key end
    io.stderr:write('bench/ops: --only ', o.only, ' matches no row; the rows are:\n  ',
                    table.concat(names, ' '), '\n')
    os.exit(2)
  end

  local have_torch = not o.no_torch and
    os.execute(sh_quote(o.python) .. ' -c "import torch" >/dev/null 2>&1') == true
  local common = ('--min-time %g --reps %d'):format(o.min_time, o.reps)
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

  io.write(('bench/ops: %d rows, %d rounds, threads %s, loops of ~%gs (%d per measurement), '
            .. 'tiny op %d calls; torch %s\n'):format(#rows, o.rounds, o.threads, o.min_time,
            o.reps, o.tiny_calls, have_torch and 'yes' or o.no_torch and 'off (--no-torch)'
            or 'not importable by ' .. o.python .. ' (skipped)'))

  -- other processes on the machine skew every figure, 2-thread ones most: say how busy it was
  local loadavg = util.loadavg
  local load_start, t_start = loadavg(), os.time()
  local dir = os.tmpname()
  os.remove(dir)
  assert(os.execute('mkdir -m 700 ' .. sh_quote(dir)), 'bench/ops: mkdir ' .. dir .. ' failed')

  local results = {} -- results[T][engine][metric] = {round values}
  local engines_of = {}
  local notes = {}
  for _, T in ipairs(threads) do
    local envT = ('%sOMP_NUM_THREADS=%d OPENBLAS_NUM_THREADS=%d '):format(clean, T, T)
    local engines = {}
    if o.blas_raw ~= '' then
      engines[#engines + 1] = {name = 'raw', cmd = envT .. sh_quote(o.blas_raw)
        .. (' --threads %d %s'):format(T, common)}
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
    for i, e in ipairs(engines) do
      results[T][e.name] = {}
      e.w = start_worker(e.cmd, ('%s/T%d-%d'):format(dir, T, i))
      e.calls = {}
    end

    -- each row: every engine that has it, in an order that rotates from round to round, all
    -- rounds one after the other (so the load of that minute touches every engine alike)
    for ri, m in ipairs(rows) do
      local have = {}
      for _, e in ipairs(engines) do
        if e.w.rows[m.key] then have[#have + 1] = e end
      end
      for r = 1, o.rounds do
        for j = 0, #have - 1 do
          local e = have[(ri + r + j) % #have + 1]
          local v, c = ask(e.w, m.key, e.calls[m.key] or 0)
          if v then
            e.calls[m.key] = c
            local list = results[T][e.name][m.key] or {}
            list[#list + 1] = v
            results[T][e.name][m.key] = list
          else
            notes[('%s ERROR: %s: %s'):format(e.name, m.key, c)] = true
          end
        end
      end
      local line = {}
      for _, e in ipairs(have) do
        line[#line + 1] = e.name .. ' ' .. fmt(median(results[T][e.name][m.key] or {}))
      end
      io.stderr:write(('  threads %d, %d/%d %s (%s): %s\n'):format(T, ri, #rows, m.key, m.unit,
                      table.concat(line, ', ')))
    end
    local ws = {}
    for i, e in ipairs(engines) do ws[i] = e.w end
    stop_workers(ws)
    for _, e in ipairs(engines) do
      for _, line in ipairs(e.w.notes) do notes[e.name .. ': ' .. line] = true end
      if e.w.dead then notes[e.name .. ' ERROR: worker ' .. e.w.dead] = true end
    end
  end
  os.execute('rm -rf ' .. sh_quote(dir))

  local h = io.popen('nproc')
  local ncpu = h and h:read('l') or '?'
  if h then h:close() end
  io.write(('\nload average (1, 5, 15 min) at start: %s, at end: %s; %s CPUs; %d s\n'):format(
    load_start, loadavg(), ncpu, os.time() - t_start))
  local sorted_notes = {}
  for k in pairs(notes) do sorted_notes[#sorted_notes + 1] = k end
  table.sort(sorted_notes)
  io.write('\n')
  for _, n in ipairs(sorted_notes) do io.write('  ', n, '\n') end

  -- side-by-side tables: median [min-max] over rounds
  for _, T in ipairs(threads) do
    local engines = engines_of[T]
    io.write(('\nthreads = %d (median [min-max] over %d rounds)\n'):format(T, o.rounds))
    local header = pad('metric', 24) .. pad('unit', 9)
    for _, e in ipairs(engines) do header = header .. pad(e.name, 18) end
    header = header:gsub('%s+$', '')
    io.write(header, '\n', string.rep('-', #header), '\n')
    for _, m in ipairs(rows) do
      local line = pad(m.label, 24) .. pad(m.unit, 9)
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
    -- bfloat16 matmul against torch's (issue 34's target: >= 0.9) and against our float32
    -- sgemm of the same shape (>= 1.7)
    local bf, tbf = med(T, 'ddplua', 'matmul_bf16_1024'), best_torch(T, 'matmul_bf16_1024', true)
    local f32 = med(T, 'ddplua', 'sgemm_1024x1024x1024')
    if bf or tbf then
      io.write(pad('bf16 matmul vs torch', 24), pad(tostring(T), 3),
               pad(tbf and 'torch ' .. fmt(tbf) or '-', 14), pad(fmt(bf), 9),
               pad(ratio(bf, tbf), 8), pad(fmt(tbf), 9), pad('-', 8), pad('>= 0.9', 9),
               bf and tbf and (bf / tbf >= 0.9 and 'ok' or 'BELOW') or 'n/a', '\n')
      if f32 then
        io.write(pad('bf16 matmul vs f32', 24), pad(tostring(T), 3),
                 pad('f32 ' .. fmt(f32), 14), pad(fmt(bf), 9), pad(ratio(bf, f32), 8),
                 pad(fmt(tbf), 9), pad(ratio(tbf, best_torch(T, 'sgemm_1024x1024x1024', true)), 8),
                 pad('>= 1.7', 9), bf and (bf / f32 >= 1.7 and 'ok' or 'BELOW') or 'n/a', '\n')
      end
    end
    local d, t = med(T, 'ddplua', 'tiny_add'), best_torch(T, 'tiny_add', false)
    if d or t then
      io.write(pad('tiny add, us per call', 24), pad(tostring(T), 3), pad('-', 14), pad(fmt(d), 9),
               pad('-', 8), pad(fmt(t), 9), pad('-', 8), pad('< 1 us', 9),
               d and (d < 1 and 'ok' or 'ABOVE') or 'n/a', '\n')
    end
  end
  -- the scans, sorts and issue-29 reductions at least as fast as PyTorch: x = torch ms /
  -- ddplua ms, or ddplua GB/s / torch GB/s (above 1: ddplua faster)
  local vs_torch = {'cumsum', 'cumsum_rows', 'cumsum_cols', 'any', 'all', 'amax_rows', 'sort_1m',
                    'sort_rows', 'argsort_1m', 'unique_1m', 'unique_1m_inv'}
  for _, s in ipairs(SELECT_METRICS) do vs_torch[#vs_torch + 1] = s[1] end
  local unit_of = {}
  for _, m in ipairs(METRICS) do unit_of[m.key] = m.unit end
  local function speedup(k, t, d)
    if unit_of[k] == 'ms' then return ratio(t, d), t and d and t / d end
    return ratio(d, t), t and d and d / t
  end
  for _, T in ipairs(threads) do
    for _, k in ipairs(vs_torch) do
      local d, t = med(T, 'ddplua', k), best_torch(T, k, unit_of[k] ~= 'ms')
      if d or t then
        local x, xv = speedup(k, t, d)
        io.write(pad(#k <= 14 and k .. ' vs torch' or k, 24), pad(tostring(T), 3),
                 pad('torch ' .. fmt(t), 14), pad(fmt(d), 9), pad(x, 8), pad(fmt(t), 9),
                 pad('-', 8), pad('>= 1', 9), xv and (xv >= 1 and 'ok' or 'BELOW') or 'n/a', '\n')
      end
    end
  end
  io.write('torch: the better of torch and torch passive (OMP_WAIT_POLICY=passive).\n')
  if base_cpath then
    -- before/after from the same rounds: x = torch ms / ddplua ms (above 1: ddplua faster)
    -- also from the fastest round of each engine: on a loaded host the minimum is the figure
    -- least touched by other processes
    -- the best round of each engine: the lowest ms, the highest GB/s
    local function best(T, engine, key)
      local v = results[T][engine] and results[T][engine][key]
      if not v or #v == 0 then return nil end
      local m = v[1]
      for _, x in ipairs(v) do
        if (unit_of[key] == 'ms') == (x < m) then m = x end
      end
      return m
    end
    local function best_round_torch(T, key)
      local a, b = best(T, 'torch', key), best(T, 'torch passive', key)
      if a and b then
        return ((unit_of[key] == 'ms') == (a < b)) and a or b
      end
      return a or b
    end
    io.write(('\nbefore (--base %s) and after, against torch (medians and the best rounds; '
              .. 'x = torch ms / ddplua ms or ddplua GB/s / torch GB/s)\n'):format(o.base))
    local hdr = pad('op', 22) .. pad('T', 3) .. pad('torch', 9) .. pad('before', 9) .. pad('x', 8)
      .. pad('after', 9) .. pad('x', 8) .. pad('best: torch', 12) .. pad('before', 9)
      .. pad('x', 8) .. pad('after', 9) .. 'x'
    io.write(hdr, '\n', string.rep('-', #hdr + 6), '\n')
    for _, T in ipairs(threads) do
      for _, k in ipairs(vs_torch) do
        local t = best_torch(T, k, unit_of[k] ~= 'ms')
        local b, d = med(T, 'ddplua base', k), med(T, 'ddplua', k)
        local tl, bl, dl = best_round_torch(T, k), best(T, 'ddplua base', k), best(T, 'ddplua', k)
        if b or d then
          io.write(pad(k, 22), pad(tostring(T), 3), pad(fmt(t), 9), pad(fmt(b), 9),
                   pad((speedup(k, t, b)), 8), pad(fmt(d), 9), pad((speedup(k, t, d)), 8),
                   pad(fmt(tl), 12), pad(fmt(bl), 9), pad((speedup(k, tl, bl)), 8),
                   pad(fmt(dl), 9), (speedup(k, tl, dl)), '\n')
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
