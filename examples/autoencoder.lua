-- examples/autoencoder.lua: a convolutional autoencoder on Fashion-MNIST, built from GroupNorm and
-- ConvTranspose2d: the images are squeezed to a 7x7 code and rebuilt.
--
--   ddplua examples/autoencoder.lua [--epochs 2] [--batch-size 64] [--lr 0.002] [--seed 0]
--       [--threads T] [--loss bce|mse] [--width 16] [--train-size N] [--test-size N]
--       [--log-every 100] [--data DIR]
--
-- Model (shapes for a batch of N images):
--   encoder  (N,1,28,28) -conv 3x3 s2-> (N,w,14,14) -GroupNorm-ReLU-> -conv 3x3 s2->
--            (N,2w,7,7) -GroupNorm-ReLU-> -conv 1x1-> (N,4,7,7): the code, 196 numbers per image
--   decoder  (N,4,7,7) -conv 1x1-> (N,2w,7,7) -GroupNorm-ReLU-> -ConvTranspose 4x4 s2 p1->
--            (N,w,14,14) -GroupNorm-ReLU-> -ConvTranspose 4x4 s2 p1-> (N,1,28,28) logits
-- The loss compares the logits with the pixels scaled to [0, 1]: BCEWithLogits (default, the
-- pixels as probabilities) or MSE on sigmoid(logits). Adam. Every --log-every steps the mean
-- training loss of those steps is printed, after every epoch the mean training loss and the
-- reconstruction loss on the test images; the last line is "final test_loss X".
-- The data is read as examples/train.lua reads it: --data DIR, else $FASHION_MNIST_DIR, else
-- Debian's dataset-fashion-mnist package (FashionMNIST says how to get it when it is missing).
local ddpl = require 'ddplua'
local nn, F, optim, data = ddpl.nn, ddpl.F, ddpl.optim, ddpl.data

local defaults = {
    epochs = 2, ['batch-size'] = 64, lr = 0.002, seed = 0, threads = false, loss = 'bce',
    width = 16, ['train-size'] = false, ['test-size'] = false, ['log-every'] = 100, data = false,
}
local numeric = { epochs = true, ['batch-size'] = true, lr = true, seed = true, threads = true,
    width = true, ['train-size'] = true, ['test-size'] = true, ['log-every'] = true }

local function usage(msg) -- msg nil: --help
    local out = msg and io.stderr or io.stdout
    if msg then out:write('autoencoder.lua: ', msg, '\n') end
    out:write('usage: ddplua examples/autoencoder.lua ',
        '[--epochs N] [--batch-size N] [--lr X] [--seed N] [--threads N] [--loss bce|mse] ',
        '[--width N] [--train-size N] [--test-size N] [--log-every N] [--data DIR]\n')
    os.exit(msg and 2 or 0)
end

local root = (arg[0]:match('^(.*)/[^/]*$') or '.') .. '/..'
local opt = dofile(root .. '/examples/args.lua')(arg, defaults, numeric, usage)
local function positive_int(key)
    local v = math.tointeger(opt[key])
    if not v or v < 1 then usage('--' .. key .. ' must be a positive integer') end
    return v
end
local batch, width, log_every = positive_int('batch-size'), positive_int('width'),
    positive_int('log-every')
local epochs = math.tointeger(opt.epochs)
if not epochs or epochs < 0 then usage('--epochs must be an integer >= 0') end
if width % 4 ~= 0 then usage('--width must be a multiple of 4 (GroupNorm uses 4 groups)') end
if opt.loss ~= 'bce' and opt.loss ~= 'mse' then usage('--loss must be bce or mse') end
if opt.threads then ddpl.set_num_threads(positive_int('threads')) end
ddpl.manual_seed(math.tointeger(opt.seed) or usage('--seed must be an integer'))

---------------------------------------------------------------------------------------------------
-- data: the images only (labels are not used), as float32 in [0, 1], shape (N, 1, 28, 28)

