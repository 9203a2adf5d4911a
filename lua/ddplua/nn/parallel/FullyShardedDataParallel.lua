-- lua/ddplua/nn/parallel/FullyShardedDataParallel.lua: nn.parallel.FullyShardedDataParallel
-- (nn.FSDP), PyTorch's FSDP (ZeRO-3 and ZeRO-2) for ddplua.
-- defines: FSDP(module, {sharding_strategy='FULL_SHARD'|'SHARD_GRAD_OP'|'NO_SHARD', auto_wrap,
--          process_group, mixed_precision={param_dtype, reduce_dtype, buffer_dtype},
--          backward_prefetch=true, forward_prefetch=false, cpu_offload=false,
--          sync_module_states=true, param_init_fn}),
--          fsdp(...) (the module's forward), fsdp.module, fsdp:parameters() (the shards),
--          fsdp:no_sync(fn, ...), fsdp:clip_grad_norm_(max_norm [, norm_type]),
--          fsdp:state_dict([{type='full'|'sharded'}]), fsdp:load_state_dict(sd), fsdp:units(),
--          fsdp:write_timeline() (DDPLUA_FSDP_TIMELINE=file: fsdp_timeline.lua).
--
-- The module is cut into units (auto_wrap: a list of module classes, each instance a unit, or
-- {min_num_params=N}, PyTorch's size_based_auto_wrap_policy: a subtree becomes a unit once the
-- parameters not yet in a unit below it reach N; the wrapped module is always the last unit,
-- holding what is left). Each unit's parameters become one flat buffer sharded across the group
-- (fsdp_unit.lua says how forward and backward gather and reduce it). The optimizer gets the
-- shards: fsdp:parameters() lists one 'flat_param' per unit, registered on the unit's module.
-- backward_prefetch starts the gather of the next unit in backward order while one unit
-- computes; cpu_offload keeps a CUDA module's shards and their gradients in host memory (the
-- optimizer steps there; on a CPU module it changes nothing). A module built under
-- nn.utils.meta_init (no memory for its parameters) is materialised one unit at a time, each
-- unit's modules given memory and values (param_init_fn(m) per module, else m:reset_parameters(),
-- as torch >= 2.1's FSDP does for a meta-device module), broadcast from rank 0 and sharded before
-- the next unit gets any: no rank ever holds the whole model. docs/internals/fsdp.md has the
-- design and the checks.
local ddpl = require 'ddplua'
local Module = require 'ddplua.nn.Module'
local State = require 'ddplua.nn.module_state'
local Parameter = require 'ddplua.nn.Parameter'
local Unit = require 'ddplua.nn.parallel.fsdp_unit'
local meta = require 'ddplua.nn.meta_init'
local timeline = require 'ddplua.nn.parallel.fsdp_timeline'
local dist = ddpl.distributed

local FSDP = Module:extend('FullyShardedDataParallel')

local NAME = 'FullyShardedDataParallel'
local defaults = {sharding_strategy = 'FULL_SHARD', auto_wrap = false, process_group = false,
    mixed_precision = false, backward_prefetch = true, forward_prefetch = false,
    cpu_offload = false, sync_module_states = true, param_init_fn = false}
local STRATEGIES = {FULL_SHARD = true, SHARD_GRAD_OP = true, NO_SHARD = true}

local function fail(fmt, ...) error(NAME .. ': ' .. fmt:format(...), 0) end

-- The unit modules of root under policy (a list of classes, or {min_num_params = N}): a set
-- module -> path, the root excluded.
local function plan_units(root, policy)
    local is_unit = {}
    if not policy then return is_unit end
    if type(policy) ~= 'table' then
        fail('auto_wrap must be a list of module classes or {min_num_params = N}, got %s',
             type(policy))
    end
    if policy.min_num_params ~= nil then
        local min = policy.min_num_params
        if math.type(min) ~= 'integer' or min < 1 then
            fail('auto_wrap.min_num_params must be a positive integer, got %s', tostring(min))
        end
        local seen = {}
        local function count(m, path)
            if seen[m] then return 0 end
            seen[m] = true
            local n = 0
            for _, e in ipairs(State.entries(m, 'params')) do
                if e[2] ~= nil then n = n + e[2]:numel() end
            end
            for _, e in ipairs(State.entries(m, 'modules')) do
                if e[2] then n = n + count(e[2], path == '' and e[1] or path .. '.' .. e[1]) end
            end
            if m ~= root and n >= min then
                is_unit[m] = path
                return 0
            end
            return n
        end
        count(root, '')
        return is_unit
    end
    for i, cls in ipairs(policy) do
        if type(cls) ~= 'table' or not cls.__name then
            fail('auto_wrap[%d] is a %s, expected a module class', i, type(cls))
        end
    end
    for _, pm in ipairs(root:named_modules()) do
        local path, m = pm[1], pm[2]
        if m ~= root then
            for _, cls in ipairs(policy) do
                if m:is_instance_of(cls) then is_unit[m] = path end
            end
        end
    end
    return is_unit
