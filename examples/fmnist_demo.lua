-- examples/fmnist_demo.lua: a two-layer perceptron trained on Fashion-MNIST with nothing but
-- tensors, autograd and a hand-written SGD step: the engine foundation end to end on real data.
--
--   ddplua examples/fmnist_demo.lua [--epochs 2] [--batch 128] [--lr 0.1] [--threads 2]
--
-- The data is read from $FASHION_MNIST_DIR, else from Debian's dataset-fashion-mnist package.
-- (The nn/optim/data library and the DDP version of this job come with later issues.)
local ddpl = require 'ddplua'
local F = ddpl.F

local opts = { epochs = 2, batch = 128, lr = 0.1, threads = 2, seed = 0, hidden = 256 }
local i = 1
while i <= #arg do
    local key = arg[i]:match('^%-%-(.+)$')
    if not key or opts[key] == nil then error('fmnist_demo: unknown argument ' .. tostring(arg[i])) end
    opts[key] = tonumber(arg[i + 1]) or error('fmnist_demo: --' .. key .. ' needs a number')
    i = i + 2
end
ddpl.set_num_threads(opts.threads)
ddpl.manual_seed(opts.seed)

local dir = os.getenv('FASHION_MNIST_DIR') or '/usr/share/datasets/fashion-mnist'

-- Reads an IDX file (big-endian header: magic with the rank in its low byte, then the sizes),
-- gzip-compressed as the Debian package ships it, into a uint8 tensor.
local function read_idx(name)
    local path = dir .. '/' .. name
    local probe = io.open(path, 'rb')
    if not probe then error('fmnist_demo: cannot open ' .. path .. ' (set FASHION_MNIST_DIR)') end
    probe:close()
    local pipe = assert(io.popen('gzip -dc ' .. path, 'r'))
    local bytes = pipe:read('a')
    pipe:close()
    local magic = string.unpack('>I4', bytes, 1)
    local rank = magic & 0xff
    local shape, pos = {}, 5
    for d = 1, rank do
        shape[d], pos = string.unpack('>I4', bytes, pos)
    end
    return ddpl.frombytes(bytes:sub(pos), 'uint8', shape)
end

local function load(split)
    local images = read_idx(split .. '-images-idx3-ubyte.gz')
    local labels = read_idx(split .. '-labels-idx1-ubyte.gz')
    -- [0,1] then the data set's mean and std, as the reference PyTorch runs do
    local x = (images:float() / 255 - 0.2860) / 0.3530
    return x:view(x:size(0), 784), labels:long()
end

local t0 = ddpl.time()
local x_train, y_train = load('train')
local x_test, y_test = load('t10k')
print(string.format('loaded %d training and %d test images in %.2f s', x_train:size(0),
    x_test:size(0), ddpl.time() - t0))

-- PyTorch's nn.Linear initialisation: U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for weight and bias
local function linear_params(fan_in, fan_out)
    local bound = 1 / math.sqrt(fan_in)
    local w = ddpl.empty(fan_out, fan_in):uniform_(-bound, bound)
    local b = ddpl.empty(fan_out):uniform_(-bound, bound)
    w.requires_grad = true
    b.requires_grad = true
    return w, b
end
local w1, b1 = linear_params(784, opts.hidden)
local w2, b2 = linear_params(opts.hidden, 10)
local params = { w1, b1, w2, b2 }

local function forward(x)
    return F.linear(F.relu(F.linear(x, w1, b1)), w2, b2)
end

local function accuracy(x, y)
    return ddpl.no_grad(function()
        local correct = forward(x):argmax(1):eq(y):sum():item()
        return correct / x:size(0)
    end)
end

local n = x_train:size(0)
for epoch = 1, opts.epochs do
    local perm = ddpl.randperm(n)
    local start, loss_sum, steps = ddpl.time(), 0, 0
    for first = 0, n - 1, opts.batch do
        local idx = perm:narrow(0, first, math.min(opts.batch, n - first))
        local xb, yb = x_train:index_select(0, idx), y_train:index_select(0, idx)
        local loss = F.cross_entropy(forward(xb), yb)
        loss:backward()
        ddpl.no_grad(function()
            for _, p in ipairs(params) do
                p:add_(p.grad, -opts.lr)
                p.grad:zero_()
            end
        end)
        loss_sum, steps = loss_sum + loss:item(), steps + 1
    end
    local seconds = ddpl.time() - start
    print(string.format('epoch %d  loss %.4f  test accuracy %.4f  %.0f samples/s', epoch,
        loss_sum / steps, accuracy(x_test, y_test), n / seconds))
end
