-- lua/ddplua/autograd_function.lua: ddpl.autograd.Function, custom differentiable operations
-- written in Lua (PyTorch's torch.autograd.Function; docs/internals/autograd-extend.md).
-- defines: autograd.Function (Function:extend(name), Fn.apply(...)), the context's
--          save_for_backward, mark_non_differentiable, set_materialize_grads, saved_tensors,
--          needs_input_grad.
--
--   local Square = ddpl.autograd.Function:extend('Square')
--   function Square.forward(ctx, x) ctx:save_for_backward(x); return x * x end
--   function Square.backward(ctx, g) local x = table.unpack(ctx.saved_tensors); return g * 2 * x end
--   local y = Square.apply(x)
--
-- forward runs with gradient recording off; each differentiable output then gets a graph node
-- (engine/lua/bind_function.c) whose backward calls the closure below, which checks what
-- Fn.backward returns (one gradient per apply argument, nil where none; shapes and dtypes of the
-- inputs) and names the class and the argument when it is wrong. An output that forward saved
-- lives in the node (no reference cycle through Lua); everything else on ctx is plain Lua and
-- lives as long as the graph does.
local ddpl = require 'ddplua.core'
local class = require 'ddplua.class'
local autograd = ddpl.autograd

local Context = class.new('FunctionCtx')

-- ctx:save_for_backward(...): tensors (or nil) backward reads back as ctx.saved_tensors
function Context:save_for_backward(...)
    local list = table.pack(...)
    for i = 1, list.n do
        local t = list[i]
        if t ~= nil and not ddpl.is_tensor(t) then
            error(('save_for_backward: argument %d is a %s, expected a tensor or nil'):format(
                i, type(t)), 2)
        end
    end
    rawset(self, '_to_save', list)
end

-- ctx:mark_non_differentiable(...): outputs that get no gradient (requires_grad false)
function Context:mark_non_differentiable(...)
    local marked = rawget(self, '_non_differentiable') or {}
    for i = 1, select('#', ...) do
        local t = select(i, ...)
        if not ddpl.is_tensor(t) then
            error(('mark_non_differentiable: argument %d is a %s, expected a tensor'):format(
                i, type(t)), 2)
        end
        marked[#marked + 1] = t
    end
    rawset(self, '_non_differentiable', marked)
end

-- ctx:set_materialize_grads(false): backward gets nil, not zeros, for the gradient of an
-- output that received none (PyTorch's default, true, gives zeros)
function Context:set_materialize_grads(value)
    rawset(self, '_materialize_grads', value and true or false)
end

local Function = class.new('Function')
local base_extend = Function.extend

-- whether x is one of list[1..n] (n: list.n or #list; entries may be nil)
local function contains(list, x)
    if not list then return false end
    for i = 1, list.n or #list do
        if rawequal(list[i], x) then return true end
    end
    return false
end

local function shape_str(shape) return '[' .. table.concat(shape, ', ') .. ']' end

-- The checked gradients of Fn.backward's results `rets` (table.pack), one per tensor input.
local function checked_gradients(name, rets, args, tensor_pos)
    local n = args.n
    if rets.n < n then
        error(('%s.backward returned %d gradients, expected %d (one per argument of %s.apply, '
            .. 'nil where none)'):format(name, rets.n, n, name), 0)
    end
    for i = n + 1, rets.n do
        if rets[i] ~= nil then
            error(('%s.backward returned %d gradients, expected %d (one per argument of %s.apply)')
                :format(name, rets.n, n, name), 0)
        end
    end
    for i = 1, n do
        local g, a = rets[i], args[i]
        if g ~= nil then
            if not a.shape then
                error(('%s.backward returned a gradient for input %d, which is a %s, not a tensor')
                    :format(name, i, a.type), 0)
            end
            if not ddpl.is_tensor(g) then
                error(('%s.backward: the gradient for input %d is a %s, expected a tensor or nil')
                    :format(name, i, type(g)), 0)
            end
            if shape_str(g:shape()) ~= shape_str(a.shape) then
                error(('%s.backward: the gradient for input %d has shape %s, but the input has '
                    .. 'shape %s'):format(name, i, shape_str(g:shape()), shape_str(a.shape)), 0)
            end
            if g.dtype ~= a.dtype then
                error(('%s.backward: the gradient for input %d has dtype %s, but the input has '
                    .. 'dtype %s'):format(name, i, g.dtype, a.dtype), 0)
            end
        end
    end
    local grads = {}
    for j, i in ipairs(tensor_pos) do grads[j] = rets[i] end
    return grads
end

local function apply(cls, ...)
    local name = cls.__name
    if type(cls.forward) ~= 'function' or type(cls.backward) ~= 'function' then
        error(('%s.apply: define %s.forward(ctx, ...) and %s.backward(ctx, grad_out, ...)')
            :format(name, name, name), 3)
    end
    local values = table.pack(...)
    -- what backward needs of the inputs: tensors' shapes and dtypes, not the tensors
    local args, tensor_ins, tensor_pos, needs, any = { n = values.n }, {}, {}, {}, false
    for i = 1, values.n do
        local v = values[i]
        args[i] = { type = type(v) }
        needs[i] = false
        if ddpl.is_tensor(v) then
            args[i] = { shape = v:shape(), dtype = v.dtype }
            tensor_ins[#tensor_ins + 1] = v
            tensor_pos[#tensor_pos + 1] = i
            needs[i] = v.requires_grad
            any = any or needs[i]
        end
    end
    local ctx = setmetatable({ needs_input_grad = needs }, Context)
    local results = table.pack(ddpl.no_grad(cls.forward, ctx, ...))
    if not (any and ddpl.is_grad_enabled()) then
        return table.unpack(results, 1, results.n)
    end

    -- outputs: an input returned as it is, or a tensor with history, is returned as a new
    -- tensor over the same memory, so that recording never changes the caller's tensor.
    -- backward's closure must not hold an output (output -> node -> closure -> output would
    -- never be collected): it keeps their geometry (zeros_for) and the count.
    local outs, out_pos, differentiable, originals, zeros_for = {}, {}, {}, {}, {}
    local n_results = results.n
    for r = 1, results.n do
        local t = results[r]
        if ddpl.is_tensor(t) then
            zeros_for[r] = { t:shape(), { dtype = t.dtype, device = t.device } }
            originals[#originals + 1] = t
            if contains(values, t) or t.requires_grad then t = t:detach() end
            results[r] = t
            outs[#outs + 1] = t
            out_pos[#out_pos + 1] = r
            differentiable[#outs] = t:is_floating_point()
                and not contains(rawget(ctx, '_non_differentiable'), originals[#originals])
        end
    end

    -- saved tensors: outputs go into the nodes (by output index), the rest stays here
    local to_save = rawget(ctx, '_to_save') or { n = 0 }
    local kept, saved_outputs = {}, {}
    for i = 1, to_save.n do
        local t = to_save[i]
        local k
        if t ~= nil and not contains(values, t) then
            for o, orig in ipairs(originals) do
                if rawequal(orig, t) then k = o end
            end
        end
        if k then
            saved_outputs[#saved_outputs + 1] = k
            kept[i] = { slot = #saved_outputs, output = k }
        else
            kept[i] = { tensor = t }
        end
    end
    local n_save = to_save.n
    rawset(ctx, '_to_save', nil)
    rawset(ctx, '_non_differentiable', nil)
    local n_differentiable = 0
    for k = 1, #outs do
        if differentiable[k] then n_differentiable = n_differentiable + 1 end
    end
    if n_differentiable == 0 then return table.unpack(results, 1, results.n) end

    local materialize = rawget(ctx, '_materialize_grads') ~= false
    -- backward's arguments: one gradient per result of forward, `given` (output index ->
    -- gradient) placed, the other tensors' zeros (or nil without materialized grads)
    local function call_backward(given, saved)
        rawset(ctx, 'saved_tensors', saved)
        local grads = {}
        if materialize then
            for r, z in pairs(zeros_for) do grads[r] = ddpl.zeros(z[1], z[2]) end
        end
        for k, g in pairs(given) do grads[out_pos[k]] = g end
        local rets = table.pack(cls.backward(ctx, table.unpack(grads, 1, n_results)))
        rawset(ctx, 'saved_tensors', nil) -- set again by the next call (retain_graph)
        return checked_gradients(name, rets, args, tensor_pos)
    end
    local function saved_list(saved_output)
        local saved = {}
        for i = 1, n_save do
            local s = kept[i]
            if s.slot then saved[i] = saved_output(s) else saved[i] = s.tensor end
        end
        return saved
    end

    if n_differentiable == 1 then -- one node: its backward is the Function's
        local only
        for k = 1, #outs do if differentiable[k] then only = k end end
        autograd._record_function(name, function(_, grad, saved_in_node)
            return call_backward({ [only] = grad },
                saved_list(function(s) return saved_in_node[s.slot] end))
        end, tensor_ins, outs, differentiable, saved_outputs)
        return table.unpack(results, 1, results.n)
    end

    -- Several differentiable outputs: backward is called once with all their gradients, as in
    -- PyTorch. The main node has the input edges and a hidden 0-dim token as its output; each
    -- output's node takes the token as input, hands its gradient over in `pass` and sends the
    -- token a zero, which wakes the main node once every output's node that got a gradient ran
    -- (the engine's dependency count). The main node keeps the saved outputs as history-free
    -- aliases; under create_graph a saved output must come with its history instead, which its
    -- own node hands over when it runs.
    local pass = { grads = {}, outputs = {} }
    local token = ddpl.zeros({}, { dtype = 'float32' })
    local aliases = {}
    for j, k in ipairs(saved_outputs) do aliases[j] = outs[k] end
    autograd._record_function(name, function(_, _, saved_in_node)
        local given, unpacked = pass.grads, pass.outputs
        pass.grads, pass.outputs = {}, {}
        local recording = ddpl.is_grad_enabled()
        return call_backward(given, saved_list(function(s)
            if not recording then return saved_in_node[s.slot] end
            return unpacked[s.output] or error(('%s: double backward (create_graph) through a '
                .. 'saved output that received no gradient is not supported'):format(name), 0)
        end))
    end, tensor_ins, { token }, { true }, {}, aliases)
    for k = 1, #outs do
        if differentiable[k] then
            local own_slot -- output k's node saves it (slot 1) when backward reads it
            for _, o in ipairs(saved_outputs) do if o == k then own_slot = 1 end end
            autograd._record_function(name, function(_, grad, saved_in_node)
                pass.grads[k] = grad
                if own_slot and ddpl.is_grad_enabled() then
                    pass.outputs[k] = saved_in_node[own_slot]
                end
                return { ddpl.zeros({}, { dtype = 'float32' }) }
            end, { token }, { outs[k] }, { true }, own_slot and { 1 } or {})
        end
    end
    return table.unpack(results, 1, results.n)
end

-- Function:extend(name): a Function class; its apply(...) runs it
function Function.extend(cls, name)
    local sub = base_extend(cls, name)
    sub.apply = function(...) return apply(sub, ...) end
    return sub
end

autograd.Function = Function
return Function
