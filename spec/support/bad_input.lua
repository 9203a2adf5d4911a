-- spec/support/bad_input.lua: helpers of the bad-input specs (spec/tensor/errors_tensor_spec.lua,
-- spec/tensor/errors_linalg_spec.lua, spec/nn/errors_nn_spec.lua).
-- defines: raises(fn, parts), unchanged(x, fn, parts), engine_alive().
--
-- API.md: "Bad input raises a Lua error whose message names the function and the offending
-- shapes, dtypes or devices ... The process never crashes and no tensor is left half-written."
local assert = require 'luassert'
local ddpl = require 'ddplua'

local M = {}

-- A small computation that must still work after an error was raised and caught.
function M.engine_alive()
  local s = (ddpl.ones(2, 3) + 1):sum():item()
  assert.are.equal(12, s, 'the engine gave a wrong result after a caught error')
end

-- Calls fn, which must raise a Lua error with a string message that contains every entry of
-- parts (plain text; an entry that is a table lists alternatives, one of which must appear).
-- Then checks that the engine still works. Returns the message.
function M.raises(fn, parts)
  local ok, err = pcall(fn)
  assert(not ok, 'expected an error, but the call succeeded')
  assert(type(err) == 'string', 'the error is a ' .. type(err) .. ', not a message string')
  for _, part in ipairs(parts or {}) do
    local alternatives = type(part) == 'table' and part or {part}
    local found = false
    for _, p in ipairs(alternatives) do found = found or err:find(p, 1, true) ~= nil end
    assert(found, ('error message %q does not mention %s'):format(err,
      table.concat(alternatives, "' or '"):gsub('^', "'") .. "'"))
  end
  M.engine_alive()
  return err
end

-- x's shape, dtype and values, to compare before and after a failed in-place call.
local function snapshot(x)
  return {shape = x:shape(), dtype = x.dtype, values = x:tolist()}
end

-- Like raises, and also checks that the in-place target x was left exactly as it was.
function M.unchanged(x, fn, parts)
  local before = snapshot(x)
  local err = M.raises(fn, parts)
  assert.are.same(before, snapshot(x), 'the tensor was modified by a failed in-place call')
  return err
end

return M
