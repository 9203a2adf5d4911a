-- spec/nn/conv_bf16_spec.lua: bfloat16 conv2d on the CPU (engine/cpu/cpu_conv.c: im2col in bf16
-- and the bf16 GEMM where the CPU has AVX512-BF16, float32 on widened copies elsewhere and for
-- the shapes the Winograd path takes).
--
-- Each result is the float32 convolution of the same bf16 values rounded once: y from the
-- float32 sum plus the bias, dx after the overlapping windows are added up, dw and db after
-- every image. Small-integer operands make every float32 sum exact, so the bf16 results must
-- equal the float32 ones rounded to bf16, bit for bit, forward and backward, for kernels,
-- strides, padding, dilation, groups and the 1x1 case that reads the input as it is.
local ddpl = require 'ddplua'
local F = ddpl.F

local function ints(shape)
    return ddpl.randint(-3, 4, shape):to('bfloat16')
end

local function assert_same(got, want, what)
    assert.are.same(want:size(), got:size(), what)
    assert.are.equal('bfloat16', got.dtype, what)
    local diff = (got:float() - want:float()):abs():max():item()
    assert(diff == 0, ('%s: differs from the float32 result rounded once by %g'):format(what, diff))
end

-- forward and all three gradients of conv2d on bf16 leaves, against float32 on the same values
local function check(name, xs, ws, opts, with_bias)
    local x, w = ints(xs):requires_grad_(), ints(ws):requires_grad_()
    local b = with_bias and ints({ ws[1] }):requires_grad_() or nil
    local y = F.conv2d(x, w, b, opts)
    local g = ints(y:shape())
    y:backward(g)

    local xf, wf = x:detach():float():requires_grad_(), w:detach():float():requires_grad_()
    local bf = b and b:detach():float():requires_grad_() or nil
    local yf = F.conv2d(xf, wf, bf, opts)
    yf:backward(g:float())
    assert_same(y, yf:bfloat16(), name .. ': y')
    assert_same(x.grad, xf.grad:bfloat16(), name .. ': dx')
    assert_same(w.grad, wf.grad:bfloat16(), name .. ': dw')
    if b then assert_same(b.grad, bf.grad:bfloat16(), name .. ': db') end
end

describe('bfloat16 conv2d on the CPU', function()
    it('equals the float32 convolution rounded once, forward and backward', function()
        ddpl.manual_seed(11)
        check('5x5, padding 2', { 2, 3, 9, 11 }, { 4, 3, 5, 5 }, { padding = 2 }, true)
        check('3x3, stride 2', { 3, 5, 10, 9 }, { 6, 5, 3, 3 }, { stride = 2, padding = 1 }, true)
        check('3x3, dilation 2', { 2, 4, 12, 12 }, { 3, 4, 3, 3 }, { dilation = 2 }, false)
        check('groups 2', { 2, 6, 8, 7 }, { 4, 3, 3, 2 }, { groups = 2, padding = { 1, 0 } }, true)
        check('1x1 (input read in place)', { 3, 16, 6, 5 }, { 24, 16, 1, 1 }, {}, true)
        check('3x3, stride 1 (Winograd shapes widen)', { 2, 32, 12, 12 }, { 32, 32, 3, 3 },
            { padding = 1 }, true)
        check('one image, many channels', { 1, 40, 7, 7 }, { 70, 40, 3, 3 }, { stride = 2 }, true)
    end)

    it('trains a small CNN under autocast close to float32', function()
        ddpl.manual_seed(12)
        local nn = ddpl.nn
        local function net()
            ddpl.manual_seed(13)
            return nn.Sequential(nn.Conv2d(1, 8, 5, { padding = 2 }), nn.ReLU(), nn.MaxPool2d(2),
                nn.Conv2d(8, 16, 5), nn.ReLU(), nn.Flatten(), nn.Linear(16 * 3 * 3, 10))
        end
        local x, y = ddpl.randn(16, 1, 14, 14), ddpl.randint(0, 10, { 16 })
        local a, b = net(), net()
        local oa = ddpl.optim.SGD(a:parameters(), { lr = 0.05 })
        local ob = ddpl.optim.SGD(b:parameters(), { lr = 0.05 })
        local la, lb
        for _ = 1, 5 do
            la = F.cross_entropy(a(x), y)
            oa:zero_grad(); la:backward(); oa:step()
            lb = ddpl.autocast('cpu', { dtype = 'bfloat16' }, function() return F.cross_entropy(b(x), y) end)
            ob:zero_grad(); lb:backward(); ob:step()
        end
        assert.are.equal('float32', lb.dtype)
        -- bf16 keeps 8 significant bits: after 5 steps the losses agree to about 1%
        assert.is_true(math.abs(la:item() - lb:item()) < 0.02 * la:item(),
            ('loss %g under autocast, %g in float32'):format(lb:item(), la:item()))
        for i, p in ipairs(b:parameters()) do
            assert.are.equal('float32', p.grad.dtype, 'parameter ' .. i .. ' gradient dtype')
        end
    end)
end)
