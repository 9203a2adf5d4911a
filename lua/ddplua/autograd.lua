-- lua/ddplua/autograd.lua: ddpl.autograd, the C functions plus gradient checking.
-- defines: autograd.grad (C), autograd.gradcheck(fn, inputs [, opts]),
--          autograd.gradgradcheck(fn, inputs [, opts]), autograd.Function (autograd_function.lua).
--
-- gradcheck compares the Jacobian that backward computes (ddpl.autograd.grad, one output
-- element at a time) with central differences (f(x + eps) - f(x - eps)) / 2eps, all in float64,
-- as torch.autograd.gradcheck does. An element passes when |analytical - numerical| <=
-- atol + rtol * |numerical|.
--
-- gradgradcheck is torch.autograd.gradgradcheck: it runs gradcheck on the function
-- (inputs, grad_outputs) -> autograd.grad(fn(inputs), inputs, {grad_outputs, create_graph=true}),
-- with random float64 grad_outputs that require grad, so the second derivatives (the backward
-- of the recorded backward) are compared with central differences of the first.
local ddpl = require 'ddplua.core'
local autograd = ddpl.autograd

local defaults = { eps = 1e-6, atol = 1e-5, rtol = 1e-3, raise_exception = true }
local gradgrad_defaults = { eps = 1e-6, atol = 1e-5, rtol = 1e-3, raise_exception = true,
    grad_outputs = false }

-- x as a list of tensors (what): a tensor, or a table of them; name: the check, for errors.
local function as_list(x, what, name)
    if ddpl.is_tensor(x) then return { x } end
    if type(x) ~= 'table' then
        error(('%s: expected %s to be a tensor or a list of tensors, got %s'):format(
            name or 'gradcheck', what or 'a value', type(x)), 0)
    end
    return x
end

-- Float64 contiguous copies of the inputs (leaves; floating inputs keep requires_grad).
local function prepare(inputs, name)
    local copies = {}
    for i, x in ipairs(inputs) do
        if not ddpl.is_tensor(x) then
            error(('%s: input %d is a %s, expected a tensor'):format(name, i, type(x)), 3)
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

local function is_callable(f)
    return type(f) == 'function' or (getmetatable(f) or {}).__call ~= nil
end

-- gradcheck under the name `name` (gradgradcheck reports as itself); level: error level.
local function check(name, fn, inputs, opts, level)
    local eps = opts.eps or defaults.eps
    local atol, rtol = opts.atol or defaults.atol, opts.rtol or defaults.rtol
    local raise = opts.raise_exception
    if raise == nil then raise = defaults.raise_exception end
    local xs = prepare(as_list(inputs, 'the inputs (argument 2)', name), name)
    local wrt, any = {}, false
    for i, x in ipairs(xs) do
        if x.requires_grad then wrt[i], any = true, true end
    end
    if not any then error(name .. ': no input requires grad', level) end

    local analytical = analytical_rows(fn, xs, wrt)
    for i in pairs(wrt) do
        local columns = numerical_columns(fn, xs, i, eps)
        for k, column in ipairs(columns) do
            for j, numerical in ipairs(column) do
                local row = analytical[i][j]
                local a = row and row[k] or 0.0
                if not (math.abs(a - numerical) <= atol + rtol * math.abs(numerical)) then
                    local msg = ('%s: Jacobian mismatch for output element %d with respect to '
                        .. 'input %d, element %d: numerical %.6g, analytical %.6g (atol %g, rtol %g)')
                        :format(name, j - 1, i, k - 1, numerical, a, atol, rtol)
                    if raise then error(msg, level) end
                    return false, msg
                end
            end
        end
    end
    return true
end

function autograd.gradcheck(fn, inputs, opts)
    opts = opts or {}
    if type(opts) ~= 'table' then
        error('gradcheck: expected a table of options as argument 3, got ' .. type(opts), 2)
    end
    for key in pairs(opts) do
        if defaults[key] == nil then error("gradcheck: unknown option '" .. tostring(key) .. "'", 2) end
    end
    if not is_callable(fn) then
        error('gradcheck: expected a function as argument 1, got ' .. type(fn), 2)
    end
    return check('gradcheck', fn, inputs, opts, 3)
end

-- opts: eps, atol, rtol, raise_exception as gradcheck; grad_outputs: a list with one tensor per
-- floating output of fn (default: standard normal values, float64)
function autograd.gradgradcheck(fn, inputs, opts)
    opts = opts or {}
    if type(opts) ~= 'table' then
        error('gradgradcheck: expected a table of options as argument 3, got ' .. type(opts), 2)
    end
    for key in pairs(opts) do
        if gradgrad_defaults[key] == nil then
            error("gradgradcheck: unknown option '" .. tostring(key) .. "'", 2)
        end
    end
    if not is_callable(fn) then
        error('gradgradcheck: expected a function as argument 1, got ' .. type(fn), 2)
    end
    local xs = prepare(as_list(inputs, 'the inputs (argument 2)', 'gradgradcheck'), 'gradgradcheck')
    local wrt = {}
    for i, x in ipairs(xs) do
        if x.requires_grad then wrt[#wrt + 1] = i end
    end
    if #wrt == 0 then error('gradgradcheck: no input requires grad', 2) end

    -- the differentiable outputs, and one grad_output for each
    local function differentiable(outs)
        local list = {}
        for _, out in ipairs(as_list(outs)) do
            if out:is_floating_point() then list[#list + 1] = out end
        end
        return list
    end
    local outs = differentiable(ddpl.no_grad(fn, table.unpack(xs)))
    local gouts = {}
    for j, out in ipairs(outs) do
        local g = opts.grad_outputs and opts.grad_outputs[j]
        if g ~= nil and not (ddpl.is_tensor(g)
                and table.concat(g:shape(), ',') == table.concat(out:shape(), ',')) then
            error(('gradgradcheck: grad_outputs[%d] must be a tensor of shape [%s]'):format(
                j, table.concat(out:shape(), ', ')), 2)
        end
        g = g and g:detach():to('float64', { copy = true }) or ddpl.randn(out:shape(), { dtype = 'float64' })
        g.requires_grad = true
        gouts[j] = g
    end

    local nx = #xs
    -- (inputs..., grad_outputs...) -> the first derivatives, recorded (zeros where unused)
    local function first_derivatives(...)
        local args = table.pack(...)
        return ddpl.enable_grad(function()
            local ins, go = {}, {}
            for i = 1, nx do ins[i] = args[i] end
            for j = 1, #gouts do go[j] = args[nx + j] end
            local ys = differentiable(fn(table.unpack(ins)))
            local live_ys, live_go, wrt_ins = {}, {}, {}
            for j, y in ipairs(ys) do
                if y.requires_grad then
                    live_ys[#live_ys + 1] = y
                    live_go[#live_go + 1] = go[j]
                end
            end
            for w, i in ipairs(wrt) do wrt_ins[w] = ins[i] end
            local grads = {}
            if #live_ys > 0 then
                grads = autograd.grad(live_ys, wrt_ins, {
                    grad_outputs = live_go, create_graph = true, allow_unused = true,
                })
            end
            local result = {}
            for w, i in ipairs(wrt) do result[w] = grads[w] or ddpl.zeros_like(ins[i]) end
            return result
        end)
    end
    local all = {}
    for i, x in ipairs(xs) do all[i] = x end
    for j, g in ipairs(gouts) do all[nx + j] = g end
    return check('gradgradcheck', first_derivatives, all,
        { eps = opts.eps, atol = opts.atol, rtol = opts.rtol, raise_exception = opts.raise_exception }, 3)
end

require 'ddplua.autograd_function'

return autograd
