-- lua/ddplua/nn/parallel/fsdp_unit.lua: one unit of FullyShardedDataParallel: a module's own
-- parameters flattened into one buffer of world * shard_size elements (zero-padded at the end),
-- this rank's shard of it as the one parameter the optimizer sees, and what runs around the
-- module's forward and backward.
-- defines: Unit.new(module, path, params, cfg), unit.shard (nn.Parameter, registered on the
--          module as 'flat_param'), unit:pre_forward(), unit:post_forward(call, results),
--          unit:gather_full([dtype]) (the whole flat buffer, this rank's copy),
--          unit:device_shard([dtype]), unit.slots (name -> range, for state dicts),
--          unit:assign(flat), unit:assign_views(views), unit:clear(), unit:write_flat(flat),
--          unit.no_sync, Unit.forward_done(fwd, succeeded) (forward_prefetch's bookkeeping).
--
-- Forward (FULL_SHARD, SHARD_GRAD_OP): the shards are all-gathered into a temporary full
-- buffer; a Function (FSDPUnshard) from the shard to one view of that buffer per parameter
-- fills the module's parameter slots, so the module runs unchanged. Its backward gets every
-- parameter's gradient at once, writes them into one flat gradient (sharded: in the buffer's
-- own memory, which nothing reads any more), starts the reduce-scatter of that (a sum over
-- ranks) and frees the buffer once that has read it; when the outermost backward pass ends, each
-- reduction is waited for, divided by the world size (the average DDP computes) and added into
-- its shard's gradient. After the forward the slots get placeholders without memory (using one
-- outside the unit's forward and backward is refused with a message), and with FULL_SHARD the
-- buffer's memory is released at once (core.h, ddpl_storage_release_memory) while the graph's
-- saved views keep pointing at it; a hook on each result gathers it again and moves that memory
-- into it when the first gradient reaches the unit in backward (and starts gathering the unit
-- before it: backward_prefetch). SHARD_GRAD_OP keeps it from forward to backward (ZeRO-2).
-- NO_SHARD keeps the whole buffer as the "shard" on every rank and all-reduces its gradient:
-- DDP with one bucket per unit.
-- no_sync: the flat gradient is kept (summed) instead of reduced, and added to the next
-- synchronised one (a reduce-scatter of the sum is the sum of the reduce-scatters).
-- forward_prefetch starts the next unit's gather (in the order the first forward recorded) as
-- soon as this unit's shards are in; cpu_offload keeps the shard and its gradient in host
-- memory; with DDPLUA_FSDP_TIMELINE each gather, reduction and unit forward is traced
-- (fsdp_timeline.lua).
local ddpl = require 'ddplua'
local Parameter = require 'ddplua.nn.Parameter'
local Function = require 'ddplua.autograd_function'
local dist = ddpl.distributed

local Unit = {}
Unit.__index = Unit

local function fail(fmt, ...) error('FullyShardedDataParallel: ' .. fmt:format(...), 0) end

-- The slot table of module m's registered parameters (State's registry, module_state.lua).
local function param_values(m) return rawget(m, '__params').vals end

-- Gives every slot a view of its range of flat.
function Unit.assign(unit, flat)
    for _, s in ipairs(unit.slots) do
        param_values(s.module)[s.name] = flat:narrow(0, s.offset, s.numel):view(s.shape)
    end
end

-- Gives every slot its parameter's tensor from views (one per range, in flat order).
function Unit.assign_views(unit, views)
    for _, s in ipairs(unit.slots) do param_values(s.module)[s.name] = views[s.range] end
end

function Unit.clear(unit)
    for _, s in ipairs(unit.slots) do param_values(s.module)[s.name] = s.placeholder end
end

