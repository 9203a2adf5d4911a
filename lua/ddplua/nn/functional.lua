-- lua/ddplua/nn/functional.lua: ddpl.nn.functional (also ddpl.F).
-- defines: linear conv2d conv_transpose2d max_pool2d avg_pool2d adaptive_avg_pool2d batch_norm
--          layer_norm embedding dropout softmax log_softmax cross_entropy nll_loss mse_loss relu
--          gelu silu sigmoid tanh scaled_dot_product_attention (C), and, written in Lua:
--          binary_cross_entropy binary_cross_entropy_with_logits l1_loss smooth_l1_loss
--          huber_loss kl_div (functional_losses.lua), leaky_relu elu softplus
--          (functional_activations.lua), one_hot pad (functional_shape.lua), group_norm rms_norm
--          conv1d (functional_layers.lua), multi_head_attention_forward
--          (functional_attention.lua).
--
-- The C functions (engine/lua/bind_functional.c) run on every forward pass, so their
-- PyTorch-style option parsing is not paid in Lua. Arguments are PyTorch's, positionally or by
-- name in a trailing options table, for both kinds:
--     F.conv2d(x, w, b, {stride = 2, padding = 1})
--     F.cross_entropy(logits, target, {reduction = 'sum', label_smoothing = 0.1})
--     F.smooth_l1_loss(x, y, {beta = 0.5})
require 'ddplua.core' -- registers the C table below
local F = require 'ddplua.core.functional'

for _, name in ipairs({'ddplua.nn.functional_losses', 'ddplua.nn.functional_activations',
                       'ddplua.nn.functional_shape', 'ddplua.nn.functional_layers',
                       'ddplua.nn.functional_attention'}) do
    for fname, fn in pairs(require(name)) do
        assert(F[fname] == nil, 'nn.functional: ' .. fname .. ' is defined twice')
        F[fname] = fn
    end
end

return F
