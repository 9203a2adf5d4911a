-- examples/ddp_train.lua: data-parallel training of a model from models/ on Fashion-MNIST, the
-- ddplua version of PyTorch's DDP script (shared/reference/torch/ddp_ref.py's workload).
--
--   ddplua examples/ddp_train.lua --nproc N [--model mlp|cnn] [--epochs 3] [--batch-size 32]
--       [--lr L] [--momentum 0.9] [--seed 0] [--bucket-cap-mb 25] [--checkpoint PATH]
--       [--checkpoint-every STEPS] [--resume PATH] [--train-size N] [--test-size N]
--       [--progress auto|on|off] [--fail-at-step K [--fail-rank R]]
--       [--metrics FILE] [--tensorboard DIR] [--log-every 50]
--       [--comm-hook allreduce|fp16_compress|bf16_compress|powersgd [--powersgd-rank R]
--       [--start-powersgd-iter K]] [--num-workers 0] [--device cpu|cuda] [--backend gloo|nccl]
--
-- One process per rank (the launcher sets RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT and
-- OMP_NUM_THREADS=1). --batch-size is per rank: the global batch is N times it, so
-- `--nproc 2 --batch-size 32` takes the same steps as examples/train.lua's batch 64.
--   * Data: DistributedSampler gives rank r every N-th sample of the epoch's permutation
--     (set_epoch each epoch, so all ranks shuffle alike and differently every epoch); the test
--     set is split the same way (no shuffle) and the counts are summed across ranks. The
--     training batches are loaded by --num-workers forked worker processes per rank (0, the
--     default as PyTorch's: in the rank itself; the batches are the same either way), into
--     page-locked memory on CUDA. Fashion-MNIST sits in memory and a batch is one gather, so
--     workers only add the hand-over: 28.7k against 68.3k samples/s with 2 workers per rank on
--     the 2-core machine (session 23); they pay for datasets that decode or augment per sample.
--   * Model: the same seed on every rank, then DDP (which also broadcasts rank 0's weights).
--   * Device (--device): cpu, or cuda, where each rank takes GPU LOCAL_RANK
--     (ddpl.cuda.set_device), the process group defaults to the nccl backend (--backend says
--     otherwise), DDP gets device_ids = {LOCAL_RANK}, and batches come from pinned host memory
--     and are copied to the GPU without blocking the host. Evaluation sums and checkpointed RNG
--     states travel through the collectives on the device, as NCCL needs.
--   * Gradient communication (--comm-hook): DDP's plain allreduce by default, or a built-in comm
--     hook; powersgd takes matrix_approximation_rank from --powersgd-rank (1) and
--     start_powerSGD_iter from --start-powersgd-iter (2). The end of the run logs the bytes each
--     rank put into allreduces in the last step.
--   * Logging: rank 0 only; a progress bar (ddpl.utils.progress: global samples, redrawn in place
--     on a terminal, a plain line every tenth of an epoch otherwise, none with --progress off),
--     one line per epoch with train loss, test accuracy and global samples/s. --metrics FILE:
--     JSON lines (ddpl.utils.MetricsLogger, appended to when resuming) as examples/train.lua
--     writes them, a "step" record every --log-every steps (loss: rank 0's mean over those
--     steps; samples_per_s: global) and an "epoch" record per epoch; --tensorboard DIR: the same
--     figures as TensorBoard scalars. Both written by rank 0.
--   * Checkpoints (--checkpoint PATH): rank 0 saves the module's state (no 'module.' prefix,
--     loadable by examples/train.lua), the optimizer, the epoch, the step within the next epoch,
--     every rank's RNG state (gathered with all_gather) and the run id after every epoch and,
--     with --checkpoint-every STEPS, every STEPS optimizer steps (counted over the whole run);
--     then all ranks meet at a barrier, so nobody reads a half-written file (ddpl.save writes a
--     temporary file and renames it, so a crash leaves the previous checkpoint whole).
--     --resume PATH loads one on every rank; a checkpoint saved mid-epoch resumes at that very
--     step (the batches of the epoch already done are skipped, in the same order: the sampler's
--     shuffle depends on the seed and the epoch only) and needs the same number of ranks.
--   * Elastic restarts (`ddplua ... --max-restarts N`): when a worker dies the launcher restarts
--     the whole gang with TORCHELASTIC_RESTART_COUNT raised; a --checkpoint PATH that exists and
--     was written by this same run (TORCHELASTIC_RUN_ID, kept across restarts; set DDPLUA_RUN_ID
--     to resume a job started again by hand) is loaded at start, so the restarted gang goes on
--     from the last checkpoint and ends with the parameters an uninterrupted run reaches, bit for
--     bit. A checkpoint of another run is left alone (and overwritten by this run's first one).
--   * Fault injection, for tests: --fail-at-step K makes rank --fail-rank R (default 1) kill
--     itself with SIGKILL just before its K-th optimizer step, in the first start only
--     (TORCHELASTIC_RESTART_COUNT 0 or unset), so a restarted gang runs through.
local ddpl = require 'ddplua'
local nn, F, optim, data, dist = ddpl.nn, ddpl.F, ddpl.optim, ddpl.data, ddpl.distributed

local MEAN, STD = 0.2860, 0.3530
local MODELS = {mlp = {file = 'mlp', lr = 0.05}, cnn = {file = 'lenet', lr = 0.02},
    lenet = {file = 'lenet', lr = 0.02}}

---------------------------------------------------------------------------------------------------
-- command line

local defaults = {model = 'mlp', epochs = 3, ['batch-size'] = 32, lr = false, momentum = 0.9,
    seed = 0, ['bucket-cap-mb'] = 25, checkpoint = false, resume = false, ['train-size'] = false,
    ['test-size'] = false, progress = 'auto', ['eval-batch'] = 1000, ['checkpoint-every'] = false,
    ['fail-at-step'] = false, ['fail-rank'] = 1, ['comm-hook'] = 'allreduce',
    ['powersgd-rank'] = 1, ['start-powersgd-iter'] = 2, metrics = false, tensorboard = false,
    ['log-every'] = 50, ['num-workers'] = 0, device = 'cpu', backend = false}
local numeric = {epochs = true, ['batch-size'] = true, lr = true, momentum = true, seed = true,
    ['bucket-cap-mb'] = true, ['train-size'] = true, ['test-size'] = true, ['eval-batch'] = true,
    ['checkpoint-every'] = true, ['fail-at-step'] = true, ['fail-rank'] = true,
    ['powersgd-rank'] = true, ['start-powersgd-iter'] = true, ['log-every'] = true,
    ['num-workers'] = true}

local function usage(msg) -- msg nil: --help
    local out = msg and io.stderr or io.stdout
    if msg then out:write('ddp_train.lua: ', msg, '\n') end
    out:write('usage: ddplua examples/ddp_train.lua --nproc N ',
        '[--model mlp|cnn] [--epochs N] [--batch-size N (per rank)] [--lr X] [--momentum X] ',
        '[--seed N] [--bucket-cap-mb X] [--checkpoint PATH] [--checkpoint-every STEPS] ',
        '[--resume PATH] [--train-size N] [--test-size N] [--eval-batch N] ',
        '[--progress auto|on|off] [--fail-at-step K [--fail-rank R]] ',
        '[--comm-hook allreduce|fp16_compress|bf16_compress|powersgd [--powersgd-rank R] ',
        '[--start-powersgd-iter K]] [--metrics FILE] [--tensorboard DIR] [--log-every N] ',
        '[--num-workers N] [--device cpu|cuda] [--backend gloo|nccl]\n')
    os.exit(msg and 2 or 0)
end

-- The directory of this script, to find args.lua and models/ wherever we are run from.
local root = (arg[0]:match('^(.*)/[^/]*$') or '.') .. '/..'
local opt = dofile(root .. '/examples/args.lua')(arg, defaults, numeric, usage)
local spec = MODELS[opt.model] or usage('unknown model ' .. opt.model .. ' (mlp, cnn)')
local lr = opt.lr or spec.lr
local batch = math.tointeger(opt['batch-size']) or usage('--batch-size must be an integer')
opt.checkpoint = opt.checkpoint or opt.resume
local function positive_int(name)
    local v = opt[name]
    if v and not (math.tointeger(v) and v > 0) then
        usage(('--%s must be a positive integer, got %s'):format(name, v))
    end
    return v and math.tointeger(v)
end
local every, fail_at = positive_int('checkpoint-every'), positive_int('fail-at-step')
local log_every = positive_int('log-every')
if every and not opt.checkpoint then usage('--checkpoint-every needs --checkpoint PATH') end
local fail_rank = math.tointeger(opt['fail-rank']) or usage('--fail-rank must be an integer')
local restart_count = math.tointeger(tonumber(os.getenv('TORCHELASTIC_RESTART_COUNT') or '0'))
    or usage('TORCHELASTIC_RESTART_COUNT is not an integer')
local run_id = os.getenv('TORCHELASTIC_RUN_ID') or os.getenv('DDPLUA_RUN_ID') or ''

---------------------------------------------------------------------------------------------------
-- process group (from the launcher's environment)

if not os.getenv('RANK') then usage('run me with the launcher: ddplua examples/ddp_train.lua --nproc N') end
local device = opt.device
if device ~= 'cpu' and device ~= 'cuda' then
    usage('--device must be cpu or cuda, got ' .. tostring(device))
end
local local_rank = math.tointeger(tonumber(os.getenv('LOCAL_RANK') or '0'))
    or usage('LOCAL_RANK is not an integer')
if device == 'cuda' then
    if not ddpl.cuda.is_available() then
        usage('--device cuda: no CUDA device (ddpl.config().cuda says whether this build has CUDA)')
    end
    if local_rank >= ddpl.cuda.device_count() then
        usage(('--device cuda: local rank %d has no GPU of its own (%d GPUs on this node; start '
            .. 'at most that many processes per node)'):format(local_rank,
            ddpl.cuda.device_count()))
    end
    ddpl.cuda.set_device(local_rank)
end
local backend = opt.backend or (device == 'cuda' and 'nccl' or 'gloo')
dist.init_process_group({backend = backend})
local rank, world = dist.get_rank(), dist.get_world_size()
-- a batch on the training device: from pinned memory the copy does not block the host
local function to_device(t)
    return device == 'cpu' and t or t:to(device, {non_blocking = true})
end
-- where the backend's collectives take their tensors: nccl's are on the GPU
local comm_device = backend == 'nccl' and 'cuda' or 'cpu'
local function log0(...) if rank == 0 then print(...) end end
if fail_at and (fail_rank < 0 or fail_rank >= world) then -- only checked where it is used
    usage(('--fail-rank %d is not a rank of this job (0 to %d)'):format(fail_rank, world - 1))
end
if restart_count > 0 then
    log0(('TORCHELASTIC_RESTART_COUNT=%d: this gang is restart %d of the job'):format(
        restart_count, restart_count))
end

---------------------------------------------------------------------------------------------------
-- data

local function load_split(train, limit)
    local ds = data.datasets.FashionMNIST({train = train})
    local x, y = ds.data, ds.targets -- (N, 28, 28) uint8, (N,) int64
    if limit and limit < x:size(0) then x, y = x:narrow(0, 0, limit), y:narrow(0, 0, limit) end
    x = x:float():div_(255):add_(-MEAN):div_(STD)
    return data.TensorDataset(x:view(x:size(0), 1, 28, 28), y)
end

local t_load = ddpl.time()
local train_set = load_split(true, opt['train-size'])
local test_set = load_split(false, opt['test-size'])
t_load = ddpl.time() - t_load
local sampler = data.DistributedSampler(train_set, {num_replicas = world, rank = rank,
    shuffle = true, seed = opt.seed})
local num_workers = math.tointeger(opt['num-workers'])
if not num_workers or num_workers < 0 then usage('--num-workers must be a non-negative integer') end
local train_loader = data.DataLoader(train_set, {batch_size = batch, sampler = sampler,
    num_workers = num_workers, pin_memory = device == 'cuda'})
local test_sampler = data.DistributedSampler(test_set, {num_replicas = world, rank = rank,
    shuffle = false})
local test_loader = data.DataLoader(test_set, {batch_size = opt['eval-batch'],
    sampler = test_sampler, pin_memory = device == 'cuda'})

---------------------------------------------------------------------------------------------------
-- model, optimizer, checkpoint

ddpl.manual_seed(opt.seed)
local chunk = assert(loadfile(root .. '/models/' .. spec.file .. '.lua'))
local net = chunk()():to(device)
local steps_per_epoch = #train_loader

local function file_exists(path)
    local f = io.open(path, 'rb')
    if f then f:close() end
    return f ~= nil
end

local function load_checkpoint(path)
    local ok, res = pcall(ddpl.load, path)
    if not ok then error('ddp_train.lua: cannot resume: ' .. tostring(res), 0) end
    return res
end

-- Which checkpoint to start from: this run's own --checkpoint after a restart (or a job started
-- again with the same DDPLUA_RUN_ID), else --resume. Every rank decides alike: nobody writes a
-- checkpoint before all ranks have got past the DDP constructor below.
local ck, ck_path
if opt.checkpoint and file_exists(opt.checkpoint) and run_id ~= '' then
    -- a file that is no checkpoint (an empty one from mktemp) is not this run's either: this
    -- run writes only whole checkpoints
    local readable, own = pcall(ddpl.load, opt.checkpoint)
    if readable and own.run_id == run_id then
        ck, ck_path = own, opt.checkpoint
    elseif not opt.resume then
        log0(('%s is not this run\'s checkpoint (%s): starting afresh'):format(opt.checkpoint,
            readable and ('run id %s, not %s'):format(tostring(own.run_id), run_id)
            or 'it cannot be read'))
    end
end
if not ck and opt.resume then ck, ck_path = load_checkpoint(opt.resume), opt.resume end

local first_epoch, skip_steps, global_step = 1, 0, 0
if ck then
    if ck.model_name and ck.model_name ~= opt.model then
        error(('ddp_train.lua: %s holds a %s model, not %s'):format(ck_path, ck.model_name,
            opt.model), 0)
    end
    net:load_state_dict(ck.model)
    first_epoch = math.tointeger(ck.epoch) + 1
    skip_steps = math.tointeger(ck.step or 0)
    if skip_steps > 0 and math.tointeger(ck.world_size) ~= world then
        error(('ddp_train.lua: %s was saved in the middle of epoch %d by %d ranks; resume it '
            .. 'with --nproc %d (each rank\'s share of the epoch depends on the number of '
            .. 'ranks)'):format(ck_path, first_epoch, ck.world_size, ck.world_size), 0)
    end
    global_step = math.tointeger(ck.global_step or (first_epoch - 1) * steps_per_epoch)
    -- each rank's generator as it was when the checkpoint was written (dropout, augmentation)
    if ck.rng and #ck.rng == world then ddpl.set_rng_state(ck.rng[rank + 1]) end
    -- in the middle of an epoch, the loader repeats that epoch's pass as it was drawn, without
    -- drawing from the generator again (so every later draw is the uninterrupted run's)
    local ls = ck.loader
    if skip_steps > 0 and ls and ls.rng and #ls.rng == world then
        train_loader:load_state_dict({passes = math.tointeger(ls.passes), rng = ls.rng[rank + 1],
            sampler_epoch = math.tointeger(ls.sampler_epoch)})
    end
end
local model = nn.DDP(net, {bucket_cap_mb = opt['bucket-cap-mb'],
    device_ids = device == 'cuda' and {local_rank} or nil})
local HOOKS = {allreduce = true, fp16_compress = true, bf16_compress = true, powersgd = true}
if not HOOKS[opt['comm-hook']] then
    usage('--comm-hook must be allreduce, fp16_compress, bf16_compress or powersgd, got '
        .. tostring(opt['comm-hook']))
end
local powersgd_state
if opt['comm-hook'] == 'powersgd' then
    local ok, res = pcall(model.register_comm_hook, model, 'powersgd', {
        matrix_approximation_rank = opt['powersgd-rank'],
        start_powerSGD_iter = opt['start-powersgd-iter']})
    if not ok then usage(tostring(res)) end
    powersgd_state = res
elseif opt['comm-hook'] ~= 'allreduce' then
    model:register_comm_hook(opt['comm-hook'])
end
local optimizer = optim.SGD(model:parameters(), {lr = lr, momentum = opt.momentum})
if ck then
    optimizer:load_state_dict(ck.optimizer)
    if skip_steps > 0 then
        log0(('resumed from %s at epoch %d, step %d of %d'):format(ck_path, first_epoch,
            skip_steps, steps_per_epoch))
    else
        log0(('resumed from %s after epoch %d'):format(ck_path, first_epoch - 1))
    end
end

-- Everything a resumed run needs to go on as if it had never stopped: `epoch` epochs done and
-- `step` steps of the next one; loss_sum and seen are rank 0's running figures of that epoch
-- (for its log line). Every rank calls this (the RNG states are gathered).
-- Every rank's copy of a CPU tensor of the same size on each (an RNG state), on the CPU.
local function gather_cpu(mine)
    local all = {}
    for r = 1, world do all[r] = ddpl.empty_like(mine):to(comm_device) end
    dist.all_gather(all, mine:to(comm_device))
    for r = 1, world do all[r] = all[r]:cpu() end
    return all
end

local function save_checkpoint(path, epoch, step, loss_sum, seen)
    local rng = gather_cpu(ddpl.get_rng_state())
    local ls = train_loader:state_dict() -- the pass in progress: where it drew from the RNG
    local loader = {passes = ls.passes, sampler_epoch = ls.sampler_epoch,
        rng = ls.rng and gather_cpu(ls.rng)}
    if rank == 0 then
        ddpl.save({model = model.module:state_dict(), optimizer = optimizer:state_dict(),
            epoch = epoch, step = step, global_step = global_step, world_size = world,
            loss_sum = loss_sum, seen = seen, rng = rng, loader = loader, run_id = run_id,
            model_name = opt.model, seed = opt.seed}, path)
    end
    dist.barrier() -- nobody goes on (or resumes) before the file is complete
end

-- --fail-at-step: die like a crashed process (no cleanup, no error message of Lua's)
local function maybe_fail()
    if fail_at and global_step + 1 == fail_at and rank == fail_rank and restart_count == 0 then
        io.stdout:flush()
        io.stderr:write(('rank %d: --fail-at-step %d: killing myself with SIGKILL\n'):format(rank,
            fail_at))
        io.stderr:flush()
        local pid = io.open('/proc/self/stat'):read('l'):match('^%d+')
        os.execute('kill -KILL ' .. pid)
        os.exit(1, false) -- not reached: the kill takes effect at once
    end
end

-- rank 0 writes these (ddpl.utils' default in a process group); appended to after a restart
local metrics = opt.metrics and ddpl.utils.MetricsLogger(opt.metrics, {mode = ck and 'a' or 'w'})
local tb = opt.tensorboard and ddpl.utils.tensorboard.SummaryWriter(opt.tensorboard)
local function log_record(rec, scalars) -- scalars: TensorBoard tag -> field of rec
    if metrics then metrics:log(rec) end
    if tb then
        for tag, k in pairs(scalars) do tb:add_scalar(tag, rec[k], rec.step) end
    end
end
log0(('model %s: %d parameters; %d ranks x batch %d (global %d); %d training and %d test ' ..
    'images (loaded in %.2f s); lr %g, momentum %g, %d buckets; on %s, backend %s'):format(
    opt.model, net:num_parameters(), world, batch, world * batch, #train_set, #test_set, t_load,
    lr, opt.momentum, #model:buckets(), device, backend))

---------------------------------------------------------------------------------------------------
-- training

-- Accuracy and mean loss over the whole test set: each rank its share, summed across ranks.
local function evaluate()
    net:eval()
    local correct, loss_sum, count = 0, 0, 0
    ddpl.no_grad(function()
        for x, y in test_loader:iter() do
            x, y = to_device(x), to_device(y)
            local out = net(x)
            correct = correct + out:argmax(1):eq(y):sum():item()
            loss_sum = loss_sum + F.cross_entropy(out, y, {reduction = 'sum'}):item()
            count = count + x:size(0)
        end
    end)
    local sums = ddpl.tensor({correct, loss_sum, count}, {dtype = 'float64'}):to(comm_device)
    dist.all_reduce(sums)
    net:train()
    local s = sums:cpu():tolist()
    return s[1] / s[3], s[2] / s[3]
end

for epoch = first_epoch, opt.epochs do
    sampler:set_epoch(epoch - 1)
    model:train()
    local t0 = ddpl.time()
    local loss_sum, seen, step = 0, 0, 0
    local skip = epoch == first_epoch and skip_steps or 0
    if skip > 0 then loss_sum, seen = ck.loss_sum or 0, math.tointeger(ck.seen) or 0 end
    local trained = seen -- samples of this epoch seen before this start (for samples/s)
    local bar = ddpl.utils.progress(world * #sampler, {desc = ('epoch %d'):format(epoch),
        unit = 'img', initial = world * trained, disable = opt.progress == 'off',
        terminal = opt.progress == 'on' or nil})
    local window = {loss = 0, n = 0, t = t0} -- the steps since the last "step" record
    for x, y in train_loader:iter() do
        step = step + 1
        if step <= skip then goto next_batch end -- done before the restart
        maybe_fail()
        x, y = to_device(x), to_device(y)
        optimizer:zero_grad()
        local loss = F.cross_entropy(model(x), y)
        loss:backward()
        optimizer:step()
        local n = x:size(0)
        local l = loss:item()
        loss_sum, seen, global_step = loss_sum + l * n, seen + n, global_step + 1
        window.loss, window.n = window.loss + l * n, window.n + n
        bar:set_postfix({loss = loss_sum / seen})
        bar:update(world * n)
        if global_step % log_every == 0 then
            local now = ddpl.time()
            log_record({event = 'step', step = global_step, epoch = epoch,
                loss = window.loss / window.n, lr = lr,
                samples_per_s = world * window.n / (now - window.t)},
                {['train/loss'] = 'loss', ['train/lr'] = 'lr',
                    ['train/samples_per_s'] = 'samples_per_s'})
            window = {loss = 0, n = 0, t = now}
        end
        if every and global_step % every == 0 and step < steps_per_epoch then
            save_checkpoint(opt.checkpoint, epoch - 1, step, loss_sum, seen)
        end
        ::next_batch::
    end
    local train_s = ddpl.time() - t0
    bar:close()
    local acc, test_loss = evaluate()
    log_record({event = 'epoch', step = global_step, epoch = epoch, train_loss = loss_sum / seen,
        test_loss = test_loss, test_acc = acc, accuracy = acc, lr = lr, train_s = train_s,
        samples_per_s = world * (seen - trained) / train_s},
        {['test/loss'] = 'test_loss', ['test/accuracy'] = 'accuracy',
            ['train/epoch_loss'] = 'train_loss'})
    if tb then tb:flush() end
    log0(('epoch %d/%d  train loss %.4f (rank 0)  test loss %.4f  test accuracy %.4f  ' ..
        '%.0f samples/s (global)  %.1f s'):format(epoch, opt.epochs, loss_sum / seen, test_loss,
        acc, world * (seen - trained) / train_s, train_s))
    if opt.checkpoint then save_checkpoint(opt.checkpoint, epoch, 0, 0, 0) end
end

-- what each rank put into allreduces in a step: the whole gradient for the plain allreduce,
-- half of it in 16 bits; PowerSGD counts its own (the last step's)
local grad_bytes = 0
for _, b in ipairs(model:buckets()) do grad_bytes = grad_bytes + b.bytes end
local step_bytes = powersgd_state and powersgd_state.last_step_bytes
    or (opt['comm-hook'] == 'allreduce' and grad_bytes or grad_bytes // 2)
log0(('comm hook %s: %d bytes allreduced per step per rank (the gradients are %d bytes)')
    :format(opt['comm-hook'], step_bytes, grad_bytes))
model:write_timeline()
if metrics then metrics:close() end
if tb then tb:close() end
dist.destroy_process_group()
