-- spec/fuzz/hostile_api_spec.lua: issue 18's probes, each a regression test. Plain API calls that
-- overflowed size arithmetic (and so crashed, reached foreign memory or returned wrong results)
-- must end in a clean error naming the op; in-place writes into self-overlapping views are
-- refused as in PyTorch. docs/internals/hostile-input.md states the rules.
local ddpl = require 'ddplua'
local bad = require 'bad_input'
local raises, unchanged = bad.raises, bad.unchanged

local I62 = 1 << 62

describe('views stay inside their storage', function()
  it('as_strided refuses a view whose extent wraps int64', function()
    local x = ddpl.ones(4)
    -- (size - 1) * stride wraps
    raises(function() return x:as_strided({2}, {I62}, 0) end, {'as_strided', 'outside'})
    raises(function() return x:as_strided({3}, {math.maxinteger}, 0) end, {'as_strided'})
    -- (last + 1) * element size wraps (float64: 8 bytes)
    local d = ddpl.ones(4, {dtype = 'float64'})
    raises(function() return d:as_strided({1}, {1}, (1 << 61)) end, {'as_strided', 'outside'})
    raises(function() return d:as_strided({1}, {1}, math.maxinteger) end, {'as_strided'})
    -- sizes whose product wraps, and plain out-of-range views
    raises(function() return x:as_strided({I62, 4}, {0, 0}, 0) end, {'as_strided', 'too large'})
    raises(function() return x:as_strided({3}, {1}, 2) end, {'as_strided', 'outside'})
    raises(function() return x:as_strided({2}, {-1}, 3) end, {'as_strided', 'negative stride'})
    raises(function() return x:as_strided({2}, {1}, -1) end, {'as_strided'})
    -- what fits is still a view
    local v = x:as_strided({2, 2}, {1, 2}, 0)
    assert.are.same({{1, 1}, {1, 1}}, v:tolist())
    assert.are.equal(0, x:as_strided({0}, {1}, 4):numel())
  end)

  it('narrow refuses start + length past the size when the sum wraps', function()
    local x = ddpl.ones(4)
    raises(function() return x:narrow(0, 2, math.maxinteger - 1) end, {'narrow', 'out of range'})
    raises(function() return x:narrow(0, 1, math.maxinteger) end, {'narrow', 'out of range'})
    assert.are.equal(2, x:narrow(0, 2, 2):numel())
  end)

  it('expand refuses shapes past 2^62 elements instead of wrapping numel', function()
    raises(function() return ddpl.ones(1):expand(1 << 40, 1 << 40) end,
      {'expand', 'too large', '[1099511627776,1099511627776]'})
    raises(function() return ddpl.ones(1):expand(2 ^ 40, 2 ^ 40) end, {'expand', 'too large'})
    raises(function() return ddpl.ones(1, 1, 1):expand(1 << 21, 1 << 21, 1 << 21) end,
      {'expand', 'too large'})
    -- the limit itself is allowed (a view: nothing is allocated)
    local e = ddpl.ones(1, 1):expand(1 << 31, 1 << 31)
    assert.are.equal(I62, e:numel())
  end)

  it('zero-element shapes with huge dimensions are refused, not given wrapped strides', function()
    raises(function() return ddpl.zeros(0, 1 << 40, 1 << 40) end, {'zeros', 'too large'})
    raises(function() return ddpl.empty({1 << 40, 1 << 40, 0}) end, {'empty', 'too large'})
    raises(function() return ddpl.zeros(0):view(1 << 40, 1 << 40, 0) end, {'view', 'too large'})
    raises(function() return ddpl.zeros(0):reshape(1 << 40, 0, 1 << 40) end,
      {'reshape', 'too large'})
    assert.are.same({0, 5, 7}, ddpl.zeros(0, 5, 7):shape())
  end)

  it('view and reshape refuse sizes whose product wraps to the input numel', function()
    -- 2^32 * 2^32 wraps to 0 in int64: it must not match an empty tensor
    raises(function() return ddpl.zeros(0):view(1 << 32, 1 << 32) end, {'view', 'invalid'})
    raises(function() return ddpl.ones(4):view(-1, 1 << 62, 4) end, {'view'})
  end)
end)

