-- spec/autograd/partial_grad_spec.lua: backward formulas that add their part into the gradient
-- already summed for their input (ddpl_node_partial_grad, engine/autograd/graph.h): narrow (split,
-- chunk, select, unbind) and index_select (a tied embedding) add in place instead of filling
-- zeros of the whole input that the engine then sums. The gradients must equal the ones summed
-- out of place: checked against independent formulas (one-hot sums, the composition through
-- cat), with repeated slices and indices, hooks and retain_grad that see the sum, and the
-- create_graph and shared-memory cases that must not take the in-place path.
local H = require 'helpers'
local ddpl = H.ddpl
local F = ddpl.F

-- float64 normal values drawn from a seed; a leaf copy of a tensor
local function data(shape, seed)
    ddpl.manual_seed(seed)
    return ddpl.randn(shape, {dtype = 'float64'})
end

local function leaf(t) return t:detach():clone():requires_grad_(true) end

describe('partial gradients summed in place', function()
    it('split: every slice reaches the input once, with its own weight', function()
        local x = leaf(data({2, 5, 12}, 1))
        local w = {data({2, 5, 4}, 2), data({2, 5, 4}, 3), data({2, 5, 4}, 4)}
        local parts = x:split(4, 2)
        local loss = (parts[1] * w[1]):sum() + (parts[2] * w[2]):sum() + (parts[3] * w[3]):sum()
        loss:backward()
        H.assert_close(x.grad, ddpl.cat(w, 2), 0, 0, 'dx')
    end)

    it('overlapping and repeated slices add up; untouched parts stay zero', function()
        local x = leaf(data({6, 3}, 5))
        local a, b, c = x:narrow(0, 0, 4), x:narrow(0, 2, 3), x:narrow(0, 2, 3)
        local loss = (a * 2):sum() + (b * 3):sum() + c:sum()
        loss:backward()
        local expected = ddpl.tensor({2, 2, 6, 6, 4, 0}, {dtype = 'float64'}):view(6, 1)
        H.assert_close(x.grad, expected:expand(6, 3), 0, 0, 'dx')
    end)

    it('select and unbind: each row once', function()
        local x = leaf(data({3, 4}, 6))
        local rows = x:unbind(0)
        local loss = rows[1]:sum() + (rows[2] * 2):sum() + (rows[3] * 3):sum() + x:select(0, 1):sum()
        loss:backward()
        local expected = ddpl.tensor({1, 3, 3}, {dtype = 'float64'}):view(3, 1)
        H.assert_close(x.grad, expected:expand(3, 4), 0, 0, 'dx')
    end)

    it('a split of an intermediate: its hook and retain_grad see the whole sum', function()
        local x = leaf(data({4, 6}, 7))
        local y = x * 2
        y:retain_grad()
        local seen
        y:register_hook(function(g) seen = g:clone() end)
        local p = y:chunk(3, 1)
        local loss = p[1]:sum() + (p[2] * 2):sum() + (p[3] * 3):sum()
        loss:backward()
        local row = ddpl.tensor({1, 1, 2, 2, 3, 3}, {dtype = 'float64'}):view(1, 6):expand(4, 6)
        H.assert_close(seen, row, 0, 0, 'hook')
        H.assert_close(y.grad, row, 0, 0, 'retain_grad')
        H.assert_close(x.grad, row * 2, 0, 0, 'dx')
    end)

    it('matches the composition through cat under create_graph (recorded, not in place)',
       function()
        local x = leaf(data({3, 6}, 8))
        local p = x:split(2, 1)
        local y = (p[1] * p[1]):sum() + (p[2] * 3):sum() + (p[3] * p[1]):sum()
        local g = ddpl.autograd.grad({y}, {x}, {create_graph = true})[1]
        local expected = ddpl.cat({p[1] * 2 + p[3], ddpl.full({3, 2}, 3, {dtype = 'float64'}),
                                   p[1]}, 1)
        H.assert_close(g, expected, 1e-12, 1e-12, 'dx')
        -- the gradient is itself differentiable: d(sum g)/dx
        g:sum():backward()
        local second = ddpl.cat({ddpl.full({3, 2}, 3, {dtype = 'float64'}),
                                 ddpl.zeros(3, 2, {dtype = 'float64'}),
                                 ddpl.ones(3, 2, {dtype = 'float64'})}, 1)
        H.assert_close(x.grad, second, 0, 0, 'd2x')
    end)

    it('leaves a gradient that someone else holds alone (a slice of it kept by a hook)',
       function()
        local x = leaf(data({2, 6}, 9))
        local y = x * 1
        local kept
        -- the first part to arrive is kept by this hook on a view node's output: the sum must
        -- not be written into it
        local a = y:narrow(1, 0, 3)
        local b = y:narrow(1, 3, 3)
        local a2 = a * 1
        a2:register_hook(function(g) kept = g end)
        local loss = (a2 * 5):sum() + (b * 7):sum()
        loss:backward()
        H.assert_close(kept, ddpl.full({2, 3}, 5, {dtype = 'float64'}), 0, 0, 'kept')
        local row = ddpl.tensor({5, 5, 5, 7, 7, 7}, {dtype = 'float64'}):view(1, 6)
        H.assert_close(x.grad, row:expand(2, 6), 0, 0, 'dx')
    end)

    it('a tied embedding: rows add into the head gradient, repeated ids accumulate', function()
        local V, C = 7, 3
        local w0, gl = data({V, C}, 10), data({5, V}, 11)
        local ids = ddpl.tensor({1, 4, 1, 6, 1}, {dtype = 'int64'})
        local w = leaf(w0)
        local logits = F.linear(F.embedding(ids, w), w) -- tied head: (5, V)
        local loss = (logits * gl):sum()
        loss:backward()
        -- head part: gl^T @ h; embedding part: row ids[i] gets (gl @ w)[i], summed over repeats
        local head = gl:t():matmul(w0:index_select(0, ids))
        local onehot = F.one_hot(ids, V):double() -- (5, V)
        local emb = onehot:t():matmul(gl:matmul(w0))
        H.assert_close(w.grad, head + emb, 1e-12, 1e-12, 'dw')
        -- rows 1 (three times), 4 and 6 differ from the head part alone; the others do not
        H.assert_close((w.grad - head):narrow(0, 0, 1), ddpl.zeros(1, C, {dtype = 'float64'}),
            0, 0, 'row 0')
    end)

    it('float32 and a second backward into existing .grad accumulate as before', function()
        local x = leaf(data({4, 6}, 12):float())
        for _ = 1, 2 do
            local p = x:split(3, 1)
            local loss = (p[1] * 2):sum() + (p[2] * 3):sum()
            loss:backward()
        end
        local row = ddpl.tensor({4, 4, 4, 6, 6, 6}, {dtype = 'float32'}):view(1, 6):expand(4, 6)
        H.assert_close(x.grad, row, 0, 0, 'dx')
    end)
end)
