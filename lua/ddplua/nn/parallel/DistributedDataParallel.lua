-- lua/ddplua/nn/parallel/DistributedDataParallel.lua: nn.parallel.DistributedDataParallel
-- (nn.DDP), PyTorch's DDP for ddplua.
-- defines: DDP(module, {bucket_cap_mb=25, broadcast_buffers=true, find_unused_parameters=false,
--          gradient_as_bucket_view=false, static_graph=false, device_ids, output_device,
--          process_group}) (device_ids: lua/ddplua/nn/parallel/device_ids.lua),
--          model(x) (the module's forward, with the reducer around it), model.module,
--          model:no_sync(fn, ...), model:join([{divide_by_initial_world_size=true,
--          enable=true},] fn, ...), model:register_comm_hook(state, hook) (PyTorch's: hook(state,
--          bucket) with a GradBucket, returning a work/future) or (name_or_fn [, state])
--          ('powersgd': lua/ddplua/distributed/algorithms/powersgd.lua),
--          model:state_dict() ('module.' prefix: the module is the child named 'module'),
--          model:buckets() (parameter names per bucket, for tests and tuning).
--
-- The work is done by the C reducer (engine/distributed/reducer.h) through gradient-ready hooks while
-- backward runs; this file checks that the ranks agree on the model, broadcasts rank 0's
-- parameters and buffers, and brackets each forward: prepare_forward (error for a previous
-- iteration that left parameters without gradient; bucket rebuild after the first iteration),
-- buffer broadcast, the module's forward, then prepare_backward with the outputs (graph walk for
-- find_unused_parameters; whether the coming backward synchronises, decided here as in PyTorch).
-- With DDPLUA_DDP_TIMELINE=file, rank 0 writes a Chrome trace of every synchronised step
-- (ddp_timeline.lua beside this file; also written at exit; tools/ddp_predict.lua reads it).
-- process_group = g (from dist.new_group) reduces over g instead of the default group (PyTorch's
-- option): the model checks, the broadcast of g's first rank's parameters and every bucket.
-- DDPLUA_DISTRIBUTED_DEBUG=INFO (or DETAIL) logs the bucket layout to stderr at construction and
-- after the rebuild that follows the first iteration.
-- static_graph=true: the reducer finds the unused parameters in the first synchronised
-- iteration only (one graph walk, one exchange) and reuses them (docs/internals/reducer.md).
-- join: docs/internals/reducer.md describes the protocol (one small allreduce per forward).
local ddpl = require 'ddplua'
local Module = require 'ddplua.nn.Module'
local C = require 'ddplua.core.ddp'
local Cdist = require 'ddplua.core.dist'
local devices = require 'ddplua.nn.parallel.device_ids'
local PowerSGD = require 'ddplua.distributed.algorithms.powersgd'
local GradBucket = require 'ddplua.distributed.grad_bucket'
local Future = require 'ddplua.distributed.future'
local dist = ddpl.distributed
local timeline = require 'ddplua.nn.parallel.ddp_timeline'

local DDP = Module:extend('DistributedDataParallel')

local defaults = {bucket_cap_mb = 25, broadcast_buffers = true, find_unused_parameters = false,
    gradient_as_bucket_view = false, static_graph = false, device_ids = false,
    output_device = false, process_group = false, first_bucket_mb = 1}

local function fail(fmt, ...) error('DistributedDataParallel: ' .. fmt:format(...), 0) end