local function load_split(train, limit)
    local ds = data.datasets.FashionMNIST({ root = opt.data or nil, train = train })
    local x = ds.data -- (N, 28, 28) uint8
    if limit and limit < x:size(0) then x = x:narrow(0, 0, math.tointeger(limit)) end
    x = x:float():div_(255)
    return data.TensorDataset(x:view(x:size(0), 1, 28, 28))
end

local t_load = ddpl.time()
local train_set, test_set = load_split(true, opt['train-size']), load_split(false, opt['test-size'])
t_load = ddpl.time() - t_load
local train_loader = data.DataLoader(train_set, { batch_size = batch, shuffle = true })
local test_loader = data.DataLoader(test_set, { batch_size = 500 })

---------------------------------------------------------------------------------------------------
-- model

local GROUPS = 4
local function block(conv, channels)
    return conv, nn.GroupNorm(GROUPS, channels), nn.ReLU()
end

local w = width
local encoder = nn.Sequential(
    block(nn.Conv2d(1, w, 3, { stride = 2, padding = 1 }), w),              -- 28 -> 14
    block(nn.Conv2d(w, 2 * w, 3, { stride = 2, padding = 1 }), 2 * w),      -- 14 -> 7
    nn.Conv2d(2 * w, 4, 1))                                                 -- the 4x7x7 code
local decoder = nn.Sequential(
    block(nn.Conv2d(4, 2 * w, 1), 2 * w),
    block(nn.ConvTranspose2d(2 * w, w, 4, { stride = 2, padding = 1 }), w), -- 7 -> 14
    nn.ConvTranspose2d(w, 1, 4, { stride = 2, padding = 1 }))               -- 14 -> 28
local model = nn.Sequential(encoder, decoder)
local optimizer = optim.Adam(model:parameters(), { lr = opt.lr })

-- reconstruction loss of a batch of logits against images in [0, 1], mean over pixels
local function recon_loss(logits, x, reduction)
    if opt.loss == 'bce' then
        return F.binary_cross_entropy_with_logits(logits, x, { reduction = reduction })
    end
    return F.mse_loss(logits:sigmoid(), x, { reduction = reduction })
end

local function evaluate()
    model:eval()
    local sum = 0
    ddpl.no_grad(function()
        for x in test_loader:iter() do sum = sum + recon_loss(model(x), x, 'sum'):item() end
    end)
    model:train()
    return sum / (#test_set * 28 * 28)
end

print(('autoencoder: %d parameters, code 4x7x7; %d training and %d test images (loaded in ' ..
    '%.2f s); loss %s, batch %d, lr %g, %d threads'):format(model:num_parameters(), #train_set,
    #test_set, t_load, opt.loss, batch, opt.lr, ddpl.get_num_threads()))
print(('step 0 test_loss %.5f'):format(evaluate()))

---------------------------------------------------------------------------------------------------
-- training

local step = 0
local test_loss
for epoch = 1, epochs do
    local t0 = ddpl.time()
    local epoch_sum, epoch_n, window_sum, window_n = 0, 0, 0, 0
    for x in train_loader:iter() do
        local loss = recon_loss(model(x), x, 'mean')
        optimizer:zero_grad()
        loss:backward()
        optimizer:step()
        step = step + 1
        local l = loss:item()
        epoch_sum, epoch_n = epoch_sum + l * x:size(0), epoch_n + x:size(0)
        window_sum, window_n = window_sum + l, window_n + 1
        if step % log_every == 0 then
            print(('step %d loss %.5f'):format(step, window_sum / window_n))
            window_sum, window_n = 0, 0
        end
    end
    test_loss = evaluate()
    print(('epoch %d/%d train_loss %.5f test_loss %.5f (%.1f s)'):format(epoch, epochs,
        epoch_sum / math.max(epoch_n, 1), test_loss, ddpl.time() - t0))
end
print(('final test_loss %.5f'):format(test_loss or evaluate()))