-- Unit.new(module, path, params, cfg): params is a list of {module, name, tensor} (the same
-- tensor may fill several slots: tied weights); cfg = {group, rank, world, strategy,
-- param_dtype, reduce_dtype, cpu_offload}. unit.device is where the module computes and the
-- collectives run; with cpu_offload on a CUDA module the shard and its gradient live in host
-- memory instead (unit.offload), as PyTorch's CPUOffload(offload_params=True): the optimizer
-- steps there, each gather copies the shard to the device first, and each reduced gradient
-- shard comes back; both host tensors are page-locked (pin_memory).
function Unit.new(module, path, params, cfg)
    local self = setmetatable({module = module, path = path, cfg = cfg, slots = {},
                               calls = {}, no_sync = false}, Unit)
    local ranges, order, numel, dtype, device = {}, {}, 0, nil, nil
    for _, p in ipairs(params) do
        local t = p[3]
        if not ranges[t] then
            dtype, device = dtype or t.dtype, device or t.device
            if t.dtype ~= dtype or t.device ~= device then
                fail('the parameters of unit %s mix %s on %s with %s on %s (one flat buffer '
                    .. 'per unit needs one dtype and device)', path == '' and '(root)' or path,
                    dtype, device, t.dtype, t.device)
            end
            ranges[t] = {offset = numel, numel = t:numel(), shape = t:shape(),
                         index = #order + 1}
            order[#order + 1] = t
            numel = numel + t:numel()
        end
        local r = ranges[t]
        self.slots[#self.slots + 1] = {module = p[1], name = p[2], key = p[4], range = r.index,
                                       offset = r.offset, numel = r.numel, shape = r.shape}
    end
    self.ranges = {} -- one per parameter tensor, in flat order
    for i, t in ipairs(order) do self.ranges[i] = ranges[t] end
    local world = cfg.world
    self.numel, self.dtype, self.device = numel, dtype, device
    self.sharded = cfg.strategy ~= 'NO_SHARD'
    self.shard_size = self.sharded and (numel + world - 1) // world or numel
    -- closed once the shard is copied out (below): its memory goes then, not when collected
    local flat <close> = ddpl.zeros({self.sharded and self.shard_size * world or numel},
                                    {dtype = dtype, device = device})
    ddpl.no_grad(function()
        for _, t in ipairs(order) do
            local r = ranges[t]
            flat:narrow(0, r.offset, r.numel):copy_(t:reshape(-1))
        end
    end)
    local mine <close> = self.sharded and
        flat:narrow(0, cfg.rank * self.shard_size, self.shard_size) or flat
    self.offload = cfg.cpu_offload and device ~= 'cpu' or false
    -- offloaded: in page-locked host memory, which the device reads and writes by DMA
    self.shard = Parameter(self.offload and mine:to('cpu'):pin_memory() or mine:clone())
    -- outside forward each slot holds a tensor of its shape without memory: any use of it is
    -- refused with a message, where nil would make the module fail obscurely. One element
    -- expanded to the shape: a placeholder of the parameter's size would be allocated only to
    -- be released, beside the parameter itself, and its block would stay in the host cache
    -- (the GPT 8 x 512's construction left three 4 MiB blocks there where two are ever used)
    for _, s in ipairs(self.slots) do
        local ones = {}
        for i = 1, #s.shape do ones[i] = 1 end
        local one <close> = ddpl.empty(ones, {dtype = dtype, device = device})
        s.placeholder = #ones > 0 and one:expand(s.shape) or one:view({})
        ddpl._release_memory(s.placeholder)
    end
    self:clear()
    module:register_parameter('flat_param', self.shard)
    return self
end

-- This rank's shard on the compute device in dtype (default the shard's), without history: a
-- copy when offloaded or cast, else the shard's own memory. Returns it and whether it is a copy.
function Unit:device_shard(dtype)
    local shard = self.shard:detach()
    local out = self.offload and shard:to(self.device) or shard
    if dtype and dtype ~= out.dtype then
        local cast = out:to(dtype)
        if not rawequal(out, shard) then
            local _ <close> = out
        end
        out = cast
    end
    return out, not rawequal(out, shard)
end

-- The whole flat buffer of this rank's copy (no history) in dtype (default the shard's; the
-- forward and backward ask for mixed_precision.param_dtype: as in PyTorch's FSDP the shard is
-- cast before the gather, which so moves half the bytes for 16-bit types and gives the same
-- values as casting after it): gathered, or the shard itself.
function Unit:gather_full(dtype)
    if not self.sharded then return (self:device_shard(dtype)) end
    local src, copied = self:device_shard(dtype)
    local full = ddpl.empty({self.shard_size * self.cfg.world}, {dtype = src.dtype,
                                                                   device = self.device})
    dist.all_gather_into_tensor(full, src, {group = self.cfg.group})
    if copied then
        local _ <close> = src
    end
    return full
end

-- Copies a whole unpadded flat buffer of numel values into this rank's shard.
function Unit:write_flat(flat)
    ddpl.no_grad(function()
        if self.sharded then
            local lo = self.cfg.rank * self.shard_size
            local n = math.max(0, math.min(self.shard_size, self.numel - lo))
            self.shard:zero_()
            if n > 0 then self.shard:narrow(0, 0, n):copy_(flat:narrow(0, lo, n)) end
        else
            self.shard:copy_(flat)
        end
    end)
end

-- the full buffer in the compute dtype (mixed_precision.param_dtype)
local function compute_copy(unit, full)
    local pd = unit.cfg.param_dtype
    if pd and pd ~= full.dtype then return full:to(pd) end
    return full
end

-- Closes boxes (Lua's <close>): the memory of a temporary goes when its last reference does,
-- not when the collector gets to the box (a whole unit's worth per box).
local function close_all(list)
    for i = #list, 1, -1 do
        local _ <close> = list[i]
    end
end

-- Reductions started in this backward pass and not yet finished: {unit, out, work, temps}, in
-- the order started. The first one queues finish_all to run when the outermost backward pass
-- ends (ddpl.autograd._queue_callback), so each unit's reduction overlaps the backward of the
-- units before it, as DDP's buckets do; at most MAX_INFLIGHT stay in flight, since each holds a
-- whole unit's gradient (all of them in flight at once would cost the model's full gradient).
-- One: the reduction of a unit overlaps the next unit's backward and is waited for when that
-- one's starts (GPT 8 x 512 on 4 ranks: the allocator's peak 141.5 MiB against 153.5 with 2;
-- on 2 ranks 4 x 256 the step took the same, 72.6-74.6 ms against 73.1-75.0).
local MAX_INFLIGHT = 1
local inflight

-- The unit's name in the timeline and in messages.
local function label(unit) return unit.path == '' and '(root)' or unit.path end

-- A span on the FSDP timeline (fsdp_timeline.lua), when there is one: tid 0 compute, 1
-- gathers, 2 reductions; bytes: what the collective moved into this rank's buffer.
local function trace(unit, name, tid, t1, t2, args)
    local tl = unit.cfg.timeline
    if tl then tl:span(name .. ' ' .. label(unit), tid, t1, t2, args) end
end

-- Waits for the oldest reduction and adds its average into its shard's gradient (only waits
-- after a failed backward pass: the gradients stay as they were).
local function finish_oldest(succeeded)
    local r = table.remove(inflight, 1)
    r.work:wait()
    trace(r.unit, r.kind, 2, r.t, ddpl.time(), {bytes = r.bytes})
    close_all(r.temps) -- the full gradient the reduction read
    if r.release then ddpl._release_memory(r.release) end
    if not succeeded then return end
    local unit, out = r.unit, r.out
    if r.round then -- the sum as a reduction in the 16-bit type gives it (Unit:reduce)
        local rounded = out:to(r.round)
        local _ <close> = out
        out = rounded
    end
    out:div_(unit.cfg.world)
    if out.dtype ~= unit.dtype then
        local wide = out:to(unit.dtype)
        local _ <close> = out
        out = wide
    end
    -- Every read of p.grad is a new box holding the gradient (and so its memory) until it is
    -- closed or collected; the shard's gradient is held by the shard alone once set (our box
    -- of it closed), so zero_grad's set_to_none frees it at once, not at the next collection
    -- (a whole model's gradient shards per step: 24 MiB on 4 ranks for the GPT 8 x 512).
    local p = unit.shard
    local pg <close> = p.grad
    if unit.offload then -- the gradient shard goes where the shard is: host memory
        local _ <close> = out
        if pg then -- accumulating over backward passes without zero_grad
            local host <close> = out:to('cpu')
            ddpl.no_grad(function() pg:add_(host) end)
            return
        end
        -- one page-locked gradient per unit, reused once the optimizer dropped the last
        -- (PyTorch's offloaded FSDP keeps one too)
        unit.host_grad = unit.host_grad or ddpl.empty({unit.shard_size},
                                                      {dtype = unit.dtype}):pin_memory()
        ddpl.no_grad(function() unit.host_grad:copy_(out) end)
        p.grad = unit.host_grad
        return
    end
    local _ <close> = out
    if pg then
        ddpl.no_grad(function() pg:add_(out) end)
    else
        p.grad = out
    end
end

-- A full collection once the Lua heap has grown by a tenth (and 64 KiB) since the last one
-- this ran, checked at the end of each backward pass. The binding paces the collector by the
-- growth of tensor memory (bind_tensor.c), which an FSDP step hardly shows: its unit-sized
-- buffers are released and reused, and each gradient shard goes at zero_grad. Its boxes,
-- closures and autograd nodes (each step's, made old by the minor collections the step itself
-- runs) then waited for a major collection of Lua's own and held the C heap meanwhile: GPT 8 x
-- 512 on 4 ranks, 11 MiB of heap after 60 steps and 19 after 150 against 3.5 before session
-- 43 (peak RSS over the baseline 148.5 and 156.3 MiB against 141.1 after 5 steps); with this
-- the heap stays under 3 MiB and the peak at 140.5 after 60 steps. That is a collection every
-- 2 to 4 steps there, 1 to 3 ms each on 2 ranks (the 2-core machine, loaded).
local gc_base_kb
local function pace_collector()
    if not collectgarbage('isrunning') then return end -- collectgarbage('stop') is the user's
    local kb = collectgarbage('count')
    if not gc_base_kb or kb < gc_base_kb then
        gc_base_kb = kb
    elseif kb > gc_base_kb * 1.1 + 64 then
        collectgarbage()
        gc_base_kb = collectgarbage('count')
    end
end

local function finish_all(succeeded)
    local t = ddpl.time()
    while #inflight > 0 do finish_oldest(succeeded) end
    if inflight.timeline then inflight.timeline:backward_done(t, ddpl.time()) end
    inflight = nil
    pace_collector()
end

-- Starts the reduction of the full buffer's gradient g into the shard's (nothing under
-- no_sync, which keeps g for the next synchronised pass instead). release: a tensor whose
-- storage g's memory is (the gathered buffer's, which Unshard.backward reuses), released once
-- the reduction has read it.
function Unit:reduce(g, release)
    local temps = {g} -- ours to drop once read
    local function temp(t)
        temps[#temps + 1] = t
        return t
    end
    g = temp(g:contiguous())
    if self.no_sync then
        local old = self.pending
        self.pending = old and old + g or g:clone()
        if old then temp(old) end
        close_all(temps)
        if release then ddpl._release_memory(release) end
        return
    end
    if self.pending then
        g = temp(g + temp(self.pending))
        self.pending = nil
    end
    local cfg = self.cfg
    local rd = cfg.reduce_dtype or g.dtype
    if g.dtype ~= rd then g = temp(g:to(rd)) end
    -- A host group (gloo, shared memory) reduces float32/float64/int64 only: a 16-bit reduction
    -- sums the ranks' rounded values in float32 and rounds the sum once (finish_oldest), as the
    -- DDP reducer's fp16/bf16 hooks do on such a group; nccl reduces in the 16-bit type itself.
    local round
    if (rd == 'bfloat16' or rd == 'float16') and cfg.backend ~= 'nccl' then
        round = rd
        g = temp(g:float())
    end
    local out, work
    local t = ddpl.time()
    if self.sharded then
        out = ddpl.empty({self.shard_size}, {dtype = g.dtype, device = self.device})
        work = dist.reduce_scatter_tensor(out, g, {group = cfg.group, async_op = true})
    else
        out = g:clone() -- the engine's gradient is not ours to overwrite
        work = dist.all_reduce(out, {group = cfg.group, async_op = true})
    end
    if not inflight then
        inflight = {timeline = cfg.timeline}
        ddpl.autograd._queue_callback(finish_all)
    end
    if cfg.timeline then cfg.timeline:backward_event(t) end
    inflight[#inflight + 1] = {unit = self, out = out, work = work, temps = temps,
                               release = release, round = round, t = t,
                               kind = self.sharded and 'reduce_scatter' or 'all_reduce',
                               bytes = out:numel() * out:element_size()}
    while #inflight > MAX_INFLIGHT do finish_oldest(true) end
end

-- FSDPUnshard: shard -> every parameter of the unit, as views of the full buffer. One node
-- with an output per parameter (autograd.Function calls backward once with all their
-- gradients), which writes them into one flat gradient: the same as views taken with history
-- from the buffer, whose backward would give each parameter's gradient as a zero-filled
-- buffer-sized tensor, summed one by one (1.45x DDP's step on 1 rank that way).
local Unshard = Function:extend('FSDPUnshard')

function Unshard.forward(ctx, call, _, full)
    ctx:set_materialize_grads(false) -- a parameter that got no gradient: zeros written below
    ctx.call = call
    local views = {}
    for i, r in ipairs(call.unit.ranges) do
        views[i] = full:narrow(0, r.offset, r.numel):view(r.shape)
    end
    return table.unpack(views)
end

-- Sharded, the flat gradient takes the gathered buffer's own memory: this node runs once every
-- node that read the unit's parameters has run (each parameter's gradient is final), so nothing
-- reads the buffer again; writing it moves the storage's version, so a saved view of it that
-- were still read (one taken outside the parameters' history) would be refused, not misread.
-- That saves a unit-sized buffer per reduction in flight (GPT 8 x 512, 4 ranks, batch 1: the
-- allocator's peak over a step 165.4 -> 153.6 MiB; bench/README.md, 'Session 43: FSDP peak RSS').
-- NO_SHARD's buffer is the shard itself (or its cast copy): a fresh gradient there.
function Unshard.backward(ctx, ...)
    local call = ctx.call
    local unit = call.unit
    local g = unit.sharded and call.full:detach() or
        ddpl.empty({call.full:numel()}, {dtype = call.full.dtype, device = unit.device})
    ddpl.no_grad(function(...)
        for i, r in ipairs(unit.ranges) do
            local gi <close> = select(i, ...) -- the engine's box, ours to drop once copied
            local dst = g:narrow(0, r.offset, r.numel)
            if gi then dst:view(r.shape):copy_(gi) else dst:zero_() end
        end
        local pad = g:numel() - unit.numel
        if pad > 0 then g:narrow(0, unit.numel, pad):zero_() end
    end, ...)
    -- the shard's gradient arrives when the backward pass ends; the buffer's memory goes once
    -- the reduction has read it
    unit:reduce(g, unit.sharded and call.full or nil)
    call.done = true
    return nil, nil, nil
end

-- Before the module's forward: the full parameters in the slots. Returns this call's state.
-- The recorded call made just before the next one (weak: a graph that dies takes its calls): in
-- backward the units run in the reverse order of their forwards, so a call's predecessor is the
-- next to gather again, and its gather can start while this one computes (backward_prefetch).
local last_recorded = setmetatable({}, {__mode = 'v'})

-- Starts gathering a unit's shards (in the compute dtype) into new memory, without waiting:
-- {buf, work, src, copied, t}.
-- The memory of the newest reduction in flight, for a gather of n elements of dtype on device
-- issued after it on the same group (nil when there is none of that size): a group runs its
-- collectives one at a time in issue order (a host group's collective lane, an nccl group's
-- stream), so the reduce-scatter has read that memory before the gather writes it. In backward
-- the prefetch of unit k-1 is issued while unit k+1's reduction is in flight; sharing their
-- memory keeps two unit-sized buffers at the backward's peak instead of three (GPT 8 x 512, 4
-- ranks, batch 1: peak RSS over the baseline 154.6 -> 142.7 MiB). The gathered memory later
-- moves into unit k-1's buffer (regather), which leaves unit k+1's released, as the reduction's
-- end would have.
local function reduced_memory(n, dtype, device, group)
    local r = inflight and inflight[#inflight]
    local m = r and r.release
    if not m or r.unit.cfg.group ~= group or m:numel() ~= n or m.dtype ~= dtype or
        m.device ~= device then
        return nil
    end
    r.release = nil -- its memory is the gather's now: not released when the reduction ends
    return m:detach()
end

local function start_gather(unit)
    local src, copied = unit:device_shard(unit.cfg.param_dtype) -- kept until waited for
    local n = unit.shard_size * unit.cfg.world
    local buf = reduced_memory(n, src.dtype, unit.device, unit.cfg.group) or
        ddpl.empty({n}, {dtype = src.dtype, device = unit.device})
    local t = ddpl.time()
    local work = dist.all_gather_into_tensor(buf, src, {group = unit.cfg.group, async_op = true})
    return {buf = buf, work = work, src = src, copied = copied, t = t}
end

-- Waits for a gather start_gather began; returns its buffer.
local function finish_gather(unit, g, phase)
    g.work:wait()
    trace(unit, 'all_gather', 1, g.t, ddpl.time(), {bytes = g.buf:numel() * g.buf:element_size(),
                                                     prefetch = 1, phase = phase})
    if g.copied then
        local _ <close> = g.src
    end
    return g.buf
end

-- The gathered flat buffer for a forward: from the forward prefetch when one was started.
local function forward_full(unit)
    local pre = unit.fwd_prefetched
    if pre then
        unit.fwd_prefetched = nil
        return finish_gather(unit, pre, 'forward')
    end
    local t = ddpl.time()
    local full = unit:gather_full(unit.cfg.param_dtype)
    if unit.sharded then
        trace(unit, 'all_gather', 1, t, ddpl.time(), {bytes = full:numel() * full:element_size(),
                                                       prefetch = 0, phase = 'forward'})
    end
    return full
end

-- Forward prefetch (PyTorch's forward_prefetch): the first forward of the root (cfg.fwd.active,
-- set by FullyShardedDataParallel:forward) records the order in which the units gather; from
-- the second on, each unit, once its own shards are gathered, starts gathering the next unit's
-- in that order, so the gather runs while this unit computes. Every rank follows the same
-- order, so the collectives stay matched.
local function forward_order(unit)
    local fwd = unit.cfg.fwd
    if not fwd.active then return end -- a recomputation in backward (checkpoint) or a bare call
    if not fwd.frozen then
        if not fwd.seen[unit] then
            fwd.seen[unit] = true
            fwd.order[#fwd.order + 1] = unit
        end
    elseif unit.cfg.forward_prefetch then
        local nxt = unit.fwd_next
        if nxt and nxt.sharded and not nxt.fwd_prefetched then
            nxt.fwd_prefetched = start_gather(nxt)
        end
    end
end

-- After the root's forward: the order is kept from the first one, and a prefetch the forward
-- did not use (a unit it skipped) is dropped: the optimizer may change the shards before the
-- next forward. A first forward that failed records nothing.
function Unit.forward_done(fwd, succeeded)
    if not fwd.frozen and not succeeded then
        fwd.order, fwd.seen = {}, {}
    elseif not fwd.frozen then
        fwd.frozen = true
        for i, u in ipairs(fwd.order) do u.fwd_next = fwd.order[i + 1] end
    end
    for _, u in ipairs(fwd.order) do
        local pre = u.fwd_prefetched
        if pre then
            u.fwd_prefetched = nil
            pre.work:wait()
            local _ <close> = pre.buf
            if pre.copied then
                local _ <close> = pre.src
            end
        end
    end
end

function Unit:pre_forward()
    local call = {unit = self}
    local full = forward_full(self)
    forward_order(self)
    call.full = compute_copy(self, full)
    if ddpl.is_grad_enabled() and self.shard.requires_grad then
        self:assign_views(table.pack(Unshard.apply(call, self.shard, call.full)))
        call.recorded = true
        if self.cfg.strategy == 'FULL_SHARD' then
            call.before = setmetatable({last_recorded[1]}, {__mode = 'v'})
            last_recorded[1] = call
        end
    else
        self:assign(call.full)
    end
    call.t_forward = ddpl.time()
    return call
end

-- Gathers the shards again into a call's released buffer (FULL_SHARD, before its backward),
-- from the prefetch when one was started, and starts the prefetch of the call before it.
local function regather(call)
    if call.gathered_again or call.done then return end
    call.gathered_again = true
    local unit = call.unit
    local tl = unit.cfg.timeline
    if tl then tl:backward_event(ddpl.time()) end
    local gathered
    if call.prefetched then
        gathered = finish_gather(unit, call.prefetched, 'backward')
        call.prefetched = nil
    else
        local t = ddpl.time()
        gathered = unit:gather_full(unit.cfg.param_dtype)
        trace(unit, 'all_gather', 1, t, ddpl.time(), {bytes = gathered:numel() *
            gathered:element_size(), prefetch = 0, phase = 'backward'})
    end
    local before = call.before and call.before[1]
    if unit.cfg.prefetch and before and not before.gathered_again and not before.done and
        not before.prefetched then
        before.prefetched = start_gather(before.unit)
    end
    -- moved into the released storage under the saved views without a version change (a copy_
    -- would make them look modified in place): the gathered memory itself when it has the
    -- compute dtype (always, unless mixed_precision's param_dtype differs from the shard's and
    -- the gather could not cast first), so no second unit-sized buffer exists at this point
    local g <close> = gathered
    local cast = compute_copy(unit, gathered)
    if rawequal(cast, gathered) then
        ddpl._restore_memory(call.full, gathered, true)
    else
        local c <close> = cast
        ddpl._restore_memory(call.full, c)
    end
end

-- The tensors among a forward's results (one level of tables: LSTM's {h, c}).
local function result_tensors(results, out)
    for i = 1, results.n or #results do
        local v = results[i]
        if ddpl.is_tensor(v) then
            out[#out + 1] = v
        elseif type(v) == 'table' and getmetatable(v) == nil then
            result_tensors(v, out)
        end
    end
    return out
end

-- After the module's forward: empty the slots; with FULL_SHARD release the buffer and hook the
-- results so that the first gradient reaching them gathers it again.
function Unit:post_forward(call, results)
    trace(self, 'forward', 0, call.t_forward, ddpl.time())
    self:clear()
    if not self.sharded then return end
    if not call.recorded then
        ddpl._release_memory(call.full)
        return
    end
    if self.cfg.strategy ~= 'FULL_SHARD' then return end
    local hooked = false
    for _, t in ipairs(result_tensors(results, {})) do
        if t.requires_grad then
            t:register_hook(function() regather(call) end)
            hooked = true
        end
    end
    -- no result carries the graph back here: nothing will need the buffer again
    ddpl._release_memory(call.full)
    if not hooked then call.done = true end
end

return Unit
