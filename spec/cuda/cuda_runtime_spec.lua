-- spec/cuda/cuda_runtime_spec.lua: the CUDA runtime side of ddpl: ddpl.cuda queries, device names,
-- copies between host and device (item, tolist, printing, saving), the caching allocator's
-- statistics and out-of-memory errors. The parts that need a GPU are pending without one; the
-- rest (errors without a GPU, device parsing, statistics at rest, config) runs everywhere.
local ddpl = require 'ddplua'

local has_cuda = ddpl.cuda.is_available()
local MiB = 1024 * 1024

local function gpu_only()
  if not ddpl.cuda.is_available() then pending('no CUDA device') return true end
  return false
end

-- Runs f, which must fail; returns the message.
local function error_of(f, ...)
  local ok, err = pcall(f, ...)
  assert.is_false(ok, 'expected an error')
  return tostring(err)
end

describe('ddpl.cuda queries', function()
  it('is a module of its own too', function()
    assert.are.equal(ddpl.cuda, require('ddplua.cuda'))
    for _, name in ipairs({'is_available', 'device_count', 'set_device', 'current_device',
                           'synchronize', 'memory_allocated', 'max_memory_allocated',
                           'memory_reserved', 'max_memory_reserved', 'reset_peak_memory_stats',
                           'empty_cache'}) do
      assert.are.equal('function', type(ddpl.cuda[name]), name)
    end
  end)

  it('agree with each other', function()
    local n = ddpl.cuda.device_count()
    assert.are.equal(n > 0, ddpl.cuda.is_available())
    if not ddpl.config().cuda then assert.are.equal(0, n) end
  end)

  it('work without a GPU: nothing allocated, nothing to wait for', function()
    if has_cuda then pending('a GPU is present') return end
    assert.are.equal(0, ddpl.cuda.device_count())
    assert.are.equal(0, ddpl.cuda.memory_allocated())
    assert.are.equal(0, ddpl.cuda.max_memory_allocated())
    assert.are.equal(0, ddpl.cuda.memory_reserved())
    assert.are.equal(0, ddpl.cuda.max_memory_reserved())
    ddpl.cuda.reset_peak_memory_stats()
    ddpl.cuda.empty_cache()
    ddpl.cuda.synchronize()
  end)

  it('refuse devices that do not exist', function()
    local n = ddpl.cuda.device_count()
    assert.matches('set_device', error_of(ddpl.cuda.set_device, n))
    assert.matches('cuda.memory_allocated: device cuda:' .. n .. ' does not exist',
                   error_of(ddpl.cuda.memory_allocated, n), 1, true)
    assert.matches('does not exist', error_of(ddpl.cuda.max_memory_allocated, 'cuda:' .. n))
    assert.matches('expected a CUDA device', error_of(ddpl.cuda.memory_reserved, 'cpu'))
    assert.matches('invalid device index', error_of(ddpl.cuda.set_device, -1))
    if not has_cuda then
      -- a CUDA build on a machine without a GPU, or a build without CUDA
      local err = error_of(ddpl.cuda.set_device, 0)
      assert.is_truthy(err:match('not available') or err:match('no CUDA backend'), err)
      assert.matches('current_device', error_of(ddpl.cuda.current_device))
    end
  end)

  it('config reports what was built in, with versions', function()
    local c = ddpl.config()
    assert.are.equal('boolean', type(c.cuda))
    assert.are.equal('boolean', type(c.cudnn))
    assert.are.equal('boolean', type(c.nccl))
    -- cuDNN and NCCL are optional parts of a CUDA build, never there without it
    if not c.cuda then assert.is_false(c.cudnn or c.nccl) end
    if c.cuda then
      assert.matches('^%d+%.%d+$', c.cuda_runtime)
      if c.cudnn then assert.matches('^%d+%.%d+%.%d+$', c.cudnn_version) end
      if c.nccl then assert.matches('^%d+%.%d+%.%d+$', c.nccl_version) end
      if c.cuda_driver then assert.matches('^%d+%.%d+$', c.cuda_driver) end
    else
      assert.is_nil(c.cuda_runtime)
    end
  end)
end)