-- "[784, 256] float32" per parameter, compared across ranks: the first difference is named.
local function check_same_model(names, params, rank, world, pg)
    local n = #params
    -- the signatures travel on the parameters' device: an nccl group takes only CUDA tensors
    local dev = params[1] and params[1].device or 'cpu'
    local count = ddpl.tensor({n}, {dtype = 'int64', device = dev})
    local counts = {}
    for q = 1, world do counts[q] = ddpl.zeros({1}, {dtype = 'int64', device = dev}) end
    dist.all_gather(counts, count, {group = pg})
    for q = 1, world do
        local c = counts[q]:item()
        if c ~= n then
            fail('rank %d has %d parameters but rank %d has %d (every rank must wrap the same '
                .. 'model)', q - 1, c, rank, n)
        end
    end
    -- per parameter: ndim, 8 sizes, dtype code
    local width = 10
    local sig = {}
    local dtype_code = {float32 = 1, float64 = 2, float16 = 3, bfloat16 = 4}
    for i, p in ipairs(params) do
        local shape = p:shape()
        sig[#sig + 1] = #shape
        for d = 1, 8 do sig[#sig + 1] = shape[d] or 0 end
        sig[#sig + 1] = dtype_code[p.dtype] or 0
        assert(#sig == i * width)
    end
    local mine = ddpl.tensor(sig, {dtype = 'int64', device = dev})
    local all = {}
    for q = 1, world do all[q] = ddpl.zeros({n * width}, {dtype = 'int64', device = dev}) end
    dist.all_gather(all, mine, {group = pg})
    for q = 1, world do
        local theirs = all[q]:tolist()
        for i = 1, n do
            for k = 1, width do
                if theirs[(i - 1) * width + k] ~= sig[(i - 1) * width + k] then
                    local shape = {}
                    for d = 1, theirs[(i - 1) * width + 1] do
                        shape[d] = theirs[(i - 1) * width + 1 + d]
                    end
                    fail("parameter '%s' (index %d) has shape [%s] %s on rank %d but [%s] %s on "
                        .. 'rank %d (every rank must wrap the same model)', names[i], i - 1,
                        table.concat(shape, ', '), ({'float32', 'float64', 'float16',
                        'bfloat16'})[theirs[i * width]] or '?', q - 1,
                        table.concat(params[i]:shape(), ', '), params[i].dtype, rank)
                end
            end
        end
    end
end

-- from the group's rank src_in_group (default its first rank)
local function broadcast_all(tensors, pg, src_in_group)
    local works = {}
    local src = dist.get_global_rank(pg, src_in_group or 0)
    ddpl.no_grad(function()
        for i, t in ipairs(tensors) do
            works[i] = dist.broadcast(t, src, {async_op = true, group = pg})
        end
    end)
    for _, w in ipairs(works) do
        local ok, err = pcall(w.wait, w)
        if not ok then
            fail('broadcast of parameters or buffers from rank %d failed: %s', src,
                (tostring(err):gsub('^[^\n]-%.lua:%d+: ', '')))
        end
    end
end

function DDP:init(module, opts)
    if not Module.is(module) then
        error('DistributedDataParallel: expected an nn.Module to wrap, got ' .. type(module), 3)
    end
    local o = Module.options('DistributedDataParallel', opts, defaults)
    if not dist.is_initialized() then
        error('DistributedDataParallel: the default process group is not initialized (call '
            .. 'ddpl.distributed.init_process_group first)', 3)
    end
    if type(o.bucket_cap_mb) ~= 'number' or o.bucket_cap_mb <= 0 then
        error('DistributedDataParallel: bucket_cap_mb must be a positive number, got '
            .. tostring(o.bucket_cap_mb), 3)
    end
    local pg = o.process_group or dist.default_group()
    if not Cdist.is_group(pg) then
        error('DistributedDataParallel: process_group must be a process group (dist.new_group), '
            .. 'got ' .. type(pg), 3)
    end
    self.module = module
    local rank, world = dist.get_rank(pg), dist.get_world_size(pg)
    if rank < 0 then
        error(('DistributedDataParallel: rank %d is not a member of process_group (ranks %s)')
            :format(dist.get_rank(), table.concat(dist.get_process_group_ranks(pg), ', ')), 3)
    end
    local names, params = {}, {}
    for _, pair in ipairs(module:named_parameters()) do
        if pair[2].requires_grad then
            names[#names + 1], params[#params + 1] = pair[1], pair[2]
        end
    end
    -- before any collective: a rank that fails here must not leave the others waiting long
    local ok, device = pcall(devices.check, o.device_ids, o.output_device, params)
    if not ok then error(device, 3) end
    check_same_model(names, params, rank, world, pg)
    local all = {}
    for _, p in ipairs(module:parameters()) do all[#all + 1] = p end
    local buffers = module:buffers()
    for _, b in ipairs(buffers) do all[#all + 1] = b end
    broadcast_all(all, pg)
    -- the wrapper's state: a plain attribute (not a parameter, buffer or child)
    self._ddp = {
        opts = o, rank = rank, world = world, names = names, params = params, pg = pg,
        device = device, -- 'cuda:N' from device_ids: inputs are moved there
        buffers = buffers, sync = true, step = 0,
        log_buckets = Cdist.debug_level() ~= 'OFF',
        reducer = C.reducer(pg, params, names, {
            bucket_cap_mb = o.bucket_cap_mb, first_bucket_mb = o.first_bucket_mb,
            find_unused_parameters = o.find_unused_parameters,
            gradient_as_bucket_view = o.gradient_as_bucket_view, static_graph = o.static_graph}),
    }
    local trace = os.getenv('DDPLUA_DDP_TIMELINE')
    if trace and trace ~= '' and rank == 0 then
        self._ddp.timeline = timeline.new(self._ddp.reducer, trace, world, dist.get_backend(pg))
    end
    if self._ddp.log_buckets then self:_log_buckets('at construction') end
end

-- INFO: one line per bucket (index, bytes, parameter count and names), on stderr.
function DDP:_log_buckets(when)
    local s = self._ddp
    local b = self:buckets()
    local lines = {('ddplua: rank %d: DDP bucket layout %s (process group %d): %d bucket%s, %d '
        .. 'parameters'):format(dist.get_rank(), when, Cdist.group_id(s.pg), #b,
        #b == 1 and '' or 's', #s.params)}
    for i, names in ipairs(b) do
        lines[#lines + 1] = ('ddplua: rank %d:   bucket %d: %d bytes, %d parameters: %s')
            :format(dist.get_rank(), i - 1, names.bytes, #names, table.concat(names, ', '))
    end
    io.stderr:write(table.concat(lines, '\n'), '\n')
end

-- every tensor in a forward's result (a tensor, or tables of them)
local function collect(v, out, seen)
    if ddpl.is_tensor(v) then
        out[#out + 1] = v
    elseif type(v) == 'table' and not seen[v] then
        seen[v] = true
        for _, x in pairs(v) do collect(x, out, seen) end
    end
    return out
end

-- Writes the DDPLUA_DDP_TIMELINE trace now (it is also written every 50 steps and at exit).
function DDP:write_timeline()
    local tl = self._ddp.timeline
    if tl then tl:write() end
end

-- ---- join (PyTorch's Join context with DDP's _DDPJoinHook) ----
-- Every forward inside join, and every iteration a joined rank shadows, starts with one
-- allreduce (sum) of world + 1 int64s over the DDP group: slot r is 1 when group rank r has not
-- joined, the last slot counts the ranks whose coming backward synchronises. From it each rank
-- knows how many have not joined (0: all done), whether to shadow a backward, and the highest
-- rank not joined, which is the source of the buffer broadcast (a joined rank's buffers are
-- stale). Returns count, syncing, source (group rank, or nil when count is 0).
local function join_exchange(s, here, syncs)
    local v = {}
    for q = 1, s.world + 1 do v[q] = 0 end
    v[s.rank + 1] = here and 1 or 0
    v[s.world + 1] = syncs and 1 or 0
    local t = ddpl.tensor(v, {dtype = 'int64', device = s.params[1].device})
    dist.all_reduce(t, {group = s.pg})
    local got = t:tolist()
    local count, source = 0, nil
    for q = 1, s.world do
        count = count + got[q]
        if got[q] > 0 then source = q - 1 end
    end
    return count, got[s.world + 1] > 0, source
end

-- The divisor of this step's gradients, the same on every rank (the 2-rank shared-memory sum
-- scales both ranks' values with one rank's factor).
local function join_divisor(s, count)
    local ok, err = pcall(s.reducer.set_divisor, s.reducer,
        s.join.divide_by_initial_world_size and s.world or count)
    if not ok then error((tostring(err):gsub('^[^\n]-%.lua:%d+: ', '')), 0) end
end

-- prepare_forward (the bucket rebuild after the first iteration: a broadcast) and the buffer
-- broadcast, which every rank does at the start of a forward, joined or not.
local function forward_collectives(self, buffer_src)
    local s = self._ddp
    local ok, err = pcall(s.reducer.prepare_forward, s.reducer)
    if not ok then error((tostring(err):gsub('^[^\n]-%.lua:%d+: ', '')), 0) end
    if s.log_buckets and s.reducer:rebuilt() then
        s.log_buckets = false
        self:_log_buckets('rebuilt in gradient-ready order after the first iteration')
    end
    if s.opts.broadcast_buffers and #s.buffers > 0 and s.world > 1 then
        broadcast_all(s.buffers, s.pg, buffer_src)
    end
end

function DDP:forward(...)
    local s = self._ddp
    if s.timeline then s.timeline:forward_begins() end -- before a rebuild drops the last step
    local buffer_src
    if s.join then
        local count, _
        count, _, buffer_src = join_exchange(s, true, s.sync and ddpl.is_grad_enabled())
        join_divisor(s, count)
    end
    forward_collectives(self, buffer_src)
    local out = table.pack(self.module(devices.to_device(s.device, ...)))
    if ddpl.is_grad_enabled() then
        s.reducer:prepare_backward(collect(out, {}, {}), s.sync)
        s.step = s.step + 1
        if s.timeline then s.timeline:step_prepared(s.step, s.sync) end
    end
    return table.unpack(out, 1, out.n)
end

-- no_sync(fn, ...): forwards (and so the backwards that follow them) inside fn accumulate
-- gradients locally; the first synchronised backward after it reduces the accumulated sum.
function DDP:no_sync(fn, ...)
    local s = self._ddp
    local prev = s.sync
    s.sync = false
    local res = table.pack(pcall(fn, ...))
    s.sync = prev
    if not res[1] then error(res[2], 0) end
    return table.unpack(res, 2, res.n)
end

local join_defaults = {divide_by_initial_world_size = true, enable = true}

-- join([{divide_by_initial_world_size=true, enable=true},] fn, ...): runs fn(...) (a training
-- loop over this rank's batches) and returns its results. A rank whose fn returned shadows the
-- others' collectives (buffer broadcasts, and for each synchronised backward the buckets'
-- reductions with zeros and the used-parameter exchange) until every rank's fn has returned; the
-- last rank to finish then broadcasts its parameters and buffers to all (PyTorch's
-- _sync_final_model). The gradients are divided by the initial world size, or with
-- divide_by_initial_world_size=false by the number of ranks not joined yet at that step.
function DDP:join(opts, fn, ...)
    local s = self._ddp
    if type(opts) == 'function' then return self:join({}, opts, fn, ...) end
    if type(opts) ~= 'table' then
        error('join: expected an options table or a function, got ' .. type(opts), 2)
    end
    if type(fn) ~= 'function' then
        error('join: expected the function to run (the training loop), got ' .. type(fn), 2)
    end
    local o = Module.options('join', opts, join_defaults)
    if not o.enable then return fn(...) end
    if s.join then error('join: this DDP model is already inside join', 2) end
    s.join = {divide_by_initial_world_size = o.divide_by_initial_world_size}
    local res = table.pack(pcall(fn, ...))
    if not res[1] then
        -- as PyTorch's Join.__exit__: an error propagates at once (the others then fail at
        -- their next collective, by the group's timeout at the latest)
        s.join = nil
        pcall(s.reducer.set_divisor, s.reducer, s.world)
        error(res[2], 0)
    end
    local ok, err = pcall(function()
        local shadowed = 0
        while true do
            local count, syncing, src = join_exchange(s, false, false)
            if count == 0 then break end
            shadowed = shadowed + 1
            forward_collectives(self, src)
            if syncing then
                join_divisor(s, count)
                s.reducer:shadow_backward()
            end
        end
        -- the last to join (no iteration shadowed) hold the final model: the highest of them
        -- sends parameters and buffers
        local _, _, src = join_exchange(s, shadowed == 0, false)
        local all = {}
        for _, p in ipairs(self.module:parameters()) do all[#all + 1] = p end
        for _, b in ipairs(s.buffers) do all[#all + 1] = b end
        broadcast_all(all, s.pg, src)
    end)
    s.join = nil
    pcall(s.reducer.set_divisor, s.reducer, s.world)
    if not ok then error((tostring(err):gsub('^[^\n]-%.lua:%d+: ', '')), 0) end
    return table.unpack(res, 2, res.n)
end


-- The GradBucket (0-based index) a hook gets for bucket b (1-based) of the reducer's order.
local function grad_bucket(s, buffer, b)
    local all = s.reducer:buckets()
    local params = {}
    for i, k in ipairs(all[b]) do params[i] = s.params[k] end
    return GradBucket.new(buffer, b - 1, params, b == #all)
end

-- 'powersgd' with options or a PowerSGD.PowerSGDState: the state, whose group defaults to the
-- model's.
local function powersgd_state(s, state)
    if not PowerSGD.PowerSGDState.is_instance_of(state, PowerSGD.PowerSGDState) then
        state = PowerSGD.PowerSGDState(state)
    end
    state.process_group = state.process_group or s.pg
    return state
end

-- register_comm_hook(state, hook) as PyTorch, or (name_or_fn [, state]): hook(state, bucket)
-- gets a GradBucket (lua/ddplua/distributed/grad_bucket.lua: bucket:buffer() is the flat
-- gradient, summed neither across ranks nor divided) and returns a work/future whose wait()
-- gives the averaged values (dist.all_reduce(buf, {async_op=true}):then_(...)), or the tensor
-- itself. The names 'allreduce', 'fp16_compress' and 'bf16_compress' run the reducer's own C
-- paths (ddpl.distributed.algorithms.default_hooks has the same hooks written on this
-- interface); 'powersgd' takes PowerSGD's options or a PowerSGDState (powersgd.lua) and
-- returns the state (iter, compression_stats(), last_step_bytes).
local BUILTIN_HOOKS = {allreduce = true, fp16_compress = true, bf16_compress = true,
    powersgd = true}
function DDP:register_comm_hook(a, b)
    local s = self._ddp
    local hook, state = a, b
    if type(b) == 'function' and type(a) ~= 'function' and type(a) ~= 'string' then
        hook, state = b, a -- PyTorch's order
    end
    if type(hook) ~= 'function' and not BUILTIN_HOOKS[hook] then
        error("register_comm_hook: expected 'allreduce', 'fp16_compress', 'bf16_compress', "
            .. "'powersgd' or a function, got " .. (type(hook) == 'string' and "'" .. hook .. "'"
            or type(hook)), 2)
    end
    if hook == 'powersgd' then
        local ok, st = pcall(powersgd_state, s, state)
        if not ok then error('register_comm_hook: ' .. tostring(st), 2) end
        hook, state = PowerSGD.hook, st
    end
    if type(hook) == 'function' then
        local f = hook
        hook = function(st, buffer, idx)
            return Future.resolve('register_comm_hook', f(st, grad_bucket(s, buffer, idx)))
        end
    end
    local ok, err = pcall(s.reducer.set_comm_hook, s.reducer, hook, state)
    if not ok then error((tostring(err):gsub('^[^\n]-%.lua:%d+: ', '')), 2) end
    return state
end

-- buckets() -> { {names...}, ... } in reduction order (after the rebuild, the ready order)
function DDP:buckets()
    local s = self._ddp
    local out = {}
    for b, idx in ipairs(s.reducer:buckets()) do
        out[b] = {bytes = idx.bytes}
        for i, k in ipairs(idx) do out[b][i] = s.names[k] end
    end
    return out
end

-- The reducer's C object, for specs (bucket_tensor, rebuilt, timeline, graph_walks).
function DDP:_reducer() return self._ddp.reducer end

function DDP:extra_repr()
    local o = self._ddp.opts
    return ('bucket_cap_mb=%s, find_unused_parameters=%s, gradient_as_bucket_view=%s')
        :format(Module.repr(o.bucket_cap_mb), Module.repr(o.find_unused_parameters),
            Module.repr(o.gradient_as_bucket_view))
end

return DDP
