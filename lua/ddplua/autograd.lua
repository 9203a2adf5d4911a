-- lua/ddplua/autograd.lua: ddpl.autograd, the C functions plus gradient checking.
-- defines: autograd.grad (C), autograd.gradcheck(fn, inputs [, opts]).
--
-- gradcheck compares the Jacobian that backward computes (ddpl.autograd.grad, one output
-- element at a time) with central differences (f(x + eps) - f(x - eps)) / 2eps, all in float64,
-- as torch.autograd.gradcheck does. An element passes when |analytical - numerical| <=
-- atol + rtol * |numerical|.
local ddpl = require 'ddplua.core'
local autograd = ddpl.autograd

local defaults = { eps = 1e-6, atol = 1e-5, rtol = 1e-3, raise_exception = true }

-- x as a list of tensors (what): a tensor, or a table of them.
local function as_list(x, what)
    if ddpl.is_tensor(x) then return { x } end
    if type(x) ~= 'table' then
        error(('gradcheck: expected %s to be a tensor or a list of tensors, got %s'):format(what,
            type(x)), 0)
    end
    return x
end

-- Float64 contiguous copies of the inputs (leaves; floating inputs keep requires_grad).
local function prepare(inputs)
    local copies = {}
    for i, x in ipairs(inputs) do
        if not ddpl.is_tensor(x) then
            error(('gradcheck: input %d is a %s, expected a tensor'):format(i, type(x)), 3)
        end
        if x:is_floating_point() then
            local c = x:detach():to('float64', { copy = true }):contiguous()
            c.requires_grad = x.requires_grad
            copies[i] = c
        else
            copies[i] = x
        end
    end
    return copies
end

-- Flat float64 values of every floating output of fn(inputs), as one Lua list.
local function evaluate(fn, inputs)
    return ddpl.no_grad(function()
        local values = {}
        for _, out in ipairs(as_list(fn(table.unpack(inputs)), "the function's result")) do
            if not ddpl.is_tensor(out) then
                error("gradcheck: the function returned a list holding a " .. type(out)
                    .. ', expected tensors', 0)
            end
            if out:is_floating_point() then
                for _, v in ipairs(out:double():reshape(-1):tolist()) do values[#values + 1] = v end
            end
        end
        return values
    end)
end

-- numerical[k][j]: d(output element j) / d(element k of input i), by central differences.
local function numerical_columns(fn, inputs, i, eps)
    local flat = inputs[i]:view(-1)
    local columns = {}
    for k = 0, flat:numel() - 1 do
        local element = flat:narrow(0, k, 1)
        local orig = element:item()
        ddpl.no_grad(function() element:fill_(orig + eps) end)
        local plus = evaluate(fn, inputs)
        ddpl.no_grad(function() element:fill_(orig - eps) end)
        local minus = evaluate(fn, inputs)
        ddpl.no_grad(function() element:fill_(orig) end)
        local column = {}
        for j = 1, #plus do column[j] = (plus[j] - minus[j]) / (2 * eps) end
        columns[k + 1] = column
    end
    return columns
end

-- analytical[i][j]: flat list of d(output element j) / d(input i) from backward.
local function analytical_rows(fn, inputs, wrt)
    local rows = {}
    for i in pairs(wrt) do rows[i] = {} end
    local wrt_list, wrt_index = {}, {}
    for i = 1, #inputs do
        if wrt[i] then
            wrt_list[#wrt_list + 1] = inputs[i]
            wrt_index[#wrt_list] = i
        end
    end
    local j = 0
    for _, out in ipairs(as_list(fn(table.unpack(inputs)), "the function's result")) do
        if not ddpl.is_tensor(out) then
            error("gradcheck: the function returned a list holding a " .. type(out)
                .. ', expected tensors', 0)
        end
        if out:is_floating_point() then
            local n = out:numel()
            for e = 0, n - 1 do
                j = j + 1
                local grads = {}
                if out.requires_grad then
                    local onehot = ddpl.zeros_like(out):view(-1)
                    onehot:narrow(0, e, 1):fill_(1)
                    grads = autograd.grad({ out }, wrt_list, {
                        grad_outputs = { onehot:view_as(out) }, retain_graph = true, allow_unused = true,
                    })
                end
                for w = 1, #wrt_list do
                    local g = grads[w]
                    rows[wrt_index[w]][j] = g and g:double():reshape(-1):tolist() or false
                end
            end
        end
    end
    return rows, j
end

function autograd.gradcheck(fn, inputs, opts)
    opts = opts or {}
    if type(opts) ~= 'table' then
        error('gradcheck: expected a table of options as argument 3, got ' .. type(opts), 2)
    end
    for key in pairs(opts) do
        if defaults[key] == nil then error("gradcheck: unknown option '" .. tostring(key) .. "'", 2) end
    end
    local eps = opts.eps or defaults.eps
    local atol, rtol = opts.atol or defaults.atol, opts.rtol or defaults.rtol
    local raise = opts.raise_exception
    if raise == nil then raise = defaults.raise_exception end
    if type(fn) ~= 'function' and not (getmetatable(fn) or {}).__call then
        error('gradcheck: expected a function as argument 1, got ' .. type(fn), 2)
    end
    local xs = prepare(as_list(inputs, 'the inputs (argument 2)'))
    local wrt, any = {}, false
    for i, x in ipairs(xs) do
        if x.requires_grad then wrt[i], any = true, true end
    end
    if not any then error('gradcheck: no input requires grad', 2) end

    local analytical = analytical_rows(fn, xs, wrt)
    for i in pairs(wrt) do
        local columns = numerical_columns(fn, xs, i, eps)
        for k, column in ipairs(columns) do
            for j, numerical in ipairs(column) do
                local row = analytical[i][j]
                local a = row and row[k] or 0.0
                if not (math.abs(a - numerical) <= atol + rtol * math.abs(numerical)) then
                    local msg = ('gradcheck: Jacobian mismatch for output element %d with respect to '
                        .. 'input %d, element %d: numerical %.6g, analytical %.6g (atol %g, rtol %g)')
                        :format(j - 1, i, k - 1, numerical, a, atol, rtol)
                    if raise then error(msg, 2) end
                    return false, msg
                end
            end
        end
    end
    return true
end

return autograd
