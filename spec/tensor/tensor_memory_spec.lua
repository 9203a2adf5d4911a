-- spec/tensor/tensor_memory_spec.lua: tensor memory is given back without collectgarbage calls: a
-- loop that makes and drops gigabytes stays small, <close> frees at scope exit (into the host
-- allocator's cache, which ddpl.empty_cache() returns to the system), and a training-like loop
-- with autograd stays flat. Each case runs in a child process that reports its own RSS from
-- /proc/self/status, so busted's memory does not interfere: under the stock lua5.4 (same
-- LUA_PATH/LUA_CPATH as this spec) and under the ddplua command ($DDPLUA_BIN, set by ctest).

-- Prelude of every child: loads ddplua and defines rss()/hwm() in MiB and report(key, value).
local PRELUDE = [[
local ddpl = require 'ddplua'
local function status(key)
  for line in io.lines('/proc/self/status') do
    local v = line:match('^' .. key .. ':%s*(%d+) kB')
    if v then return tonumber(v) / 1024 end
  end
  error('no ' .. key .. ' in /proc/self/status')
end
local function rss() return status('VmRSS') end
local function hwm() return status('VmHWM') end
local function report(key, value) io.write(('REPORT %s %.6f\n'):format(key, value)) end
]]

local S = require 'shell_util'

-- Runs PRELUDE .. body in a child `interpreter`; returns the reported {key = number} and the
-- whole output (for failure messages). The child must exit cleanly.
local function run_child(interpreter, body) return S.run_reporting(interpreter, PRELUDE .. body) end

local INTERPRETERS = {
  {name = 'lua5.4', path = function() return 'lua5.4' end},
  {name = 'the ddplua command', path = function()
    local bin = os.getenv('DDPLUA_BIN')
    assert(bin and bin ~= '', 'DDPLUA_BIN is not set (ctest sets it to the ddplua executable)')
    return bin
  end},
}

for _, interp in ipairs(INTERPRETERS) do
  describe('memory under ' .. interp.name, function()
    local function run(body) return run_child(interp.path(), body) end

    it('making and dropping 2 GB of tensors keeps peak RSS under 500 MB', function()
      local r, out = run([[
        report('start_hwm', hwm())
        local total, mean = 0, 0
        for i = 1, 512 do
          local x = ddpl.full({1024, 1024}, i % 5)  -- 4 MiB, dropped each iteration
          local y = (x * 2 + 1):sqrt()              -- three more 4 MiB results
          mean = y:sum():item() / y:numel()
          total = total + x:numel() * 4
        end
        report('allocated_mb', total / 2^20)
        report('last_mean', mean)
        report('peak_mb', hwm())
      ]])
      assert.are.equal(2048, r.allocated_mb, out)
      assert.is_true(math.abs(r.last_mean - math.sqrt(5)) < 1e-3, out) -- i = 512: sqrt(2*2 + 1)
      assert.is_true(r.peak_mb < 500,
        ('peak RSS %.0f MB (%.0f MB after loading ddplua)'):format(r.peak_mb, r.start_hwm))
    end)

    it('a <close> tensor frees its memory at scope exit', function()
      local r, out = run([[
        local x0 = ddpl.ones(8)  -- warm up the allocator and the kernels
        local before, bytes_before = rss(), ddpl.memory_allocated()
        local escaped
        do
          local x <close> = ddpl.ones(64, 1024, 1024)  -- 256 MiB, written by ones
          report('inside', rss() - before)
          report('bytes_inside', ddpl.memory_allocated() - bytes_before)
          escaped = x
        end
        report('bytes_after', ddpl.memory_allocated() - bytes_before)
        -- the block went back to the host allocator's cache (docs/internals/allocators.md), pages
        -- kept for the next tensor of its size; empty_cache gives them to the system
        report('cached_after', ddpl.memory_stats().cached_bytes)
        ddpl.empty_cache()
        report('after', rss() - before)
        local ok, err = pcall(function() return escaped:sum() end)
        report('use_after_close_failed', ok and 0 or 1)
        io.write('ERR ', tostring(err), '\n')
      ]])
      assert.is_true(r.inside > 200, 'the 256 MiB tensor was not resident:\n' .. out)
      assert.are.equal(256 * 2^20, r.bytes_inside, 'ddpl.memory_allocated() inside the scope:\n' .. out)
      assert.is_true(r.cached_after >= 256 * 2^20, 'the block is not in the cache:\n' .. out)
      assert.is_true(r.after < 32, ('%.0f MiB still resident after the scope exit and ' ..
        'empty_cache:\n%s'):format(r.after, out))
      assert.are.equal(0, r.bytes_after, 'tensor bytes still allocated after the scope exit:\n' .. out)
      assert.are.equal(1, r.use_after_close_failed, 'a closed tensor could still be used:\n' .. out)
      assert.truthy(out:match('ERR [^\n]*closed'), 'the error does not say the tensor is closed:\n' .. out)
    end)

    it('a training-like loop with autograd stays flat', function()
      local r, out = run([[
        ddpl.manual_seed(0)
        local w = ddpl.randn(1024, 512)  -- 2 MiB weight; its gradient is 2 MiB per step
        w:mul_(0.01)
        w.requires_grad = true
        local mid, first_loss, loss_value
        for step = 1, 300 do
          local x = ddpl.randn(32, 1024)
          local h = ddpl.matmul(x, w):relu()
          local loss = (h * h):mean()
          loss:backward()
          ddpl.no_grad(function() w:add_(w.grad, -1.0) end)
          w.grad:zero_()
          loss_value = loss:item()
          first_loss = first_loss or loss_value
          if step == 100 then mid = rss() end
        end
        report('mid', mid)
        report('growth', rss() - mid)
        report('peak_mb', hwm())
        report('first_loss', first_loss)
        report('last_loss', loss_value)
      ]])
      -- the loop trained: gradient descent on mean(relu(xw)^2) shrinks it
      assert.is_true(r.last_loss < r.first_loss, out)
      assert.is_true(r.growth < 64, ('RSS grew by %.0f MiB over steps 100..300:\n%s'):format(r.growth, out))
      assert.is_true(r.peak_mb < 500, ('peak RSS %.0f MB:\n%s'):format(r.peak_mb, out))
    end)
  end)
end
