-- lua/ddplua/distributed/algorithms/powersgd.lua: the PowerSGD gradient compression comm hook of
-- DistributedDataParallel (Vogels, Karimireddy, Jaggi 2019, arXiv:1905.13727), as PyTorch's
-- torch.distributed.algorithms.ddp_comm_hooks.powerSGD_hook.
-- defines: PowerSGDState(opts) (the hyperparameters and the memory of the algorithm),
--          state:compression_stats(), hook(state, bucket), also named powerSGD_hook as in
--          PyTorch (the comm-hook interface: bucket is a GradBucket; a completed future of its
--          buffer, holding the averaged values), orthogonalize(mat, epsilon).
--
-- DistributedDataParallel:register_comm_hook('powersgd', opts_or_state), or
-- register_comm_hook(state, PowerSGD.hook), calls hook for every bucket of a synchronised
-- backward. The bucket's buffer is flat (numel = the sum of the parameters' numels, no padding,
-- in the order of bucket:parameters()), holds this rank's own gradients (not divided by the
-- world size) and is overwritten with the result.
--
-- Per bucket, as PyTorch's powerSGD_hook:
--   * the first start_powerSGD_iter steps are plain allreduce (divide by the world size, sum);
--     state.iter counts steps (raised after the last bucket of each);
--   * then, with error feedback, the bucket gets the local error of the previous step added
--     (M += e); each gradient is viewed as a matrix M (n = size(0), m = numel / n, a 0-dim or
--     1-D tensor as n x 1) and compressed only where (n + m) r * min_compression_rate < n m with
--     r = min(n, m, matrix_approximation_rank): the others (biases, small layers) are
--     allreduced together, uncompressed;
--   * for each compressed M: Q (m x r) is, with warm start, last step's Q, else standard normal
--     from a seed that a generator seeded with random_seed gives every rank alike (the process's
--     own generator is left as it was); Q is orthogonalised (Gram-Schmidt), P = M Q (n x r),
--     the Ps of the bucket are summed across ranks in one allreduce and orthogonalised,
--     Q = M^T P, the Qs summed in one allreduce and divided by the world size, and the
--     gradient becomes P Q^T (rank r, the average's projection onto the span of P);
--   * with error feedback the local error e = M - P Q^T is kept for the next step.
-- Where r = min(n, m) the result is the exact average (P spans the average's columns).
-- Memory is per bucket number; PyTorch's rule that start_powerSGD_iter > 1 when error feedback
-- or warm start is on keeps it away from DDP's rebuild of the buckets after the first step.
--
-- One difference from PyTorch: Gram-Schmidt leaves a column whose norm is 0 at 0 where PyTorch
-- (orthogonalization_epsilon = 0) divides 0 by 0 and fills the gradient with NaN; this is the
-- limit of PyTorch's epsilon > 0 case, so a layer whose gradient vanishes (or is unused) stays 0.
--
-- Bytes: state.step_bytes counts what this rank puts into allreduces in the current step and
-- state.last_step_bytes that of the last finished step (a ring allreduce sends 2 (N - 1) / N
-- times that over the network per rank).
local ddpl = require 'ddplua'
local class = require 'ddplua.class'
local dist = ddpl.distributed
local Future = require 'ddplua.distributed.future'
local args = require 'ddplua.distributed.algorithms.hook_args'

local M = {}

local PowerSGDState = class.new('PowerSGDState')
M.PowerSGDState = PowerSGDState

local defaults = {matrix_approximation_rank = 1, start_powerSGD_iter = 2,
    min_compression_rate = 2, use_error_feedback = true, warm_start = true,
    orthogonalization_epsilon = 0, random_seed = 0, process_group = false}

local function fail(fmt, ...) error('PowerSGDState: ' .. fmt:format(...), 0) end

local function check_int(opts, key, min)
    local v = type(opts[key]) == 'number' and math.tointeger(opts[key])
    if not v or v < min then
        fail('%s must be an integer >= %d, got %s', key, min, tostring(opts[key]))
    end
    opts[key] = v
end

local function check_bool(opts, key)
    if type(opts[key]) ~= 'boolean' then
        fail('%s must be a boolean, got %s', key, tostring(opts[key]))
    end
end

local function check_number(opts, key)
    local v = opts[key]
    if type(v) ~= 'number' or v ~= v or v < 0 or v == math.huge then
        fail('%s must be a finite number >= 0, got %s', key, tostring(v))
    end
end

-- PowerSGDState({matrix_approximation_rank=1, start_powerSGD_iter=2, min_compression_rate=2,
-- use_error_feedback=true, warm_start=true, orthogonalization_epsilon=0, random_seed=0,
-- process_group}): process_group defaults to the DDP model's group when the hook is registered.
function PowerSGDState:init(opts)
    if opts ~= nil and type(opts) ~= 'table' then
        fail('expected an options table, got %s', type(opts))
    end
    local o = {}
    for k, v in pairs(defaults) do o[k] = v end
    for k, v in pairs(opts or {}) do
        if defaults[k] == nil then
            local known = {}
            for name in pairs(defaults) do known[#known + 1] = name end
            table.sort(known)
            fail("unknown option '%s' (known: %s)", tostring(k), table.concat(known, ', '))
        end
        o[k] = v
    end
    check_int(o, 'matrix_approximation_rank', 1)
    check_int(o, 'start_powerSGD_iter', 0)
    check_int(o, 'random_seed', 0)
    check_number(o, 'min_compression_rate')
    check_number(o, 'orthogonalization_epsilon')
    check_bool(o, 'use_error_feedback')
    check_bool(o, 'warm_start')
    if (o.use_error_feedback or o.warm_start) and o.start_powerSGD_iter <= 1 then
        fail('start_powerSGD_iter must be > 1 when use_error_feedback or warm_start is on, got '
            .. '%d (DistributedDataParallel rebuilds its buckets after the first iteration, '
            .. 'which would invalidate the memory PowerSGD keeps per bucket)',
            o.start_powerSGD_iter)
    end
    for k, v in pairs(o) do self[k] = v end
    self.process_group = o.process_group or nil
    self.iter = 0
    self.rng = o.random_seed -- SplitMix64 state, advanced for every random initialisation
    self.error_dict, self.p_memory_dict, self.q_memory_dict = {}, {}, {}
    self.numel_dict = {}    -- bucket number -> numel, to catch a changed layout
    self.total_numel_before_compression, self.total_numel_after_compression = 0, 0
    self.step_bytes, self.last_step_bytes = 0, 0
end

-- (compression rate, numel before, numel after) summed over every compressed bucket so far
function PowerSGDState:compression_stats()
    local before, after = self.total_numel_before_compression, self.total_numel_after_compression
    return after > 0 and before / after or 0, before, after
end

function PowerSGDState:__tostring()
    return ('PowerSGDState(matrix_approximation_rank=%d, start_powerSGD_iter=%d, iter=%d)')
        :format(self.matrix_approximation_rank, self.start_powerSGD_iter, self.iter)
end

-- A seed in [0, 1e9) for the next random Q, the same on every rank (SplitMix64, Steele, Lea,
-- Flood 2014; PyTorch draws it from numpy's RandomState(random_seed)).
local function next_seed(state)
    state.rng = state.rng + 0x9E3779B97F4A7C15
    local z = state.rng
    z = (z ~ (z >> 30)) * 0xBF58476D1CE4E5B9
    z = (z ~ (z >> 27)) * 0x94D049BB133111EB
    z = z ~ (z >> 31)
    return (z >> 1) % 1000000000
end

-- Gram-Schmidt on the columns of a (k x r) matrix, in place: each column is normalised (divided
-- by its norm + epsilon; a zero column stays zero) and removed from the columns after it.
local function orthogonalize(mat, epsilon)
    if not ddpl.is_tensor(mat) or mat:dim() ~= 2 or not mat:is_floating_point() then
        error(('orthogonalize: expected a 2-D floating-point tensor (k x r), got %s'):format(
            ddpl.is_tensor(mat) and mat:dim() .. '-D ' .. tostring(mat.dtype) or type(mat)), 2)
    end
    if type(epsilon) ~= 'number' or not (epsilon >= 0) then
        error(('orthogonalize: expected a number >= 0 as epsilon, got %s'):format(
            tostring(epsilon)), 2)
    end
    local r = mat:size(1)
    for i = 0, r - 1 do
        local col = mat:narrow(1, i, 1) -- (k, 1)
        local norm = col:norm():item()
        if norm + epsilon > 0 then col:div_(norm + epsilon) end
        if i + 1 < r then
            local rest = mat:narrow(1, i + 1, r - i - 1) -- (k, r - i - 1)
            rest:add_((col * rest):sum(0) * col, -1)
        end
    end
end
M.orthogonalize = orthogonalize

local ELEMENT_BYTES = {float32 = 4, float64 = 8, float16 = 2, bfloat16 = 2}

local function allreduce(state, t)
    state.step_bytes = state.step_bytes + t:numel() * (ELEMENT_BYTES[t.dtype] or 4)
    dist.all_reduce(t, {group = state.process_group})
end

local function end_of_bucket(state, layout)
    if layout.last then
        state.iter = state.iter + 1
        state.last_step_bytes, state.step_bytes = state.step_bytes, 0
    end
end

-- One bucket: the flat buffer and its layout = {shapes = per-parameter shapes in bucket order,
-- index = bucket number (1-based), last = whether it is the last bucket of the step}; returns the
-- buffer, holding the averaged (or approximated) gradients.
local function hook_flat(state, bucket, layout)
    local world = args.world_size('powerSGD_hook', state.process_group)
    if state.iter < state.start_powerSGD_iter then
        -- PyTorch's allreduce hook: scaled first (no overflow in 16-bit types), then summed;
        -- by 1 / world as the reducer's own allreduce, so the results are the same bit for bit
        bucket:mul_(1 / world)
        allreduce(state, bucket)
        end_of_bucket(state, layout)
        return bucket
    end
    local b, total = layout.index, bucket:numel()
    if state.numel_dict[b] and state.numel_dict[b] ~= total then
        error(('powerSGD_hook: bucket %d holds %d elements but held %d when PowerSGD started (the '
            .. 'buckets were rebuilt after start_powerSGD_iter = %d)'):format(b, total,
            state.numel_dict[b], state.start_powerSGD_iter), 0)
    end
    state.numel_dict[b] = total
    local input_copy
    if state.use_error_feedback then
        if state.error_dict[b] then
            bucket:add_(state.error_dict[b])
        else
            state.error_dict[b] = ddpl.zeros({total}, {dtype = bucket.dtype,
                device = bucket.device})
        end
        input_copy = bucket:clone()
    end

    -- I: which gradients are compressed (as n x m matrices) and which are allreduced as they are
    local matrices, ranks, plain = {}, {}, {}
    local p_size, q_size, offset = 0, 0, 0
    for _, shape in ipairs(layout.shapes) do
        local numel = 1
        for _, d in ipairs(shape) do numel = numel * d end
        local grad = bucket:narrow(0, offset, numel)
        offset = offset + numel
        local n = #shape >= 1 and shape[1] or 1
        local m = n > 0 and numel // n or 0
        local r = math.min(n, m, state.matrix_approximation_rank)
        state.total_numel_before_compression = state.total_numel_before_compression + numel
        if numel > 0 and (n + m) * r * state.min_compression_rate < numel then
            matrices[#matrices + 1], ranks[#ranks + 1] = grad:view(n, m), r
            p_size, q_size = p_size + n * r, q_size + m * r
            state.total_numel_after_compression = state.total_numel_after_compression
                + (n + m) * r
        else
            plain[#plain + 1] = grad
            state.total_numel_after_compression = state.total_numel_after_compression + numel
        end
    end
    assert(offset == total, 'PowerSGD: the layout does not cover the bucket')

    -- II: the uncompressed gradients, allreduced in one flat buffer and averaged
    if #plain > 0 then
        local flat = #plain == 1 and plain[1]:clone() or ddpl.cat(plain, 0)
        allreduce(state, flat)
        flat:div_(world)
        local at = 0
        for _, g in ipairs(plain) do
            g:copy_(flat:narrow(0, at, g:numel()))
            at = at + g:numel()
        end
    end

    -- III: the low-rank approximations
    if #matrices > 0 then
        local fresh = not state.warm_start or not state.q_memory_dict[b]
        if fresh then
            state.p_memory_dict[b] = ddpl.empty({p_size}, {dtype = bucket.dtype,
                device = bucket.device})
            state.q_memory_dict[b] = ddpl.empty({q_size}, {dtype = bucket.dtype,
                device = bucket.device})
        end
        local pmem, qmem = state.p_memory_dict[b], state.q_memory_dict[b]
        local ps, qs, pi, qi = {}, {}, 0, 0
        for k, mat in ipairs(matrices) do
            local n, m, r = mat:size(0), mat:size(1), ranks[k]
            ps[k] = pmem:narrow(0, pi, n * r):view(n, r)
            qs[k] = qmem:narrow(0, qi, m * r):view(m, r)
            pi, qi = pi + n * r, qi + m * r
        end
        if fresh then
            -- drawn on the CPU from a seed every rank shares, then copied to the bucket's device
            local saved = ddpl.get_rng_state()
            ddpl.manual_seed(next_seed(state))
            for _, q in ipairs(qs) do
                q:copy_(ddpl.randn(q:size(0), q:size(1), {dtype = bucket.dtype}))
            end
            ddpl.set_rng_state(saved)
        end
        for _, q in ipairs(qs) do orthogonalize(q, state.orthogonalization_epsilon) end
        for k, mat in ipairs(matrices) do ps[k]:copy_(mat:matmul(qs[k])) end
        allreduce(state, pmem) -- summed: orthogonalised next, so no division
        for _, p in ipairs(ps) do orthogonalize(p, state.orthogonalization_epsilon) end
        for k, mat in ipairs(matrices) do qs[k]:copy_(mat:t():matmul(ps[k])) end
        allreduce(state, qmem)
        qmem:div_(world)
        for k, mat in ipairs(matrices) do mat:copy_(ps[k]:matmul(qs[k]:t())) end
        if not state.warm_start then
            state.p_memory_dict[b], state.q_memory_dict[b] = nil, nil
        end
    end

    if state.use_error_feedback then
        state.error_dict[b] = input_copy:add_(bucket, -1) -- what this rank's step left out
    end
    end_of_bucket(state, layout)
    return bucket
end

function M.hook(state, grad_bucket)
    if not (type(state) == 'table' and PowerSGDState.is_instance_of(state, PowerSGDState)) then
        error(('powerSGD_hook: expected a PowerSGDState as argument 1 (hook(state, bucket)), '
            .. 'got %s'):format(type(state)), 2)
    end
    args.check_bucket('powerSGD_hook', grad_bucket)
    local layout = {index = grad_bucket:index() + 1, last = grad_bucket:is_last(), shapes = {}}
    for i, p in ipairs(grad_bucket:parameters()) do layout.shapes[i] = p:shape() end
    return Future.completed(hook_flat(state, grad_bucket:buffer(), layout))
end
M.powerSGD_hook = M.hook

return M