describe('device names', function()
  it('are checked', function()
    for _, bad in ipairs({'gpu', 'cuda:', 'cuda:x', 'cuda:-1', 'cuda:1x', 'cuda0', 'CUDA'}) do
      local err = error_of(ddpl.zeros, {2}, {device = bad})
      assert.matches("unknown device '" .. bad .. "'", err, 1, true)
    end
  end)

  it('give a clear error without a GPU', function()
    if has_cuda then pending('a GPU is present') return end
    for _, dev in ipairs({'cuda', 'cuda:0', 'cuda:1'}) do
      assert.matches('not available', error_of(ddpl.zeros, {2}, {device = dev}))
      assert.matches('not available', error_of(ddpl.tensor, {1, 2}, {device = dev}))
    end
    local x = ddpl.tensor({1, 2, 3})
    assert.matches('not available', error_of(x.cuda, x))
    assert.matches('not available', error_of(x.cuda, x, 1))
    assert.matches('not available', error_of(x.to, x, 'cuda:1'))
    assert.matches('not available', error_of(x.to, x, {device = 'cuda'}))
    -- nothing was half-made
    assert.are.same({1, 2, 3}, x:tolist())
    assert.are.equal('cpu', x.device)
  end)

  it("'cuda' is the current device", function()
    if gpu_only() then return end
    local n = ddpl.cuda.device_count()
    local last = n - 1
    ddpl.cuda.set_device(last)
    assert.are.equal(last, ddpl.cuda.current_device())
    assert.are.equal('cuda:' .. last, ddpl.zeros({2}, {device = 'cuda'}).device)
    assert.are.equal('cuda:' .. last, ddpl.ones({2}):cuda().device)
    assert.are.equal('cuda:0', ddpl.ones({2}):cuda(0).device)
    assert.are.equal('cuda:0', ddpl.ones({2}):to('cuda:0').device)
    ddpl.cuda.set_device(0)
    assert.are.equal('cuda:0', ddpl.zeros({2}, {device = 'cuda'}).device)
  end)
end)

describe('copies between host and device', function()
  it('keep values through item, tolist and printing', function()
    if gpu_only() then return end
    local x = ddpl.tensor({{1.5, -2}, {3, 4.25}})
    local g = x:cuda()
    assert.are.equal('cuda:0', g.device)
    assert.are.same(x:tolist(), g:tolist())
    assert.are.equal(4.25, g[1][1]:item()) -- x[i] is select(0, i)
    assert.are.same(x:tolist(), g:cpu():tolist())
    assert.matches("device='cuda:0'", tostring(g), 1, true)
    assert.are.same({{1.5, 3}, {-2, 4.25}}, g:t():tolist()) -- a strided view
    for _, dt in ipairs({'float64', 'float16', 'bfloat16', 'int64', 'int32', 'uint8', 'bool'}) do
      local h = ddpl.tensor({0, 1, 2}, {dtype = dt})
      assert.are.same(h:tolist(), h:cuda():tolist(), dt)
    end
    assert.are.same({}, ddpl.zeros({0}):cuda():tolist())
  end)

  it('stage large host-to-device copies without changing the bytes', function()
    if gpu_only() then return end
    -- 40 MiB: ten 4 MiB pinned chunks, both buffers reused several times
    local n = 10 * MiB + 3
    local x = ddpl.arange(n, {dtype = 'float32'})
    local g = x:cuda()
    assert.are.equal(0, (g:cpu() - x):abs():max():item())
    x:fill_(7) -- the host tensor may change at once after the copy
    assert.are.equal((n - 1) * 1.0, g[n - 1]:item())
  end)

  it('save a CUDA tensor and load it to either device', function()
    if gpu_only() then return end
    local path = os.tmpname()
    local w = ddpl.randn({3, 5}):cuda()
    ddpl.save({w = w, step = 3}, path)
    local cpu = ddpl.load(path)
    assert.are.equal('cpu', cpu.w.device)
    assert.are.same(w:tolist(), cpu.w:tolist())
    local dev = ddpl.load(path, {device = 'cuda'})
    assert.are.equal('cuda:0', dev.w.device)
    assert.are.same(w:tolist(), dev.w:tolist())
    os.remove(path)
  end)
end)