describe('allocations sized from hostile shapes', function()
  it('topk on a dimension of 2^59 or more fails cleanly (scratch bytes wrap)', function()
    raises(function() return ddpl.topk(ddpl.ones(1):expand(1 << 59), 1) end, {'topk'})
    raises(function() return ddpl.topk(ddpl.ones(1):expand(1 << 60), 2) end, {'topk'})
    raises(function() return ddpl.ones(1):expand(I62):topk(1) end, {'topk'})
  end)

  it('nll_loss fails cleanly when its input cannot be made contiguous', function()
    local logp = ddpl.ones(1, 1):expand(1 << 31, 1 << 31)
    local target = ddpl.zeros(1, {dtype = 'int64'}):expand(1 << 31)
    raises(function() return ddpl.F.nll_loss(logp, target) end, {'nll_loss'})
    raises(function() return ddpl.F.cross_entropy(logp, target) end, {'cross_entropy'})
    -- memory pressure: 2^40 floats cannot be allocated either
    local big = ddpl.ones(1, 1):expand(1 << 20, 1 << 20)
    local t20 = ddpl.zeros(1, {dtype = 'int64'}):expand(1 << 20)
    raises(function() return ddpl.F.nll_loss(big, t20) end, {'nll_loss'})
  end)

  it('making a huge expanded view contiguous fails cleanly', function()
    local e = ddpl.ones(1, 1):expand(1 << 31, 1 << 31)
    raises(function() return e:contiguous() end, {'contiguous'})
    raises(function() return e:clone() end, {'clone'})
    raises(function() return e + 1 end, {'add'})
  end)

  it('matmul on a huge expanded operand fails cleanly (the M*K scratch)', function()
    for _, dt in ipairs({'float16', 'float32'}) do
      local a = ddpl.ones(1, 1, {dtype = dt}):expand(2, 1 << 61)
      local b = ddpl.ones(1, 1, {dtype = dt}):expand(1 << 61, 1)
      raises(function() return ddpl.mm(a, b) end, {'mm'})
    end
  end)

  it('frombytes checks its byte count without overflow', function()
    -- 2^61 float32 elements are 2^63 bytes: the signed product wrapped
    raises(function() return ddpl.frombytes('abcdefgh', 'float32', 1 << 61) end,
      {'frombytes', 'does not hold'})
    raises(function() return ddpl.frombytes('abcdefgh', 'float32', I62, 4) end,
      {'frombytes', 'too large'})
    raises(function() return ddpl.frombytes('abcdefgh', 'float32', -1, -2) end,
      {'frombytes', 'negative'})
    assert.are.same({2, 4}, ddpl.frombytes('abcdefgh', 'uint8', 2, 4):shape())
  end)

  it('unbind refuses a dimension no Lua list can hold', function()
    raises(function() return ddpl.ones(1):expand(I62):unbind(0) end, {'unbind'})
  end)

  it('cat and stack on a table whose __len lies name the function', function()
    local liar = setmetatable({}, {__len = function() return -1 end})
    raises(function() return ddpl.cat(liar, 0) end, {'cat', 'length -1'})
    raises(function() return ddpl.stack(liar, 0) end, {'stack', 'length -1'})
    local huge = setmetatable({}, {__len = function() return 1 << 50 end})
    raises(function() return ddpl.cat(huge, 0) end, {'cat', 'position 1'})
    raises(function() return ddpl.stack(huge, 0) end, {'stack', 'position 1'})
    raises(function() return ddpl.full(setmetatable({}, {__len = function() return -3 end}), 1)
    end, {'full', '-3 dimensions'})
  end)
end)

describe('ranges and random integers over all of int64', function()
  it('arange refuses a count past 2^62 instead of returning an empty tensor', function()
    raises(function() return ddpl.arange(0, 1e300) end, {'arange', 'limit'})
    raises(function() return ddpl.arange(-1e308, 1e308, 1) end, {'arange'})
    raises(function() return ddpl.arange(0, 1e19, 1) end, {'arange', 'limit'})
    raises(function() return ddpl.arange(math.mininteger, math.maxinteger) end,
      {'arange', 'limit'})
  end)

  it('integer arange is exact for huge steps', function()
    -- through doubles this gave [-2^62, 0]: the step 2^62 - 1 rounds to 2^62
    assert.are.same({-I62, -1, I62 - 2}, ddpl.arange(-I62, I62, I62 - 1):tolist())
    assert.are.same({math.mininteger, -1, math.maxinteger - 1},
      ddpl.arange(math.mininteger, math.maxinteger, math.maxinteger):tolist())
    assert.are.same({math.maxinteger, 0}, ddpl.arange(math.maxinteger, -2, math.mininteger + 1)
      :tolist())
    assert.are.same({0, 3, 6, 9}, ddpl.arange(0, 10, 3):tolist())
    assert.are.same({10, 7, 4, 1}, ddpl.arange(10, 0, -3):tolist())
    assert.are.same({}, ddpl.arange(5, 5):tolist())
    raises(function() return ddpl.arange(0, 10, 0) end, {'arange'})
    raises(function() return ddpl.arange(10, 0, 1) end, {'arange'})
  end)

  it('randint draws from spans wider than int64 without overflow', function()
    ddpl.manual_seed(1)
    for _, range in ipairs({{-I62, I62}, {math.mininteger, math.maxinteger}}) do
      local v = ddpl.randint(range[1], range[2], {2000}):tolist()
      local neg, pos = 0, 0
      for _, x in ipairs(v) do
        assert(x >= range[1] and x < range[2], 'randint value out of range: ' .. x)
        if x < 0 then neg = neg + 1 else pos = pos + 1 end
      end
      -- uniform over a span centred on 0: both signs about half the time
      assert(neg > 800 and pos > 800, ('randint skewed: %d negative, %d positive'):format(neg,
        pos))
    end
    local small = ddpl.randint(-3, 2, {500}):tolist()
    local seen = {}
    for _, x in ipairs(small) do
      assert(x >= -3 and x < 2)
      seen[x] = true
    end
    for x = -3, 1 do assert(seen[x], 'randint(-3, 2) never drew ' .. x) end
  end)
end)

