-- spec/tensor/errors_tensor_spec.lua: bad input to creation, views, pointwise ops and reductions
-- raises a Lua error naming the function and the offending shapes/dtypes; in-place targets stay
-- intact.
local ddpl = require 'ddplua'
local bad = require 'bad_input'
local raises, unchanged = bad.raises, bad.unchanged

local function x23() return ddpl.tensor({{0, 1, 2}, {3, 4, 5}}, {dtype = 'float32'}) end

describe('bad input to creation', function()
  it('ragged nested tables', function()
    raises(function() return ddpl.tensor({{1, 2}, {3}}) end, {'tensor'})
    raises(function() return ddpl.tensor({{1, 2}, 3}) end, {'tensor'})
  end)

  it('non-numbers in the data', function()
    raises(function() return ddpl.tensor({1, 'a'}) end, {'tensor'})
    raises(function() return ddpl.tensor('abc') end, {'tensor'})
  end)

  it('a dtype name that does not exist', function()
    raises(function() return ddpl.tensor({1, 2}, {dtype = 'float33'}) end, {'tensor', 'float33'})
    raises(function() return ddpl.zeros(2, 3, {dtype = 'float33'}) end, {'zeros', 'float33'})
    raises(function() return ddpl.ones(2):to('float33') end, {'to', 'float33'})
  end)

  it('a device that does not exist', function()
    raises(function() return ddpl.ones(2, {device = 'tpu'}) end, {'ones', 'tpu'})
  end)

  it('a negative size', function()
    raises(function() return ddpl.zeros(2, -3) end, {'zeros', '-3'})
  end)

  it('non-numeric sizes and negative counts', function()
    raises(function() return ddpl.zeros('abc') end, {'zeros'})
    raises(function() return ddpl.empty({2, 'x'}) end, {'empty'})
    raises(function() return ddpl.eye(-1) end, {'eye', '-1'})
  end)

  it('bad ranges and values', function()
    raises(function() return ddpl.arange(0, 10, 0) end, {'arange'})
    raises(function() return ddpl.randint(5, 2, {3}) end, {'randint'})
    raises(function() return ddpl.full({2, 2}, 'x') end, {'full'})
  end)

  it('random floats of an integer dtype', function()
    raises(function() return ddpl.randn(2, {dtype = 'int64'}) end, {'randn', 'int64'})
  end)

  it('requires_grad on an integer dtype', function()
    raises(function() return ddpl.zeros(2, {dtype = 'int64', requires_grad = true}) end,
           {'requires_grad', 'int64'})
  end)
end)

describe('bad input to views', function()
  it('view with the wrong number of elements', function()
    raises(function() return x23():view(4, 2) end, {'view', '[4,2]', '[2,3]'})
    raises(function() return x23():view(-1, -1) end, {'view'})
    raises(function() return x23():view('a') end, {'view'})
  end)

  it('view of a non-contiguous tensor', function()
    raises(function() return x23():t():view(6) end, {'view', '[3,2]'})
  end)

  it('reshape with the wrong number of elements', function()
    raises(function() return x23():reshape(5) end, {'reshape', '[5]', '[2,3]'})
  end)

  it('select out of range', function()
    raises(function() return x23():select(0, 2) end, {'select', '2', '[2,3]'})
    raises(function() return x23():select(1, -4) end, {'select', '-4', '[2,3]'})
    raises(function() return x23():select(2, 0) end, {'select', '2'})
  end)

  it('x[i] out of range', function()
    raises(function() return x23()[2] end, {{'select', 'index'}, '2'})
  end)

  it('narrow out of range', function()
    raises(function() return x23():narrow(1, 2, 2) end, {'narrow', '[2,3]'})
    raises(function() return x23():narrow(0, 0, 3) end, {'narrow', '[2,3]'})
    raises(function() return x23():narrow(3, 0, 1) end, {'narrow', '3'})
  end)

  it('dims out of range', function()
    raises(function() return x23():transpose(0, 2) end, {'transpose', '2'})
    raises(function() return x23():unsqueeze(5) end, {'unsqueeze', '5'})
    raises(function() return x23():squeeze(4) end, {'squeeze', '4'})
    raises(function() return x23():flatten(0, 4) end, {'flatten', '4'})
    raises(function() return x23():size(5) end, {'size', '5'})
  end)

  it('bad permutations', function()
    raises(function() return x23():permute(0, 0) end, {'permute'})
    raises(function() return x23():permute(0) end, {'permute', '[2,3]'})
  end)

  it('expand to an incompatible shape', function()
    raises(function() return x23():expand(3, 2) end, {'expand', '[2,3]'})
  end)

  it('t of a 3-d tensor', function()
    raises(function() return ddpl.zeros(2, 2, 2):t() end, {'t', '[2,2,2]'})
  end)

  it('chunk and split with sizes of 0', function()
    raises(function() return x23():chunk(0) end, {'chunk'})
    raises(function() return x23():split(0) end, {'split'})
  end)
end)

