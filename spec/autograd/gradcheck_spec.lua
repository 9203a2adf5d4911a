-- spec/autograd/gradcheck_spec.lua: ddpl.autograd.gradcheck (central differences in float64) for
-- every differentiable op of API.md: pointwise ops, reductions with and without dim, matmul forms,
-- joining/picking and view ops, and every nn.functional function. Inputs are kept away from
-- kinks (relu and abs at 0, clamp bounds, max ties) so the finite differences are meaningful.
local H = require 'helpers'
local ddpl = H.ddpl
local F = ddpl.F
local gradcheck = ddpl.autograd.gradcheck

ddpl.manual_seed(1234)

local grad_inputs = require 'grad_inputs'
local U, A, D = grad_inputs.U, grad_inputs.A, grad_inputs.D

local function ok_gradcheck(fn, inputs, opts)
    local ok, res = pcall(gradcheck, fn, inputs, opts)
    if not ok then error('gradcheck raised: ' .. tostring(res), 2) end
    assert.is_true(res, 'gradcheck returned ' .. tostring(res))
end

-- checks[i] = {name, fn, inputs-builder}
local function suite(title, checks)
    describe(title, function()
        for _, c in ipairs(checks) do
            it(c[1], function() ok_gradcheck(c[2], c[3]()) end)
        end
    end)
end

describe('gradcheck itself', function()
    it('passes a correct gradient', function()
        ok_gradcheck(function(x) return x * x end, {U({3})})
    end)

    it('fails a wrong gradient (x * detached x has half the true derivative)', function()
        local ok, res = pcall(gradcheck, function(x) return x * x:detach() end, {U({3}, 0.5, 1)})
        assert.is_true(not ok or res == false, 'gradcheck accepted a wrong gradient')
    end)
end)

suite('gradcheck: pointwise', {
    {'neg', function(x) return -x end, function() return {U({2, 3})} end},
    {'exp', function(x) return x:exp() end, function() return {U({2, 3})} end},
    {'log', function(x) return x:log() end, function() return {U({2, 3}, 0.2, 2)} end},
    {'sqrt', function(x) return x:sqrt() end, function() return {U({2, 3}, 0.2, 2)} end},
    {'rsqrt', function(x) return x:rsqrt() end, function() return {U({2, 3}, 0.2, 2)} end},
    {'abs', function(x) return x:abs() end, function() return {A({2, 3})} end},
    {'sin', function(x) return x:sin() end, function() return {U({2, 3}, -3, 3)} end},
    {'cos', function(x) return x:cos() end, function() return {U({2, 3}, -3, 3)} end},
    {'tanh', function(x) return x:tanh() end, function() return {U({2, 3}, -2, 2)} end},
    {'sigmoid', function(x) return x:sigmoid() end, function() return {U({2, 3}, -3, 3)} end},
    {'relu', function(x) return x:relu() end, function() return {A({2, 3})} end},
    {'gelu', function(x) return x:gelu() end, function() return {U({2, 3}, -3, 3)} end},
    {'gelu tanh', function(x) return F.gelu(x, {approximate = 'tanh'}) end,
     function() return {U({2, 3}, -3, 3)} end},
    {'silu', function(x) return x:silu() end, function() return {U({2, 3}, -3, 3)} end},
    {'clamp both', function(x) return x:clamp(-0.5, 0.5) end,
     function() return {ddpl.tensor({-0.9, -0.3, 0.1, 0.45, 0.7, -0.6}, {dtype = 'float64',
                                                                       requires_grad = true})} end},
    {'clamp min only', function(x) return x:clamp(0.0) end, function() return {A({5})} end},
    {'clamp max only', function(x) return x:clamp(nil, 0.0) end, function() return {A({5})} end},
    {'add broadcast', function(a, b) return a + b end, function() return {U({2, 3}), U({3})} end},
    {'sub broadcast', function(a, b) return a - b end, function() return {U({2, 1}), U({1, 3})} end},
    {'mul broadcast', function(a, b) return a * b end,
     function() return {U({2, 3, 1}), U({4})} end},
    {'div broadcast', function(a, b) return a / b end,
     function() return {U({2, 3}), A({2, 1})} end},
    {'pow tensor^tensor', function(a, b) return a ^ b end,
     function() return {U({2, 3}, 0.5, 2), U({2, 3})} end},
    {'pow tensor^number', function(a) return a ^ 2.5 end, function() return {U({4}, 0.3, 2)} end},
    {'pow number^tensor', function(a) return 1.7 ^ a end, function() return {U({4})} end},
    {'number - tensor, number / tensor', function(a) return 3 - 2.5 / a end,
     function() return {A({4})} end},
    {'add/sub/mul/div methods', function(a, b) return a:add(b):mul(a):sub(b):div(b) end,
     function() return {U({3}), U({3}, 0.5, 1.5)} end},
    {'pow method', function(a, b) return a:pow(b) end,
     function() return {U({3}, 0.5, 2), U({3})} end},
    {'where', function(x, y)
        return ddpl.where(ddpl.tensor({{true, false, true}, {false, false, true}}), x, y)
    end, function() return {U({2, 3}), U({3})} end},
    {'masked_fill', function(x)
        return x:masked_fill(ddpl.tensor({true, false, false, true}), 2.0)
    end, function() return {U({3, 4})} end},
})

