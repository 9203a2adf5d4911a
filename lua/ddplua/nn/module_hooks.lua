-- lua/ddplua/nn/module_hooks.lua: forward hooks of nn.Module (PyTorch's register_forward_hook
-- and register_forward_pre_hook).
-- defines: installs Module:register_forward_pre_hook(fn), Module:register_forward_hook(fn)
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
local class = require 'ddplua.class'

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
    if h and #h.pre == 0 and #h.post == 0 then hooks.of[self.module] = nil end
    self.module, self.list, self.entry = nil, nil, nil
end

local function register(module, kind, fn, method)
    if type(fn) ~= 'function' and not (getmetatable(fn) or {}).__call then
        error(('%s: expected a function, got %s'):format(method, type(fn)), 3)
    end
    local h = hooks.of[module]
    if not h then
        h = { pre = {}, post = {} }
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
    local res = table.pack(run(self, table.unpack(args, 1, args.n)))
    if #h.post == 0 then return table.unpack(res, 1, res.n) end
    local several = res.n > 1
    local output = several and res or res[1]
    for _, entry in ipairs(snapshot(h.post)) do
        local r = entry.fn(self, args, output)
        if r ~= nil then output = r end
    end
    if several then return table.unpack(output, 1, output.n or #output) end
    return output
end

return function(Module)
    function Module:register_forward_pre_hook(fn)
        return register(self, 'pre', fn, 'register_forward_pre_hook')
    end
    function Module:register_forward_hook(fn)
        return register(self, 'post', fn, 'register_forward_hook')
    end
    return hooks
end
