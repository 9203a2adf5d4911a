-- spec/support/grad_inputs.lua: float64 leaves for the gradient checks
-- (spec/autograd/gradcheck_spec.lua, spec/autograd/double_backward_spec.lua), drawn away from the
-- places finite differences get wrong.
-- defines: U(shape [, lo, hi]), A(shape), D(shape).
local ddpl = require 'ddplua'

local M = {}

local function with_opts(shape, opts)
    local args = {table.unpack(shape)}
    args[#args + 1] = opts
    return table.unpack(args)
end

-- a float64 leaf that requires grad, uniform in [lo, hi)
function M.U(shape, lo, hi)
    lo, hi = lo or -1, hi or 1
    local x = (ddpl.rand(with_opts(shape, {dtype = 'float64'})) * (hi - lo) + lo):detach()
    x.requires_grad = true
    return x
end

-- a float64 leaf whose values have |v| in [0.2, 1.2] with random signs (no kink at 0)
function M.A(shape)
    local mag = ddpl.rand(with_opts(shape, {dtype = 'float64'})) + 0.2
    local sign = ddpl.rand(with_opts(shape, {dtype = 'float64'})):gt(0.5):double() * 2 - 1
    local x = (mag * sign):detach()
    x.requires_grad = true
    return x
end

-- a float64 leaf with distinct values 0.25 apart in random order (no ties for max/min/pools)
function M.D(shape)
    local n = 1
    for _, s in ipairs(shape) do n = n * s end
    local x = ((ddpl.randperm(n):double() - n / 2) * 0.25):reshape(table.unpack(shape)):detach()
    x.requires_grad = true
    return x
end

return M
