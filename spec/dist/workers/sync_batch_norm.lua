-- spec/dist/workers/sync_batch_norm.lua: nn.SyncBatchNorm on N ranks against plain batch norm in
-- one process on the concatenated batch; run by spec/dist/sync_batch_norm_spec.lua on every rank of
-- a job (S.run_world). SBN_MODE selects the checks:
--   equiv (default): for several input ranks, dtypes, options and per-rank batch sizes (even,
--     uneven, one rank empty), two training steps of y = sbn(x_rank); loss_rank = sum(y * G_rank).
--     Every rank also runs the reference (BatchNorm1d/2d, or the BatchNorm base for 5-D) on the
--     global batch with loss sum(Y * G), and checks: y = Y's rows of this rank, x.grad = X.grad's
--     rows, the group's sum of weight/bias gradients = the reference's, running_mean,
--     running_var and num_batches_tracked equal; then evaluation mode on local rows (rank 0
--     alone, so a collective there would fail). With 4 ranks also on new_subgroups(2) pairs,
--     each pair equal to one process on the pair's batch, and ranks outside a group {0, 1}
--     doing plain local batch norm. The collectives counted: one
--     all_gather_into_tensor in a training forward, one all_reduce in its backward, none in
--     backward when the input needs no gradient. Input and parameter errors.
--   ddp: a CNN with BatchNorm2d and BatchNorm1d converted by convert_sync_batchnorm, in DDP
--     (one bucket per parameter), three SGD steps equal to the unconverted model trained in one
--     process on the global batch: parameters and running statistics, float64 and float32.
--   gradcheck (1 rank): the synchronised computation (nn/sync_batch_norm.lua) on a one-rank
--     group against central differences, for input, weight and bias.
-- SBN_DEVICE=cuda (equiv and ddp) runs the SyncBatchNorm side on GPU LOCAL_RANK (set before
-- init) over the nccl backend (SBN_BACKEND overrides it): inputs and the module on cuda, DDP
-- with device_ids = {LOCAL_RANK}; the reference stays on the cpu, and values are compared there.
-- The subgroup cases need 4 ranks, so 4 GPUs.
-- Prints "SYNCBN_OK <rank>" and exits 0, or raises naming the rank and the case.
local ddpl = require 'ddplua'
local nn, F, dist = ddpl.nn, ddpl.nn.functional, ddpl.distributed
local BatchNorm = require 'ddplua.nn.BatchNorm'

