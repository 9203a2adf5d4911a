-- lua/ddplua/nn/module_hooks.lua: hooks of nn.Module: forward (PyTorch's
-- register_forward_pre_hook, register_forward_hook) and backward (register_full_backward_hook,
-- register_full_backward_pre_hook).
-- defines: installs Module:register_forward_pre_hook(fn), Module:register_forward_hook(fn),
--          Module:register_full_backward_hook(fn), Module:register_full_backward_pre_hook(fn)
--          (each returns a handle with :remove()); hooks.of (module -> its hooks, or nil),
--          hooks.call (Module's call when the module has hooks).
--
-- A module without hooks has no entry in `of`, so its call costs one table lookup more than
-- before; removing the last hook removes the entry again. Hooks run in registration order.
--   fn(module, inputs) -> nil, or replacement inputs: a plain Lua table (no metatable) is the
--     argument list, anything else one argument, as PyTorch wraps a non-tuple in a tuple.
--     inputs is the argument list (inputs.n counts trailing nils).
--   fn(module, inputs, output) -> nil, or a replacement output. output is forward's result,
--     or the list of its results (with .n) when it returned several; a replacement for several
--     results is such a list.
--   backward: fn(module, grad_input, grad_output) -> nil, or a replacement grad_input; and
--     fn(module, grad_output) -> nil, or a replacement grad_output. Both are lists with .n, one
--     entry per argument of forward (per result): nil for what is not a tensor, for a result
--     that received no gradient, and for every argument when none requires grad; zeros for a
--     tensor argument that requires no grad while another does (PyTorch's values). As PyTorch's BackwardHook, the
--     tensor arguments and the tensor results of a call go through an identity Function each;
--     the results' backward runs first and keeps grad_output, the arguments' backward gets every
--     grad_input at once and calls the hooks.
local class = require 'ddplua.class'
local core = require 'ddplua.core'
local ddpl_is_tensor, ddpl_is_grad_enabled = core.is_tensor, core.is_grad_enabled

local hooks = {}
-- module -> {pre = {entries}, post = {entries}}; an entry is {fn = fn}
hooks.of = setmetatable({}, { __mode = 'k' })

local Handle = class.new('RemovableHandle')

function Handle:init(module, list, entry)
    self.module, self.list, self.entry = module, list, entry
end

-- handle:remove(): the hook runs no more (again: nothing)
function Handle:remove()
    local list, entry = self.list, self.entry
    if not list then return end
    for i = #list, 1, -1 do
        if list[i] == entry then table.remove(list, i) end
    end
    local h = hooks.of[self.module]
    if h and #h.pre == 0 and #h.post == 0 and #h.backward == 0 and #h.backward_pre == 0 then
        hooks.of[self.module] = nil
    end
    self.module, self.list, self.entry = nil, nil, nil
end

local function register(module, kind, fn, method)
    if type(fn) ~= 'function' and not (getmetatable(fn) or {}).__call then
        error(('%s: expected a function, got %s'):format(method, type(fn)), 3)
    end
    local h = hooks.of[module]
    if not h then
        h = { pre = {}, post = {}, backward = {}, backward_pre = {} }
        hooks.of[module] = h
    end
    local entry = { fn = fn }
    table.insert(h[kind], entry)
    return Handle(module, h[kind], entry)
end

-- A copy of the list, so that a hook removing hooks does not disturb this call's order.
local function snapshot(list)
    return table.move(list, 1, #list, 1, {})
end

---------------------------------------------------------------------------------------------
-- backward hooks
---------------------------------------------------------------------------------------------
local Function -- ddpl.autograd.Function, loaded with the first backward hook (no cycle at load)
local InputHook, OutputHook

-- A list of n entries (a table with .n) from a hook's replacement r, or an error naming the
-- hook kind when it does not have n entries.
local function replacement_list(r, n, what)
    if type(r) ~= 'table' or getmetatable(r) ~= nil then
        if n == 1 then return { r, n = 1 } end
        error(('%s: the hook returned a %s, expected a list of %d gradients'):format(what, type(r),
            n), 0)
    end
    local count = r.n or #r
    if count ~= n then
        error(('%s: the hook returned %d gradients, expected %d'):format(what, count, n), 0)
    end
    return r
end

-- Builds the two identity Functions on first use.
local function hook_functions()
    if InputHook then return end
    Function = require 'ddplua.autograd_function'
    -- identity over the tensors after `state`; those that require no grad get no history
    local function identity(ctx, state, ...)
        ctx.state = state
        for i = 1, select('#', ...) do
            local t = select(i, ...)
            if not t.requires_grad then ctx:mark_non_differentiable(t) end
        end
        return ...
    end
    InputHook = Function:extend('BackwardHookFunction')
    InputHook.forward = identity
    -- every grad_input at once: the full backward hooks run here
    function InputHook.backward(ctx, ...)
        local st, grads = ctx.state, table.pack(...)
        if st.grad_output == nil then -- the gradient did not come through the results
            return nil, table.unpack(grads, 1, grads.n)
        end
        local grad_input = { n = st.n_inputs }
        -- as PyTorch: a tensor argument that requires no grad gets zeros (materialized)
        for j, pos in ipairs(st.input_pos) do grad_input[pos] = grads[j] end
        for _, fn in ipairs(st.backward) do
            local r = fn(st.module, grad_input, st.grad_output)
            if r ~= nil then
                grad_input = replacement_list(r, st.n_inputs, 'register_full_backward_hook')
            end
        end
        st.grad_output = nil
        local out = { n = #st.input_pos + 1 }
        for j, pos in ipairs(st.input_pos) do out[j + 1] = grad_input[pos] end
        return table.unpack(out, 1, out.n)
    end
    OutputHook = Function:extend('BackwardHookFunction')
    function OutputHook.forward(ctx, state, ...)
        ctx:set_materialize_grads(false) -- a result without gradient is nil in grad_output
        return identity(ctx, state, ...)
    end
    -- every grad_output at once: kept for the hooks (pre hooks may replace it)
    function OutputHook.backward(ctx, ...)
        local st, grads = ctx.state, table.pack(...)
        local grad_output = { n = st.n_outputs }
        for j, pos in ipairs(st.output_pos) do grad_output[pos] = grads[j] end
        for _, fn in ipairs(st.backward_pre) do
            local r = fn(st.module, grad_output)
            if r ~= nil then
                grad_output = replacement_list(r, st.n_outputs, 'register_full_backward_pre_hook')
            end
        end
        if st.input_pos then
            st.grad_output = grad_output
        else -- no argument requires grad: the hooks run now, with grad_input all nil
            for _, fn in ipairs(st.backward) do
                local r = fn(st.module, { n = st.n_inputs }, grad_output)
                if r ~= nil then
                    r = replacement_list(r, st.n_inputs, 'register_full_backward_hook')
                    for i = 1, st.n_inputs do
                        if r[i] ~= nil then
                            error('register_full_backward_hook: the hook of a module none of '
                                .. 'whose inputs requires grad must return nil or nils', 0)
                        end
                    end
                end
            end
        end
        local out = { n = #st.output_pos + 1 }
        for j, pos in ipairs(st.output_pos) do out[j + 1] = grad_output[pos] end
        return table.unpack(out, 1, out.n)
    end
end

-- The tensors of list (positions 1..list.n) through fn.apply(state, ...): returns the list
-- with them replaced and their positions, or the list and nil when none requires grad.
local function through(fn, state, list)
    local pos, tensors, any = {}, {}, false
    for i = 1, list.n do
        local v = list[i]
        if ddpl_is_tensor(v) then
            pos[#pos + 1], tensors[#tensors + 1] = i, v
            any = any or v.requires_grad
        end
    end
    if not any then return list, nil end
    local wrapped = table.pack(fn.apply(state, table.unpack(tensors)))
    local out = table.move(list, 1, list.n, 1, { n = list.n })
    for j, i in ipairs(pos) do out[i] = wrapped[j] end
    return out, pos
end

-- Module's call for a module with hooks: run(self, ...) is the plain call (forward with error
-- locations).
function hooks.call(run, self, h, ...)
    local args = table.pack(...)
    for _, entry in ipairs(snapshot(h.pre)) do
        local r = entry.fn(self, args)
        if r ~= nil then
            if type(r) == 'table' and getmetatable(r) == nil then
                args = table.pack(table.unpack(r, 1, r.n or #r))
            else
                args = table.pack(r)
            end
        end
    end
    -- backward hooks: the arguments go through the input identity (after the pre hooks)
    local bw
    if (#h.backward > 0 or #h.backward_pre > 0) and ddpl_is_grad_enabled() then
        hook_functions()
        local function fns(list)
            local out = {}
            for i, entry in ipairs(list) do out[i] = entry.fn end
            return out
        end
        bw = { module = self, n_inputs = args.n, backward = fns(h.backward),
               backward_pre = fns(h.backward_pre) }
        args, bw.input_pos = through(InputHook, bw, args)
    end
    local res = table.pack(run(self, table.unpack(args, 1, args.n)))
    if #h.post == 0 and not bw then return table.unpack(res, 1, res.n) end
    local several = res.n > 1
    local output = several and res or res[1]
    for _, entry in ipairs(snapshot(h.post)) do
        local r = entry.fn(self, args, output)
        if r ~= nil then output = r end
    end
    -- and the results through the output identity (after the forward hooks)
    local list = several and output or { output, n = 1 }
    list.n = list.n or #list
    if bw then
        bw.n_outputs = list.n
        list, bw.output_pos = through(OutputHook, bw, list)
    end
    return table.unpack(list, 1, list.n)
end

return function(Module)
    function Module:register_forward_pre_hook(fn)
        return register(self, 'pre', fn, 'register_forward_pre_hook')
    end
    function Module:register_forward_hook(fn)
        return register(self, 'post', fn, 'register_forward_hook')
    end
    function Module:register_full_backward_hook(fn)
        return register(self, 'backward', fn, 'register_full_backward_hook')
    end
    function Module:register_full_backward_pre_hook(fn)
        return register(self, 'backward_pre', fn, 'register_full_backward_pre_hook')
    end
    return hooks
end
