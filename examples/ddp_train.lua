-- examples/ddp_train.lua: data-parallel training of a model from models/ on Fashion-MNIST, the
-- ddplua version of PyTorch's DDP script (shared/reference/torch/ddp_ref.py's workload).
--
--   ddplua examples/ddp_train.lua --nproc N [--model mlp|cnn] [--epochs 3] [--batch-size 32]
--       [--lr L] [--momentum 0.9] [--seed 0] [--bucket-cap-mb 25] [--checkpoint PATH]
--       [--resume PATH] [--train-size N] [--test-size N] [--progress auto|on|off]
--
-- One process per rank (the launcher sets RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT and
-- OMP_NUM_THREADS=1). --batch-size is per rank: the global batch is N times it, so
-- `--nproc 2 --batch-size 32` takes the same steps as examples/train.lua's batch 64.
--   * Data: DistributedSampler gives rank r every N-th sample of the epoch's permutation
--     (set_epoch each epoch, so all ranks shuffle alike and differently every epoch); the test
--     set is split the same way (no shuffle) and the counts are summed across ranks.
--   * Model: the same seed on every rank, then DDP (which also broadcasts rank 0's weights).
--   * Logging: rank 0 only; a progress bar when stdout is a terminal, one line per epoch with
--     train loss, test accuracy and global samples/s.
--   * Checkpoints: rank 0 saves the module's state (no 'module.' prefix, loadable by
--     examples/train.lua), the optimizer and the epoch after every epoch, then all ranks meet at
--     a barrier, so nobody reads a half-written file. --resume PATH loads it on every rank.
local ddpl = require 'ddplua'
local nn, F, optim, data, dist = ddpl.nn, ddpl.F, ddpl.optim, ddpl.data, ddpl.distributed

local MEAN, STD = 0.2860, 0.3530
local MODELS = {mlp = {file = 'mlp', lr = 0.05}, cnn = {file = 'lenet', lr = 0.02},
    lenet = {file = 'lenet', lr = 0.02}}

---------------------------------------------------------------------------------------------------
-- command line

local defaults = {model = 'mlp', epochs = 3, ['batch-size'] = 32, lr = false, momentum = 0.9,
    seed = 0, ['bucket-cap-mb'] = 25, checkpoint = false, resume = false, ['train-size'] = false,
    ['test-size'] = false, progress = 'auto', ['eval-batch'] = 1000}
local numeric = {epochs = true, ['batch-size'] = true, lr = true, momentum = true, seed = true,
    ['bucket-cap-mb'] = true, ['train-size'] = true, ['test-size'] = true, ['eval-batch'] = true}

local function usage(msg)
    io.stderr:write('ddp_train.lua: ', msg, '\nusage: ddplua examples/ddp_train.lua --nproc N ',
        '[--model mlp|cnn] [--epochs N] [--batch-size N (per rank)] [--lr X] [--momentum X] ',
        '[--seed N] [--bucket-cap-mb X] [--checkpoint PATH] [--resume PATH] [--train-size N] ',
        '[--test-size N] [--eval-batch N] [--progress auto|on|off]\n')
    os.exit(2)
end

-- The directory of this script, to find args.lua and models/ wherever we are run from.
local root = (arg[0]:match('^(.*)/[^/]*$') or '.') .. '/..'
local opt = dofile(root .. '/examples/args.lua')(arg, defaults, numeric, usage)
local spec = MODELS[opt.model] or usage('unknown model ' .. opt.model .. ' (mlp, cnn)')
local lr = opt.lr or spec.lr
local batch = math.tointeger(opt['batch-size']) or usage('--batch-size must be an integer')
opt.checkpoint = opt.checkpoint or opt.resume

