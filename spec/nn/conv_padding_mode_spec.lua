-- spec/nn/conv_padding_mode_spec.lua: nn.Conv2d and nn.Conv1d with padding_mode 'zeros',
-- 'reflect', 'replicate' and 'circular' against PyTorch (spec/fixtures/nn_modes.lua,
-- tools/gen_nn_modes_fixtures.py): the input is padded with F.pad's mode and convolved with
-- padding 0; values and the gradients of input, weight and bias; then the module itself, its
-- text, and the errors.
local H = require 'helpers'
local ddpl = H.ddpl
local nn = ddpl.nn

-- The module's forward on the fixture's weight and bias (leaves of the case): the same forward
-- function, with the module's normalised options.
local function module_runner(cls, n)
    return function(ins, o)
        local m = nn[cls](3, ins[2]:size(0), o.kernel_size,
                          {padding = o.padding, stride = o.stride, dilation = o.dilation,
                           padding_mode = o.padding_mode, dtype = 'float64'})
        local view = {weight = ins[2], bias = ins[3]}
        for _, k in ipairs({'stride', 'padding', 'dilation', 'groups', 'padding_mode',
                            'kernel_size'}) do
            view[k] = m[k]
        end
        assert.are.equal(n, #m.kernel_size)
        return m.forward(view, ins[1])
    end
end

local runners = {conv2d_module = module_runner('Conv2d', 2),
                 conv1d_module = module_runner('Conv1d', 1)}

local function conv_cases()
    local out = {}
    for _, c in ipairs(H.fixture('nn_modes')) do
        if runners[c.op] then out[#out + 1] = c end
    end
    return out
end

describe('convolution padding_mode matches PyTorch', function()
    H.run_cases(conv_cases(), runners, it)
end)

describe('convolution padding_mode', function()
    it('the module pads explicitly and trains its own parameters', function()
        ddpl.manual_seed(3)
        local m = nn.Conv2d(2, 3, 3, {padding = 1, padding_mode = 'circular'})
        local x = ddpl.randn(1, 2, 5, 4)
        local y = m(x)
        assert.are.same({1, 3, 5, 4}, H.shape(y))
        local ref = ddpl.F.conv2d(ddpl.F.pad(x, {1, 1, 1, 1}, {mode = 'circular'}), m.weight,
                                  m.bias)
        H.assert_close(y, ref, 1e-6, 1e-6, 'explicit padding')
        y:sum():backward()
        assert.are.same({3, 2, 3, 3}, H.shape(m.weight.grad))
        assert.is_truthy(tostring(m):find("padding_mode=circular", 1, true))
        assert.is_nil(tostring(nn.Conv2d(2, 3, 3)):find('padding_mode', 1, true))
    end)

    it('refuses unknown modes, and non-zero modes of transposed convolutions', function()
        H.assert_error(function() nn.Conv2d(2, 3, 3, {padding_mode = 'mirror'}) end, 'Conv2d',
                       'padding_mode', 'mirror')
        H.assert_error(function() nn.ConvTranspose2d(2, 3, 3, {padding_mode = 'reflect'}) end,
                       'ConvTranspose2d', "only 'zeros'")
        -- reflect needs the padding smaller than the input, as F.pad says
        local m = nn.Conv2d(1, 1, 3, {padding = 3, padding_mode = 'reflect'})
        H.assert_error(function() m(ddpl.randn(1, 1, 3, 3)) end, 'pad')
    end)
end)
