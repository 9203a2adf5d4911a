-- spec/examples/autoencoder_spec.lua: examples/autoencoder.lua (GroupNorm + ConvTranspose2d on
-- Fashion-MNIST) trains: on a 512-image subset for two epochs the reconstruction loss falls,
-- both the logged training loss and the test loss, and the MSE variant runs too. The example
-- runs as a child of the ddplua executable with --threads 1; the data comes from
-- $FASHION_MNIST_DIR or Debian's dataset-fashion-mnist package, as for examples/train.lua.
local S = require 'shell_util'

local function run(args)
    local out, code = S.sh(('%s %s %s'):format(S.q(S.bin), S.q(S.src .. '/examples/autoencoder.lua'),
                                               args))
    assert(code == 0, 'autoencoder.lua ' .. args .. ' failed:\n' .. out)
    return out
end

local function numbers(out, pattern)
    local list = {}
    for v in out:gmatch(pattern) do list[#list + 1] = tonumber(v) end
    return list
end

describe('examples/autoencoder.lua', function()
    it('the reconstruction loss falls (BCEWithLogits)', function()
        local out = run('--epochs 2 --train-size 512 --test-size 500 --batch-size 32 ' ..
                        '--log-every 4 --threads 1')
        local start = numbers(out, 'step 0 test_loss ([%d.]+)')[1]
        local steps = numbers(out, 'step %d+ loss ([%d.]+)')
        local epochs = numbers(out, 'epoch %d/2 train_loss [%d.]+ test_loss ([%d.]+)')
        local final = numbers(out, 'final test_loss ([%d.]+)')[1]
        assert.are.equal(8, #steps, out) -- 16 steps per epoch, one line every 4
        assert.are.equal(2, #epochs, out)
        -- an untrained decoder predicts about 0.5 everywhere: BCE near ln 2 = 0.69
        assert.is_true(start > 0.6, out)
        assert.is_true(steps[#steps] < steps[1] - 0.1, out)
        assert.is_true(epochs[2] < epochs[1], out)
        assert.is_true(final < start - 0.15, out)
    end)

    it('runs with --loss mse and refuses bad arguments', function()
        local out = run('--epochs 1 --train-size 128 --test-size 100 --batch-size 32 ' ..
                        '--log-every 2 --threads 1 --loss mse')
        local start = numbers(out, 'step 0 test_loss ([%d.]+)')[1]
        local final = numbers(out, 'final test_loss ([%d.]+)')[1]
        assert.is_true(final < start, out)
        local msg, code = S.sh(('%s %s --loss l1'):format(S.q(S.bin),
                                                          S.q(S.src .. '/examples/autoencoder.lua')))
        assert.are_not.equal(0, code)
        assert.truthy(msg:find('--loss must be bce or mse', 1, true), msg)
    end)
end)
