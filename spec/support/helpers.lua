-- spec/support/helpers.lua: shared helpers for the busted specs.
-- defines: fixture, tensor, inputs, values, shape, dtype_name, assert_close, assert_values,
--          assert_error, tolerance, check_case, run_cases.
--
-- Fixtures (spec/fixtures/*.lua) are written by tools/gen_fixtures.py from PyTorch; a fixture
-- tensor is {shape = {..}, dtype = 'float32', values = {flat row-major values}}, or instead of
-- values: fill = v, pattern = {mul, mod, add, div} (a formula, for large inputs) or, for large
-- expected results, digest = {sum, abs_sum, weighted}.
-- Usage in a spec:
--   local H = require 'helpers'
--   local ddpl = H.ddpl
--   H.run_cases(H.fixture('pointwise'), runners, it)   -- one `it` per case
local H = {}

local ddpl = require 'ddplua'
H.ddpl = ddpl

local source_dir = os.getenv('DDPLUA_SOURCE_DIR') or '.'

-- Loads spec/fixtures/<name>.lua (a list of cases).
-- Deterministic values in [-width/2, width/2) of the given shape and dtype, from an LCG (the
-- same inputs on every run and on every device): the specs' test data.
function H.lcg(shape, seed, width, dtype)
    local flat, n, s = {}, 1, seed
    for _, d in ipairs(shape) do n = n * d end
    for i = 1, n do
        s = (s * 1103515245 + 12345) % 2147483648
        flat[i] = s / 2147483648 * width - width / 2
    end
    if n == 0 then return H.ddpl.zeros(shape, {dtype = dtype}) end
    return H.ddpl.tensor(flat, {dtype = dtype}):reshape(shape)
end

function H.fixture(name)
    local path = source_dir .. '/spec/fixtures/' .. name .. '.lua'
    local chunk, err = loadfile(path, 't', {})
    if not chunk then error('cannot load fixture ' .. path .. ': ' .. tostring(err), 2) end
    return chunk()
end

-- 'float32' for a dtype however the binding spells it ('float32', 'ddpl.float32', ...).
function H.dtype_name(dt)
    local s = tostring(dt)
    return (s:gsub('^.*%.', ''))
end

local function nest(flat, shape, dim, offset)
    local n = shape[dim]
    local out = {}
    if dim == #shape then
        for i = 1, n do out[i] = flat[offset + i] end
        return out, offset + n
    end
    local stride = 1
    for d = dim + 1, #shape do stride = stride * shape[d] end
    for i = 1, n do out[i] = nest(flat, shape, dim + 1, offset + (i - 1) * stride) end
    return out
end

-- Builds a ddplua tensor from a fixture entry; opts: requires_grad, dtype (overrides).
function H.tensor(e, opts)
    opts = opts or {}
    local dtype = opts.dtype or e.dtype
    local topts = {dtype = dtype, requires_grad = opts.requires_grad or nil}
    if e.fill ~= nil then
        local t = ddpl.full(e.shape, e.fill, {dtype = dtype})
        if opts.requires_grad then t.requires_grad = true end
        return t
    end
    local flat = e.values
    if e.pattern then -- element i (0-based) is ((i * mul) % mod + add) / div, see gen_fixtures.py
        local mul, mod, add, div = table.unpack(e.pattern)
        local n = 1
        for _, s in ipairs(e.shape) do n = n * s end
        flat = {}
        local integral = e.dtype == 'int64' or e.dtype == 'int32' or e.dtype == 'int16'
            or e.dtype == 'int8' or e.dtype == 'uint8'
        for i = 0, n - 1 do
            local v = (i * mul) % mod + add
            if e.dtype == 'bool' then
                flat[i + 1] = v ~= 0
            elseif integral then
                flat[i + 1] = v
            else
                flat[i + 1] = v / div
            end
        end
    end
    if e.dtype == 'bool' then
        local bools = flat
        flat = {}
        for i, v in ipairs(bools) do flat[i] = v and 1 or 0 end
    end
    if #e.shape == 0 then return ddpl.tensor(flat[1], topts) end
    for _, s in ipairs(e.shape) do
        assert(s > 0, 'helpers.tensor: empty fixture tensors are not supported')
    end
    return ddpl.tensor((nest(flat, e.shape, 1, 0)), topts)
end

-- The inputs of a fixture case: tensors (requiring grad where the case has expected gradients)
-- and plain Lua numbers or tables as they are.
function H.inputs(case)
    local ins = {}
    for i, e in ipairs(case.inputs) do
        if type(e) == 'table' and e.shape then
            ins[i] = H.tensor(e, {requires_grad = case.grads ~= nil and case.grads[i] ~= nil})
        else
            ins[i] = e
        end
    end
    return ins
end

local function flatten(v, out)
    if type(v) == 'table' then
        for _, x in ipairs(v) do flatten(x, out) end
    elseif type(v) == 'boolean' then
        out[#out + 1] = v and 1 or 0
    else
        out[#out + 1] = v
    end
    return out
end

-- Flat list of a tensor's values (bools as 0/1), from tolist().
function H.values(t)
    return flatten(t:tolist(), {})
end

function H.shape(t)
    local s = t:shape()
    local out = {}
    for i, v in ipairs(s) do out[i] = v end
    return out
end

local function fmt_shape(s) return '[' .. table.concat(s, ',') .. ']' end

local function unravel(i, shape) -- 1-based flat position -> '[i,j,..]' 0-based
    local idx, rem = {}, i - 1
    for d = #shape, 1, -1 do
        idx[d] = rem % shape[d]
        rem = rem // shape[d]
    end
    return fmt_shape(idx)
end

-- Default tolerances (rtol, atol) for comparing with PyTorch in a dtype.
function H.tolerance(dtype)
    if dtype == 'float64' then return 1e-9, 1e-12 end
    if dtype == 'float32' then return 1e-5, 1e-5 end
    if dtype == 'float16' then return 1e-3, 1e-3 end
    if dtype == 'bfloat16' then return 1e-2, 1e-2 end
    return 0, 0
end

local function num(v)
    if type(v) == 'boolean' then return v and 1 or 0 end
    return v
end

local function close(a, b, rtol, atol)
    a, b = num(a), num(b)
    if b ~= b then return a ~= a end -- nan only matches nan
    if b == math.huge or b == -math.huge then return a == b end
    if a ~= a or a == math.huge or a == -math.huge then return false end
    return math.abs(a - b) <= atol + rtol * math.abs(b)
end

-- Compares values element by element; raises with the largest error and where it is.
function H.assert_values(got, expected, shape, rtol, atol, what)
    what = what or 'tensor'
    if #got ~= #expected then
        error(string.format('%s: %d values, expected %d', what, #got, #expected), 3)
    end
    local worst, worst_i, nbad = -1, nil, 0
    for i = 1, #expected do
        if not close(got[i], expected[i], rtol, atol) then
            nbad = nbad + 1
            local a, b = num(got[i]), num(expected[i])
            local err = (a ~= a or b ~= b) and math.huge or math.abs(a - b)
            if err ~= err then err = math.huge end
            if err > worst then worst, worst_i = err, i end
        end
    end
    if nbad > 0 then
        error(string.format('%s: %d of %d values differ (rtol %g, atol %g); max error %g at %s: '
                            .. 'got %.17g, expected %.17g', what, nbad, #expected, rtol, atol,
                            worst, unravel(worst_i, shape or {#expected}), num(got[worst_i]),
                            num(expected[worst_i])), 3)
    end
end

-- Compares a tensor with a digest {sum, abs_sum, weighted} of PyTorch's result (large cases):
-- each sum within rtol * abs_sum + atol.
local function assert_digest(t, digest, rtol, atol, what)
    local v = H.values(t)
    local sum, abs_sum, weighted = 0.0, 0.0, 0.0
    for i, x in ipairs(v) do
        x = num(x)
        sum, abs_sum = sum + x, abs_sum + math.abs(x)
        weighted = weighted + x * ((i - 1) % 7 - 3)
    end
    local got = {sum, abs_sum, weighted}
    local names = {'sum', 'sum of |v|', 'position-weighted sum'}
    for k = 1, 3 do
        local tol = rtol * math.abs(digest[2]) + atol
        if not (math.abs(got[k] - digest[k]) <= tol) then
            error(string.format('%s: %s of the %d values is %.17g, PyTorch %.17g (tolerance %g)',
                                what, names[k], #v, got[k], digest[k], tol), 3)
        end
    end
end

-- assert_close(t, expected [, rtol [, atol [, what]]])
-- expected: a fixture entry (its dtype and shape are checked too), a ddplua tensor, a (nested)
-- Lua table of numbers, or a number (t must then hold one element). Tolerances default to
-- H.tolerance of the expected dtype (exact for integers and bools).
function H.assert_close(t, expected, rtol, atol, what)
    what = what or 'tensor'
    if t == nil then error(what .. ': got nil, expected a tensor', 2) end
    local exp_vals, exp_shape, exp_dtype
    if type(expected) == 'table' and expected.shape and expected.digest then
        exp_shape, exp_dtype = expected.shape, expected.dtype
    elseif type(expected) == 'table' and expected.shape and (expected.values or expected.fill) then
        exp_shape, exp_dtype = expected.shape, expected.dtype
        exp_vals = expected.values
        if not exp_vals then
            local n = 1
            for _, s in ipairs(exp_shape) do n = n * s end
            exp_vals = {}
            for i = 1, n do exp_vals[i] = expected.fill end
        end
    elseif type(expected) == 'number' then
        exp_vals = {expected}
    elseif type(expected) == 'table' then
        exp_vals = flatten(expected, {})
    else -- a tensor
        exp_vals, exp_shape = H.values(expected), H.shape(expected)
        exp_dtype = H.dtype_name(expected.dtype)
    end
    local got_dtype = H.dtype_name(t.dtype)
    if exp_dtype and got_dtype ~= exp_dtype then
        error(string.format('%s: dtype %s, expected %s', what, got_dtype, exp_dtype), 2)
    end
    local got_shape = H.shape(t)
    if exp_shape and fmt_shape(got_shape) ~= fmt_shape(exp_shape) then
        error(string.format('%s: shape %s, expected %s', what, fmt_shape(got_shape),
                            fmt_shape(exp_shape)), 2)
    end
    local dr, da = H.tolerance(exp_dtype or got_dtype)
    if exp_vals == nil then return assert_digest(t, expected.digest, rtol or dr, atol or da, what) end
    H.assert_values(H.values(t), exp_vals, got_shape, rtol or dr, atol or da, what)
end

-- Calls fn and checks that it raises an error whose message contains every pattern given
-- (plain substrings, case-insensitive). Returns the message.
function H.assert_error(fn, ...)
    local ok, err = pcall(fn)
    if ok then error('expected an error, but the call succeeded', 2) end
    local msg = tostring(err)
    for _, p in ipairs({...}) do
        if not msg:lower():find(p:lower(), 1, true) then
            error(string.format('error message %q does not mention %q', msg, p), 2)
        end
    end
    return msg
end

-- Runs one fixture case: runner(inputs, opts) returns the outputs in the fixture's order;
-- checks the outputs, then (when the case has gradients) backpropagates grad_out from the first
-- output and checks the gradient of each input.
function H.check_case(case, runner)
    if not runner then error('no runner for op ' .. tostring(case.op), 2) end
    local ins = H.inputs(case)
    local args = table.move(ins, 1, #case.inputs, 1, {})
    -- t_inputs: inputs (1-based positions) that the case uses transposed, so kernels see
    -- non-contiguous strides; gradients are still those of the stored (leaf) tensors
    for _, i in ipairs(case.t_inputs or {}) do args[i] = ins[i]:t() end
    local outs = table.pack(runner(args, case.opts or {}))
    for i, e in ipairs(case.outputs) do
        local rtol, atol = H.tolerance(e.dtype)
        H.assert_close(outs[i], e, case.rtol or rtol, case.atol or atol,
                       case.name .. ': output ' .. i)
    end
    if case.grads then
        outs[1]:backward(H.tensor(case.grad_out))
        local out_rtol, out_atol = H.tolerance(case.outputs[1].dtype)
        for i, e in pairs(case.grads) do
            -- a float64 input of a float32 result gets a gradient computed in float32
            local rtol, atol = H.tolerance(e.dtype)
            rtol, atol = math.max(rtol, out_rtol), math.max(atol, out_atol)
            -- gradients sum several products: a little more room than the forward values
            H.assert_close(ins[i].grad, e, (case.rtol or rtol) * 2, (case.atol or atol) * 2,
                           case.name .. ': gradient of input ' .. i)
        end
    end
end

-- Declares one busted test per fixture case; call it inside a describe block and pass busted's
-- `it` (a spec's globals are not this module's).
function H.run_cases(cases, runners, it)
    for _, case in ipairs(cases) do
        it(case.name, function() H.check_case(case, runners[case.op]) end)
    end
end

return H
