-- examples/train.lua: single-process training of a model from models/ on Fashion-MNIST or CIFAR-10.
--
--   ddplua examples/train.lua [--model mlp|cnn|resnet] [--dataset fashion-mnist|cifar10]
--       [--data DIR] [--epochs 3] [--batch-size 64] [--lr L]
--       [--momentum 0.9] [--seed 0] [--threads T] [--checkpoint PATH] [--resume PATH]
--       [--metrics PATH] [--train-size N] [--test-size N] [--eval-batch 1000]
--       [--progress auto|on|off] [--tensorboard DIR] [--log-every 50] [--device cpu|cuda]
--       [--dtype float32|bfloat16|float16]
--
-- The settings of the PyTorch reference runs (shared/reference/torch/train_ref.py): images scaled
-- to [0, 1] then normalised with mean 0.2860 and std 0.3530, SGD with momentum 0.9, lr 0.05 for
-- the mlp and 0.02 for the cnn, batch 64, the last partial batch kept, test accuracy on all
-- 10000 test images at the end of every epoch.
--   * Progress (ddpl.utils.progress): a bar with loss, rate and ETA redrawn in place when stdout
--     is a terminal (--progress on forces it), a plain line every tenth of an epoch otherwise,
--     none with --progress off; one summary line per epoch in every case.
--   * Metrics (ddpl.utils.MetricsLogger): one JSON object per line in --metrics, default
--     runs/train-<model>-<date>.jsonl: a "start" record, a "step" record every --log-every steps
--     (step, epoch, loss: the mean of those steps, lr, samples_per_s), one "epoch" record per
--     epoch (step, epoch, train_loss, test_loss, test_acc, accuracy, lr, samples_per_s), an
--     "end" record. `ddplua plot` draws them against step.
--   * TensorBoard (--tensorboard DIR, ddpl.utils.tensorboard): the same figures as scalars
--     (train/loss, train/lr, train/samples_per_s, test/loss, test/accuracy), the settings as text.
--   * Checkpoints: with --checkpoint PATH, model, optimizer and epoch go to PATH (ddpl.save,
--     safetensors, atomic) after every epoch. --resume PATH loads such a file and continues with
--     the next epoch (and keeps checkpointing to PATH unless --checkpoint says otherwise). The
--     shuffle order of epoch e depends only on --seed and e (DistributedSampler semantics with
--     one replica), so a resumed run follows the same path as an uninterrupted one.
--   * Device (--device): cpu, or cuda (the current GPU, ddpl.cuda.set_device to choose; the
--     batches come from pinned host memory and are copied without blocking the host).
--   * Precision (--dtype): float32, or bfloat16/float16 mixed precision: forward and loss under
--     ddpl.autocast(device, {dtype}) with float32 weights, gradients and optimizer state, as
--     PyTorch's autocast recipe (float16 also scales the loss with amp.GradScaler; bfloat16
--     has float32's range and needs no scaling). Evaluation runs under the same autocast.
-- The data is read from --data DIR, else $FASHION_MNIST_DIR or Debian's dataset-fashion-mnist
-- package (fashion-mnist), $CIFAR10_DIR (cifar10: the binary version, data_batch_*.bin). CIFAR-10
-- trains with the usual augmentation, RandomCrop(32, {padding=4}) and RandomHorizontalFlip, then
-- Normalize with the training set's per-channel mean and std; the test set is only normalised.
-- The models get 3-channel 32x32 inputs then (each reads the option it knows).
local ddpl = require 'ddplua'
local nn, F, optim, data = ddpl.nn, ddpl.F, ddpl.optim, ddpl.data