---------------------------------------------------------------------------------------------------
-- process group (from the launcher's environment)

if not os.getenv('RANK') then usage('run me with the launcher: ddplua examples/ddp_train.lua --nproc N') end
dist.init_process_group({backend = 'gloo'})
local rank, world = dist.get_rank(), dist.get_world_size()
local function log0(...) if rank == 0 then print(...) end end

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
local train_loader = data.DataLoader(train_set, {batch_size = batch, sampler = sampler})
local test_sampler = data.DistributedSampler(test_set, {num_replicas = world, rank = rank,
    shuffle = false})
local test_loader = data.DataLoader(test_set, {batch_size = opt['eval-batch'],
    sampler = test_sampler})

---------------------------------------------------------------------------------------------------
-- model, optimizer, checkpoint

ddpl.manual_seed(opt.seed)
local chunk = assert(loadfile(root .. '/models/' .. spec.file .. '.lua'))
local net = chunk()()
local first_epoch = 1
local ck
if opt.resume then
    local ok, res = pcall(ddpl.load, opt.resume)
    if not ok then error('ddp_train.lua: cannot resume: ' .. tostring(res), 0) end
    ck = res
    if ck.model_name and ck.model_name ~= opt.model then
        error(('ddp_train.lua: %s holds a %s model, not %s'):format(opt.resume, ck.model_name,
            opt.model), 0)
    end
    net:load_state_dict(ck.model)
    first_epoch = math.tointeger(ck.epoch) + 1
end
local model = nn.DDP(net, {bucket_cap_mb = opt['bucket-cap-mb']})
local optimizer = optim.SGD(model:parameters(), {lr = lr, momentum = opt.momentum})
if ck then
    optimizer:load_state_dict(ck.optimizer)
    log0(('resumed from %s after epoch %d'):format(opt.resume, first_epoch - 1))
end

local function save_checkpoint(path, epoch)
    if rank == 0 then
        ddpl.save({model = model.module:state_dict(), optimizer = optimizer:state_dict(),
            epoch = epoch, model_name = opt.model, seed = opt.seed}, path)
    end
    dist.barrier() -- nobody goes on (or resumes) before the file is complete
end

local progress = rank == 0 and (opt.progress == 'on' or (opt.progress == 'auto'
    and os.execute('test -t 1') == true))
log0(('model %s: %d parameters; %d ranks x batch %d (global %d); %d training and %d test ' ..
    'images (loaded in %.2f s); lr %g, momentum %g, %d buckets'):format(opt.model,
    net:num_parameters(), world, batch, world * batch, #train_set, #test_set, t_load, lr,
    opt.momentum, #model:buckets()))

---------------------------------------------------------------------------------------------------
-- training

-- Accuracy and mean loss over the whole test set: each rank its share, summed across ranks.
local function evaluate()
    net:eval()
    local correct, loss_sum, count = 0, 0, 0
    ddpl.no_grad(function()
        for x, y in test_loader:iter() do
            local out = net(x)
            correct = correct + out:argmax(1):eq(y):sum():item()
            loss_sum = loss_sum + F.cross_entropy(out, y, {reduction = 'sum'}):item()
            count = count + x:size(0)
        end
    end)
    local sums = ddpl.tensor({correct, loss_sum, count}, {dtype = 'float64'})
    dist.all_reduce(sums)
    net:train()
    local s = sums:tolist()
    return s[1] / s[3], s[2] / s[3]
end

local steps_per_epoch = #train_loader
for epoch = first_epoch, opt.epochs do
    sampler:set_epoch(epoch - 1)
    model:train()
    local t0 = ddpl.time()
    local loss_sum, seen, step, last_draw = 0, 0, 0, t0
    for x, y in train_loader:iter() do
        optimizer:zero_grad()
        local loss = F.cross_entropy(model(x), y)
        loss:backward()
        optimizer:step()
        local n = x:size(0)
        loss_sum, seen, step = loss_sum + loss:item() * n, seen + n, step + 1
        if progress then
            local now = ddpl.time()
            if now - last_draw > 0.1 or step == steps_per_epoch then
                io.write(('\repoch %d [%-30s] %d/%d  loss %.4f  %.0f samples/s '):format(epoch,
                    ('='):rep(30 * step // steps_per_epoch), step, steps_per_epoch,
                    loss_sum / seen, world * seen / (now - t0)))
                io.flush()
                last_draw = now
            end
        end
    end
    local train_s = ddpl.time() - t0
    if progress then io.write('\n') end
    local acc, test_loss = evaluate()
    log0(('epoch %d/%d  train loss %.4f (rank 0)  test loss %.4f  test accuracy %.4f  ' ..
        '%.0f samples/s (global)  %.1f s'):format(epoch, opt.epochs, loss_sum / seen, test_loss,
        acc, world * seen / train_s, train_s))
    if opt.checkpoint then save_checkpoint(opt.checkpoint, epoch) end
end

model:write_timeline()
dist.destroy_process_group()
