-- spec/nn/ctc_spec.lua: F.ctc_loss and nn.CTCLoss against PyTorch (spec/fixtures/ctc.lua,
-- tools/gen_ctc_fixtures.py): several batches, repeated labels, a blank other than 0, padded and
-- concatenated targets, unbatched input, every reduction, zero_infinity with targets too long
-- for their inputs; values and gradients. Then lengths as Lua lists, gradcheck in float64, the
-- module, the errors, and the CUDA kernel against the CPU (pending without a device; the
-- emulation build runs it).
local H = require 'helpers'
local ddpl = H.ddpl
local F = ddpl.F
local nn = ddpl.nn

local function run(ins, o) return F.ctc_loss(ins[1], ins[2], ins[3], ins[4], o) end

describe('ctc_loss matches PyTorch', function()
    H.run_cases(H.fixture('ctc'), {ctc_loss = run}, it)
end)

-- an int64 tensor's values as a Lua list (a 0-dim one as a number)
local function list(t)
    if t:dim() == 0 then return t:item() end
    return t:tolist()
end

describe('ctc_loss', function()
    it('takes lengths as Lua lists, and equals the tensor form', function()
        for _, c in ipairs(H.fixture('ctc')) do
            local ins = H.inputs(c)
            local a = F.ctc_loss(ins[1], ins[2], ins[3], ins[4], c.opts or {})
            local b = F.ctc_loss(ins[1], ins[2], list(ins[3]), list(ins[4]), c.opts or {})
            H.assert_close(b, a, 0, 0, c.name)
        end
    end)

    it('nn.CTCLoss is F.ctc_loss with its options', function()
        local c = H.fixture('ctc')[3] -- batch of 4, reduction 'sum'
        local ins = H.inputs(c)
        local m = nn.CTCLoss({blank = 0, reduction = 'sum'})
        H.assert_close(m(ins[1], ins[2], ins[3], ins[4]),
                       F.ctc_loss(ins[1], ins[2], ins[3], ins[4], {reduction = 'sum'}), 0, 0,
                       'module')
        assert.are.equal('CTCLoss()', tostring(m)) -- as PyTorch prints it
        H.assert_error(function() nn.CTCLoss({reduction = 'max'}) end, 'CTCLoss', 'reduction')
        H.assert_error(function() nn.CTCLoss({blanc = 1}) end, 'CTCLoss', "unknown option")
    end)

    it('is differentiable: gradcheck in float64', function()
        local lp = H.lcg({6, 3, 4}, 7, 3, 'float64')
        lp.requires_grad = true
        local tg = ddpl.tensor({{1, 1, 2}, {3, 0, 0}, {2, 3, 1}}, {dtype = 'int64'})
        for _, o in ipairs({{}, {reduction = 'sum', blank = 2}, {reduction = 'none'},
                            {zero_infinity = true}}) do
            local f = function(a)
                return F.ctc_loss(a:log_softmax(2), tg, {6, 5, 6}, {3, 1, 3}, o)
            end
            assert.is_true(ddpl.autograd.gradcheck(f, {lp}))
        end
    end)

    it('input length 0: loss 0 for an empty target, else +inf', function()
        local lp = ddpl.randn(3, 2, 4):log_softmax(2)
        local l = F.ctc_loss(lp, ddpl.tensor({{1}, {1}}, {dtype = 'int64'}), {0, 0}, {0, 1},
                             {reduction = 'none'})
        assert.are.same({0, math.huge}, l:tolist())
    end)

    it('refuses bad shapes, lengths, labels and options, naming ctc_loss', function()
        local lp = ddpl.randn(5, 2, 4):log_softmax(2)
        local tg = ddpl.tensor({{1, 2}, {1, 1}}, {dtype = 'int64'})
        local E = H.assert_error
        E(function() F.ctc_loss(lp, tg, {6, 5}, {2, 2}) end, 'ctc_loss', 'input_lengths', '6')
        E(function() F.ctc_loss(lp, tg, {5, 5}, {3, 2}) end, 'ctc_loss', 'narrower', '3')
        E(function() F.ctc_loss(lp, tg, {5, 5}, {2, 2}, {blank = 4}) end, 'ctc_loss', 'blank')
        E(function() F.ctc_loss(lp, tg, {5, 5}, {2, 2}, {blank = -1}) end, 'ctc_loss', 'blank')
        E(function() F.ctc_loss(lp, tg * 4, {5, 5}, {2, 2}) end, 'ctc_loss', 'label', '[0, 4)')
        E(function() F.ctc_loss(lp, tg, {5}, {2, 2}) end, 'ctc_loss', 'input_lengths', 'batch')
        E(function() F.ctc_loss(lp, tg, {5, 5}, {-1, 2}) end, 'ctc_loss', 'target_lengths')
        E(function() F.ctc_loss(lp, tg, {5, 5.5}, {2, 2}) end, 'ctc_loss', 'input_lengths[2]')
        E(function() F.ctc_loss(lp, tg:float(), {5, 5}, {2, 2}) end, 'ctc_loss', 'integers')
        E(function() F.ctc_loss(lp, tg, ddpl.tensor({5.0, 5.0}), {2, 2}) end, 'ctc_loss',
          'integers')
        E(function() F.ctc_loss(lp[0], tg, {2}, {2}) end, 'ctc_loss', 'targets', 'unbatched')
        E(function() F.ctc_loss(lp:long(), tg, {5, 5}, {2, 2}) end, 'ctc_loss', 'float32')
        E(function() F.ctc_loss(lp:reshape(5, 2, 2, 2), tg, {5, 5}, {2, 2}) end, 'ctc_loss',
          '(T, N, C)')
        E(function() F.ctc_loss(lp, ddpl.tensor({1, 2, 1}, {dtype = 'int64'}), {5, 5}, {2, 2}) end,
          'ctc_loss', 'sum of target_lengths')
        E(function() F.ctc_loss(lp, tg:narrow(0, 0, 1), {5, 5}, {1, 1}) end, 'ctc_loss', 'rows')
        E(function() F.ctc_loss(lp, tg, {5, 5}, {2, 2}, {reduction = 'max'}) end, 'ctc_loss',
          'reduction')
        E(function() F.ctc_loss(lp, tg, {5, 5}, {2, 2}, {blank_index = 0}) end,
          "unknown option 'blank_index'")
        E(function() F.ctc_loss(lp, tg, nil, {2, 2}) end, 'ctc_loss', 'input_lengths')
        E(function() F.ctc_loss(lp, tg, 'x', {2, 2}) end, 'ctc_loss', 'input_lengths')
    end)
end)

