-- spec/tensor/linalg_spec.lua: linear algebra against PyTorch (spec/fixtures/linalg.lua): matmul in
-- every 1-D / 2-D / batched / broadcast form, mm, bmm, ddpl.addmm; forward values and gradients
-- in float32 and float64, transposed (non-contiguous) operands.
local H = require 'helpers'
local ddpl = H.ddpl

local cases = H.fixture('linalg')

-- opts.transpose = {bool, bool}: apply :t() to that operand first
local function operands(ins, o)
    local a, b = ins[1], ins[2]
    if o.transpose and o.transpose[1] then a = a:t() end
    if o.transpose and o.transpose[2] then b = b:t() end
    return a, b
end

local runners = {
    matmul = function(ins, o)
        local a, b = operands(ins, o)
        return a:matmul(b)
    end,
    mm = function(ins, o)
        local a, b = operands(ins, o)
        return a:mm(b)
    end,
    bmm = function(ins) return ins[1]:bmm(ins[2]) end,
    addmm = function(ins, o)
        if o.beta or o.alpha then
            return ddpl.addmm(ins[1], ins[2], ins[3], {beta = o.beta, alpha = o.alpha})
        end
        return ddpl.addmm(ins[1], ins[2], ins[3])
    end,
}

describe('linear algebra matches PyTorch', function()
    H.run_cases(cases, runners, it)
end)

describe('linear algebra', function()
    it('ddpl.matmul is the method', function()
        local a = ddpl.tensor({{1, 2}, {3, 4}}, {dtype = 'float64'})
        local b = ddpl.tensor({{5, 6}, {7, 8}}, {dtype = 'float64'})
        H.assert_close(ddpl.matmul(a, b), {19, 22, 43, 50})
        H.assert_close(a:matmul(b), {19, 22, 43, 50})
    end)

    it('mismatched inner dimensions raise an error naming the op and shapes', function()
        local a, b = ddpl.zeros(2, 3), ddpl.zeros(4, 5)
        H.assert_error(function() return a:matmul(b) end, 'matmul', '[2,3]', '[4,5]')
        H.assert_error(function() return a:mm(b) end, 'mm', '[2,3]', '[4,5]')
        H.assert_error(function() return ddpl.zeros(2, 2, 3):bmm(ddpl.zeros(3, 3, 2)) end, 'bmm')
    end)

    it('mm and bmm refuse inputs of the wrong rank', function()
        H.assert_error(function() return ddpl.zeros(2, 3, 4):mm(ddpl.zeros(4, 2)) end, 'mm')
        H.assert_error(function() return ddpl.zeros(3, 4):bmm(ddpl.zeros(4, 2)) end, 'bmm')
    end)

    it('matmul of 0-dim operands raises', function()
        H.assert_error(function() return ddpl.tensor(2.0):matmul(ddpl.zeros(2)) end, 'matmul')
    end)

    it('mixed dtypes are refused, as in PyTorch', function()
        H.assert_error(function()
            return ddpl.zeros(2, 2):matmul(ddpl.zeros(2, 2, {dtype = 'float64'}))
        end, 'matmul')
    end)
end)
