-- spec/nn/conv_winograd_spec.lua: the float32 3x3 stride-1 convolution fast path
-- (engine/cpu/cpu_conv_winograd.c, Winograd F(2x2,3x3)) against the float64 general path
-- (im2col + GEMM, itself checked against PyTorch in nn_functional_spec and gradcheck_spec):
-- forward, input, weight and bias gradients, for paddings 0-2, odd and even sizes, channel
-- counts that are not multiples of the 16-channel blocks, a batch that leaves a partial chunk of
-- images, a plane large enough to be a chunk by itself, more than one 64-channel block of the
-- kernel and weight-gradient transforms, and 1 and 2 threads (a single chunk leaves the second
-- thread without one: its weight-gradient sums must be left out). Shapes the fast
-- path does not take (few channels, stride 2, dilation, groups, 5x5) are compared too, so that
-- the dispatch between the paths is covered.
local H = require 'helpers'
local ddpl = H.ddpl
local F = ddpl.F

-- max |got - ref| / max |ref| over the tensor (float32 rounding of sums of C*9 products)
local function rel_err(got, ref)
    local scale = ref:abs():max():item()
    local err = (got:double() - ref):abs():max():item()
    return scale > 0 and err / scale or err
end

local function check(cfg)
    local N, C, O, Hh, W = cfg.N, cfg.C, cfg.O, cfg.H, cfg.W
    local opts = {padding = cfg.padding or 1, stride = cfg.stride, dilation = cfg.dilation,
                  groups = cfg.groups}
    local k = cfg.k or 3
    local x = ddpl.randn(N, C, Hh, W):double():requires_grad_(true)
    local w = ddpl.randn(O, C // (cfg.groups or 1), k, k):double():requires_grad_(true)
    local b = ddpl.randn(O):double():requires_grad_(true)
    local y = F.conv2d(x, w, b, opts)
    local g = ddpl.randn(table.unpack(H.shape(y))):double()
    y:backward(g)

    local x32 = x:detach():float():requires_grad_(true)
    local w32 = w:detach():float():requires_grad_(true)
    local b32 = b:detach():float():requires_grad_(true)
    local y32 = F.conv2d(x32, w32, b32, opts)
    assert.are.same(H.shape(y), H.shape(y32))
    y32:backward(g:float())
    local what = ('N=%d C=%d O=%d %dx%d k=%d padding=%d'):format(N, C, O, Hh, W, k, opts.padding)
    for name, pair in pairs({y = {y32, y:detach()}, dx = {x32.grad, x.grad},
                             dw = {w32.grad, w.grad}, db = {b32.grad, b.grad}}) do
        local e = rel_err(pair[1], pair[2])
        if not (e < 2e-6) then
            error(('%s: %s differs from the float64 path by %.3g of its largest value'):format(
                what, name, e))
        end
    end
end

local winograd_shapes = {
    {N = 3, C = 32, O = 64, H = 14, W = 14},            -- the lenet's second layer, smaller batch
    {N = 2, C = 8, O = 16, H = 28, W = 28},             -- the smallest channel count taken
    {N = 2, C = 9, O = 11, H = 7, W = 5, padding = 0},  -- odd outputs: clipped last tiles
    {N = 2, C = 10, O = 12, H = 6, W = 9, padding = 2}, -- the largest padding taken
    {N = 5, C = 20, O = 18, H = 13, W = 13},            -- 4 images a chunk: a partial last one
    {N = 1, C = 16, O = 8, H = 1, W = 1},               -- one pixel, all padding around it
    {N = 2, C = 8, O = 8, H = 30, W = 31},              -- a plane of > 192 tiles: its own chunk
    {N = 9, C = 66, O = 70, H = 5, W = 6},              -- > 64 channels: two blocks of the kernel
                                                        -- and weight-gradient transforms
}

local general_shapes = {
    {N = 2, C = 1, O = 32, H = 28, W = 28},               -- the lenet's first layer (1 channel)
    {N = 2, C = 8, O = 8, H = 9, W = 9, stride = 2},
    {N = 2, C = 8, O = 8, H = 9, W = 9, dilation = 2, padding = 2},
    {N = 2, C = 8, O = 8, H = 9, W = 9, groups = 2},
    {N = 2, C = 8, O = 8, H = 9, W = 9, k = 5, padding = 2},
    {N = 2, C = 8, O = 8, H = 9, W = 9, padding = 3},     -- padding > 2
}

describe('conv2d float32 3x3 stride-1 fast path', function()
    local threads
    before_each(function()
        threads = ddpl.get_num_threads()
        ddpl.manual_seed(7)
    end)
    after_each(function() ddpl.set_num_threads(threads) end)

    for _, nt in ipairs({1, 2}) do
        it(('matches the float64 path on the Winograd shapes (%d thread%s)'):format(
            nt, nt > 1 and 's' or ''), function()
            ddpl.set_num_threads(nt)
            for _, cfg in ipairs(winograd_shapes) do check(cfg) end
        end)
    end

    it('leaves the other shapes to the general path, with the same agreement', function()
        ddpl.set_num_threads(2)
        for _, cfg in ipairs(general_shapes) do check(cfg) end
    end)

    it('gives the same training step at 1 and 2 threads (up to float32 summation order)',
       function()
        local x = ddpl.randn(6, 32, 14, 14)
        local w = ddpl.randn(64, 32, 3, 3)
        local grads = {}
        for _, nt in ipairs({1, 2}) do
            ddpl.set_num_threads(nt)
            local wt = w:clone():requires_grad_(true)
            local xt = x:clone():requires_grad_(true)
            F.conv2d(xt, wt, nil, {padding = 1}):relu():sum():backward()
            grads[nt] = {xt.grad, wt.grad}
        end
        for i = 1, 2 do
            local e = rel_err(grads[2][i], grads[1][i]:double())
            assert.is_true(e < 1e-6, ('gradient %d: 1 and 2 threads differ by %.3g'):format(i, e))
        end
    end)

    -- The weight gradient is a sum over the batch kept in several partial sums; they must be
    -- partial sums of fixed ranges of images, added in a fixed order, not one per thread (which
    -- thread takes which images changes from call to call, and with it the rounding: 3 runs in
    -- 20 of a small block differed in the last bits before the sums were kept per part).
    it('gives the same bits on every call at 2 threads (Winograd and im2col weight gradients)',
       function()
        ddpl.set_num_threads(2)
        local shapes = {{C = 32, O = 64, k = 3}, {C = 1, O = 32, k = 3}, {C = 8, O = 16, k = 5}}
        for _, cfg in ipairs(shapes) do
            local x = ddpl.randn(64, cfg.C, 14, 14)
            local w = ddpl.randn(cfg.O, cfg.C, cfg.k, cfg.k):requires_grad_(true)
            local g = ddpl.randn(64, cfg.O, 14, 14)
            local first
            for run = 1, 40 do
                w.grad = nil
                F.conv2d(x, w, nil, {padding = cfg.k // 2}):backward(g)
                if not first then
                    first = w.grad:clone()
                else
                    local d = (w.grad - first):abs():max():item()
                    assert.are.equal(0, d, ('%dx%d, %d -> %d channels: call %d differs by %g')
                        :format(cfg.k, cfg.k, cfg.C, cfg.O, run, d))
                end
            end
        end
    end)
end)
