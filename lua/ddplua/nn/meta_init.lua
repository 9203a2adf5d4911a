-- lua/ddplua/nn/meta_init.lua: building a module without memory for its parameters (PyTorch's
-- `with torch.device('meta'): m = Net()`), so that FullyShardedDataParallel can give them memory
-- one unit at a time and shard each unit at once, instead of every rank holding the whole model.
-- defines: nn.utils.meta_init(fn, ...) -> fn's results, nn.utils.is_meta(t),
--          nn.utils.materialize_module_(m [, init_fn, made]) (FSDP's per-module step).
--
-- Inside fn, the factories ddpl.empty, zeros, ones, full, rand, randn (and their _like forms)
-- return meta tensors: the asked shape, dtype and device, over one element (every stride 0:
-- 4 bytes for any shape); nn.Parameter of one is meta too; and the in-place initialisers
-- (normal_, uniform_, fill_, zero_, copy_ and the other value writers below) do nothing to a
-- meta tensor, so constructors and nn.init run unchanged, touch no memory and draw no random
-- numbers. Any other op reads a meta tensor as its one element broadcast (0). As in PyTorch,
-- a meta module cannot run: it is for FSDP (or materialize_module_) to give memory to.
local ddpl = require 'ddplua'
local Parameter = require 'ddplua.nn.Parameter'
local State = require 'ddplua.nn.module_state'

local M = {}

local meta = setmetatable({}, {__mode = 'k'}) -- meta tensors (their boxes) -> true

function M.is_meta(t) return meta[t] == true end

local FACTORIES = {'empty', 'zeros', 'ones', 'full', 'rand', 'randn'}
local LIKE = {'empty_like', 'zeros_like', 'ones_like', 'rand_like', 'randn_like'}
-- tensor methods that only write values: a no-op on a meta tensor
local WRITERS = {'normal_', 'uniform_', 'fill_', 'zero_', 'copy_', 'bernoulli_', 'exponential_',
                 'random_', 'geometric_', 'log_normal_', 'cauchy_', 'clamp_', 'mul_', 'div_',
                 'add_', 'sub_', 'fmod_', 'abs_', 'neg_', 'sqrt_', 'exp_', 'log_'}
local is_writer = {}
for _, k in ipairs(WRITERS) do is_writer[k] = true end

local depth, saved = 0, nil

local function new_meta(shape, opts)
    local one = saved.fns.empty({1}, {dtype = opts and opts.dtype, device = opts and opts.device})
    local ones = {}
    for i = 1, #shape do ones[i] = 1 end
    local t = one:reshape(ones):expand(shape)
    meta[t] = true
    return t
end

-- (sizes as a table or as integers [, fill value for full] [, opts]) -> shape, opts; nil when
-- the arguments have another form (the real factory then runs)
local function parse(full, ...)
    local n, a1 = select('#', ...), select(1, ...)
    local shape, i
    if type(a1) == 'table' and not ddpl.is_tensor(a1) then
        shape, i = a1, 2
    else
        shape, i = {}, 1
        while i <= n and math.type((select(i, ...))) == 'integer' do
            shape[#shape + 1] = (select(i, ...))
            i = i + 1
        end
    end
    for _, d in ipairs(shape) do
        if math.type(d) ~= 'integer' or d < 0 then return nil end
    end
    if full then i = i + 1 end
    local opts = select(i, ...)
    if opts ~= nil and (type(opts) ~= 'table' or ddpl.is_tensor(opts)) then return nil end
    return shape, opts
end

local function enter()
    depth = depth + 1
    if depth > 1 then return end
    saved = {fns = {}}
    for _, name in ipairs(FACTORIES) do
        local real = ddpl[name]
        saved.fns[name] = real
        ddpl[name] = function(...)
            local shape, opts = parse(name == 'full', ...)
            if not shape then return real(...) end
            return new_meta(shape, opts)
        end
    end
    for _, name in ipairs(LIKE) do
        local real = ddpl[name]
        if real then
            saved.fns[name] = real
            ddpl[name] = function(t, opts)
                if not ddpl.is_tensor(t) then return real(t, opts) end
                return new_meta(t:shape(), {dtype = opts and opts.dtype or t.dtype,
                                            device = opts and opts.device or t.device})
            end
        end
    end
    local pmt = getmetatable(Parameter)
    saved.param_call = pmt.__call
    pmt.__call = function(cls, t, ...)
        local p = saved.param_call(cls, t, ...)
        if meta[t] then meta[p] = true end
        return p
    end
    local tmt = getmetatable(saved.fns.empty({0}))
    saved.tmt, saved.index = tmt, tmt.__index
    local index = saved.index
    local function noop(self) return self end
    tmt.__index = function(t, k)
        if is_writer[k] and meta[t] then return noop end
        return index(t, k)
    end
end

local function leave()
    depth = depth - 1
    if depth > 0 then return end
    for name, real in pairs(saved.fns) do ddpl[name] = real end
    getmetatable(Parameter).__call = saved.param_call
    saved.tmt.__index = saved.index
    saved = nil
end

-- nn.utils.meta_init(fn, ...): fn(...) with the factories making meta tensors (above); returns
-- what fn returns.
function M.meta_init(fn, ...)
    if type(fn) ~= 'function' then
        error('nn.utils.meta_init: expected a function, got ' .. type(fn), 2)
    end
    enter()
    local res = table.pack(pcall(fn, ...))
    leave()
    if not res[1] then error(res[2], 0) end
    return table.unpack(res, 2, res.n)
end

-- nn.utils.materialize_module_(m [, init_fn, made]): gives module m's own meta parameters and
-- buffers (not its children's) memory, zero-filled (PyTorch's m:to_empty(recurse=False)), then
-- runs init_fn(m) when given, else m:reset_parameters() (the order of torch >= 2.1's FSDP);
-- made maps each meta tensor to its new one, so a parameter tied in two slots stays one.
-- Returns whether m had meta state. A module with meta parameters, no reset_parameters and no
-- init_fn is refused: its values would be left unset.
function M.materialize_module_(m, init_fn, made)
    made = made or {}
    local any, params = false, false
    for _, e in ipairs(State.entries(m, 'params')) do
        local t = e[2]
        if t ~= nil and meta[t] then
            if not made[t] then
                made[t] = Parameter(ddpl.zeros(t:shape(), {dtype = t.dtype, device = t.device}),
                                    t.requires_grad)
            end
            m:register_parameter(e[1], made[t])
            any, params = true, true
        end
    end
    for _, e in ipairs(State.entries(m, 'buffers')) do
        local t = e[2]
        if t ~= nil and meta[t] then
            made[t] = made[t] or ddpl.zeros(t:shape(), {dtype = t.dtype, device = t.device})
            m:register_buffer(e[1], made[t], {persistent = State.persistent(m, e[1])})
            any = true
        end
    end
    if not any then return false end
    if init_fn then
        ddpl.no_grad(function() init_fn(m) end)
    elseif type(m.reset_parameters) == 'function' then
        ddpl.no_grad(function() m:reset_parameters() end)
    elseif params then
        error(('%s was built under nn.utils.meta_init and has no reset_parameters: pass '
            .. 'param_init_fn to give its parameters values'):format(m.__name or 'a module'), 0)
    end
    return true
end

return M