local MEAN, STD = 0.2860, 0.3530
-- --model name -> file in models/ and default learning rate (the reference's for mlp and cnn)
local MODELS = {
    mlp = { file = 'mlp', lr = 0.05 },
    cnn = { file = 'lenet', lr = 0.02 },
    lenet = { file = 'lenet', lr = 0.02 },
    resnet = { file = 'resnet', lr = 0.05 },
}

---------------------------------------------------------------------------------------------------
-- command line
local defaults = {
    model = 'mlp', epochs = 3, ['batch-size'] = 64, lr = false, momentum = 0.9, seed = 0,
    threads = false, checkpoint = false, resume = false, metrics = false, ['train-size'] = false,
    ['test-size'] = false, progress = 'auto', ['eval-batch'] = 1000,
    tensorboard = false, ['log-every'] = 50, dataset = 'fashion-mnist', data = false,
    device = 'cpu', dtype = 'float32',
}
local numeric = { epochs = true, ['batch-size'] = true, lr = true, momentum = true, seed = true,
    threads = true, ['train-size'] = true, ['test-size'] = true, ['eval-batch'] = true,
    ['log-every'] = true }

local function usage(msg) -- msg nil: --help
    local out = msg and io.stderr or io.stdout
    if msg then out:write('train.lua: ', msg, '\n') end
    out:write('usage: ddplua examples/train.lua [--model ',
        'mlp|cnn|resnet] [--dataset fashion-mnist|cifar10] [--data DIR] [--epochs N] ',
        '[--batch-size N] [--lr X] [--momentum X] [--seed N] ',
        '[--threads N] [--checkpoint PATH] [--resume PATH] [--metrics PATH] [--train-size N] ',
        '[--test-size N] [--eval-batch N] [--progress auto|on|off] [--tensorboard DIR] ',
        '[--log-every N] [--device cpu|cuda] [--dtype float32|bfloat16|float16]\n')
    os.exit(msg and 2 or 0)
end

-- The directory of this script, to find args.lua and models/ wherever we are run from.
local root = (arg[0]:match('^(.*)/[^/]*$') or '.') .. '/..'
local opt = dofile(root .. '/examples/args.lua')(arg, defaults, numeric, usage)
local spec = MODELS[opt.model] or usage('unknown model ' .. opt.model .. ' (mlp, cnn, resnet)')
local lr = opt.lr or spec.lr
local batch = math.tointeger(opt['batch-size']) or usage('--batch-size must be an integer')
if batch < 1 or opt.epochs < 0 then usage('--batch-size must be >= 1 and --epochs >= 0') end
local log_every = math.tointeger(opt['log-every'])
if not log_every or log_every < 1 then usage('--log-every must be a positive integer') end
opt.checkpoint = opt.checkpoint or opt.resume
if opt.threads then ddpl.set_num_threads(math.tointeger(opt.threads)) end
if opt.device ~= 'cpu' and opt.device ~= 'cuda' then
    usage('--device must be cpu or cuda, got ' .. tostring(opt.device))
end
if opt.device == 'cuda' and not ddpl.cuda.is_available() then
    usage('--device cuda: no CUDA device (ddpl.config().cuda says whether this build has CUDA)')
end
local device = opt.device
if opt.dtype ~= 'float32' and opt.dtype ~= 'bfloat16' and opt.dtype ~= 'float16' then
    usage('--dtype must be float32, bfloat16 or float16, got ' .. tostring(opt.dtype))
end
-- fn's results, computed under autocast when --dtype is a 16-bit one
local function autocast(fn)
    if opt.dtype == 'float32' then return fn() end
    return ddpl.autocast(device, { dtype = opt.dtype }, fn)
end
-- a batch on the training device: from pinned memory the copy does not block the host
local function to_device(t)
    return device == 'cpu' and t or t:to(device, { non_blocking = true })
end
ddpl.manual_seed(opt.seed)

---------------------------------------------------------------------------------------------------
-- small helpers


local function load_model_file(name)
    local path = root .. '/models/' .. name .. '.lua'
    local chunk, err = loadfile(path)
    if not chunk then error('train.lua: cannot load model ' .. path .. ': ' .. err, 0) end
    return chunk()
end

---------------------------------------------------------------------------------------------------
-- data: the whole split in memory as two tensors, normalised once (as the reference does), then
-- a TensorDataset, whose batches the DataLoader gathers with one native index_select per tensor.

local function load_split(train, limit)
    local ds = data.datasets.FashionMNIST({ root = opt.data or nil, train = train })
    local x, y = ds.data, ds.targets -- (N, 28, 28) uint8, (N,) int64
    if limit and limit < x:size(0) then
        x, y = x:narrow(0, 0, limit), y:narrow(0, 0, limit)
    end
    -- one float32 copy, then in place: no full-size temporaries (peak memory)
    x = x:float():div_(255):add_(-MEAN):div_(STD)
    return data.TensorDataset(x:view(x:size(0), 1, 28, 28), y)
end

-- CIFAR-10: items go through the transforms one by one (random crops differ per image), so the
-- data set stays a CIFAR10 (uint8 pixels) and a --train-size/--test-size limit is a Subset.
local CIFAR_MEAN, CIFAR_STD = { 0.4914, 0.4822, 0.4465 }, { 0.2470, 0.2435, 0.2616 }

local function load_cifar10_split(train, limit)
    local T = data.transforms
    local normalize = T.Normalize(CIFAR_MEAN, CIFAR_STD)
    local transform = normalize
    if train then
        transform = T.Compose({ T.RandomCrop(32, { padding = 4 }), T.RandomHorizontalFlip(),
            normalize })
    end
    local ds = data.datasets.CIFAR10({ root = opt.data or nil, train = train, transform = transform })
    if limit and limit < #ds then ds = data.Subset(ds, ddpl.arange(math.tointeger(limit))) end
    return ds
end

-- --dataset -> loader of a split and the options that fit the models to its images
local DATASETS = {
    ['fashion-mnist'] = { load = load_split, model_opts = {} },
    cifar10 = { load = load_cifar10_split,
        model_opts = { in_channels = 3, image_size = 32, in_features = 3 * 32 * 32 } },
}
local dataset = DATASETS[opt.dataset] or usage('unknown dataset ' .. opt.dataset ..
    ' (fashion-mnist, cifar10)')

local t_load = ddpl.time()
local train_set = dataset.load(true, opt['train-size'])
local test_set = dataset.load(false, opt['test-size'])
t_load = ddpl.time() - t_load
local n_train = #train_set

-- One replica of PyTorch's DistributedSampler: the permutation of epoch e is randperm(n) under
-- seed + e, independent of what ran before, which is what makes --resume exact.
local sampler = data.DistributedSampler(train_set, { num_replicas = 1, rank = 0, shuffle = true,
    seed = opt.seed })
local pin = device == 'cuda'
local train_loader = data.DataLoader(train_set, { batch_size = batch, sampler = sampler,
    pin_memory = pin })
local test_loader = data.DataLoader(test_set, { batch_size = opt['eval-batch'], pin_memory = pin })

---------------------------------------------------------------------------------------------------
-- model, optimizer, checkpoint

local model = load_model_file(spec.file)(dataset.model_opts):to(device)
local optimizer = optim.SGD(model:parameters(), { lr = lr, momentum = opt.momentum })
-- float16 needs loss scaling (its range ends at 65504); bfloat16 has float32's exponent
local scaler = opt.dtype == 'float16' and ddpl.amp.GradScaler() or nil
local first_epoch = 1

local function save_checkpoint(path, epoch)
    ddpl.save({ model = model:state_dict(), optimizer = optimizer:state_dict(), epoch = epoch,
        model_name = opt.model, seed = opt.seed }, path)
end

if opt.resume then
    local ok, ck = pcall(ddpl.load, opt.resume)
    if not ok then error('train.lua: cannot resume: ' .. tostring(ck), 0) end
    if ck.model_name and ck.model_name ~= opt.model then
        error(('train.lua: %s holds a %s model, not %s'):format(opt.resume, ck.model_name,
            opt.model), 0)
    end
    model:load_state_dict(ck.model)
    optimizer:load_state_dict(ck.optimizer)
    first_epoch = math.tointeger(ck.epoch) + 1
    print(('resumed from %s after epoch %d'):format(opt.resume, first_epoch - 1))
end

---------------------------------------------------------------------------------------------------
-- metrics file

local metrics_path = opt.metrics
if not metrics_path then
    os.execute('mkdir -p runs')
    metrics_path = ('runs/train-%s-%s.jsonl'):format(opt.model, os.date('!%Y%m%d-%H%M%S'))
end
local metrics = ddpl.utils.MetricsLogger(metrics_path, { mode = opt.resume and 'a' or 'w' })
local tb = opt.tensorboard and ddpl.utils.tensorboard.SummaryWriter(opt.tensorboard)

if opt.dataset ~= 'fashion-mnist' then
    local ds = train_set.dataset or train_set -- the CIFAR10 under a Subset
    print(('data %s from %s; training transform %s'):format(opt.dataset, ds.root,
        (tostring(ds.transform):gsub('\n%s*', ' '))))
end
local n_params = model:num_parameters()
print(('model %s: %d parameters; %d training and %d test images (loaded in %.2f s); ' ..
    'batch %d, lr %g, momentum %g, %d threads; metrics in %s'):format(opt.model, n_params,
    n_train, #test_set, t_load, batch, lr, opt.momentum, ddpl.get_num_threads(), metrics_path))
local start = { event = 'start', model = opt.model, params = n_params, epochs = opt.epochs,
    batch_size = batch, lr = lr, momentum = opt.momentum, seed = opt.seed, device = device,
    dtype = opt.dtype,
    threads = ddpl.get_num_threads(), train_size = n_train, test_size = #test_set,
    first_epoch = first_epoch, time = os.date('!%Y-%m-%dT%H:%M:%SZ') }
metrics:log(start)
if tb then tb:add_text('config', require('ddplua.json').encode(start), 0) end

---------------------------------------------------------------------------------------------------
-- training

-- Accuracy and mean loss over the test set, without recording gradients.
local function evaluate()
    model:eval()
    local correct, loss_sum = 0, 0
    ddpl.no_grad(function()
        for x, y in test_loader:iter() do
            x, y = to_device(x), to_device(y)
            local out, l = autocast(function()
                local o = model(x)
                return o, F.cross_entropy(o, y, { reduction = 'sum' })
            end)
            loss_sum = loss_sum + l:item()
            correct = correct + out:argmax(1):eq(y):sum():item()
        end
    end)
    model:train()
    return correct / #test_set, loss_sum / #test_set
end

local steps_per_epoch = #train_loader
local last_acc
for epoch = first_epoch, opt.epochs do
    sampler:set_epoch(epoch - 1) -- 0-based epochs, as in PyTorch scripts
    model:train()
    local t0 = ddpl.time()
    local loss_sum, seen, step = 0, 0, 0
    local bar = ddpl.utils.progress(n_train, { desc = ('epoch %d'):format(epoch), unit = 'img',
        disable = opt.progress == 'off', terminal = opt.progress == 'on' or nil })
    local window = { loss = 0, n = 0, t = t0 } -- the steps since the last "step" record
    for x, y in train_loader:iter() do
        x, y = to_device(x), to_device(y)
        local loss = autocast(function() return F.cross_entropy(model(x), y) end)
        optimizer:zero_grad()
        if scaler then
            scaler:scale(loss):backward()
            scaler:step(optimizer)
            scaler:update()
        else
            loss:backward()
            optimizer:step()
        end
        local n, l = x:size(0), loss:item()
        loss_sum, seen, step = loss_sum + l * n, seen + n, step + 1
        window.loss, window.n = window.loss + l * n, window.n + n
        bar:set_postfix({ loss = loss_sum / seen })
        bar:update(n)
        local global_step = (epoch - 1) * steps_per_epoch + step
        if global_step % log_every == 0 then
            local now = ddpl.time()
            local rec = { event = 'step', step = global_step, epoch = epoch,
                loss = window.loss / window.n, lr = lr,
                samples_per_s = window.n / (now - window.t) }
            metrics:log(rec)
            if tb then
                for _, k in ipairs({ 'loss', 'lr', 'samples_per_s' }) do
                    tb:add_scalar('train/' .. k, rec[k], global_step)
                end
            end
            window = { loss = 0, n = 0, t = now }
        end
    end
    local train_s = ddpl.time() - t0
    bar:close()
    local acc, test_loss = evaluate()
    last_acc = acc
    local rate = seen / train_s
    print(('epoch %d/%d  train loss %.4f  test loss %.4f  test accuracy %.4f  %.0f samples/s  ' ..
        '%.1f s'):format(epoch, opt.epochs, loss_sum / seen, test_loss, acc, rate, train_s))
    local global_step = epoch * steps_per_epoch
    metrics:log({ event = 'epoch', step = global_step, epoch = epoch, train_loss = loss_sum / seen,
        test_loss = test_loss, test_acc = acc, accuracy = acc, samples_per_s = rate,
        train_s = train_s, steps = step, lr = lr })
    if tb then
        tb:add_scalar('test/loss', test_loss, global_step)
        tb:add_scalar('test/accuracy', acc, global_step)
        tb:add_scalar('train/epoch_loss', loss_sum / seen, global_step)
        tb:flush()
    end
    if opt.checkpoint then save_checkpoint(opt.checkpoint, epoch) end
end

metrics:log({ event = 'end', test_acc = last_acc, time = os.date('!%Y-%m-%dT%H:%M:%SZ') })
metrics:close()
if tb then tb:close() end
