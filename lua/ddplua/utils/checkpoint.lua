-- lua/ddplua/utils/checkpoint.lua: activation checkpointing (PyTorch's
-- torch.utils.checkpoint): trade compute for memory by recomputing a segment in backward
-- instead of keeping its intermediate activations.
-- defines: checkpoint.checkpoint(fn, ...) -> fn(...)'s results;
--          checkpoint.checkpoint_sequential(seq, segments, x) -> seq(x);
--          checkpoint.checkpoint_wrapper(module) -> a module running module under checkpoint.
--
-- checkpoint runs fn under no_grad (nothing it computes inside is kept), remembering its
-- arguments and the RNG state. In backward it restores that RNG state (dropout draws the same
-- mask), runs fn again with recording on, over detached copies of the tensor arguments, and
-- runs backward through that recomputed graph from inside the outer one: the parameters fn
-- uses get their gradients accumulated there (and DDP's hooks fire), and the arguments'
-- gradients flow on. This is PyTorch's reentrant checkpoint; the engine sets aside the
-- scratch that the outer pass keeps on nodes the two passes share (engine/autograd/engine.c).
-- Unlike PyTorch's reentrant form, the parameters inside get gradients even when no argument
-- requires grad (the first block of a network): a hidden argument always does.
-- Limits, as PyTorch's reentrant form: autograd.grad with inputs inside fn, create_graph
-- through a checkpoint and DDP's find_unused_parameters (its graph walk does not see the
-- parameters inside) are not supported.
local ddpl = require 'ddplua.core'
local Function = require 'ddplua.autograd_function'

local is_tensor = ddpl.is_tensor
local M = {}

local Checkpoint = Function:extend('CheckpointFunction')

-- apply(fn, always, ...): `always` is the hidden 0-dim tensor that requires grad
function Checkpoint.forward(ctx, fn, _, ...)
    ctx:set_materialize_grads(false) -- an unused result costs nothing in backward
    ctx.fn, ctx.rng, ctx.args = fn, ddpl.get_rng_state(), table.pack(...)
    return fn(...)
end

function Checkpoint.backward(ctx, ...)
    if ddpl.is_grad_enabled() then
        error('checkpoint: create_graph (double backward) through a checkpoint is not supported',
              0)
    end
    local grads, args = table.pack(...), ctx.args
    local detached = { n = args.n }
    for i = 1, args.n do
        local v = args[i]
        if is_tensor(v) then
            local d = v:detach()
            d.requires_grad = v.requires_grad
            v = d
        end
        detached[i] = v
    end
    -- recompute with the forward's RNG state, then give the outer stream its own back
    local outer_rng = ddpl.get_rng_state()
    ddpl.set_rng_state(ctx.rng)
    local ok, outs = pcall(function()
        return table.pack(ddpl.enable_grad(ctx.fn, table.unpack(detached, 1, detached.n)))
    end)
    ddpl.set_rng_state(outer_rng)
    if not ok then error(outs, 0) end
    -- backward through the recomputed graph: one root, sum over the results of <out, grad>
    local root = ddpl.enable_grad(function() -- backward runs with recording off
        local sum
        for i = 1, outs.n do
            local o, g = outs[i], grads[i]
            if is_tensor(o) and o.requires_grad and g ~= nil then
                local term = (o * g):sum()
                sum = sum and sum + term or term
            end
        end
        return sum
    end)
    if root then root:backward() end
    local ret = { n = args.n + 2 } -- nil for fn and the hidden tensor
    for i = 1, args.n do
        local d = detached[i]
        if is_tensor(d) and d.requires_grad then ret[i + 2] = d.grad end
    end
    return table.unpack(ret, 1, ret.n)
end

-- checkpoint(fn, ...): fn(...)'s results, with its activations recomputed in backward
function M.checkpoint(fn, ...)
    if type(fn) ~= 'function' and not (getmetatable(fn) or {}).__call then
        error(('checkpoint: expected a function (or a module) as the first argument, got %s')
            :format(type(fn)), 2)
    end
    if not ddpl.is_grad_enabled() then return fn(...) end
    local always = ddpl.zeros({}, { dtype = 'float32' })
    always.requires_grad = true
    return Checkpoint.apply(fn, always, ...)
end

-- checkpoint_wrapper(module): a module whose forward is checkpoint(module, ...) (PyTorch's
-- checkpoint_wrapper); wrapping FSDP units this way checkpoints them from outside, as FSDP needs
local CheckpointWrapper
function M.checkpoint_wrapper(module)
    local Module = require 'ddplua.nn.Module'
    if not Module.is(module) then
        error(('checkpoint_wrapper: expected a module, got %s'):format(type(module)), 2)
    end
    if not CheckpointWrapper then
        CheckpointWrapper = Module:extend('CheckpointWrapper')
        function CheckpointWrapper:init(m) self.module = m end
        function CheckpointWrapper:forward(...) return M.checkpoint(self.module, ...) end
    end
    return CheckpointWrapper(module)
end

-- checkpoint_sequential(seq, segments, x): seq(x) with seq's modules in `segments` runs of
-- consecutive modules, each but the last checkpointed (PyTorch's split: equal runs, the last
-- taking the rest)
function M.checkpoint_sequential(seq, segments, x)
    local mods = {}
    if type(seq) == 'table' and seq.named_children_all then
        for _, pair in ipairs(seq:named_children_all()) do mods[#mods + 1] = pair[2] end
    elseif type(seq) == 'table' and getmetatable(seq) == nil then
        mods = seq
    else
        error('checkpoint_sequential: expected an nn.Sequential or a list of modules, got '
            .. type(seq), 2)
    end
    if math.type(segments) ~= 'integer' or segments < 1 then
        error(('checkpoint_sequential: segments must be a positive integer, got %s')
            :format(tostring(segments)), 2)
    end
    local function run_range(first, last)
        return function(input)
            for i = first, last do input = mods[i](input) end
            return input
        end
    end
    local size = #mods // segments
    local last_start = 1
    if size > 0 then
        for s = 0, segments - 2 do
            local first, last = s * size + 1, (s + 1) * size
            x = M.checkpoint(run_range(first, last), x)
            last_start = last + 1
        end
    end
    return run_range(last_start, #mods)(x)
end

return M
