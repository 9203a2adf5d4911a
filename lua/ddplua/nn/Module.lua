-- lua/ddplua/nn/Module.lua: nn.Module, the base class of every layer and model.
-- defines: Module:extend(name) (a subclass: ddplua/class.lua), Cls(...) (an instance: runs
--          Cls.init), m(...) (runs m:forward with error locations), registration by assignment,
--          register_parameter/register_buffer/add_module, parameters, named_parameters,
--          buffers, named_buffers, children, named_children, modules, named_modules, train,
--          eval, zero_grad, requires_grad_, to/float/double/half/bfloat16/cpu/cuda, apply,
--          num_parameters, extra_repr, tostring(m) (PyTorch's tree); state_dict and
--          load_state_dict come from module_state_dict.lua. For layer files: Module.is(v),
--          Module.repr(v) (Python's repr of numbers, booleans, tuples), Module.options,
--          Module.check_int, _child_slots; register_forward_pre_hook and register_forward_hook
--          come from module_hooks.lua.
--
-- Registration. Instances keep parameters, buffers, child modules and plain attributes in
-- four ordered tables and none as raw fields, so every assignment reaches __newindex: that is
-- how `self.fc = nn.Linear(...)` registers the child in assignment order (PyTorch's
-- __setattr__), how re-assigning a name keeps its place, and how assigning a module to a name
-- that held a plain value still registers it. Reads go through __index (registered names,
-- then attributes, then the class chain).
--
-- Lists. parameters(), buffers(), children(), modules() return Lua sequences. named_*()
-- return a sequence of {name, value} pairs that can also drive a for loop directly:
--     for name, p in net:named_parameters() do ... end
-- Shared tensors and modules are listed once (PyTorch's remove_duplicate).
--
-- Parameters keep their identity for the module's whole life: load_state_dict copies into
-- them and to() swaps their contents with `p.data = new` (the binding replaces the tensor
-- inside the same Lua object), so optimizers built earlier stay valid. C code that kept the
-- old tensor (a DDP reducer built before to()) does not see the change, as in PyTorch where
-- DDP must wrap the model after it is moved.
local ddpl = require 'ddplua'
local Parameter = require 'ddplua.nn.Parameter'
local State = require 'ddplua.nn.module_state'
local class = require 'ddplua.class'

local is_module_mt = setmetatable({}, {__mode = 'k'}) -- instance metatables of every class

-- ---------------------------------------------------------------------------------------
-- Calls: m(...) runs m:forward(...). An error raised inside a child is rethrown once, by the
-- innermost module that sees it, prefixed with where it happened; outer modules let that
-- message through unchanged. `calling` is the chain of modules being called right now.

local calling, depth, located = {}, 0, nil

-- "fc1" or "layers.0": the path from parent to a module it called (a descendant).
local function path_to(parent, m)
    for _, pair in ipairs(parent:named_modules()) do
        if pair[2] == m and pair[1] ~= '' then return pair[1] end
    end
    return '?' -- a module the parent keeps outside its registered children
end

local function locate(err, d)
    -- a position inside the layer files adds nothing to the location given here
    err = err:gsub('^[^\n]-ddplua/nn/[%w_]+%.lua:%d+: ', '', 1)
    local parent, m = calling[d - 1], calling[d]
    local where = {calling[1].__name}
    for i = 2, d - 1 do where[#where + 1] = path_to(calling[i - 1], calling[i]) end
    local name = path_to(parent, m)
    if parent.__name == 'Sequential' and not name:find('.', 1, true) then
        return string.format('In module %s (%s) of %s: %s', name, m.__name,
                             table.concat(where, '.'), err)
    end
    where[#where + 1] = name
    return string.format('in %s (%s): %s', table.concat(where, '.'), m.__name, err)
end

local function run(self, ...)
    depth = depth + 1
    local d = depth
    calling[d] = self
    local res = table.pack(pcall(self.forward, self, ...))
    if res[1] then
        calling[d], depth = nil, d - 1
        return table.unpack(res, 2, res.n)
    end
    local err = res[2]
    if d > 1 and type(err) == 'string' and err ~= located then
        located = locate(err, d)
        err = located
    end
    calling[d], depth = nil, d - 1
    error(err, 0)
end

local hooks_of, hooks_call -- module_hooks.lua, installed below with the class

-- m(...): forward hooks only cost the lookup when the module has none
local function call_inner(self, ...)
    local h = hooks_of[self]
    if h then return hooks_call(run, self, h, ...) end
    return run(self, ...)
end

-- The outermost call (the user's model(x)) reports an error raised inside the library at the
-- user's line rather than at a line of a layer file (class.reraise); calls inside it pay nothing.
local function finish(ok, ...)
    if ok then return ... end
    class.reraise((...), 2) -- 2: above finish (call's frame is gone: a tail call) is the user
end

local function call(self, ...)
    if depth > 0 then return call_inner(self, ...) end
    return finish(pcall(call_inner, self, ...))
end

-- ---------------------------------------------------------------------------------------
-- Classes

local function make_instance_mt(cls)
    local mt = {__name = cls.__name, __class = cls}
    mt.__index = function(self, k)
        local v, found = State.get(self, k)
        if found then return v end
        if math.type(k) == 'integer' and cls.getitem then return cls.getitem(self, k) end
        return cls[k]
    end
    mt.__newindex = State.set
    mt.__call = call
    mt.__tostring = function(self) return self:repr_tree() end
    mt.__len = function(self)
        if cls.len then return cls.len(self) end
        return #self:children()
    end
    is_module_mt[mt] = true
    return mt
end

-- Each class's instance metatable, made when the class first constructs: classes come from
-- Module:extend (ddplua/class.lua), which knows nothing of registration.
local function instance_mt(cls)
    local mt = rawget(cls, '__instance')
    if not mt then
        mt = make_instance_mt(cls)
        cls.__instance = mt
    end
    return mt
end

-- Cls(...): a new instance with empty registries, training on, then Cls.init(self, ...).
local function construct(cls, ...)
    local self = State.new()
    setmetatable(self, instance_mt(cls))
    self.training = true
    local ok, err = pcall(self.init, self, ...)
    if not ok then
        -- a constructor check of a layer file (or one without a position) is reported at the
        -- caller's line, naming the layer being made ("Linear: empty: out of memory ...",
        -- "TransformerEncoderLayer: Linear: ..."); an error with a position in user code keeps it
        if type(err) == 'string' then
            local msg, n = err:gsub('^[^\n]-ddplua/[%w_/]+%.lua:%d+: ', '', 1)
            if n > 0 or not msg:find('^[^\n:]+:%d+: ') then
                local name = rawget(cls, '__name')
                if name and msg:sub(1, #name + 1) ~= name .. ':' then msg = name .. ': ' .. msg end
                error(msg, 2)
            end
        end
        class.reraise(err, 2)
    end
    return self
end

local Module = class.new('Module', nil, construct)

function Module.is(v)
    local mt = type(v) == 'table' and getmetatable(v)
    return mt and is_module_mt[mt] == true or false
end

-- Module._runs_class_forward(m, cls): m is an instance of exactly cls, without forward hooks or a
-- forward of its own, so calling it is cls.forward (Sequential's relu/max-pool reordering).
function Module._runs_class_forward(m, cls)
    local mt = getmetatable(m)
    return mt ~= nil and mt.__class == cls and hooks_of[m] == nil and m.forward == cls.forward
end
State.is_module = Module.is

-- ---------------------------------------------------------------------------------------
-- Python's repr, for extra_repr strings that must read like PyTorch's.

local function float_repr(x)
    if x ~= x then return 'nan' end
    if x == math.huge then return 'inf' end
    if x == -math.huge then return '-inf' end
    local s
    for p = 1, 17 do -- the shortest decimal that reads back as x, as Python's repr
        s = string.format('%.' .. p .. 'e', x)
        if tonumber(s) == x then break end
    end
    local mant, ex = s:match('^(-?[%d.]+)e([-+]%d+)$')
    ex = tonumber(ex)
    local digits = mant:gsub('[.-]', '')
    local neg = x < 0 and '-' or ''
    digits = digits:gsub('0+$', '')
    if digits == '' then digits = '0' end
    if ex < -4 or ex >= 16 then -- Python switches to exponent notation here
        local m = digits:sub(1, 1) .. (#digits > 1 and '.' .. digits:sub(2) or '')
        return string.format('%s%se%s%02d', neg, m, ex < 0 and '-' or '+', math.abs(ex))
    end
    if ex < 0 then return neg .. '0.' .. string.rep('0', -ex - 1) .. digits end
    if #digits <= ex + 1 then return neg .. digits .. string.rep('0', ex + 1 - #digits) .. '.0' end
    return neg .. digits:sub(1, ex + 1) .. '.' .. digits:sub(ex + 2)
end

-- Python's repr of a number, boolean, string, nil or list (a tuple: "(3, 3)", "(64,)").
function Module.repr(v)
    local t = type(v)
    if t == 'boolean' then return v and 'True' or 'False' end
    if t == 'nil' then return 'None' end
    if t == 'string' then return "'" .. v .. "'" end
    if math.type(v) == 'integer' then return tostring(v) end
    if t == 'number' then return float_repr(v) end
    if t == 'table' then
        local parts = {}
        for i, x in ipairs(v) do parts[i] = Module.repr(x) end
        return '(' .. table.concat(parts, ', ') .. (#parts == 1 and ',)' or ')')
    end
    return tostring(v)
end

-- Layer constructors' option tables: opts merged over defaults; an unknown key is an error
-- naming the class (a misspelt option must not be silently ignored). Layers that create
-- tensors pass factory = true to accept PyTorch's dtype and device as well.
function Module.options(cls_name, opts, defaults, factory)
    if opts ~= nil and type(opts) ~= 'table' then
        error(string.format('%s: expected an options table, got %s', cls_name, type(opts)), 3)
    end
    local out = {}
    for k, v in pairs(defaults) do out[k] = v end
    for k, v in pairs(opts or {}) do
        if defaults[k] == nil and not (factory and (k == 'dtype' or k == 'device')) then
            local known = {}
            for name in pairs(defaults) do known[#known + 1] = name end
            table.sort(known)
            error(string.format("%s: unknown option '%s' (known: %s)", cls_name, tostring(k),
                                table.concat(known, ', ')), 3)
        end
        out[k] = v
    end
    return out
end

-- The inplace flag of an activation or dropout module: nn.ReLU(true) or nn.ReLU({inplace=true}),
-- as PyTorch's positional and keyword forms; nil is false. Raises on anything else.
function Module.inplace_option(cls_name, v)
    if type(v) == 'table' then v = Module.options(cls_name, v, {inplace = false}).inplace end
    if v == nil then return false end
    if type(v) ~= 'boolean' then
        error(string.format('%s: inplace must be a boolean, got %s', cls_name, tostring(v)), 3)
    end
    return v
end

-- A constructor's integer argument: raises "<cls>: <what> must be an integer >= min, got v".
function Module.check_int(cls_name, v, what, min)
    -- math.tointeger: an integral float that fits 64 bits (not inf, not 2^70)
    if not (type(v) == 'number' and math.tointeger(v) and v >= (min or 1)) then
        error(string.format('%s: %s must be an integer >= %d, got %s', cls_name, what, min or 1,
                            tostring(v)), 3)
    end
    return math.tointeger(v)
end

-- a * b for sizes a constructor derives (4 * hidden_size gate rows, 3 * embed_dim): raises
-- "<cls>: <what> = a x b is too large" instead of wrapping past 64 bits into a negative size.
function Module.size_product(cls_name, what, a, b)
    if a ~= 0 and b > math.maxinteger // a then
        error(string.format('%s: %s = %d x %d is too large', cls_name, what, a, b), 3)
    end
    return a * b
end

function Module:forward()
    error(self.__name .. ': forward is not defined (define ' .. self.__name .. ':forward)', 2)
end

-- ---------------------------------------------------------------------------------------
-- Registration (the checks live in module_state.lua, shared with assignment)

function Module:register_parameter(name, p)
    if p ~= nil and not Parameter.is(p) then
        error(string.format("%s:register_parameter: '%s' must be an nn.Parameter or nil, got %s",
                            self.__name, tostring(name), ddpl.is_tensor(p) and 'a plain tensor'
                            or type(p)), 2)
    end
    State.register(self, 'params', name, p, 'register_parameter')
end

-- register_buffer(name, t [, {persistent=true}]): a non-persistent buffer stays out of
-- state_dict, as in PyTorch.
function Module:register_buffer(name, t, opts)
    if t ~= nil and not ddpl.is_tensor(t) then
        error(string.format("%s:register_buffer: buffer '%s' must be a tensor or nil, got %s",
                            self.__name, tostring(name), type(t)), 2)
    end
    local persistent = not (type(opts) == 'table' and opts.persistent == false)
    State.register(self, 'buffers', name, t, 'register_buffer', persistent)
end

function Module:add_module(name, m)
    if m ~= nil and not Module.is(m) then
        error(string.format("%s:add_module: '%s' must be a Module or nil, got %s", self.__name,
                            tostring(name), type(m)), 2)
    end
    State.register(self, 'modules', name, m, 'add_module')
end
Module.register_module = Module.add_module

-- ---------------------------------------------------------------------------------------
-- Listings

-- Named lists iterate in a for loop: `for name, v in list do`. The loop passes the previous
-- name back, so each list keeps a name -> position map (built on first use).
local positions = setmetatable({}, {__mode = 'k'})
local NamedList = {__name = 'ddplua.NamedList'}
function NamedList.__call(list, _, prev)
    local i = 0
    if prev ~= nil then
        local pos = positions[list]
        if not pos then
            pos = {}
            for j, pair in ipairs(list) do pos[pair[1]] = j end
            positions[list] = pos
        end
        i = pos[prev]
    end
    local pair = list[i + 1]
    if pair then return pair[1], pair[2] end
end

local function named(list) return setmetatable(list, NamedList) end

local function join(prefix, name) return prefix == '' and name or prefix .. '.' .. name end

-- named_modules([prefix]): self (named prefix, '' by default) and every descendant, preorder.
function Module:named_modules(prefix)
    local out, seen = {}, {}
    local function walk(m, pre)
        if seen[m] then return end
        seen[m] = true
        out[#out + 1] = {pre, m}
        for _, e in ipairs(State.entries(m, 'modules')) do
            if e[2] then walk(e[2], join(pre, e[1])) end
        end
    end
    walk(self, prefix or '')
    return named(out)
end

local function values(list)
    local out = {}
    for i, pair in ipairs(list) do out[i] = pair[2] end
    return out
end

function Module:modules() return values(self:named_modules()) end

function Module:named_children()
    local out, seen = {}, {}
    for _, e in ipairs(State.entries(self, 'modules')) do
        if e[2] and not seen[e[2]] then
            seen[e[2]] = true
            out[#out + 1] = e
        end
    end
    return named(out)
end

function Module:children() return values(self:named_children()) end

-- Every child slot {name, module or nil} in order, duplicates included (for containers).
function Module:_child_slots() return State.entries(self, 'modules') end

-- Tensors of registry kind from self (and descendants unless recurse == false), each once.
local function named_tensors(self, kind, recurse, prefix)
    local out, seen = {}, {}
    local mods = recurse == false and {{prefix or '', self}} or self:named_modules(prefix)
    for _, mp in ipairs(mods) do
        for _, e in ipairs(State.entries(mp[2], kind)) do
            local t = e[2]
            if t ~= nil and not seen[t] then
                seen[t] = true
                out[#out + 1] = {join(mp[1], e[1]), t}
            end
        end
    end
    return named(out)
end

-- named_parameters([prefix [, recurse=true]]): {'fc1.weight', p} pairs in registration order.
function Module:named_parameters(prefix, recurse)
    return named_tensors(self, 'params', recurse, prefix)
end
function Module:parameters(recurse) return values(named_tensors(self, 'params', recurse)) end
function Module:named_buffers(prefix, recurse)
    return named_tensors(self, 'buffers', recurse, prefix)
end
function Module:buffers(recurse) return values(named_tensors(self, 'buffers', recurse)) end

function Module:num_parameters()
    local n = 0
    for _, p in ipairs(self:parameters()) do n = n + p:numel() end
    return n
end

-- ---------------------------------------------------------------------------------------
-- Modes and in-place changes

function Module:train(mode)
    if mode == nil then mode = true end
    if type(mode) ~= 'boolean' then
        error(self.__name .. ':train: expected a boolean mode, got ' .. type(mode), 2)
    end
    for _, m in ipairs(self:modules()) do m.training = mode end
    return self
end

function Module:eval() return self:train(false) end

-- requires_grad_([flag=true]): sets requires_grad on every parameter (freezing a part of a
-- model); returns self.
function Module:requires_grad_(flag)
    if flag == nil then flag = true end
    if type(flag) ~= 'boolean' then
        error(self.__name .. ':requires_grad_: expected a boolean, got ' .. type(flag), 2)
    end
    for _, p in ipairs(self:parameters()) do p.requires_grad = flag end
    return self
end

-- apply(fn): fn(m) on every child (recursively, children first) and then on self.
function Module:apply(fn)
    for _, child in ipairs(self:children()) do child:apply(fn) end
    fn(self)
    return self
end

-- zero_grad([{set_to_none=true}]): PyTorch 2's default drops the gradients (nil), which
-- saves memory and a kernel; set_to_none=false zeroes them in place instead.
function Module:zero_grad(opts)
    local to_none = true
    if type(opts) == 'boolean' then
        to_none = opts
    elseif type(opts) == 'table' then
        if opts.set_to_none ~= nil then to_none = opts.set_to_none end
    elseif opts ~= nil then
        error('zero_grad: expected a boolean or {set_to_none = boolean}, got ' .. type(opts), 2)
    end
    for _, p in ipairs(self:parameters()) do
        if to_none then
            p.grad = nil
        else
            local g <close> = p.grad -- let go of it now (ddpl._release says why)
            if g ~= nil then g:zero_() end
        end
    end
end

local FLOAT = {float32 = true, float64 = true, float16 = true, bfloat16 = true}
local DTYPE = {int64 = true, int32 = true, int16 = true, int8 = true, uint8 = true, bool = true}
for k in pairs(FLOAT) do DTYPE[k] = true end

-- to(dtype | device | {dtype=, device=}): converts parameters (keeping their identity, so an
-- optimizer built before stays valid: p.data is replaced), their gradients and buffers, in
-- place. As in PyTorch a dtype applies to floating point tensors only (num_batches_tracked
-- stays int64).
function Module:to(arg)
    local dtype, device
    if type(arg) == 'table' then
        dtype, device = arg.dtype, arg.device
    elseif type(arg) == 'string' then
        if DTYPE[arg] then dtype = arg else device = arg end
    end
    if not (dtype or device) then
        error(self.__name .. ':to: expected a dtype, a device or {dtype=, device=}, got '
              .. tostring(arg), 2)
    end
    if dtype and not FLOAT[dtype] then
        error(self.__name .. ':to: only floating point dtypes are accepted, got ' .. dtype, 2)
    end
    local function conv(t)
        local r = t
        if dtype and FLOAT[r.dtype] and r.dtype ~= dtype then r = r:to(dtype) end
        if device and r.device ~= device then r = r:to(device) end
        return r
    end
    ddpl.no_grad(function()
        for _, p in ipairs(self:parameters()) do
            local g = p.grad
            local new = conv(p)
            if new ~= p then p.data = new end
            if g ~= nil then p.grad = conv(g) end
        end
        for _, mp in ipairs(self:named_modules()) do
            for _, e in ipairs(State.entries(mp[2], 'buffers')) do
                if e[2] ~= nil then mp[2][e[1]] = conv(e[2]) end
            end
        end
    end)
    return self
end

function Module:float() return self:to('float32') end
function Module:double() return self:to('float64') end
function Module:half() return self:to('float16') end
function Module:bfloat16() return self:to('bfloat16') end
function Module:cpu() return self:to('cpu') end
function Module:cuda(n) return self:to(n and 'cuda:' .. n or 'cuda') end

-- ---------------------------------------------------------------------------------------
-- tostring: PyTorch's Module.__repr__ (children indented by two spaces, one per line).

function Module:extra_repr() return '' end

function Module:repr_tree()
    local extra = self:extra_repr()
    local lines = {}
    if extra ~= '' then
        for line in (extra .. '\n'):gmatch('(.-)\n') do lines[#lines + 1] = line end
    end
    local nextra = #lines
    for _, e in ipairs(State.entries(self, 'modules')) do
        local s = e[2] and e[2]:repr_tree() or 'None'
        lines[#lines + 1] = '(' .. e[1] .. '): ' .. s:gsub('\n', '\n  ')
    end
    local s = self.__name .. '('
    if nextra == 1 and #lines == 1 then
        s = s .. lines[1]
    elseif #lines > 0 then
        s = s .. '\n  ' .. table.concat(lines, '\n  ') .. '\n'
    end
    return s .. ')'
end

-- state_dict and load_state_dict live in their own file
require('ddplua.nn.module_state_dict')(Module, State)
do
    local hooks = require('ddplua.nn.module_hooks')(Module)
    hooks_of, hooks_call = hooks.of, hooks.call
end

return Module
