-- spec/tensor/host_alloc_spec.lua: the host caching allocator seen from Lua
-- (docs/internals/allocators.md): ddpl.memory_stats() and ddpl.empty_cache(), reuse of freed
-- blocks, no growth over repeated allocation of mixed sizes, a forked child using the cache, and
-- page faults per training step once warm: near zero for the mlp, the cnn (models/lenet.lua) and a
-- small GPT (models/gpt.lua). Fault counts come from /proc/self/stat (minor faults, field 10) in a
-- child process per case, so busted's own memory does not add to them. The allocator's logic in
-- detail (classes, threads, memory pressure) is spec/c/test_host_alloc.c's.
local ddpl = require 'ddplua'

local S = require 'shell_util'
local ROOT = S.src

local MiB = 2 ^ 20
local KEYS = { 'allocated_bytes', 'peak_allocated_bytes', 'reserved_bytes', 'peak_reserved_bytes',
    'cached_bytes', 'blocks_mapped', 'blocks_reused', 'blocks_released', 'page_faults_avoided',
    'num_alloc_retries', 'num_pressure_releases', 'large_block_bytes',
    'allocated_bytes.current', 'allocated_bytes.peak' }

-- Prelude of every child: ddplua, minflt() and rss_mib(), report(key, value).
local PRELUDE = [[
local ddpl = require 'ddplua'
local F = ddpl.F
local ROOT = ...
local function minflt()
  local f = assert(io.open('/proc/self/stat'))
  local rest = f:read('a'):match('%) (.*)$')
  f:close()
  local i = 2 -- the field after the command name is number 3
  for x in rest:gmatch('%S+') do
    i = i + 1
    if i == 10 then return tonumber(x) end
  end
end
local function rss_mib()
  for line in io.lines('/proc/self/status') do
    local kb = line:match('^VmRSS:%s*(%d+) kB')
    if kb then return tonumber(kb) / 1024 end
  end
end
local function report(key, value) io.write(('REPORT %s %.17g\n'):format(key, value)) end
]]

-- Runs PRELUDE .. body in a child lua5.4; returns the reported {key = number} and the output.
local function run_child(body) return S.run_reporting('lua5.4', PRELUDE .. body, ROOT) end