describe('bad input to pointwise ops', function()
  it('shapes that do not broadcast', function()
    raises(function() return ddpl.ones(2, 3) + ddpl.ones(4) end, {'add', '[2,3]', '[4]'})
    raises(function() return ddpl.ones(2, 3) * ddpl.ones(2, 2) end, {'mul', '[2,3]', '[2,2]'})
    raises(function() return ddpl.ones(2, 3):sub(ddpl.ones(3, 2)) end, {'sub', '[2,3]', '[3,2]'})
    raises(function() return ddpl.ones(2, 3):pow(ddpl.ones(4)) end, {'pow', '[2,3]', '[4]'})
  end)

  it('wrong argument types', function()
    raises(function() return x23() + 'abc' end, {'add'})
    raises(function() return x23() - {} end, {'sub'})
    raises(function() return x23():div(nil) end, {'div'})
    raises(function() return x23():clamp('a', 1) end, {'clamp'})
  end)

  it('where with a non-bool condition or mismatched shapes', function()
    raises(function() return ddpl.where(ddpl.ones(3), ddpl.ones(3), ddpl.zeros(3)) end,
           {'where', 'float32'})
    raises(function() return ddpl.where(ddpl.ones(3):gt(0), ddpl.ones(3), ddpl.zeros(4)) end,
           {'where', '[3]', '[4]'})
  end)

  it('masked_fill with a non-bool mask', function()
    raises(function() return x23():masked_fill(ddpl.ones(2, 3), 0) end,
           {'masked_fill', 'float32'})
  end)
end)

describe('bad input to in-place ops leaves the tensor unchanged', function()
  it('add_ with an unbroadcastable operand', function()
    local x = x23()
    unchanged(x, function() return x:add_(ddpl.ones(4)) end, {'add_', '[2,3]', '[4]'})
  end)

  it('add_ whose broadcast shape is larger than the target', function()
    local x = x23()
    unchanged(x, function() return x:add_(ddpl.ones(2, 2, 3)) end, {'add_', '[2,3]', '[2,2,3]'})
  end)

  it('mul_, div_ and copy_ with unbroadcastable operands', function()
    local x = x23()
    unchanged(x, function() return x:mul_(ddpl.ones(3, 3)) end, {'mul_', '[2,3]', '[3,3]'})
    unchanged(x, function() return x:div_(ddpl.ones(2, 2)) end, {'div_', '[2,3]', '[2,2]'})
    unchanged(x, function() return x:copy_(ddpl.ones(4)) end, {'copy_', '[4]', '[2,3]'})
  end)

  it('add_ of floats into an int64 tensor', function()
    local x = ddpl.tensor({1, 2}, {dtype = 'int64'})
    unchanged(x, function() return x:add_(ddpl.tensor({0.5, 0.5})) end,
              {'add_', 'int64', 'float32'})
  end)

  it('fill_, clamp_ and uniform_ with bad arguments', function()
    local x = x23()
    unchanged(x, function() return x:fill_('a') end, {'fill_'})
    unchanged(x, function() return x:clamp_('a', 2) end, {'clamp_'})
    unchanged(x, function() return x:uniform_(1, 0) end, {'uniform_'})
  end)
end)

describe('bad input to reductions', function()
  it('dims out of range', function()
    raises(function() return x23():sum(2) end, {'sum', '2'})
    raises(function() return x23():mean(-3) end, {'mean', '-3'})
    raises(function() return x23():max(5) end, {'max', '5'})
    raises(function() return x23():min(2) end, {'min', '2'})
    raises(function() return x23():argmax(2) end, {'argmax', '2'})
    raises(function() return x23():logsumexp(3) end, {'logsumexp', '3'})
    raises(function() return x23():var(4) end, {'var', '4'})
    raises(function() return x23():prod(3) end, {'prod', '3'})
  end)

  it('a dim that is not a number', function()
    raises(function() return x23():sum('a') end, {'sum'})
  end)

  it('mean of an integer tensor', function()
    raises(function() return ddpl.tensor({1, 2}, {dtype = 'int64'}):mean() end, {'mean', 'int64'})
  end)

  it('max of an empty tensor', function()
    raises(function() return ddpl.zeros(0):max() end, {'max'})
  end)
end)
