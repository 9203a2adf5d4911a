-- spec/nn/errors_nn_spec.lua: bad input to nn functional ops and to autograd raises a Lua error
-- naming the function and the offending shapes/dtypes/values; tensors stay intact.
local ddpl = require 'ddplua'
local bad = require 'bad_input'
local raises, unchanged = bad.raises, bad.unchanged

local function long(t) return ddpl.tensor(t, {dtype = 'int64'}) end

describe('bad input to nn functional ops', function()
  local F
  setup(function() F = ddpl.nn.functional end)

  it('conv2d with a channel mismatch', function()
    raises(function() return F.conv2d(ddpl.zeros(1, 3, 8, 8), ddpl.zeros(4, 2, 3, 3)) end,
           {'conv2d', '[1,3,8,8]', '[4,2,3,3]'})
  end)

  it('conv2d with a weight of the wrong rank, a bad bias or a kernel larger than the input', function()
    raises(function() return F.conv2d(ddpl.zeros(1, 3, 8, 8), ddpl.zeros(4, 3, 3)) end,
           {'conv2d', '[4,3,3]'})
    raises(function() return F.conv2d(ddpl.zeros(1, 3, 8, 8), ddpl.zeros(4, 3, 3, 3), ddpl.zeros(5)) end,
           {'conv2d', '[5]'})
    raises(function() return F.conv2d(ddpl.zeros(1, 3, 2, 2), ddpl.zeros(4, 3, 3, 3)) end,
           {'conv2d'})
  end)

  it('conv2d with an int64 input', function()
    raises(function() return F.conv2d(ddpl.zeros(1, 3, 8, 8, {dtype = 'int64'}), ddpl.zeros(4, 3, 3, 3)) end,
           {'conv2d', 'int64'})
  end)

  it('linear with a shape mismatch', function()
    raises(function() return F.linear(ddpl.zeros(4, 3), ddpl.zeros(5, 6)) end,
           {'linear', '[4,3]', '[5,6]'})
    raises(function() return F.linear(ddpl.zeros(4, 3), ddpl.zeros(5, 3), ddpl.zeros(4)) end,
           {'linear', '[4]'})
    raises(function() return F.linear(ddpl.zeros(4, 3), 'w') end, {'linear'})
  end)

  it('cross_entropy with a target class out of range', function()
    local logits = ddpl.zeros(4, 10)
    raises(function() return F.cross_entropy(logits, long({0, 1, 2, 10})) end,
           {'cross_entropy', '10'})
    raises(function() return F.cross_entropy(logits, long({0, 1, 2, -3})) end,
           {'cross_entropy', '-3'})
  end)

  it('cross_entropy with a target of the wrong batch size', function()
    raises(function() return F.cross_entropy(ddpl.zeros(4, 10), long({0, 1, 2})) end,
           {'cross_entropy', '[4,10]', '[3]'})
  end)

  it('nll_loss with a target class out of range', function()
    raises(function() return F.nll_loss(ddpl.zeros(2, 5), long({1, 5})) end, {'nll_loss', '5'})
  end)

  it('mse_loss with shapes that do not broadcast', function()
    raises(function() return F.mse_loss(ddpl.zeros(2, 3), ddpl.zeros(4)) end,
           {'mse_loss', '[2,3]', '[4]'})
  end)

  it('softmax and log_softmax with a dim out of range', function()
    raises(function() return F.softmax(ddpl.zeros(2, 3), 2) end, {'softmax', '2'})
    raises(function() return F.log_softmax(ddpl.zeros(2, 3), -3) end, {'log_softmax', '-3'})
  end)

  it('embedding with an index out of range or a float index', function()
    local w = ddpl.zeros(5, 3)
    raises(function() return F.embedding(long({0, 7}), w) end, {'embedding', '7'})
    raises(function() return F.embedding(ddpl.tensor({0, 1}, {dtype = 'float32'}), w) end, {'embedding', 'float32'})
  end)

  it('max_pool2d with a kernel larger than the input', function()
    raises(function() return F.max_pool2d(ddpl.zeros(1, 1, 2, 2), 3) end, {'max_pool2d'})
  end)

  it('layer_norm with a normalized shape that does not match', function()
    raises(function() return F.layer_norm(ddpl.zeros(2, 3), {4}) end, {'layer_norm', '[2,3]'})
  end)

  it('dropout with p outside [0, 1]', function()
    raises(function() return F.dropout(ddpl.zeros(2, 3), 1.5, true) end, {'dropout', '1.5'})
  end)

  it('scaled_dot_product_attention with mismatched head sizes', function()
    raises(function()
      return F.scaled_dot_product_attention(ddpl.zeros(2, 4, 8), ddpl.zeros(2, 4, 6), ddpl.zeros(2, 4, 8))
    end, {'scaled_dot_product_attention', '[2,4,6]'})
  end)
end)

