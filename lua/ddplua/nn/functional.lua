-- lua/ddplua/nn/functional.lua: ddpl.nn.functional (also ddpl.F).
-- defines: linear conv2d max_pool2d avg_pool2d adaptive_avg_pool2d batch_norm layer_norm
--          embedding dropout softmax log_softmax cross_entropy nll_loss mse_loss relu gelu silu
--          sigmoid tanh scaled_dot_product_attention.
--
-- The functions are C (engine/lua/bind_functional.c): they run on every forward pass, so their
-- PyTorch-style option parsing is not paid in Lua. Arguments are PyTorch's, positionally or by
-- name in a trailing options table:
--     F.conv2d(x, w, b, {stride = 2, padding = 1})
--     F.cross_entropy(logits, target, {reduction = 'sum', label_smoothing = 0.1})
require 'ddplua.core' -- registers the C table below
return require 'ddplua.core.functional'
