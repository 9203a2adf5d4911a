-- spec/fuzz/workers/fuzz_api_driver.lua: one batch of the API sweep (spec/fuzz/fuzz_api_spec.lua
-- starts it in a child process, so a crash kills only the child and the spec names the call).
-- defines: the sweep's targets (every function of ddpl, ddpl.F, ddpl.autograd and the tensor
--          metatable and methods, found by iterating them), its argument battery, and the
--          classification of each call.
-- Usage: ddplua spec/fuzz/workers/fuzz_api_driver.lua list           -- one "TARGET <name>" each
--        ddplua spec/fuzz/workers/fuzz_api_driver.lua run <name>...  -- sweeps these targets
-- While running it writes "CALL <target> <arguments>" to stderr before each call (stderr is not
-- buffered: after a crash the last such line is the call that crashed), "UNNAMED <call> => <msg>"
-- to stdout for an error that does not name its function, then "COUNTS calls=.. errors=..
-- ok=.. unnamed=.." and "done". docs/internals/hostile-input.md explains the skip list and the
-- aliases.
local ddpl = require 'ddplua'

-- Functions that legitimately block or end the process: they are not called.
local SKIP = {
  -- none at present: every ddpl, ddpl.F, ddpl.autograd and tensor function returns or raises
}

-- Where an error names the operation under another name than the one called: PyTorch's aliases
-- (nelement is numel, ndimension is dim), methods defined as another op on the other tensor's
-- shape (view_as is view), the attribute requires_grad_ sets, and the metamethods (x + y is
-- add, x[i] = v is setindex).
local ALIAS = {
  ['ddpl.concat'] = {'cat'},
  ['tensor.nelement'] = {'numel'}, ['tensor.ndimension'] = {'dim'},
  ['tensor.view_as'] = {'view'}, ['tensor.reshape_as'] = {'reshape'},
  ['tensor.expand_as'] = {'expand'}, ['tensor.requires_grad_'] = {'requires_grad'},
  ['tensor.__add'] = {'add'}, ['tensor.__sub'] = {'sub'}, ['tensor.__mul'] = {'mul'},
  ['tensor.__div'] = {'div'}, ['tensor.__pow'] = {'pow'}, ['tensor.__unm'] = {'neg'},
  ['tensor.__idiv'] = {'floor_divide'}, ['tensor.__mod'] = {'remainder'},
  ['tensor.__band'] = {'bitwise_and'}, ['tensor.__bor'] = {'bitwise_or'},
  ['tensor.__bxor'] = {'bitwise_xor'}, ['tensor.__shl'] = {'bitwise_left_shift'},
  ['tensor.__shr'] = {'bitwise_right_shift'}, ['tensor.__bnot'] = {'bitwise_not'},
  ['tensor.__index'] = {'index'}, ['tensor.__newindex'] = {'setindex'},
  ['tensor.__len'] = {'len'}, ['tensor.__tostring'] = {'tostring'},
  ['tensor.__gc'] = {'close'}, ['tensor.__close'] = {'close'},
  -- the private kernel entry of ddpl.amp.GradScaler reports as its only caller
  ['ddpl._amp_unscale_'] = {'GradScaler'},
  -- the recurrent building blocks of nn.LSTM/nn.GRU report as the op or layer they run
  ['ddpl.F._fused_lstm_cell'] = {'lstm_cell'}, ['ddpl.F._fused_gru_cell'] = {'gru_cell'},
  ['ddpl.F._lstm_layer'] = {'LSTM'}, ['ddpl.F._gru_layer'] = {'GRU'},
}

-- The tensor metatable's methods: the table among __index's upvalues that holds them.
local function tensor_methods()
  local index = getmetatable(ddpl.ones(1)).__index
  for i = 1, 8 do
    local name, value = debug.getupvalue(index, i)
    if not name then break end
    if type(value) == 'table' and type(value.add_) == 'function' then return value end
  end
  error('fuzz_api_driver: cannot find the tensor methods table')
end