local function red(op, dim, keepdim)
    if dim == nil then return function(x) return x[op](x) end end
    return function(x) return (x[op](x, dim, keepdim)) end
end

local reductions = {}
for _, op in ipairs({'sum', 'mean', 'var', 'std', 'prod'}) do
    local input = op == 'prod' and function() return {A({2, 3, 2})} end
                  or function() return {U({2, 3, 2})} end
    reductions[#reductions + 1] = {op .. ' all', red(op), input}
    reductions[#reductions + 1] = {op .. ' dim 1', red(op, 1), input}
    reductions[#reductions + 1] = {op .. ' dim -1 keepdim', red(op, -1, true), input}
end
-- norm has the ([dim [, keepdim]]) form of every reduction; the order p is an option
reductions[#reductions + 1] = {'norm all', function(x) return x:norm() end,
                               function() return {U({2, 3, 2})} end}
reductions[#reductions + 1] = {'norm p=2 dim 1', function(x) return x:norm(2, 1) end,
                               function() return {U({2, 3, 2})} end}
reductions[#reductions + 1] = {'norm p=1 dim -1 keepdim', function(x) return x:norm(1, -1, true) end,
                               function() return {A({2, 3, 2})} end}
reductions[#reductions + 1] = {'norm p=3 all', function(x) return x:norm({ p = 3 }) end,
                               function() return {A({2, 3})} end}
for _, op in ipairs({'max', 'min'}) do
    reductions[#reductions + 1] = {op .. ' all', red(op), function() return {D({3, 4})} end}
    reductions[#reductions + 1] = {op .. ' dim 0 (values)', red(op, 0),
                                   function() return {D({3, 4})} end}
    reductions[#reductions + 1] = {op .. ' dim 1 keepdim (values)', red(op, 1, true),
                                   function() return {D({3, 4})} end}
end
reductions[#reductions + 1] = {'logsumexp dim 1', red('logsumexp', 1),
                               function() return {U({3, 4}, -2, 2)} end}
reductions[#reductions + 1] = {'logsumexp dim -1 keepdim', red('logsumexp', -1, true),
                               function() return {U({3, 4}, -2, 2)} end}
reductions[#reductions + 1] = {'prod with one zero', red('prod', 1),
                               function()
                                   return {ddpl.tensor({{0.5, 0.0, 2.0}, {1.5, -1.0, 3.0}},
                                                       {dtype = 'float64', requires_grad = true})}
                               end}
suite('gradcheck: reductions', reductions)

suite('gradcheck: linear algebra', {
    {'matmul 1-D x 1-D', function(a, b) return a:matmul(b) end,
     function() return {U({4}), U({4})} end},
    {'matmul 2-D x 1-D', function(a, b) return a:matmul(b) end,
     function() return {U({3, 4}), U({4})} end},
    {'matmul 1-D x 2-D', function(a, b) return a:matmul(b) end,
     function() return {U({4}), U({4, 3})} end},
    {'matmul 2-D x 2-D', function(a, b) return a:matmul(b) end,
     function() return {U({3, 4}), U({4, 2})} end},
    {'matmul 3-D x 2-D', function(a, b) return a:matmul(b) end,
     function() return {U({2, 3, 4}), U({4, 2})} end},
    {'matmul 1-D x 3-D', function(a, b) return a:matmul(b) end,
     function() return {U({4}), U({2, 4, 3})} end},
    {'matmul batched broadcast', function(a, b) return a:matmul(b) end,
     function() return {U({2, 1, 3, 2}), U({3, 2, 2})} end},
    {'matmul transposed operands', function(a, b) return a:t():matmul(b:t()) end,
     function() return {U({4, 3}), U({2, 4})} end},
    {'mm', function(a, b) return a:mm(b) end, function() return {U({3, 4}), U({4, 2})} end},
    {'bmm', function(a, b) return a:bmm(b) end,
     function() return {U({2, 3, 4}), U({2, 4, 2})} end},
    {'addmm', function(c, a, b) return ddpl.addmm(c, a, b) end,
     function() return {U({3, 2}), U({3, 4}), U({4, 2})} end},
    {'addmm broadcast bias, beta and alpha', function(c, a, b)
        return ddpl.addmm(c, a, b, {beta = 0.5, alpha = -1.5})
    end, function() return {U({2}), U({3, 4}), U({4, 2})} end},
})

suite('gradcheck: joining, picking and views', {
    {'cat dim 0', function(a, b) return ddpl.cat({a, b}, 0) end,
     function() return {U({2, 3}), U({1, 3})} end},
    {'cat dim -1', function(a, b, c) return ddpl.cat({a, b, c}, -1) end,
     function() return {U({2, 1}), U({2, 3}), U({2, 2})} end},
    {'stack dim 1', function(a, b) return ddpl.stack({a, b}, 1) end,
     function() return {U({2, 3}), U({2, 3})} end},
    {'index_select with repeats', function(x)
        return x:index_select(0, ddpl.tensor({2, 0, 2, 2}))
    end, function() return {U({3, 2})} end},
    {'gather', function(x) return x:gather(1, ddpl.tensor({{0, 0, 2}, {1, 2, 1}})) end,
     function() return {U({2, 3})} end},
    {'topk values', function(x) return (ddpl.topk(x, 2)) end, function() return {D({3, 4})} end},
    {'narrow', function(x) return x:narrow(1, 1, 2) end, function() return {U({2, 4})} end},
    {'select', function(x) return x:select(1, 2) end, function() return {U({2, 4})} end},
    {'x[i]', function(x) return x[1] end, function() return {U({3, 2})} end},
    {'expand', function(x) return x:expand(3, 2, 4) end, function() return {U({2, 1})} end},
    {'permute', function(x) return x:permute(2, 0, 1) end, function() return {U({2, 3, 2})} end},
    {'transpose', function(x) return x:transpose(0, 2) end, function() return {U({2, 3, 2})} end},
    {'t', function(x) return x:t() end, function() return {U({2, 3})} end},
    {'view', function(x) return x:view(3, 4) end, function() return {U({2, 6})} end},
    {'reshape of a transposed tensor', function(x) return x:t():reshape(6) end,
     function() return {U({2, 3})} end},
    {'flatten', function(x) return x:flatten(1) end, function() return {U({2, 3, 2})} end},
    {'unsqueeze and squeeze', function(x) return x:unsqueeze(1):squeeze(2) end,
     function() return {U({2, 1, 3})} end},
    {'chunk', function(x)
        local a, b = table.unpack(x:chunk(2, 1))
        return a * 2 + b
    end, function() return {U({2, 4})} end},
    {'split', function(x)
        local parts = x:split(2, 0)
        return parts[1]:sum(0) * parts[2]:sum(0)
    end, function() return {U({4, 3})} end},
    {'contiguous and clone', function(x) return x:t():contiguous():clone() * 3 end,
     function() return {U({2, 3})} end},
    {'double() of a float64 tensor', function(x) return x:double() * x end,
     function() return {U({3})} end},
})

suite('gradcheck: nn.functional', {
    {'linear', function(x, w, b) return F.linear(x, w, b) end,
     function() return {U({3, 4}), U({2, 4}), U({2})} end},
    {'linear without bias', function(x, w) return F.linear(x, w) end,
     function() return {U({2, 3, 4}), U({2, 4})} end},
    {'conv2d', function(x, w, b) return F.conv2d(x, w, b) end,
     function() return {U({2, 2, 4, 4}), U({3, 2, 3, 3}), U({3})} end},
    {'conv2d stride and padding', function(x, w, b)
        return F.conv2d(x, w, b, {stride = 2, padding = 1})
    end, function() return {U({1, 2, 5, 5}), U({2, 2, 3, 3}), U({2})} end},
    {'conv2d groups and dilation', function(x, w, b)
        return F.conv2d(x, w, b, {groups = 2, dilation = 2, padding = {2, 1}})
    end, function() return {U({1, 4, 5, 5}), U({4, 2, 3, 2}), U({4})} end},
    {'max_pool2d', function(x) return F.max_pool2d(x, 2) end,
     function() return {D({1, 2, 4, 4})} end},
    {'max_pool2d overlapping with padding', function(x)
        return F.max_pool2d(x, 3, {stride = 2, padding = 1})
    end, function() return {D({1, 1, 5, 5})} end},
    {'avg_pool2d', function(x) return F.avg_pool2d(x, 2) end,
     function() return {U({1, 2, 4, 4})} end},
    {'avg_pool2d padding, count_include_pad false', function(x)
        return F.avg_pool2d(x, 3, {stride = 2, padding = 1, count_include_pad = false})
    end, function() return {U({1, 1, 5, 5})} end},
    {'adaptive_avg_pool2d uneven windows', function(x)
        return F.adaptive_avg_pool2d(x, {3, 2})
    end, function() return {U({1, 2, 5, 7})} end},
    {'batch_norm training', function(x, w, b)
        return F.batch_norm(x, nil, nil, w, b, {training = true})
    end, function() return {U({4, 3, 2}), U({3}, 0.5, 1.5), U({3})} end},
    {'batch_norm training with running stats', function(x, w, b)
        return F.batch_norm(x, ddpl.zeros(2, {dtype = 'float64'}),
                            ddpl.ones(2, {dtype = 'float64'}), w, b, {training = true})
    end, function() return {U({3, 2, 2, 2}), U({2}, 0.5, 1.5), U({2})} end},
    {'batch_norm eval', function(x, w, b)
        return F.batch_norm(x, ddpl.tensor({0.1, -0.2}, {dtype = 'float64'}),
                            ddpl.tensor({0.5, 2.0}, {dtype = 'float64'}), w, b,
                            {training = false})
    end, function() return {U({3, 2}), U({2}), U({2})} end},
    {'layer_norm', function(x, w, b) return F.layer_norm(x, {4}, w, b) end,
     function() return {U({3, 4}), U({4}), U({4})} end},
    {'layer_norm over two dims', function(x, w, b) return F.layer_norm(x, {2, 3}, w, b) end,
     function() return {U({2, 2, 3}), U({2, 3}), U({2, 3})} end},
    {'embedding', function(w) return F.embedding(ddpl.tensor({{0, 2}, {2, 3}}), w) end,
     function() return {U({4, 3})} end},
    {'dropout p = 0 and eval', function(x)
        return F.dropout(x, 0.0, true) + F.dropout(x, 0.5, false)
    end, function() return {U({3})} end},
    {'softmax', function(x) return F.softmax(x, 1) end, function() return {U({2, 4}, -2, 2)} end},
    {'log_softmax', function(x) return F.log_softmax(x, 0) end,
     function() return {U({3, 2}, -2, 2)} end},
    {'relu', function(x) return F.relu(x) end, function() return {A({5})} end},
    {'gelu', function(x) return F.gelu(x) end, function() return {U({5}, -3, 3)} end},
    {'silu', function(x) return F.silu(x) end, function() return {U({5}, -3, 3)} end},
    {'cross_entropy', function(x) return F.cross_entropy(x, ddpl.tensor({2, 0, 1})) end,
     function() return {U({3, 4}, -2, 2)} end},
    {'cross_entropy label smoothing, weights, ignore_index', function(x)
        local w = ddpl.tensor({0.5, 1.0, 1.5, 2.0}, {dtype = 'float64'})
        return F.cross_entropy(x, ddpl.tensor({2, 0, 1, 3}),
                               {label_smoothing = 0.15, weight = w, ignore_index = 1})
    end, function() return {U({4, 4}, -2, 2)} end},
    {'cross_entropy (N,C,d) sum', function(x)
        return F.cross_entropy(x, ddpl.tensor({{0, 2}, {1, 1}}), {reduction = 'sum'})
    end, function() return {U({2, 3, 2}, -2, 2)} end},
    {'nll_loss', function(x)
        return F.nll_loss(x, ddpl.tensor({1, 0, 2}), {reduction = 'none'})
    end, function() return {U({3, 3})} end},
    {'mse_loss', function(a, b) return F.mse_loss(a, b) end,
     function() return {U({2, 3}), U({2, 3})} end},
    {'scaled_dot_product_attention', function(q, k, v)
        return F.scaled_dot_product_attention(q, k, v)
    end, function() return {U({2, 3, 4}), U({2, 2, 4}), U({2, 2, 3})} end},
    {'scaled_dot_product_attention causal', function(q, k, v)
        return F.scaled_dot_product_attention(q, k, v, {is_causal = true})
    end, function() return {U({1, 3, 2}), U({1, 3, 2}), U({1, 3, 2})} end},
    {'scaled_dot_product_attention with a mask', function(q, k, v)
        local m = ddpl.tensor({{true, false, true}, {true, true, false}})
        return F.scaled_dot_product_attention(q, k, v, {attn_mask = m})
    end, function() return {U({2, 2}), U({3, 2}), U({3, 2})} end},
})

-- issue 16's additions (nn.functional_*.lua): losses, activations, pad, norms, conv1d. Inputs
-- avoid the kinks (|x - y| at 0 and at beta/delta, x at 0 for the activations, the softplus
-- threshold), where finite differences are not meaningful.
suite('gradcheck: nn.functional (issue 16)', {
    {'binary_cross_entropy with weight', function(x, y)
        return F.binary_cross_entropy(x, y, {weight = ddpl.tensor({0.5, 2.0, 1.0},
                                                                  {dtype = 'float64'})})
    end, function() return {U({2, 3}, 0.1, 0.9), U({2, 3}, 0, 1)} end},
    {'binary_cross_entropy_with_logits pos_weight and weight (all four inputs)',
     function(x, y, w, pw)
        return F.binary_cross_entropy_with_logits(x, y, {weight = w, pos_weight = pw,
                                                         reduction = 'sum'})
    end, function() return {U({2, 3}, -4, 4), U({2, 3}, 0, 1), U({3}, 0.5, 2), U({3}, 0.5, 3)}
    end},
    {'binary_cross_entropy_with_logits none', function(x, y)
        return F.binary_cross_entropy_with_logits(x, y, {reduction = 'none'})
    end, function() return {U({4}, -3, 3), U({4}, 0, 1)} end},
    {'l1_loss', function(a, b) return F.l1_loss(a, b, 'sum') end,
     function() return {A({2, 3}), ddpl.zeros(2, 3, {dtype = 'float64'})} end},
    {'smooth_l1_loss beta 0.5', function(a)
        return F.smooth_l1_loss(a, ddpl.zeros(2, 4, {dtype = 'float64'}), {beta = 0.5})
    end, function() return {A({2, 4})} end},
    {'huber_loss delta 0.7', function(a)
        return F.huber_loss(a, ddpl.zeros(2, 4, {dtype = 'float64'}), {delta = 0.7,
                                                                       reduction = 'none'})
    end, function() return {A({2, 4})} end},
    {'kl_div batchmean (input and target)', function(x, t)
        return F.kl_div(x, t, {reduction = 'batchmean'})
    end, function() return {U({3, 4}, -3, -0.1), U({3, 4}, 0.05, 1)} end},
    {'kl_div log_target', function(x, t)
        return F.kl_div(x, t, {reduction = 'sum', log_target = true})
    end, function() return {U({3, 4}, -3, -0.1), U({3, 4}, -3, -0.1)} end},
    {'leaky_relu', function(x) return F.leaky_relu(x, 0.2) end, function() return {A({6})} end},
    {'elu', function(x) return F.elu(x, 0.7) end, function() return {A({6})} end},
    {'softplus beta 2 threshold 3', function(x) return F.softplus(x, 2, 3) end,
     function() return {U({8}, -3, 1.4)} end},
    {'pad constant with negative amounts', function(x)
        return F.pad(x, {1, -1, 2, 0}, {value = 0.5})
    end, function() return {U({2, 3, 4})} end},
    {'pad reflect', function(x) return F.pad(x, {2, 1, 1, 2}, {mode = 'reflect'}) end,
     function() return {U({1, 2, 3, 4})} end},
    {'pad replicate', function(x) return F.pad(x, {2, 3}, {mode = 'replicate'}) end,
     function() return {U({2, 3})} end},
    {'pad circular', function(x) return F.pad(x, {1, 2, 2, 0}, {mode = 'circular'}) end,
     function() return {U({1, 1, 3, 3})} end},
    {'group_norm', function(x, w, b) return F.group_norm(x, 2, w, b) end,
     function() return {U({2, 4, 3}), U({4}), U({4})} end},
    {'rms_norm', function(x, w) return F.rms_norm(x, {2, 3}, w) end,
     function() return {U({2, 2, 3}), U({2, 3})} end},
    {'conv1d', function(x, w, b)
        return F.conv1d(x, w, b, {stride = 2, padding = 1, dilation = 2, groups = 2})
    end, function() return {U({2, 4, 7}), U({4, 2, 3}), U({4})} end},
    {'conv_transpose2d stride, padding, output_padding, groups, dilation', function(x, w, b)
        return F.conv_transpose2d(x, w, b, {stride = {2, 1}, padding = {1, 0},
                                            output_padding = {1, 0}, groups = 2,
                                            dilation = {1, 2}})
    end, function() return {U({2, 4, 3, 3}), U({4, 1, 2, 3}), U({2})} end},
    {'conv_transpose2d unbatched', function(x, w) return F.conv_transpose2d(x, w, nil, 2) end,
     function() return {U({2, 3, 2}), U({2, 3, 2, 2})} end},
})
