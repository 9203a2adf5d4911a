-- spec/fuzz/fuzz_api_spec.lua: the API sweep (issue 18): every function of ddpl, ddpl.F,
-- ddpl.autograd and the tensor methods and metamethods, called with a battery of bad arguments in
-- child processes (spec/fuzz/workers/fuzz_api_driver.lua), must raise a Lua error naming the
-- function or return: no crash, no hang, no anonymous error. The targets are found by iterating the
-- tables, so a new function is swept without editing anything (docs/internals/hostile-input.md).
local S = require 'shell_util'

local DRIVER = S.src .. '/spec/fuzz/workers/fuzz_api_driver.lua'
local BATCHES = 8 -- child processes; each sweeps every 8th target
local KILL_AFTER = 300 -- seconds per child: generous, the whole sweep takes seconds

-- Runs the driver in a scratch directory (ddpl.save and friends may write files named by the
-- battery); returns its stdout, its stderr and its exit status.
local function driver(dir, args)
  local out, err = dir .. '/out', dir .. '/err'
  -- in a subshell: S.sh appends 2>&1, which would otherwise take the child's stderr
  local _, code = S.sh(('(cd %s && timeout %d %s %s %s > %s 2> %s)'):format(S.q(dir), KILL_AFTER,
    S.q(S.bin), S.q(DRIVER), args, S.q(out), S.q(err)))
  return S.slurp(out), S.slurp(err), code
end

-- The last call a child started, from its stderr.
local function last_call(err)
  local call
  for line in err:gmatch('CALL ([^\n]*)') do call = line end
  return call or '(none)'
end

describe('the API sweep', function()
  it('raises a clean error naming the function, or returns, for every call', function()
    local dir = S.new_tmpdir()
    local listing, list_err, code = driver(dir, 'list')
    assert(code == 0 and listing:find('\ndone\n'), 'listing the targets failed:\n' .. list_err)
    local names = {}
    for name in listing:gmatch('TARGET (%S+)') do names[#names + 1] = name end
    -- the sweep must reach every namespace it claims to cover
    local function has(name)
      for _, n in ipairs(names) do if n == name then return true end end
      return false
    end
    for _, want in ipairs({'ddpl.zeros', 'ddpl.F.conv2d', 'ddpl.autograd.grad', 'tensor.add_',
        'tensor.__add', 'tensor.as_strided'}) do
      assert(has(want), 'the sweep does not reach ' .. want)
    end

    local totals = {calls = 0, errors = 0, ok = 0, unnamed = 0, crashes = 0}
    local failures = {}
    for b = 1, BATCHES do
      local mine = {}
      for i = b, #names, BATCHES do mine[#mine + 1] = S.q(names[i]) end
      local out, err, status = driver(dir, 'run ' .. table.concat(mine, ' '))
      local counts = out:match('COUNTS ([^\n]*)')
      if status ~= 0 or not out:find('\ndone\n') or not counts then
        totals.crashes = totals.crashes + 1
        failures[#failures + 1] = ('batch %d died (status %s) in %s\n%s'):format(b,
          tostring(status), last_call(err), err:gsub('CALL [^\n]*\n', ''):sub(-2000))
      else
        for key, value in counts:gmatch('(%w+)=(%d+)') do
          totals[key] = totals[key] + tonumber(value)
        end
        for line in out:gmatch('UNNAMED ([^\n]*)') do failures[#failures + 1] = line end
      end
    end
    os.execute('rm -rf ' .. S.q(dir))
    print(('\nAPI sweep: %d targets, %d calls, %d clean errors, %d returned, %d unnamed errors, '
      .. '%d crashed batches'):format(#names, totals.calls, totals.errors, totals.ok,
      totals.unnamed, totals.crashes))
    assert(#failures == 0, #failures .. ' failures:\n' .. table.concat(failures, '\n', 1,
      math.min(#failures, 40)))
    -- the battery must reach far: most calls fail, and each target gets well over a hundred
    assert(totals.calls > 100 * #names, 'the sweep made only ' .. totals.calls .. ' calls')
    assert(totals.errors > totals.calls / 2, 'too few calls were refused: the battery is weak')
  end)
end)