-- Every target, sorted: {name = 'ddpl.zeros', fn = f, short = 'zeros'}.
local function targets()
  local list = {}
  local function add(prefix, t)
    for k, v in pairs(t) do
      if type(k) == 'string' and type(v) == 'function' then
        list[#list + 1] = {name = prefix .. '.' .. k, fn = v, short = k}
      end
    end
  end
  add('ddpl', ddpl)
  add('ddpl.F', ddpl.F)
  add('ddpl.autograd', ddpl.autograd)
  add('tensor', tensor_methods())
  add('tensor', getmetatable(ddpl.ones(1)))
  table.sort(list, function(a, b) return a.name < b.name end)
  local kept = {}
  for _, t in ipairs(list) do
    if not SKIP[t.name] then kept[#kept + 1] = t end
  end
  return kept
end

-- The argument battery, made fresh for each target (a target may close or modify a tensor).
-- Each entry: {desc, value}.
local function battery()
  local b = {}
  local function add(desc, value) b[#b + 1] = {desc, value} end
  add('nil', nil)
  add('true', true)
  add("'abc'", 'abc')
  add("''", '')
  add('{}', {})
  add('{1,2}', {1, 2})
  add('{2,2}', {2, 2})
  add('{{1},{2,3}}', {{1}, {2, 3}})
  add('{-1,-1}', {-1, -1})
  add('{2^62,4}', {1 << 62, 4})
  add('function', function() return 1 end)
  add('NaN', 0 / 0)
  add('inf', math.huge)
  add('-inf', -math.huge)
  add('1.5', 1.5)
  add('0', 0)
  add('1', 1)
  add('-1', -1)
  add('3', 3)
  add('-9', -9)
  add('2^62', 1 << 62)
  add('maxinteger', math.maxinteger)
  add('mininteger', math.mininteger)
  add('2^63 (float)', 2.0 ^ 63)
  add('1e300', 1e300)
  add('x23', ddpl.ones(2, 3))
  add('scalar0d', ddpl.tensor(2.5))
  add('empty(0,3)', ddpl.zeros(0, 3))
  add('expanded(2,3)', ddpl.ones(3):expand(2, 3))
  add('transposed(3,2)', ddpl.ones(2, 3):t())
  for _, dt in ipairs({'float64', 'float16', 'bfloat16', 'int64', 'int32', 'int16', 'int8', 'uint8',
                       'bool'}) do
    add(dt .. '(2,3)', ddpl.ones(2, 3, {dtype = dt}))
  end
  add('requires_grad(2,3)', ddpl.ones(2, 3, {requires_grad = true}))
  add('x4d(1,2,3,3)', ddpl.ones(1, 2, 3, 3))
  add('int64 labels(2)', ddpl.tensor({0, 1}))
  return b
end

local function call_desc(name, args, n)
  local parts = {}
  for i = 1, n do parts[i] = args[i] end
  return name .. '(' .. table.concat(parts, ', ') .. ')'
end

-- The argument lists swept for one target, as {descs, values, n}.
local function argument_lists(b)
  local lists = {}
  local function add(...)
    local n = select('#', ...)
    local descs, values = {}, {}
    for i = 1, n do
      local e = select(i, ...)
      descs[i], values[i] = e[1], e[2]
    end
    lists[#lists + 1] = {descs, values, n}
  end
  local by = {}
  for _, e in ipairs(b) do by[e[1]] = e end
  local x, zero, one, pair, square = by.x23, by['0'], by['1'], by['{1,2}'], by['{2,2}']
  add()
  for _, a in ipairs(b) do
    add(a)
    add(x, a)
    add(a, x)
    add(x, zero, a)
    add(x, a, one)
    add(x, zero, one, a) -- narrow(dim, start, length), clamp(min, max), ...
    add(x, pair, a) -- as_strided(size, stride), view(size, ...), ...
    add(x, square, a)
  end
  for _, t in ipairs(b) do
    if ddpl.is_tensor(t[2]) then
      add(t, t)
      add(t, zero, one)
      add(t, one, one, one)
    end
  end
  return lists
end

-- Reads a returned tensor's first and last elements (and all of a small one): a view that
-- reaches outside its storage crashes here rather than pass as a success. Errors are ignored:
-- only crashes matter for results.
local function touch_one(r)
  if not ddpl.is_tensor(r) or r:numel() == 0 then return end
  if r:numel() <= 4096 then r:tolist() return end
  for _, last in ipairs({false, true}) do
    local v = r
    while v:dim() > 0 do v = v[last and v:size(0) - 1 or 0] end
    v:item()
  end
end

local function touch(...)
  for i = 1, select('#', ...) do
    local r = select(i, ...)
    if type(r) == 'table' then
      for _, e in ipairs(r) do pcall(touch_one, e) end
    else
      pcall(touch_one, r)
    end
  end
end

local function names_target(msg, t)
  if msg:find(t.short, 1, true) then return true end
  for _, alias in ipairs(ALIAS[t.name] or {}) do
    if msg:find(alias, 1, true) then return true end
  end
  return false
end

local function run(names)
  local wanted = {}
  for _, n in ipairs(names) do wanted[n] = true end
  local calls, errors, ok, unnamed = 0, 0, 0, 0
  for _, t in ipairs(targets()) do
    if wanted[t.name] then
      local b = battery()
      for _, l in ipairs(argument_lists(b)) do
        local desc = call_desc(t.name, l[1], l[3])
        io.stderr:write('CALL ', desc, '\n')
        calls = calls + 1
        local results = table.pack(pcall(t.fn, table.unpack(l[2], 1, l[3])))
        local good, err = results[1], results[2]
        if good then
          ok = ok + 1
          touch(table.unpack(results, 2, results.n))
        elseif type(err) == 'string' and names_target(err, t) then
          errors = errors + 1
        else
          unnamed = unnamed + 1
          print('UNNAMED ' .. desc .. ' => ' .. tostring(err):gsub('\n', ' '))
        end
      end
      collectgarbage()
    end
  end
  print(('COUNTS calls=%d errors=%d ok=%d unnamed=%d'):format(calls, errors, ok, unnamed))
  print('done')
end

local mode = arg[1]
if mode == 'list' then
  for _, t in ipairs(targets()) do print('TARGET ' .. t.name) end
  print('done')
elseif mode == 'run' then
  run({table.unpack(arg, 2)})
else
  error('fuzz_api_driver: expected "list" or "run <names>"')
end