describe('the caching allocator', function()
  it('counts allocated and reserved bytes per device', function()
    if gpu_only() then return end
    collectgarbage()
    ddpl.cuda.synchronize()
    local base = ddpl.cuda.memory_allocated()
    local x = ddpl.zeros({MiB}, {device = 'cuda'}) -- 4 MiB
    assert.are.equal(base + 4 * MiB, ddpl.cuda.memory_allocated())
    assert.are.equal(base + 4 * MiB, ddpl.cuda.memory_allocated(0))
    assert.is_true(ddpl.cuda.memory_reserved() >= ddpl.cuda.memory_allocated())
    assert.is_true(ddpl.cuda.max_memory_allocated() >= base + 4 * MiB)
    -- the same figures through ddpl.memory_stats('cuda') (PyTorch's dotted keys too)
    local s = ddpl.memory_stats('cuda')
    assert.are.equal(base + 4 * MiB, s['allocated_bytes.current'])
    assert.are.equal(ddpl.cuda.max_memory_allocated(), s['allocated_bytes.peak'])
    assert.are.equal(ddpl.cuda.memory_reserved(), s.reserved_bytes)
    local reserved = ddpl.cuda.memory_reserved()
    x = nil
    collectgarbage()
    assert.are.equal(base, ddpl.cuda.memory_allocated())
    assert.are.equal(reserved, ddpl.cuda.memory_reserved()) -- kept in the cache
    local y = ddpl.zeros({MiB}, {device = 'cuda'})
    assert.are.equal(reserved, ddpl.cuda.memory_reserved()) -- served from it
    y = nil
    collectgarbage()
    ddpl.cuda.reset_peak_memory_stats()
    assert.are.equal(base, ddpl.cuda.max_memory_allocated())
    local z = ddpl.zeros({MiB}, {device = 'cuda'})
    ddpl.reset_peak_memory_stats('cuda:0') -- the same reset, through ddpl
    assert.are.equal(base + 4 * MiB, ddpl.memory_stats('cuda:0')['allocated_bytes.peak'])
    z = nil
    collectgarbage()
    ddpl.cuda.empty_cache()
    assert.is_true(ddpl.cuda.memory_reserved() < reserved)
  end)

  it('does not call the driver per op in a loop', function()
    if gpu_only() then return end
    local x = ddpl.randn({256, 256}):cuda()
    for _ = 1, 3 do x = (x * 0.5 + 1):tanh() end
    ddpl.cuda.synchronize()
    local reserved = ddpl.cuda.memory_reserved()
    for _ = 1, 200 do x = (x * 0.5 + 1):tanh() end
    ddpl.cuda.synchronize()
    assert.are.equal(reserved, ddpl.cuda.memory_reserved())
  end)

  it('reports out of memory clearly and stays usable', function()
    if gpu_only() then return end
    -- 2^40 float32 elements: 4 TiB, more than any GPU has
    local err = error_of(ddpl.empty, {1 << 40}, {device = 'cuda'})
    assert.matches('CUDA out of memory on cuda:0: tried to allocate 4194304.00 MiB', err, 1, true)
    assert.matches('MiB allocated by tensors, [%d.]+ MiB cached, [%d.]+ MiB free of [%d.]+ MiB total',
                   err)
    assert.are.same({2, 2}, (ddpl.ones({2}, {device = 'cuda'}) * 2):tolist())
  end)

  it('collects garbage tensors before giving up', function()
    if gpu_only() then return end
    ddpl.cuda.empty_cache()
    collectgarbage()
    -- tensors of a quarter of the device, dropped without a collection: the allocator's OOM
    -- hook must run the GC to find room for the later ones
    local total = 0
    local probe = error_of(ddpl.empty, {1 << 40}, {device = 'cuda'})
    total = tonumber(probe:match('free of ([%d.]+) MiB total')) * MiB
    local n = math.floor(total / 4 / 4)
    collectgarbage('stop')
    for _ = 1, 8 do local _ = ddpl.empty({n}, {device = 'cuda'}) end
    collectgarbage('restart')
    ddpl.cuda.empty_cache()
  end)
end)