describe('in-place writes into self-overlapping views', function()
  local function expanded() return ddpl.zeros(3):expand(2, 3) end

  it('are refused as PyTorch refuses them, leaving the tensor unchanged', function()
    local msg = 'more than one element of the written-to tensor'
    local y = ddpl.ones(2, 3)
    for _, case in ipairs({
      {'add_', function(x) return x:add_(1) end},
      {'sub_', function(x) return x:sub_(y) end},
      {'mul_', function(x) return x:mul_(2) end},
      {'div_', function(x) return x:div_(2) end},
      {'clamp_', function(x) return x:clamp_(0, 1) end},
      {'copy_', function(x) return x:copy_(y) end},
      {'uniform_', function(x) return x:uniform_() end},
      {'normal_', function(x) return x:normal_() end},
      {'bernoulli_', function(x) return x:bernoulli_(0.5) end},
    }) do
      local x = expanded()
      unchanged(x, function() return case[2](x) end, {case[1], msg, 'clone()'})
    end
  end)

  it('are refused through an expanded row (setindex copies into it)', function()
    local x = ddpl.zeros(1, 3):expand(4, 3):unsqueeze(0):expand(2, 4, 3)
    unchanged(x, function() x[0] = ddpl.ones(4, 3) end, {'setindex', 'written-to'})
  end)

  it('fill_ and zero_ are allowed, as in PyTorch (every element gets the same value)', function()
    local base = ddpl.zeros(3)
    local x = base:expand(2, 3)
    x:fill_(7)
    assert.are.same({7, 7, 7}, base:tolist())
    x:zero_()
    assert.are.same({0, 0, 0}, base:tolist())
  end)

  it('non-overlapping strided views are still written in place', function()
    local base = ddpl.zeros(3, 2)
    local t = base:t()
    t:add_(1)
    t:copy_(ddpl.ones(2, 3) * 2)
    assert.are.same({{2, 2}, {2, 2}, {2, 2}}, base:tolist())
    -- a broadcast operand (stride 0 in the source) is fine
    base:add_(ddpl.ones(2))
    assert.are.same({{3, 3}, {3, 3}, {3, 3}}, base:tolist())
  end)
end)

describe('errors name the function', function()
  it('sub with alpha reports sub, chunk and split survive huge counts', function()
    raises(function() return ddpl.ones(2, 3):sub(ddpl.ones(3, 2), 2) end, {'sub:'})
    assert.are.equal(2, #ddpl.ones(2, 3):chunk(math.maxinteger)) -- ceil(2 / n) = 1 per chunk
    raises(function() return ddpl.ones(4):split({math.maxinteger, math.maxinteger}) end,
      {'split'})
    raises(function() return ddpl.ones(2):fill_(ddpl.ones(2)) end, {'fill_'})
    raises(function() local x = ddpl.ones(2, 3); x[5] = 1 end, {'setindex'})
  end)

  it('a dimension beyond int names the value given, not a clamped one', function()
    raises(function() return ddpl.ones(2):size(math.maxinteger) end,
      {'size', '9223372036854775807'})
    raises(function() return ddpl.ones(2):transpose(0, math.mininteger) end,
      {'transpose', '-9223372036854775808'})
  end)

  it('gradcheck rejects arguments of the wrong kind by name', function()
    local g = ddpl.autograd.gradcheck
    local x = ddpl.ones(2, {dtype = 'float64', requires_grad = true})
    raises(function() return g(function(a) return a * 2 end, 3) end, {'gradcheck'})
    raises(function() return g(function(a) return a * 2 end, {x}, 5) end, {'gradcheck'})
    raises(function() return g(function() return 1 end, {x}) end, {'gradcheck'})
    raises(function() return g(function() return {1} end, {x}) end, {'gradcheck'})
  end)
end)