describe('bad input to autograd', function()
  local function leaf(...)
    local w = ddpl.ones(...)
    w.requires_grad = true
    return w
  end

  it('backward on a non-scalar without a gradient', function()
    local y = leaf(2, 3) * 2
    raises(function() y:backward() end, {'backward', '[2,3]'})
  end)

  it('backward with a gradient of the wrong shape', function()
    local y = leaf(2, 3) * 2
    raises(function() y:backward(ddpl.ones(3)) end, {'backward', '[3]', '[2,3]'})
  end)

  it('backward on a tensor that does not require grad', function()
    raises(function() ddpl.ones(2):sum():backward() end, {'backward'})
  end)

  it('a second backward without retain_graph', function()
    local w = leaf(3)
    local loss = (w * w):sum()
    loss:backward()
    raises(function() loss:backward() end, {'backward', 'retain_graph'})
  end)

  it('backward after a saved tensor was modified in place', function()
    local w, x = leaf(3), ddpl.ones(3)
    local loss = (x * w):sum()
    x:add_(ddpl.ones(3))
    raises(function() loss:backward() end, {'inplace operation', 'version 1'})
  end)

  it('in-place ops on a leaf that requires grad leave it unchanged', function()
    local w = leaf(3)
    unchanged(w, function() return w:mul_(ddpl.full({3}, 2)) end, {'mul_'})
    unchanged(w, function() return w:add_(ddpl.ones(3)) end, {'add_'})
    unchanged(w, function() return w:zero_() end, {'zero_'})
  end)

  it('requires_grad on an integer tensor or on a non-leaf', function()
    local i = ddpl.ones(2, {dtype = 'int64'})
    raises(function() i.requires_grad = true end, {'requires_grad', 'int64'})
    local y = leaf(2) * 2
    raises(function() y.requires_grad = false end, {'requires_grad'})
  end)

  it('autograd.grad for an input that the output does not depend on', function()
    local w, z = leaf(3), leaf(3)
    local loss = (w * w):sum()
    raises(function() return ddpl.autograd.grad({loss}, {z}) end, {'grad'})
  end)

  it('register_hook on a tensor without grad, or with a non-function', function()
    raises(function() ddpl.ones(2):register_hook(function() end) end, {'register_hook'})
    raises(function() leaf(2):register_hook('not a function') end, {'register_hook'})
  end)

  it('no_grad with a non-function', function()
    raises(function() ddpl.no_grad(5) end, {'no_grad'})
  end)
end)

-- Sizes a constructor cannot hold: infinite or huge arguments, products that would wrap past 64
-- bits, parameters too large to allocate: each error names the layer (and the argument), never
-- "attempt to perform arithmetic on a nil value" or a wrapped negative size.
describe('bad sizes to nn constructors', function()
  local nn
  setup(function() nn = ddpl.nn end)
  local huge = math.huge
  local cases = {
    {'Conv2d in_channels', function() return nn.Conv2d(huge, 1, 1) end,
     'Conv2d: in_channels must be an integer >= 1, got inf'},
    {'Conv2d kernel_size', function() return nn.Conv2d(1, 1, huge) end,
     'Conv2d: kernel_size must be an integer >= 1, got inf'},
    {'GroupNorm', function() return nn.GroupNorm(1, huge) end,
     'GroupNorm: num_channels must be an integer >= 1, got inf'},
    {'MultiheadAttention', function() return nn.MultiheadAttention(huge, 1) end,
     'MultiheadAttention: embed_dim must be an integer >= 1, got inf'},
    {'MultiheadAttention 3 x E', function() return nn.MultiheadAttention(math.maxinteger, 1) end,
     'MultiheadAttention: the packed q, k, v rows (3 x embed_dim) = 3 x 9223372036854775807 '
       .. 'is too large'},
    {'TransformerEncoderLayer', function() return nn.TransformerEncoderLayer(huge, 1) end,
     'TransformerEncoderLayer: d_model must be an integer >= 1, got inf'},
    {'TransformerEncoderLayer dim_feedforward',
     function() return nn.TransformerEncoderLayer(8, 2, {dim_feedforward = huge}) end,
     'TransformerEncoderLayer: dim_feedforward must be an integer >= 1, got inf'},
    {'LSTM 4 x hidden', function() return nn.LSTM(1, math.maxinteger) end,
     'LSTM: the gate rows (gates x hidden_size) = 4 x 9223372036854775807 is too large'},
    {'GRU 3 x hidden', function() return nn.GRU(1, math.maxinteger // 2) end,
     'GRU: the gate rows (gates x hidden_size) = 3 x 4611686018427387903 is too large'},
    {'BatchNorm2d', function() return nn.BatchNorm2d(huge) end,
     'BatchNorm2d: num_features must be an integer >= 1, got inf'},
    {'Linear 2^70', function() return nn.Linear(2.0 ^ 70, 1) end,
     'Linear: in_features must be an integer >= 0, got 1.1805916207174e+21'},
    {'Linear too large to allocate', function() return nn.Linear(1000000, 1000000) end,
     'Linear: empty: out of memory'},
    {'Embedding past 2^62 elements', function() return nn.Embedding(math.maxinteger, 2) end,
     'Embedding: empty: shape [9223372036854775807,2] is too large'},
  }
  for _, c in ipairs(cases) do
    it(c[1], function()
      local ok, err = pcall(c[2])
      assert.is_false(ok)
      assert.truthy(tostring(err):find(c[3], 1, true), ('expected %q in: %s'):format(c[3], err))
      assert.is_nil(tostring(err):find('nil value', 1, true), err)
    end)
  end
end)