end

-- The parameters of unit module u: {module, name, tensor, key} for every slot in u's subtree
-- outside other units (key: the name in the unwrapped module's state dict).
local function own_params(u, prefix, is_unit, out, seen)
    if seen[u] then return out end
    seen[u] = true
    for _, e in ipairs(State.entries(u, 'params')) do
        if e[2] ~= nil then out[#out + 1] = {u, e[1], e[2], prefix .. e[1]} end
    end
    for _, e in ipairs(State.entries(u, 'modules')) do
        local c = e[2]
        if c and not is_unit[c] then own_params(c, prefix .. e[1] .. '.', is_unit, out, seen) end
    end
    return out
end

-- Every rank gets the group's first rank's tensors (parameters and buffers; meta ones are
-- broadcast as each unit is materialised).
local function broadcast_tensors(list, group)
    local src = group and dist.get_global_rank(group, 0) or 0
    ddpl.no_grad(function()
        for _, t in ipairs(list) do
            if not meta.is_meta(t) then dist.broadcast(t, src, {group = group}) end
        end
    end)
end

-- The modules of unit u's subtree outside other units, u first.
local function own_modules(u, is_unit, out, seen)
    if seen[u] then return out end
    seen[u] = true
    out[#out + 1] = u
    for _, e in ipairs(State.entries(u, 'modules')) do
        local c = e[2]
        if c and not is_unit[c] then own_modules(c, is_unit, out, seen) end
    end
    return out
end

-- Gives unit module u's meta parameters and buffers memory and values (meta_init.lua), rank 0's
-- when sync; returns the new parameters (the unit's flat buffer takes their values, then their
-- memory is released) or nil when the unit had nothing meta.
local function materialize_unit(u, is_unit, init_fn, sync, group)
    local made, any = {}, false
    for _, m in ipairs(own_modules(u, is_unit, {}, {})) do
        local ok, res = pcall(meta.materialize_module_, m, init_fn or nil, made)
        if not ok then fail('%s', res) end
        any = any or res
    end
    if not any then return nil end
    local params, buffers = {}, {}
    for _, t in pairs(made) do
        if Parameter.is(t) then params[#params + 1] = t else buffers[#buffers + 1] = t end
    end
    if sync then
        -- the same order on every rank: the unit's own registration order
        local list, seen = {}, {}
        for _, m in ipairs(own_modules(u, is_unit, {}, {})) do
            for _, kind in ipairs({'params', 'buffers'}) do
                for _, e in ipairs(State.entries(m, kind)) do
                    if e[2] ~= nil and not seen[e[2]] then
                        seen[e[2]] = true
                        list[#list + 1] = e[2]
                    end
                end
            end
        end
        broadcast_tensors(list, group)
    end
    return params
end

function FSDP:init(module, opts)
    if not Module.is(module) then fail('expected a module to wrap, got %s', type(module)) end
    local o = Module.options(NAME, opts, defaults)
    if not STRATEGIES[o.sharding_strategy] then
        fail("sharding_strategy must be 'FULL_SHARD', 'SHARD_GRAD_OP' or 'NO_SHARD', got %s",
             tostring(o.sharding_strategy))
    end
    if not dist.is_initialized() then
        fail('the default process group is not initialized (call dist.init_process_group first)')
    end
    local group = o.process_group or nil
    local mp = o.mixed_precision or {}
    if type(mp) ~= 'table' then fail('mixed_precision must be a table, got %s', type(mp)) end
    for k in pairs(mp) do
        if k ~= 'param_dtype' and k ~= 'reduce_dtype' and k ~= 'buffer_dtype' then
            fail("unknown mixed_precision option '%s' (known: buffer_dtype, param_dtype, "
                .. 'reduce_dtype)', tostring(k))
        end
    end
    local params = module:parameters()
    if #params == 0 then fail('the module has no parameters to shard') end
    self:add_module('module', module)
    self.strategy, self.group = o.sharding_strategy, group
    self.rank, self.world = dist.get_rank(group), dist.get_world_size(group)
    if o.param_init_fn and type(o.param_init_fn) ~= 'function' then
        fail('param_init_fn must be a function, got %s', type(o.param_init_fn))
    end
    if o.sync_module_states then
        broadcast_tensors(module:parameters(), group)
        broadcast_tensors(module:buffers(), group)
    end
    local cfg = {group = group, rank = self.rank, world = self.world,
                 strategy = o.sharding_strategy, param_dtype = mp.param_dtype,
                 reduce_dtype = mp.reduce_dtype, prefetch = o.backward_prefetch and true,
                 cpu_offload = o.cpu_offload and true, backend = dist.get_backend(group),
                 forward_prefetch = o.forward_prefetch and true,
                 fwd = {order = {}, seen = {}, frozen = false, active = false}}
    local trace = os.getenv('DDPLUA_FSDP_TIMELINE')
    if trace and trace ~= '' and self.rank == 0 then
        cfg.timeline = timeline.new(trace, self.world, dist.get_backend(group))
    end
    self._fsdp_cfg = cfg
    local is_unit = plan_units(module, o.auto_wrap)
    local order = {{module, ''}}
    for _, pm in ipairs(module:named_modules()) do
        if is_unit[pm[2]] then order[#order + 1] = {pm[2], pm[1]} end
    end
    -- every unit's parameters first (a parameter in two units is refused), then the flattening
    local owner, lists = {}, {}
    for i, um in ipairs(order) do
        local prefix = um[2] == '' and '' or um[2] .. '.'
        lists[i] = own_params(um[1], prefix, is_unit, {}, {})
        for _, p in ipairs(lists[i]) do
            if owner[p[3]] and owner[p[3]] ~= i then
                fail("parameter '%s' is shared by units '%s' and '%s' (tied parameters must be in "
                    .. 'one unit)', p[4], order[owner[p[3]]][2], um[2])
            end
            owner[p[3]] = i
        end
    end
    local units = {}
    for i, um in ipairs(order) do
        -- built under nn.utils.meta_init: this unit's modules get memory and values now
        local made = materialize_unit(um[1], is_unit, o.param_init_fn, o.sync_module_states,
                                      group)
        if made then
            lists[i] = own_params(um[1], um[2] == '' and '' or um[2] .. '.', is_unit, {}, {})
        end
        if #lists[i] > 0 then
            local unit = Unit.new(um[1], um[2], lists[i], cfg)
            units[#units + 1] = unit
            local calls = {}
            um[1]:register_forward_pre_hook(function()
                calls[#calls + 1] = unit:pre_forward()
            end)
            um[1]:register_forward_hook(function(_, _, output)
                local call = table.remove(calls)
                local results = output
                if type(output) ~= 'table' or getmetatable(output) ~= nil then
                    results = {output, n = 1}
                end
                if call then unit:post_forward(call, results) end
            end)
        end
        -- the flat buffer has their values: their memory serves the next unit
        for _, p in ipairs(made or {}) do ddpl._release_memory(p) end
    end
    self._fsdp_units = units
    -- buffers live in buffer_dtype (cast once every unit is materialised); state dicts give
    -- them in their own dtype (PyTorch saves full precision): each cast buffer's name -> dtype
    self._fsdp_buffer_dtypes = {}
    if mp.buffer_dtype then
        for _, pm in ipairs(module:named_modules()) do
            for _, e in ipairs(State.entries(pm[2], 'buffers')) do
                local b = e[2]
                if b ~= nil and b:is_floating_point() and b.dtype ~= mp.buffer_dtype then
                    pm[2]:register_buffer(e[1], b:to(mp.buffer_dtype))
                    self._fsdp_buffer_dtypes[(pm[1] == '' and '' or pm[1] .. '.') .. e[1]] =
                        b.dtype
                end
            end
        end
    end
end

-- Floating-point tensors among a forward's arguments (and in plain tables of them) in dtype:
-- PyTorch's FSDP casts the root's inputs to mixed_precision.param_dtype.
local function cast_inputs(dtype, v)
    if ddpl.is_tensor(v) then
        if v:is_floating_point() and v.dtype ~= dtype then return v:to(dtype) end
        return v
    end
    if type(v) == 'table' and getmetatable(v) == nil then
        local out = {}
        for k, x in pairs(v) do out[k] = cast_inputs(dtype, x) end
        return out
    end
    return v
end

-- The module's forward, bracketed for forward_prefetch (the units' gather order, recorded in
-- the first forward) and the timeline.
function FSDP:forward(...)
    local cfg = self._fsdp_cfg
    local args = table.pack(...)
    if cfg.param_dtype then
        for i = 1, args.n do args[i] = cast_inputs(cfg.param_dtype, args[i]) end
    end
    if cfg.timeline then cfg.timeline:forward_begins() end
    cfg.fwd.active = true
    local res = table.pack(pcall(self.module, table.unpack(args, 1, args.n)))
    cfg.fwd.active = false
    Unit.forward_done(cfg.fwd, res[1])
    if cfg.timeline then cfg.timeline:forward_ends() end
    if not res[1] then error(res[2], 0) end
    return table.unpack(res, 2, res.n)
end

-- Writes the DDPLUA_FSDP_TIMELINE trace now (it is also written every 50 steps and at exit).
function FSDP:write_timeline()
    if self._fsdp_cfg.timeline then self._fsdp_cfg.timeline:write() end
end

-- fsdp:named_parameters([prefix]) and fsdp:parameters(): the units' shards only (the slots of
-- the wrapped modules hold views or placeholders, never parameters of their own)
function FSDP:named_parameters(prefix, recurse)
    local list = Module.named_parameters(self, prefix, recurse)
    local shards = {}
    for _, u in ipairs(self._fsdp_units) do shards[u.shard] = true end
    local out = {}
    for _, pair in ipairs(list) do
        if shards[pair[2]] then out[#out + 1] = pair end
    end
    return setmetatable(out, getmetatable(list))
end

function FSDP:parameters(recurse)
    local out = {}
    for i, pair in ipairs(self:named_parameters(nil, recurse)) do out[i] = pair[2] end
    return out
end

-- fsdp:units(): {path, numel, shard_size} per unit (for tests and tuning)
function FSDP:units()
    local out = {}
    for i, u in ipairs(self._fsdp_units) do
        out[i] = {path = u.path, numel = u.numel, shard_size = u.shard_size}
    end
    return out
end

-- fsdp:no_sync(fn, ...): fn(...) with gradients kept locally (accumulated into the next
-- synchronised backward's), as DDP's no_sync
function FSDP:no_sync(fn, ...)
    if type(fn) ~= 'function' then fail('no_sync: expected a function, got %s', type(fn)) end
    local units = self._fsdp_units
    for _, u in ipairs(units) do u.no_sync = true end
    local res = table.pack(pcall(fn, ...))
    for _, u in ipairs(units) do u.no_sync = false end
    if not res[1] then error(res[2], 0) end
    return table.unpack(res, 2, res.n)
end

-- fsdp:clip_grad_norm_(max_norm [, norm_type=2]): scales the shards' gradients so that the
-- norm of the whole model's gradient is at most max_norm; returns that norm (before scaling)
function FSDP:clip_grad_norm_(max_norm, norm_type)
    norm_type = norm_type or 2
    if type(max_norm) ~= 'number' or max_norm < 0 then
        fail('clip_grad_norm_: max_norm must be a non-negative number, got %s', tostring(max_norm))
    end
    if type(norm_type) ~= 'number' or norm_type <= 0 then
        fail('clip_grad_norm_: norm_type must be a positive number or math.huge, got %s',
             tostring(norm_type))
    end
    local inf = norm_type == math.huge
    local sharded, replicated = 0.0, 0.0 -- sums of |g|^p (maxima for inf)
    local grads = {}
    for _, u in ipairs(self._fsdp_units) do
        local g = u.shard.grad
        if g then
            grads[#grads + 1] = g
            local a = g:to('float64'):abs()
            local v = inf and a:max():item() or a:pow(norm_type):sum():item()
            if u.sharded then
                sharded = inf and math.max(sharded, v) or sharded + v
            else
                replicated = inf and math.max(replicated, v) or replicated + v
            end
        end
    end
    -- on the units' compute device: an nccl group takes CUDA tensors only (offloaded shards'
    -- gradients are on the host)
    local t = ddpl.tensor({sharded}, {dtype = 'float64', device = self._fsdp_units[1].device})
    dist.all_reduce(t, {op = inf and dist.ReduceOp.MAX or dist.ReduceOp.SUM, group = self.group})
    local total
    if inf then
        total = math.max(t:item(), replicated)
    else
        total = (t:item() + replicated) ^ (1 / norm_type)
    end
    local coef = max_norm / (total + 1e-6)
    if coef < 1 then
        ddpl.no_grad(function()
            for _, g in ipairs(grads) do g:mul_(coef) end
        end)
    end
    return ddpl.tensor(total, {dtype = 'float32'})
end

-- Runs fn with every unit's full parameters in its slots (gathered: a collective on every rank).
local function with_full_params(self, fn)
    local fulls = {}
    for i, u in ipairs(self._fsdp_units) do fulls[i] = u:gather_full() end
    for i, u in ipairs(self._fsdp_units) do u:assign(fulls[i]) end
    local ok, res = pcall(fn)
    for _, u in ipairs(self._fsdp_units) do u:clear() end
    if not ok then error(res, 0) end
    return res
end

-- The state dict key of each unit's shard: '<unit path>.flat_param'.
local function flat_param_keys(self)
    local keys = {}
    for _, u in ipairs(self._fsdp_units) do
        keys[(u.path == '' and '' or u.path .. '.') .. 'flat_param'] = true
    end
    return keys
end

-- fsdp:state_dict([{type='full'}]): 'full' (default): the unwrapped module's state dict
-- (plain keys, values copied) on the group's rank 0, an empty table elsewhere; every rank must
-- call it (the parameters are gathered). 'sharded': this rank's shards ('<unit>flat_param'),
-- the buffers, and the layout under '_fsdp' (world size, rank, per unit its key, element count
-- and shard size), for ddpl.save on every rank.
function FSDP:state_dict(opts)
    opts = opts or {}
    if type(opts) ~= 'table' then fail('state_dict: expected an options table, got %s', type(opts)) end
    for k in pairs(opts) do
        if k ~= 'type' then fail("state_dict: unknown option '%s' (known: type)", tostring(k)) end
    end
    local kind = opts.type or 'full'
    if kind == 'full' then
        local sd = with_full_params(self, function() return self.module:state_dict() end)
        local out_keys, out, flat_keys = {}, {}, flat_param_keys(self)
        for k, v in pairs(sd) do
            if not flat_keys[k] then
                out_keys[#out_keys + 1] = k
                local dt = self._fsdp_buffer_dtypes[k]
                out[k] = dt and v:to(dt) or v:clone()
            end
        end
        if self.rank ~= 0 then return {} end
        -- keep the unwrapped module's order for pairs()
        local keys_mt = getmetatable(sd)
        local listed = {}
        for _, k in ipairs(out_keys) do listed[k] = true end
        return setmetatable(out, {__pairs = keys_mt.__pairs, __name = keys_mt.__name,
                                  keys = out_keys, listed = listed})
    elseif kind == 'sharded' then
        local out = {_fsdp = {world_size = self.world, rank = self.rank,
                              strategy = self.strategy, units = {}}}
        for i, u in ipairs(self._fsdp_units) do
            local key = (u.path == '' and '' or u.path .. '.') .. 'flat_param'
            out[key] = u.shard:detach():clone()
            out._fsdp.units[i] = {key = key, numel = u.numel, shard_size = u.shard_size}
        end
        for _, nb in ipairs(self.module:named_buffers()) do
            local dt = self._fsdp_buffer_dtypes[nb[1]]
            out[nb[1]] = dt and nb[2]:to(dt) or nb[2]:clone()
        end
        return out
    end
    fail("state_dict: type must be 'full' or 'sharded', got %s", tostring(kind))
end

-- The whole unpadded flat buffer of unit i from every saving rank's sharded state dict.
local function flat_from_shards(list, i, unit)
    local meta = list[1]._fsdp.units[i]
    if not meta or meta.numel ~= unit.numel then
        fail('load_state_dict: unit %d (%s) has %d elements, the checkpoint %s', i,
             unit.path == '' and '(root)' or unit.path, unit.numel,
             meta and ('has ' .. meta.numel) or 'has no such unit')
    end
    local pieces = {}
    for r, sd in ipairs(list) do
        local shard = sd[meta.key]
        if not ddpl.is_tensor(shard) then
            fail("load_state_dict: rank %d's sharded state dict has no tensor '%s'", r - 1,
                 meta.key)
        end
        pieces[r] = shard:to(unit.device)
    end
    return ddpl.cat(pieces, 0):narrow(0, 0, unit.numel)
end

-- fsdp:load_state_dict(sd): a full state dict (every rank passes one: rank 0's is enough for
-- the values only if the ranks pass the same), this rank's own sharded one, or the list of
-- every saving rank's sharded state dicts in rank order (any world size: resharded here).
function FSDP:load_state_dict(sd)
    if type(sd) ~= 'table' then fail('load_state_dict: expected a table, got %s', type(sd)) end
    local units = self._fsdp_units
    local list
    if sd._fsdp then
        if sd._fsdp.world_size ~= self.world or sd._fsdp.rank ~= self.rank then
            fail('load_state_dict: this sharded state dict was saved by rank %s of %s; this is '
                .. 'rank %d of %d: pass the list of every rank\'s sharded state dicts to reshard',
                tostring(sd._fsdp.rank), tostring(sd._fsdp.world_size), self.rank, self.world)
        end
        list = nil
        for i, u in ipairs(units) do
            local meta = sd._fsdp.units[i]
            local shard = meta and sd[meta.key]
            if not ddpl.is_tensor(shard) or shard:numel() ~= u.shard:numel() then
                fail('load_state_dict: unit %d (%s) does not match the sharded state dict', i,
                     u.path == '' and '(root)' or u.path)
            end
        end
        ddpl.no_grad(function()
            for i, u in ipairs(units) do u.shard:copy_(sd[sd._fsdp.units[i].key]) end
        end)
    elseif sd[1] ~= nil then
        list = sd
        for r, one in ipairs(list) do
            if type(one) ~= 'table' or not one._fsdp or one._fsdp.rank ~= r - 1 then
                fail('load_state_dict: entry %d of the list is not rank %d\'s sharded state dict',
                     r, r - 1)
            end
        end
        if #list ~= list[1]._fsdp.world_size then
            fail('load_state_dict: the list has %d sharded state dicts, saved by %d ranks',
                 #list, list[1]._fsdp.world_size)
        end
        local flats = {}
        for i, u in ipairs(units) do flats[i] = flat_from_shards(list, i, u) end
        for i, u in ipairs(units) do u:write_flat(flats[i]) end
    else
        -- a full state dict: each unit's flat buffer from its slots' keys
        local flats = {}
        for i, u in ipairs(units) do
            local flat = ddpl.zeros({u.numel}, {dtype = u.dtype, device = u.device})
            for _, s in ipairs(u.slots) do
                local v = sd[s.key]
                if not ddpl.is_tensor(v) then
                    fail("load_state_dict: missing key '%s' in the state dict", s.key)
                end
                if v:numel() ~= s.numel then
                    fail("load_state_dict: '%s' has %d elements, the parameter %d", s.key,
                         v:numel(), s.numel)
                end
                flat:narrow(0, s.offset, s.numel):copy_(v:reshape(-1))
            end
            flats[i] = flat
        end
        for i, u in ipairs(units) do u:write_flat(flats[i]) end
    end
    -- buffers (replicated): from whatever form was given
    local source = list and list[1] or sd
    ddpl.no_grad(function()
        for _, nb in ipairs(self.module:named_buffers()) do
            local v = source[nb[1]]
            if ddpl.is_tensor(v) then nb[2]:copy_(v) end
        end
    end)
end

return FSDP
