-- spec/tensor/errors_linalg_spec.lua: bad input to linear algebra, joining and indexing raises a
-- Lua error naming the function and the offending shapes, dtypes or indices.
local ddpl = require 'ddplua'
local bad = require 'bad_input'
local raises = bad.raises

local function x23() return ddpl.tensor({{0, 1, 2}, {3, 4, 5}}, {dtype = 'float32'}) end
local function long(t) return ddpl.tensor(t, {dtype = 'int64'}) end

describe('bad input to linear algebra', function()
  it('matmul with mismatched inner sizes', function()
    raises(function() return ddpl.matmul(ddpl.zeros(2, 3), ddpl.zeros(4, 5)) end,
           {'matmul', '[2,3]', '[4,5]'})
    raises(function() return ddpl.zeros(2, 3):matmul(ddpl.zeros(4, 5)) end,
           {'matmul', '[2,3]', '[4,5]'})
    raises(function() return ddpl.matmul(ddpl.zeros(3), ddpl.zeros(4)) end,
           {'matmul', '[3]', '[4]'})
  end)

  it('matmul with batch dims that do not broadcast', function()
    raises(function() return ddpl.matmul(ddpl.zeros(2, 2, 3), ddpl.zeros(3, 3, 4)) end,
           {'matmul', '[2,2,3]', '[3,3,4]'})
  end)

  it('matmul of a 0-dim tensor or a non-tensor', function()
    raises(function() return ddpl.matmul(ddpl.tensor(1, {dtype = 'float32'}), ddpl.zeros(2)) end, {'matmul'})
    raises(function() return ddpl.matmul(ddpl.zeros(2, 3), 3) end, {'matmul'})
  end)

  it('matmul of float32 with float64 (PyTorch refuses mixed dtypes)', function()
    raises(function() return ddpl.matmul(ddpl.zeros(2, 3), ddpl.zeros(3, 2, {dtype = 'float64'})) end,
           {'matmul', 'float32', 'float64'})
  end)

  it('mm and bmm with the wrong ranks or sizes', function()
    raises(function() return ddpl.zeros(2, 3, 4):mm(ddpl.zeros(4, 5)) end, {'mm', '[2,3,4]'})
    raises(function() return ddpl.zeros(2, 3):mm(ddpl.zeros(4, 5)) end, {'mm', '[2,3]', '[4,5]'})
    raises(function() return ddpl.zeros(2, 3, 4):bmm(ddpl.zeros(3, 4, 5)) end,
           {'bmm', '[2,3,4]', '[3,4,5]'})
    raises(function() return ddpl.zeros(3, 4):bmm(ddpl.zeros(4, 5)) end, {'bmm', '[3,4]'})
  end)

  it('addmm with a bias that does not broadcast', function()
    raises(function() return ddpl.addmm(ddpl.zeros(3), ddpl.zeros(2, 3), ddpl.zeros(3, 4)) end,
           {'addmm', '[3]'})
  end)
end)

describe('bad input to joining', function()
  it('cat with mismatched shapes', function()
    raises(function() return ddpl.cat({ddpl.zeros(2, 3), ddpl.zeros(2, 4)}, 0) end,
           {'cat', '[2,4]'})
    raises(function() return ddpl.cat({ddpl.zeros(2, 3), ddpl.zeros(2, 3, 1)}, 0) end,
           {'cat', '[2,3]', '[2,3,1]'})
  end)

  it('cat with a dim out of range', function()
    raises(function() return ddpl.cat({ddpl.zeros(2, 3), ddpl.zeros(2, 3)}, 2) end, {'cat', '2'})
  end)

  it('cat of an empty list, a non-list or a list holding a non-tensor', function()
    raises(function() return ddpl.cat({}, 0) end, {'cat'})
    raises(function() return ddpl.cat(ddpl.zeros(2, 3), 0) end, {'cat'})
    raises(function() return ddpl.cat({ddpl.zeros(2, 3), 5}, 0) end, {'cat'})
  end)

  it('stack with mismatched shapes', function()
    raises(function() return ddpl.stack({ddpl.zeros(2, 3), ddpl.zeros(3, 2)}, 0) end,
           {'stack', '[2,3]', '[3,2]'})
  end)
end)

describe('bad input to indexing', function()
  it('index_select with an out-of-range index', function()
    raises(function() return x23():index_select(0, long({0, 5})) end, {'index_select', '5'})
    raises(function() return x23():index_select(1, long({-1})) end, {'index_select', '-1'})
  end)

  it('index_select with a float or 2-d index, or a bad dim', function()
    raises(function() return x23():index_select(0, ddpl.tensor({0, 1}, {dtype = 'float32'})) end,
           {'index_select', 'float32'})
    raises(function() return x23():index_select(0, long({{0}})) end, {'index_select', '[1,1]'})
    raises(function() return x23():index_select(3, long({0})) end, {'index_select', '3'})
  end)

  it('gather with the wrong index dtype', function()
    raises(function() return x23():gather(1, ddpl.tensor({{0}, {1}}, {dtype = 'float32'})) end, {'gather', 'float32'})
  end)

  it('gather with an out-of-range index or the wrong rank', function()
    raises(function() return x23():gather(1, long({{0}, {3}})) end, {'gather', '3'})
    raises(function() return x23():gather(1, long({0, 1})) end, {'gather', '[2]'})
  end)

  it('topk with k larger than the dim', function()
    raises(function() return ddpl.topk(x23(), 4) end, {'topk', '4'})
  end)
end)