local mode = os.getenv('SBN_MODE') or 'equiv'
-- where the SyncBatchNorm side runs: 'cpu', or 'cuda' (this rank's GPU, the current device)
local DEV = os.getenv('SBN_DEVICE') or 'cpu'
local local_rank = tonumber(os.getenv('LOCAL_RANK') or '0')
if DEV == 'cuda' then
    if mode == 'gradcheck' then error('SBN_DEVICE=cuda covers SBN_MODE equiv and ddp', 0) end
    -- before init, as torchrun scripts do: nccl binds each rank's communicator to its device
    ddpl.cuda.set_device(local_rank)
elseif DEV ~= 'cpu' then
    error(('SBN_DEVICE must be cpu or cuda, got %s'):format(DEV), 0)
end
local backend = os.getenv('SBN_BACKEND') or (DEV == 'cuda' and 'nccl' or 'gloo')
dist.init_process_group({backend = backend, timeout = 30})
local rank, world = dist.get_rank(), dist.get_world_size()

local function fail(fmt, ...) error(('rank %d: ' .. fmt):format(rank, ...), 2) end

-- Every collective SyncBatchNorm calls goes through these fields of the dist table; counting
-- wrappers see each call.
local counts = {}
for _, name in ipairs({'all_reduce', 'all_gather_into_tensor', 'all_gather', 'broadcast',
    'reduce_scatter_tensor', 'barrier'}) do
    local f = dist[name]
    dist[name] = function(...)
        counts[name] = (counts[name] or 0) + 1
        return f(...)
    end
end
-- f() and the collectives it called, as "name=count" words in name order ('' for none)
local function collectives_of(f)
    counts = {}
    f()
    local words = {}
    for name, n in pairs(counts) do words[#words + 1] = name .. '=' .. n end
    table.sort(words)
    counts = {}
    return table.concat(words, ' ')
end

-- max|got - want| <= tol * max(1, max|want|), shapes equal; compared on the cpu (got may be on
-- DEV, want is the cpu reference)
local function close(what, got, want, tol)
    local gs, ws = table.concat(got:shape(), ','), table.concat(want:shape(), ',')
    if gs ~= ws then fail('%s: shape [%s], expected [%s]', what, gs, ws) end
    if want:numel() == 0 then return end
    local g, w = got:detach():cpu():double(), want:detach():cpu():double()
    local scale = math.max(1, w:abs():max():item())
    local diff = (g - w):abs():max():item()
    if not (diff <= tol * scale) then
        fail('%s: max|diff| %.3g > %.3g (scale %.3g)', what, diff, tol * scale, scale)
    end
end

local function expect_error(want, f, ...)
    local ok, err = pcall(f, ...)
    if ok then fail('expected an error containing %q, got none', want) end
    if not tostring(err):find(want, 1, true) then
        fail('expected an error containing %q, got: %s', want, tostring(err))
    end
end

-- The plain batch norm of the reference for inputs of `dims` dimensions.
local function plain_bn(dims, C, opts)
    if dims <= 3 then return nn.BatchNorm1d(C, opts) end
    if dims == 4 then return nn.BatchNorm2d(C, opts) end
    return BatchNorm(C, opts) -- the shared base (PyTorch's _BatchNorm) takes any rank
end

-- One equivalence case. c: {name, dtype, C, tail (dims after C), sizes (per member), tol,
-- opts (BatchNorm options), group, members (global ranks, in group order), no_input_grad,
-- noncontig, eval_check}.
local function equivalence(c)
    local members = c.members
    local me, offset, total = nil, 0, 0
    for i, r in ipairs(members) do
        if r == rank then me, offset = i, total end
        total = total + c.sizes[i]
    end
    local B = c.sizes[me]
    local function shape_of(n)
        local s = {n, c.C}
        for _, d in ipairs(c.tail) do s[#s + 1] = d end
        return s
    end
    local topts = {dtype = c.dtype}
    ddpl.manual_seed(17)
    local w0, b0 = ddpl.randn({c.C}, topts) * 0.5 + 1, ddpl.randn({c.C}, topts)
    local sopts = {dtype = c.dtype, process_group = c.group}
    local bopts = {dtype = c.dtype}
    for k, v in pairs(c.opts or {}) do sopts[k], bopts[k] = v, v end
    local sbn = nn.SyncBatchNorm(c.C, sopts)
    local ref = plain_bn(#c.tail + 2, c.C, bopts)
    if sbn.affine then
        ddpl.no_grad(function()
            sbn.weight:copy_(w0); sbn.bias:copy_(b0)
            ref.weight:copy_(w0); ref.bias:copy_(b0)
        end)
    end
    sbn:to(DEV) -- parameters and buffers; the reference stays on the cpu
    for step = 1, 2 do
        local what = ('%s, step %d'):format(c.name, step)
        ddpl.manual_seed(100 * step + #members) -- the same global batch on every member
        local X = ddpl.randn(shape_of(total), topts) * 2 + 3 -- a mean far from 0
        local G = ddpl.randn(shape_of(total), topts)
        X.requires_grad = true
        local Y = ref(X)
        Y:mul(G):sum():backward()

        local x = X:detach():narrow(0, offset, B):clone():to(DEV)
        if c.noncontig then x = x:transpose(2, 3):contiguous():transpose(2, 3) end
        x.requires_grad = not c.no_input_grad
        local dy = G:narrow(0, offset, B):to(DEV)
        local y
        local fwd = collectives_of(function() y = sbn(x) end)
        local bwd = collectives_of(function() y:mul(dy):sum():backward() end)
        if fwd ~= 'all_gather_into_tensor=1' then
            fail('%s: forward called the collectives [%s], expected one all_gather_into_tensor',
                what, fwd)
        end
        local want_bwd = c.no_input_grad and '' or 'all_reduce=1'
        if bwd ~= want_bwd then
            fail('%s: backward called the collectives [%s], expected [%s]', what, bwd, want_bwd)
        end

        close(what .. ': output', y, Y:narrow(0, offset, B), c.tol)
        if not c.no_input_grad then
            close(what .. ': input gradient', x.grad, X.grad:narrow(0, offset, B), c.tol)
        elseif x.grad ~= nil then
            fail('%s: the input does not require grad but got a gradient', what)
        end
        if sbn.affine then
            for _, p in ipairs({'weight', 'bias'}) do
                local g = sbn[p].grad:clone()
                dist.all_reduce(g, {group = c.group})
                close(what .. ': ' .. p .. ' gradient summed over the group', g, ref[p].grad,
                    c.tol)
                sbn[p].grad, ref[p].grad = nil, nil
            end
        end
        if sbn.track_running_stats then
            close(what .. ': running_mean', sbn.running_mean, ref.running_mean, c.tol)
            close(what .. ': running_var', sbn.running_var, ref.running_var, c.tol)
            local n, want = sbn.num_batches_tracked:item(), ref.num_batches_tracked:item()
            if n ~= want then fail('%s: num_batches_tracked %d, expected %d', what, n, want) end
        end
    end
    if c.eval_check and sbn.track_running_stats then
        -- evaluation uses the running statistics and no collective: rank 0 alone runs it
        sbn:eval(); ref:eval()
        if rank == 0 then
            ddpl.manual_seed(5)
            local x = ddpl.randn(shape_of(3), topts)
            close(c.name .. ': eval output', sbn(x:to(DEV)), ref(x), c.tol)
        end
        dist.barrier()
    end
end

-- Per-member batch sizes: every member the same, r + 1, or the first member empty.
local function sizes_of(kind, n)
    local s = {}
    for i = 1, n do
        if kind == 'even' then s[i] = 3
        elseif kind == 'uneven' then s[i] = i
        else s[i] = ({0, 2, 3, 1})[i] or 2 end
    end
    if kind == 'empty' and n == 2 then s = {0, 3} end
    return s
end

local function run_equiv()
    local all = {}
    for r = 0, world - 1 do all[#all + 1] = r end
    local cases = {
        {name = '(N,C) float64 even', dtype = 'float64', C = 4, tail = {}, sizes = 'even',
            tol = 1e-10, eval_check = true},
        {name = '(N,C,L) float32 even', dtype = 'float32', C = 3, tail = {5}, sizes = 'even',
            tol = 1e-5},
        {name = '(N,C,H,W) float64 uneven', dtype = 'float64', C = 3, tail = {4, 5},
            sizes = 'uneven', tol = 1e-10},
        {name = '(N,C,H,W) float32 uneven', dtype = 'float32', C = 3, tail = {4, 5},
            sizes = 'uneven', tol = 1e-5, eval_check = true},
        {name = '(N,C,H,W) float64 one rank empty, momentum None', dtype = 'float64', C = 2,
            tail = {3, 3}, sizes = 'empty', tol = 1e-10, opts = {momentum = false}},
        {name = '(N,C,L) float32 one rank empty', dtype = 'float32', C = 5, tail = {2},
            sizes = 'empty', tol = 1e-5},
        {name = '(N,C,L) float64 no affine, no running stats', dtype = 'float64', C = 3,
            tail = {4}, sizes = 'uneven', tol = 1e-10,
            opts = {affine = false, track_running_stats = false}},
        {name = '(N,C,D,H,W) float64 momentum 0.3', dtype = 'float64', C = 2, tail = {2, 3, 2},
            sizes = 'uneven', tol = 1e-10, opts = {momentum = 0.3}},
        {name = 'non-contiguous (N,C,H,W) float64', dtype = 'float64', C = 3, tail = {3, 4},
            sizes = 'uneven', tol = 1e-10, noncontig = true},
        {name = '(N,C) float64 input without grad', dtype = 'float64', C = 4, tail = {},
            sizes = 'uneven', tol = 1e-10, no_input_grad = true},
    }
    for _, c in ipairs(cases) do
        c.members = all
        c.sizes = sizes_of(c.sizes, world)
        equivalence(c)
    end
    if world == 4 then
        -- pairs {0, 1} and {2, 3}: each pair is one process on the pair's batch
        local pair = dist.new_subgroups(2)
        local first = rank - rank % 2
        for _, c in ipairs({
            {name = 'pair (N,C,H,W) float64 uneven', dtype = 'float64', C = 3, tail = {2, 3},
                sizes = {1 + first, 3}, tol = 1e-10},
            {name = 'pair (N,C) float32 even', dtype = 'float32', C = 6, tail = {},
                sizes = {4, 4}, tol = 1e-5},
        }) do
            c.group, c.members = pair, {first, first + 1}
            equivalence(c)
        end
        -- ranks 2 and 3 are outside {0, 1} (world size -1 there): plain batch norm on their
        -- own batch, without a collective, as PyTorch's need_sync
        local g01 = dist.new_group({0, 1})
        local sbn = nn.SyncBatchNorm(3, {process_group = g01, dtype = 'float64'}):to(DEV)
        ddpl.manual_seed(60 + rank)
        local x = ddpl.randn({4, 3, 2}, {dtype = 'float64'}):to(DEV)
        x.requires_grad = true
        local used = collectives_of(function() sbn(x):pow(2):sum():backward() end)
        if rank >= 2 then
            if used ~= '' then fail('outside the group: collectives [%s], expected none', used) end
            local ref = nn.BatchNorm1d(3, {dtype = 'float64'})
            local xr = x:detach():cpu():clone()
            xr.requires_grad = true
            ref(xr):pow(2):sum():backward()
            close('outside the group: input gradient', x.grad, xr.grad, 1e-12)
            close('outside the group: running_var', sbn.running_var, ref.running_var, 1e-12)
        elseif used ~= 'all_gather_into_tensor=1 all_reduce=1' then
            fail('in group {0, 1}: collectives [%s]', used)
        end
    end

    -- input errors are raised before any collective: rank 0 alone meets them (a collective
    -- would wait for the others and time out)
    local sbn = nn.SyncBatchNorm(4):to(DEV)
    local function on_dev(shape) return ddpl.randn(shape):to(DEV) end
    if rank == 0 then
        expect_error('SyncBatchNorm: expected at least 2-D input (N, C, ...), got a 1-D input '
            .. 'of shape [4]', function() return sbn(on_dev({4})) end)
        expect_error('SyncBatchNorm: expected input with 4 channels (num_features) in dim 1, got '
            .. 'shape [2,3,5]', function() return sbn(on_dev({2, 3, 5})) end)
        expect_error('SyncBatchNorm: expected a float32 or float64 input (16-bit ones under '
            .. 'autocast), got bfloat16', function() return sbn(on_dev({3, 4}):bfloat16()) end)
        expect_error('SyncBatchNorm: process_group must be a process group (from '
            .. 'dist.new_group), got string', nn.SyncBatchNorm, 4, {process_group = 'world'})
        expect_error("SyncBatchNorm: unknown option 'group'", nn.SyncBatchNorm, 4, {group = 1})
    end
    dist.barrier()
    -- a 16-bit input under autocast normalises in float32, as F.batch_norm does: the group's
    -- output is BatchNorm2d's on the float32 values, float32 on CUDA (autocast's float32 list
    -- there) and rounded back to bfloat16 on the CPU (PyTorch's CPU list does not have it)
    ddpl.manual_seed(9)
    local X = ddpl.randn({3 * world, 4, 2, 2}):bfloat16():float()
    local x = X:narrow(0, 3 * rank, 3):bfloat16():to(DEV)
    local y = ddpl.autocast(DEV, {dtype = 'bfloat16'}, function() return sbn(x) end)
    local want_dtype = DEV == 'cpu' and 'bfloat16' or 'float32'
    if y.dtype ~= want_dtype then
        fail('autocast: output dtype %s, expected %s', y.dtype, want_dtype)
    end
    close('autocast bfloat16 input', y:float(), nn.BatchNorm2d(4)(X):narrow(0, 3 * rank, 3),
        DEV == 'cpu' and 2 ^ -7 or 1e-5)
    -- one value per channel over the whole group (rank 0 has 1 row, the others none): every
    -- rank gets the error from the gathered count
    local one = on_dev(rank == 0 and {1, 4} or {0, 4})
    expect_error('SyncBatchNorm: expected more than 1 value per channel when training, got 1 '
        .. 'over the group', function() return sbn(one) end)
end

-- ---------------------------------------------------------------------------------------

local function cnn(dtype)
    local opts = {dtype = dtype}
    return nn.Sequential(nn.Conv2d(2, 4, 3, {padding = 1}), nn.BatchNorm2d(4), nn.ReLU(),
        nn.Conv2d(4, 4, 3, {padding = 1}), nn.BatchNorm2d(4, {momentum = false}), nn.ReLU(),
        nn.Flatten(), nn.Linear(4 * 4 * 4, 8), nn.BatchNorm1d(8), nn.ReLU(),
        nn.Linear(8, 5)):to(opts)
end

local function run_ddp(dtype, tol)
    ddpl.manual_seed(1) -- the same weights everywhere (DDP would broadcast them anyway)
    local net = cnn(dtype)
    ddpl.manual_seed(1)
    local ref = cnn(dtype)
    local conv = nn.SyncBatchNorm.convert_sync_batchnorm(net)
    for _, i in ipairs({1, 4, 8}) do
        if conv[i].__name ~= 'SyncBatchNorm' then
            fail('convert_sync_batchnorm left layer %d a %s', i, conv[i].__name)
        end
    end
    -- on cuda, as PyTorch's recipe: the module moved to this rank's GPU, then DDP told which
    local ddp_opts = {bucket_cap_mb = 0.000001}
    if DEV == 'cuda' then
        conv:to(DEV)
        ddp_opts.device_ids = {local_rank}
    end
    local model = nn.DDP(conv, ddp_opts)
    local opt = ddpl.optim.SGD(model:parameters(), {lr = 0.1, momentum = 0.9})
    local ref_opt = ddpl.optim.SGD(ref:parameters(), {lr = 0.1, momentum = 0.9})
    local B = 4
    for step = 1, 3 do
        ddpl.manual_seed(50 + step)
        local X = ddpl.randn({world * B, 2, 4, 4}, {dtype = dtype}) + 1
        local Y = ddpl.randint(0, 5, {world * B})
        opt:zero_grad()
        local x, y = X:narrow(0, rank * B, B):to(DEV), Y:narrow(0, rank * B, B):to(DEV)
        F.cross_entropy(model(x), y):backward()
        opt:step()
        ref_opt:zero_grad()
        F.cross_entropy(ref(X), Y):backward()
        ref_opt:step()
    end
    local what = 'DDP ' .. dtype
    for i, pair in ipairs(ref:named_parameters()) do
        close(what .. ': parameter ' .. pair[1], model.module:named_parameters()[i][2], pair[2],
            tol)
    end
    for i, pair in ipairs(ref:named_buffers()) do
        close(what .. ': buffer ' .. pair[1], model.module:named_buffers()[i][2], pair[2], tol)
    end
end

local function run_gradcheck()
    local sync = require('ddplua.nn.sync_batch_norm').sync_batch_norm
    ddpl.manual_seed(3)
    local x = ddpl.randn({3, 2, 2}, {dtype = 'float64'}) * 2 + 1
    local w = ddpl.randn({2}, {dtype = 'float64'})
    local b = ddpl.randn({2}, {dtype = 'float64'})
    x.requires_grad, w.requires_grad, b.requires_grad = true, true, true
    local calls = 0
    local function fn(xx, ww, bb)
        calls = calls + 1
        return sync(xx, {weight = ww, bias = bb, momentum = 0.1, eps = 1e-5, name = 'sbn'})
    end
    ddpl.autograd.gradcheck(fn, {x, w, b}, {eps = 1e-6, atol = 1e-7, rtol = 1e-5})
    if calls < 2 * x:numel() then fail('gradcheck evaluated the function %d times', calls) end
    -- and the same values as plain batch norm on this rank's batch
    local y = fn(x, w, b)
    local want = F.batch_norm(x, nil, nil, w, b, true, 0.1, 1e-5)
    close('gradcheck case output', y, want, 1e-12)
end

if mode == 'equiv' then
    run_equiv()
elseif mode == 'ddp' then
    run_ddp('float64', 1e-10)
    run_ddp('float32', 1e-5)
elseif mode == 'gradcheck' then
    run_gradcheck()
else
    fail('unknown SBN_MODE %s', mode)
end
dist.destroy_process_group()
print('SYNCBN_OK ' .. rank)
