-- spec/examples/models_train_spec.lua: the models of models/ and the training examples, end to end.
-- defines: specs for models/{mlp,lenet,resnet,gpt}.lua (shapes, parameter counts, a tied GPT
--          head, a learning step), examples/train.lua (the MLP learns Fashion-MNIST on a 4000-image
--          subset; --resume continues exactly where an uninterrupted run would be; the resnet
--          trains on small files in CIFAR-10's binary format with crop+flip augmentation) and
--          examples/gpt_tiny.lua (the validation loss falls).
--
-- The examples run as child processes of the ddplua executable ($DDPLUA_BIN, set by ctest) with
-- --threads 1, so their sums are reduced in one fixed order and two runs agree to the bit.
-- Fashion-MNIST comes from $FASHION_MNIST_DIR or Debian's dataset-fashion-mnist package.
local ddpl = require 'ddplua'
local nn, F = ddpl.nn, ddpl.F

local source = os.getenv('DDPLUA_SOURCE_DIR') or '.'
local bin = os.getenv('DDPLUA_BIN') or ((os.getenv('DDPLUA_BUILD_DIR') or 'build') .. '/ddplua')

local function q(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end

local function model(name) return dofile(source .. '/models/' .. name .. '.lua') end

-- Runs `ddplua <script> <args>`, returns its stdout; fails the spec with the output on error.
local function run(script, args)
    local err = os.tmpname()
    local p = assert(io.popen(('%s %s %s 2>%s'):format(q(bin), q(source .. '/' .. script), args,
        q(err))))
    local out = p:read('a')
    local ok, _, code = p:close()
    local f = io.open(err)
    local stderr = f and f:read('a') or ''
    if f then f:close() end
    os.remove(err)
    assert(ok, ('%s %s exited with %s:\n%s\n%s'):format(script, args, tostring(code), out, stderr))
    return out
end

-- The records of a JSON-lines metrics file whose "event" is `event`, as tables of the numeric
-- and string fields (the file holds flat objects only).
local function records(path, event)
    local list = {}
    for line in io.lines(path) do
        local r = {}
        for k, v in line:gmatch('"([%w_]+)":("?[^,}"]*"?)') do
            r[k] = tonumber(v) or v:gsub('^"', ''):gsub('"$', '')
        end
        if r.event == event then list[#list + 1] = r end
    end
    return list
end

describe('models', function()
    it('mlp: 784-256-256-10, 269,322 parameters as in PyTorch, logits for 28x28 images', function()
        local net = model('mlp')()
        assert.are.equal(269322, net:num_parameters())
        assert.are.same({ 5, 10 }, net(ddpl.randn(5, 1, 28, 28)):shape())
        assert.are.same({ 3, 10 }, net(ddpl.randn(3, 784)):shape())
    end)

    it('lenet: the reference cnn, 421,642 parameters as in PyTorch', function()
        local net = model('lenet')()
        assert.are.equal(421642, net:num_parameters())
        assert.are.same({ 2, 10 }, net(ddpl.randn(2, 1, 28, 28)):shape())
        assert.has_error(function() model('lenet')({ image_size = 30 }) end,
            'lenet: image_size 30 is not divisible by 4 (two 2x2 poolings)')
    end)

    it('resnet: 28x28 and 32x32 inputs, BatchNorm running statistics move in training', function()
        local net = model('resnet')({ in_channels = 3, widths = { 8, 16 }, blocks = 1 })
        assert.are.same({ 4, 10 }, net(ddpl.randn(4, 3, 32, 32)):shape())
        local stem_bn = net.layers[0].bn1 -- first block's first BatchNorm
        local before = stem_bn.running_mean:clone()
        net(ddpl.randn(4, 3, 28, 28) + 1)
        assert.is_true((stem_bn.running_mean - before):abs():max():item() > 1e-3)
        net:eval()
        assert.are.same({ 4, 10 }, net(ddpl.randn(4, 3, 28, 28)):shape())
    end)

    it('gpt: logits and loss, a tied head, causality', function()
        ddpl.manual_seed(0)
        local cfg = { vocab_size = 11, block_size = 8, n_layer = 2, n_head = 2, n_embd = 16 }
        local net = model('gpt')(cfg)
        -- per block: 2 LayerNorms (2*2*16), attention (16*48+48 + 16*16+16), MLP (16*64+64 +
        -- 64*16+16); plus wte 11*16, wpe 8*16, ln_f 2*16, and no separate head weight
        local block = 4 * 16 + (16 * 48 + 48 + 16 * 16 + 16) + (16 * 64 + 64 + 64 * 16 + 16)
        assert.are.equal(2 * block + 11 * 16 + 8 * 16 + 2 * 16, net:num_parameters())
        local idx = ddpl.randint(0, 11, { 3, 8 }, { dtype = 'int64' })
        local logits, loss = net(idx, idx)
        assert.are.same({ 3, 8, 11 }, logits:shape())
        assert.is_true(math.abs(loss:item() - math.log(11)) < 0.5) -- small init: near uniform
        -- changing the last token must not change any earlier position's logits
        local idx2 = idx:clone()
        idx2[0][7] = (idx[0][7]:item() + 1) % 11
        local l2 = net(idx2)
        local diff = (l2:narrow(1, 0, 7) - logits:narrow(1, 0, 7)):abs():max():item()
        assert.is_true(diff < 1e-6, 'future token leaked into the past: ' .. diff)
        assert.is_true((l2:narrow(1, 7, 1) - logits:narrow(1, 7, 1)):abs():max():item() > 1e-6)
        -- the head is the embedding: its gradient collects from both uses
        loss:backward()
        assert.is_truthy(net.wte.weight.grad)
        assert.has_error(function() net(ddpl.zeros(1, 9, { dtype = 'int64' })) end)
    end)
end)

describe('examples/train.lua', function()
    local tmp = os.tmpname()
    os.remove(tmp)
    os.execute('mkdir -p ' .. q(tmp))
    teardown(function() os.execute('rm -rf ' .. q(tmp)) end)

    it('trains the mlp on 4000 images: the loss falls and test accuracy > 0.70', function()
        local m = tmp .. '/mlp.jsonl'
        local out = run('examples/train.lua', '--model mlp --epochs 2 --train-size 4000 ' ..
            '--test-size 2000 --threads 1 --progress off --metrics ' .. q(m))
        local epochs = records(m, 'epoch')
        assert.are.equal(2, #epochs, out)
        -- an untrained 10-class classifier scores ln(10) = 2.30 on average
        assert.is_true(epochs[1].train_loss < 2.0, out)
        assert.is_true(epochs[2].train_loss < epochs[1].train_loss, out)
        assert.is_true(epochs[2].test_loss < 0.9, out)
        assert.is_true(epochs[2].test_acc > 0.70, out)
        assert.are.equal(1, #records(m, 'start'))
        assert.truthy(out:find('epoch 2/2', 1, true))
    end)

    it('--resume continues exactly where an uninterrupted run would be', function()
        local common = '--model mlp --train-size 2000 --test-size 1000 --threads 1 ' ..
            '--progress off --seed 3 '
        run('examples/train.lua', common .. '--epochs 2 --checkpoint ' .. q(tmp .. '/a.st') ..
            ' --metrics ' .. q(tmp .. '/a.jsonl'))
        run('examples/train.lua', common .. '--epochs 1 --checkpoint ' .. q(tmp .. '/b.st') ..
            ' --metrics ' .. q(tmp .. '/b.jsonl'))
        local out = run('examples/train.lua', common .. '--epochs 2 --resume ' ..
            q(tmp .. '/b.st') .. ' --metrics ' .. q(tmp .. '/b.jsonl'))
        assert.truthy(out:find('resumed from .* after epoch 1'), out)
        assert.falsy(out:find('epoch 1/2', 1, true), out)
        local a, b = records(tmp .. '/a.jsonl', 'epoch'), records(tmp .. '/b.jsonl', 'epoch')
        assert.are.equal(2, #b)
        for _, k in ipairs({ 'train_loss', 'test_loss', 'test_acc' }) do
            assert.are.equal(a[2][k], b[2][k], k)
        end
        local ca, cb = ddpl.load(tmp .. '/a.st'), ddpl.load(tmp .. '/b.st')
        assert.are.equal(2, cb.epoch)
        local n = 0
        for name, t in pairs(ca.model) do
            assert.are.equal(0, t:ne(cb.model[name]):sum():item(), name)
            n = n + 1
        end
        assert.are.equal(6, n)
    end)
end)

describe('examples/train.lua --dataset cifar10', function()
    it('trains the resnet with crop+flip augmentation on files in the binary format', function()
        local dir = os.tmpname()
        os.remove(dir)
        -- 8 records per file, in the folder the archive unpacks to
        require('cifar_files').write(dir .. '/cifar-10-batches-bin', { train = { 8, 8, 8, 8, 8 },
            test = 8 })
        local m = dir .. '/m.jsonl'
        local ok, out = pcall(run, 'examples/train.lua', '--model resnet --dataset cifar10 --data '
            .. q(dir) .. ' --epochs 2 --batch-size 8 --train-size 24 --threads 1 --progress off '
            .. '--metrics ' .. q(m))
        local epochs = ok and records(m, 'epoch') or {}
        os.execute('rm -rf ' .. q(dir))
        assert(ok, out)
        assert.truthy(out:find('data cifar10 from ' .. dir, 1, true), out)
        assert.truthy(out:find('RandomCrop(size={32, 32}, padding={4, 4, 4, 4}) '
            .. 'RandomHorizontalFlip(p=0.5) Normalize(mean={0.4914, 0.4822, 0.4465}', 1, true), out)
        assert.truthy(out:find('24 training and 8 test images', 1, true), out)
        assert.equals(2, #epochs, out)
        for _, e in ipairs(epochs) do
            assert.equals(3, e.steps) -- 24 images in batches of 8
            assert.is_true(e.train_loss > 0 and e.train_loss < 10, out) -- finite, not diverged
            assert.is_true(e.test_acc >= 0 and e.test_acc <= 1, out)
        end
    end)
end)

describe('examples/train.lua --data', function()
    it('reads each dataset from --data and names the folder when the files are missing', function()
        local missing = os.tmpname() .. '-none'
        local cases = {
            { 'fashion-mnist', 'FashionMNIST: ' .. missing .. '/train-images-idx3-ubyte.gz' },
            { 'cifar10', 'CIFAR10: ' .. missing .. '/data_batch_1.bin not found' },
        }
        for _, c in ipairs(cases) do
            local ok, err = pcall(run, 'examples/train.lua', '--dataset ' .. c[1] .. ' --data '
                .. q(missing) .. ' --epochs 1 --progress off')
            assert.is_false(ok)
            assert.truthy(tostring(err):find(c[2], 1, true), err)
        end
        local ok, err = pcall(run, 'examples/train.lua', '--dataset imagenet')
        assert.is_false(ok)
        assert.truthy(tostring(err):find('unknown dataset imagenet (fashion-mnist, cifar10)', 1, true),
            err)
    end)
end)

describe('examples/gpt_tiny.lua', function()
    it('the validation loss falls within 60 small steps', function()
        local out = run('examples/gpt_tiny.lua', '--steps 60 --n-layer 1 --n-embd 32 ' ..
            '--block-size 32 --batch 8 --eval-every 30 --sample 20 --threads 1')
        local first, last = out:match('loss first ([%d.]+) last ([%d.]+)')
        assert.truthy(first, out)
        first, last = tonumber(first), tonumber(last)
        assert.is_true(last < first - 0.5, out)
        assert.truthy(out:find('sample: This License', 1, true), out)
    end)
end)

describe('the examples\' command lines', function()
    it('print their usage for --help and -h and exit 0; an unknown flag is still refused', function()
        for _, script in ipairs({'train.lua', 'ddp_train.lua', 'autoencoder.lua', 'gpt_tiny.lua',
            'char_lstm.lua'}) do
            for _, flag in ipairs({'--help', '-h'}) do
                local out = run('examples/' .. script, flag)
                assert.truthy(out:find('usage: ddplua examples/' .. script, 1, true), out)
            end
        end
        local p = assert(io.popen(('%s %s --bogus 2>&1; echo "EXIT $?"'):format(q(bin),
            q(source .. '/examples/train.lua'))))
        local out = p:read('a')
        p:close()
        assert.truthy(out:find('train.lua: unknown argument --bogus', 1, true), out)
        assert.truthy(out:find('EXIT 2', 1, true), out)
    end)
end)