local function no_cuda()
    if ddpl.cuda.is_available() then return false end
    pending('no CUDA device')
    return true
end

describe('cuda ctc_loss matches the cpu', function()
    it('values and gradients, float32 and float64', function()
        if no_cuda() then return end
        for _, c in ipairs(H.fixture('ctc')) do
            local ins = H.inputs(c)
            local lp = ins[1]:detach()
            local lpc = lp:cuda()
            lp.requires_grad = true
            lpc.requires_grad = true
            local o = c.opts or {}
            local y = F.ctc_loss(lp, ins[2], ins[3], ins[4], o)
            local yc = F.ctc_loss(lpc, ins[2]:cuda(), list(ins[3]), ins[4]:cuda(), o)
            local tol = lp.dtype == 'float64' and 1e-12 or 1e-5
            H.assert_close(yc:cpu(), y, tol, tol, c.name)
            if c.grads then
                local g = H.tensor(c.grad_out)
                y:backward(g)
                yc:backward(g:cuda())
                H.assert_close(lpc.grad:cpu(), lp.grad, tol, tol, c.name .. ' gradient')
            end
        end
        -- targets and lengths may stay on the host (they are read there anyway)
        local lp = ddpl.randn(3, 2, 4):log_softmax(2)
        local tg = ddpl.tensor({{1}, {1}}, {dtype = 'int64'})
        local lens = ddpl.tensor({3, 3}, {dtype = 'int64'})
        H.assert_close(F.ctc_loss(lp:cuda(), tg, lens, {1, 1}):cpu(),
                       F.ctc_loss(lp, tg, lens, {1, 1}), 1e-6, 1e-6, 'host targets')
    end)
end)
