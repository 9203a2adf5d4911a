-- lua/ddplua/nn/NonDynamicallyQuantizableLinear.lua: PyTorch's name for the output projection of
--          nn.MultiheadAttention (torch.nn.modules.linear.NonDynamicallyQuantizableLinear).
-- defines: NonDynamicallyQuantizableLinear: nn.Linear under another name, so that
--          tostring(MultiheadAttention(...)) prints what PyTorch prints. PyTorch keeps the class
--          only to stop dynamic quantisation from swapping the projection; nothing else differs.
local Linear = require 'ddplua.nn.Linear'

return Linear:extend('NonDynamicallyQuantizableLinear')
