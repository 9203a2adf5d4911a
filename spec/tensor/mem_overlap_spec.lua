-- spec/tensor/mem_overlap_spec.lua: in-place writes whose operands share memory with the tensor
-- written, against PyTorch 1.13 (spec/fixtures/mem_overlap.lua, tools/gen_overlap_fixtures.py
-- says how to read a case): refused where PyTorch refuses (partial overlap of dense tensors, any
-- overlap for index_add_/scatter_/index_put_ and x[idx] = v, an expanded tensor written; x[mask] =
-- one value is PyTorch's masked_fill_, which checks the mask alone), with
-- PyTorch's message naming the op and the tensor left as it was; allowed where PyTorch allows
-- (x:add_(x), the same elements through another view, disjoint parts), with PyTorch's values;
-- an operand PyTorch cannot decide about (not dense) is read as if cloned. On CUDA too where
-- there is a device (the checks sit above the kernels).
local H = require 'helpers'
local ddpl = H.ddpl

local cases = H.fixture('mem_overlap')

-- Where PyTorch's CUDA outcome differs from the CPU one the fixtures were made with: x[mask] =
-- v goes to masked_fill_ only for a one-element v on the CPU (canDispatchToMaskedFill; Python
-- makes a scalar a CPU tensor for a CUDA x), so a CUDA element of x itself is index_put_'s
-- value, which may not overlap x (assert_no_overlap).
local cuda_error = {
    ['setitem an element of itself under a mask'] = 'unsupported operation: some elements of ' ..
        'the input tensor and the written-to tensor refer to a single memory location',
}

local function apply_view(x, chain)
    for _, step in ipairs(chain) do
        local kind = step[1]
        if kind == 't' then
            x = x:t()
        elseif kind == 'narrow' then
            x = x:narrow(step[2], step[3], step[4])
        elseif kind == 'select' then
            x = x:select(step[2], step[3])
        elseif kind == 'expand' then
            x = x:expand(table.unpack(step[2]))
        elseif kind == 'view' then
            x = x:view(table.unpack(step[2]))
        elseif kind == 'transpose' then
            x = x:transpose(step[2], step[3])
        elseif kind == 'as_strided' then
            x = x:as_strided(step[2], step[3], step[4])
        else
            error('mem_overlap_spec: unknown view step ' .. tostring(kind))
        end
    end
    return x
end

local function make_arg(base, a, device)
    if a.view then return apply_view(base, a.view) end
    if a.index then return ddpl.tensor(a.index, {dtype = 'int64', device = device}) end
    if a.number ~= nil then return a.number end
    if a.gt then return base:detach():gt(a.gt) end
    return a.str
end

-- base (arange in the case's shape and dtype; with grad, a non-leaf that autograd records)
local function make_base(case, device)
    local n = 1
    for _, s in ipairs(case.shape) do n = n * s end
    local base = ddpl.arange(n, {device = device}):to(case.dtype or 'float32'):view(case.shape)
    if case.grad then
        local leaf = base:clone()
        leaf.requires_grad = true
        base = leaf * 1
    end
    return base
end

local function write(case, x, args)
    if case.op == 'setitem' then
        x[args[1]] = args[2]
    elseif case.op == 'setslice' then
        x[{{args[1], args[2]}}] = args[3]
    elseif case.op == 'index_put_' then
        x:index_put_({args[1]}, args[2])
    elseif case.op == 'index_put_accumulate' then
        x:index_put_({args[1]}, args[2], {accumulate = true})
    else
        x[case.op](x, table.unpack(args))
    end
end

local function api_name(op)
    if op == 'index_put_accumulate' then return 'index_put_' end
    return (op == 'setitem' or op == 'setslice') and 'setindex' or op
end

local function check(case, device)
    if device == 'cuda' and cuda_error[case.name] then
        case = setmetatable({error = cuda_error[case.name], result = false}, {__index = case})
    end
    local base = make_base(case, device)
    local before = base:detach():clone()
    local x = apply_view(base, case.target)
    local args = {}
    for i, a in ipairs(case.args) do args[i] = make_arg(base, a, device) end
    if case.error then
        H.assert_error(function() write(case, x, args) end, api_name(case.op), case.error,
                       'clone()')
        assert.is_true(ddpl.equal(base:detach(), before), case.name .. ': the tensor changed')
    else
        write(case, x, args)
        H.assert_close(base:detach():cpu(), case.result, 0, 0, case.name)
    end
end

for _, device in ipairs({'cpu', 'cuda'}) do
    describe('in-place writes into memory their operands share, as PyTorch (' .. device .. ')',
        function()
            for _, case in ipairs(cases) do
                it(case.name, function()
                    if device == 'cuda' and not ddpl.cuda.is_available() then
                        return pending('no CUDA device')
                    end
                    check(case, device)
                end)
            end
        end)
end

describe('memory overlap: what the fixtures cannot hold', function()
    it('the message names both layouts, so the user sees which view overlapped', function()
        local x = ddpl.arange(9.0):view(3, 3)
        H.assert_error(function() x:add_(x:t()) end, 'add_', 'strides [3,1]', 'strides [1,3]')
        local e = ddpl.zeros(3):expand(2, 3)
        H.assert_error(function() e:mul_(2) end, 'mul_', 'strides [0,1]')
    end)

    it('an in-place op on exactly the same tensor keeps working (x:add_(x), x:mul_(x))', function()
        local x = ddpl.tensor({1.0, -2.0, 3.0})
        x:add_(x)
        x:mul_(x)
        x:div_(x:view(3))
        H.assert_close(x, {1, 1, 1})
    end)

    it('autograd: a refused write leaves the graph as it was, so backward still works', function()
        local leaf = ddpl.arange(4.0):view(2, 2)
        leaf.requires_grad = true
        local y = leaf * 2
        local version = y._version
        H.assert_error(function() y:add_(y:t()) end, 'add_', 'single memory location')
        assert.are.equal(version, y._version)
        y:sum():backward()
        H.assert_close(leaf.grad, {{2, 2}, {2, 2}})
    end)

    it('empty operands never overlap', function()
        local x = ddpl.arange(4.0)
        x:narrow(0, 0, 0):add_(x:narrow(0, 0, 0))
        x:narrow(0, 0, 0):copy_(x:narrow(0, 1, 0))
        H.assert_close(x, {0, 1, 2, 3})
    end)
end)