describe('ddpl.memory_stats', function()
  it('has every key, as integers, consistent with each other', function()
    local keep = ddpl.empty(1024, 1024) -- 4 MiB in use while the figures are read
    local s = ddpl.memory_stats()
    for _, k in ipairs(KEYS) do
      assert.is_true(math.type(s[k]) == 'integer', k .. ' is not an integer: ' .. tostring(s[k]))
      assert.is_true(s[k] >= 0, k .. ' is negative')
    end
    local n = 0
    for _ in pairs(s) do n = n + 1 end
    assert.are.equal(#KEYS, n)
    assert.are.equal(ddpl.memory_allocated(), s.allocated_bytes)
    assert.is_true(s.allocated_bytes >= 4 * MiB)
    assert.is_true(s.peak_allocated_bytes >= s.allocated_bytes)
    assert.is_true(s.reserved_bytes >= 4 * MiB) -- keep's block is a large one
    assert.is_true(s.cached_bytes <= s.reserved_bytes)
    assert.is_true(s.peak_reserved_bytes >= s.reserved_bytes)
    assert.are.equal(64 * 1024, s.large_block_bytes)
    assert.are.equal(ddpl.memory_stats('cpu').reserved_bytes, s.reserved_bytes)
    keep = nil
  end)

  it("has PyTorch's dotted keys, whose peak reset_peak_memory_stats starts again", function()
    collectgarbage()
    collectgarbage()
    do
      local big <close> = ddpl.empty(2048, 1024) -- 8 MiB, freed at once
    end
    local s = ddpl.memory_stats()
    assert.are.equal(s.allocated_bytes, s['allocated_bytes.current'])
    assert.are.equal(s.peak_allocated_bytes, s['allocated_bytes.peak'])
    assert.is_true(s['allocated_bytes.peak'] >= s['allocated_bytes.current'] + 8 * MiB)
    ddpl.reset_peak_memory_stats()
    local r = ddpl.memory_stats()
    assert.are.equal(r['allocated_bytes.current'], r['allocated_bytes.peak'])
    assert.are.equal(r.reserved_bytes, r.peak_reserved_bytes)
    do
      local small <close> = ddpl.empty(256, 1024) -- 1 MiB: the new peak
    end
    local t = ddpl.memory_stats()
    assert.are.equal(r['allocated_bytes.current'] + MiB, t['allocated_bytes.peak'])
  end)

  it('rejects a device this build does not have, naming the function', function()
    if ddpl.cuda.is_available() then return end -- spec/cuda/cuda_runtime_spec.lua covers CUDA
    for _, f in ipairs({'memory_stats', 'reset_peak_memory_stats'}) do
      local ok, err = pcall(ddpl[f], 'cuda')
      assert.is_false(ok)
      assert.matches(f, err, 1, true)
      assert.matches('cuda', err, 1, true)
    end
  end)
end)

describe('the host caching allocator', function()
  it('reuses a freed block of the same size class and counts it', function()
    local s0 = ddpl.memory_stats()
    do
      local x <close> = ddpl.ones(512, 1024) -- 2 MiB
    end
    local s1 = ddpl.memory_stats()
    assert.is_true(s1.cached_bytes >= s0.cached_bytes + 2 * MiB)
    local y = ddpl.zeros(500, 1024) -- same class (eight classes per power of two)
    local s2 = ddpl.memory_stats()
    assert.are.equal(s1.blocks_reused + 1, s2.blocks_reused)
    assert.are.equal(s1.blocks_mapped, s2.blocks_mapped)
    assert.are.equal(s1.page_faults_avoided + 500 * 1024 * 4 // 4096, s2.page_faults_avoided)
    assert.are.equal(0, y:sum():item()) -- a reused block is still filled as asked
    assert.are.equal(0, y:abs():max():item())
  end)

  it('does not grow over repeated allocation and release of mixed sizes', function()
    local sizes = { 16 * 1024, 70 * 1000, 256 * 1024, 300 * 1000, 1024 * 1024, 2500 * 1000 }
    local function round()
      local live = {}
      for i, n in ipairs(sizes) do
        local t <close> = ddpl.empty(n) -- float32: 4n bytes
        live[i] = ddpl.full({ n // 2 }, i)
        t:fill_(i)
      end
      for i = #live, 1, -1 do getmetatable(live[i]).__close(live[i]) end
    end
    round()
    round()
    local warm = ddpl.memory_stats()
    for _ = 1, 30 do round() end
    local s = ddpl.memory_stats()
    assert.are.equal(warm.reserved_bytes, s.reserved_bytes)
    assert.are.equal(warm.blocks_mapped, s.blocks_mapped)
    assert.is_true(s.blocks_reused >= warm.blocks_reused + 30 * 9) -- 5 and 4 large blocks a round
  end)

  it('empty_cache gives the cached memory back to the system', function()
    local r, out = run_child([[
      ddpl.ones(8) -- load the kernels before the first reading
      local before = rss_mib()
      do
        local x <close> = ddpl.ones(64, 1024, 1024) -- 256 MiB, written
      end
      local s = ddpl.memory_stats()
      report('allocated', s.allocated_bytes)
      report('cached', s.cached_bytes)
      report('kept_mib', rss_mib() - before)
      ddpl.empty_cache()
      s = ddpl.memory_stats()
      report('cached_after', s.cached_bytes)
      report('released', s.blocks_released)
      report('left_mib', rss_mib() - before)
    ]])
    assert.are.equal(0, r.allocated, out)
    assert.is_true(r.cached >= 256 * MiB, out)
    assert.is_true(r.kept_mib > 200, 'the cached block was not resident:\n' .. out)
    assert.are.equal(0, r.cached_after, out)
    assert.is_true(r.released >= 1, out)
    assert.is_true(r.left_mib < 32, ('%.0f MiB still resident after empty_cache:\n%s'):format(
      r.left_mib, out))
  end)

  it('serves a forked child from the cache it inherited', function()
    local r, out = run_child([[
      local P = require 'ddplua.core.process'
      do local warm <close> = ddpl.full({ 1024, 1024 }, 3) end -- a 4 MiB block cached
      local pid = P.fork()
      if pid == 0 then
        local s0 = ddpl.memory_stats()
        local x = ddpl.full({ 1024, 1024 }, 5)      -- the inherited block
        local y = ddpl.full({ 2048, 1024 }, 2)      -- a new one
        local s1 = ddpl.memory_stats()
        local ok = s0.cached_bytes >= 4 * 2^20 and s1.blocks_reused == s0.blocks_reused + 1
          and s1.blocks_mapped == s0.blocks_mapped + 1
          and x:sum():item() == 5 * 2^20 and y:sum():item() == 4 * 2^20
        x, y = nil, nil
        collectgarbage()
        ddpl.empty_cache()
        ok = ok and ddpl.memory_stats().cached_bytes == 0
        P.exit(ok and 0 or 3)
      end
      local how, code
      for _ = 1, 6000 do
        how, code = P.waitpid(pid)
        if how then break end
        P.sleep(0.01)
      end
      report('child_exit', how == 'exit' and code or -1)
      local z = ddpl.full({ 1024, 1024 }, 7) -- the parent's block, untouched by the child
      report('parent_sum', z:sum():item())
      report('parent_reused', ddpl.memory_stats().blocks_reused)
    ]])
    assert.are.equal(0, r.child_exit, out)
    assert.are.equal(7 * 2 ^ 20, r.parent_sum, out)
    assert.is_true(r.parent_reused >= 1, out)
  end)
end)

-- Minor page faults of each of `steps` training steps of a model in a fresh process, and the
-- allocator's mappings before and after the measured steps.
local function step_faults(model_code, steps)
  return run_child(model_code .. ([[
    local faults, mapped = {}, {}
    for s = 1, %d do
      local f0 = minflt()
      local loss = step()
      loss:item()
      faults[s] = minflt() - f0
      mapped[s] = ddpl.memory_stats().blocks_mapped
    end
    io.write('FAULTS ', table.concat(faults, ' '), '\n')
    for s, f in ipairs(faults) do report('f' .. s, f) end
    for s, m in ipairs(mapped) do report('m' .. s, m) end
  ]]):format(steps))
end

-- The faults of steps first..last: their median and their sum.
local function steady(r, first, last)
  local v, sum = {}, 0
  for s = first, last do
    v[#v + 1] = r['f' .. s]
    sum = sum + r['f' .. s]
  end
  table.sort(v)
  return v[(#v + 1) // 2], sum
end

local SGD_STEP = [[
  local opt = ddpl.optim.SGD(model:parameters(), { lr = 0.01, momentum = 0.9 })
  function step()
    local x, y = ddpl.randn(64, 1, 28, 28), ddpl.randint(0, 10, { 64 })
    local loss = F.cross_entropy(model(x), y)
    opt:zero_grad()
    loss:backward()
    opt:step()
    return loss
  end
]]

describe('page faults per training step once warm', function()
  -- Warm-up lasts until the Lua GC's pacing has run its first full collections (the garbage a
  -- step leaves is part of the working set). After it, a step takes nearly no faults: the bound
  -- is 1% of the first step's for the median and a quarter of it for the sum of 20 steps (the
  -- Lua heap, glibc's small blocks and busted-free stdio still fault now and then).
  for _, case in ipairs({
    { name = 'mlp', steps = 40, code = "ddpl.manual_seed(0); local model = dofile(ROOT .. '/models/mlp.lua')()\n" .. SGD_STEP },
    { name = 'cnn (lenet)', steps = 40, code = "ddpl.manual_seed(0); local model = dofile(ROOT .. '/models/lenet.lua')()\n" .. SGD_STEP },
  }) do
    it(case.name, function()
      local r, out = step_faults(case.code, case.steps)
      local median, sum = steady(r, case.steps - 19, case.steps)
      assert.is_true(r.f1 > 300, 'the first step faulted too little to compare with:\n' .. out)
      assert.is_true(median <= r.f1 / 100, ('median %d faults per warm step against %d in the ' ..
        'first:\n%s'):format(median, r.f1, out))
      assert.is_true(sum <= r.f1 / 4, ('%d faults over 20 warm steps against %d in the first ' ..
        'step:\n%s'):format(sum, r.f1, out))
    end)
  end

  it('GPT (models/gpt.lua, small)', function()
    -- 40 steps: with the fused attention and cross-entropy a step leaves less garbage, so the
    -- GC's first full collection (the end of warm-up) comes after about 30 steps
    local steps = 40
    local r, out = step_faults([[
      ddpl.manual_seed(0)
      local cfg = { vocab_size = 1024, block_size = 64, n_layer = 2, n_head = 4, n_embd = 128 }
      local model = dofile(ROOT .. '/models/gpt.lua')(cfg)
      local opt = ddpl.optim.AdamW(model:parameters(), { lr = 1e-3 })
      function step()
        local idx = ddpl.randint(0, cfg.vocab_size, { 8, 64 })
        local _, loss = model(idx, ddpl.randint(0, cfg.vocab_size, { 8, 64 }))
        opt:zero_grad()
        loss:backward()
        opt:step()
        return loss
      end
    ]], steps)
    local median, sum = steady(r, steps - 5, steps)
    assert.is_true(r.f1 > 1000, 'the first step faulted too little to compare with:\n' .. out)
    assert.is_true(median <= r.f1 / 100, ('median %d faults per warm step against %d in the ' ..
      'first:\n%s'):format(median, r.f1, out))
    assert.is_true(sum <= r.f1 / 4, ('%d faults over 6 warm steps against %d in the first ' ..
      'step:\n%s'):format(sum, r.f1, out))
    -- and the allocator mapped nothing new in those steps
    assert.are.equal(r['m' .. (steps - 6)], r['m' .. steps], out)
  end)
end)
