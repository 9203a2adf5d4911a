-- lua/ddplua/nn/ReLU.lua: nn.ReLU([inplace=false]) (or {inplace=}), the relu activation as a
-- module; inplace writes the result into the input, as PyTorch.
-- defines: ReLU: y = F.relu(x), elementwise, any shape.
local Module = require 'ddplua.nn.Module'
local F = require 'ddplua.nn.functional'

local ReLU = Module:extend('ReLU')

function ReLU:init(inplace)
    self.inplace = Module.inplace_option('ReLU', inplace)
end

function ReLU:forward(x)
    return F.relu(x, {inplace = self.inplace})
end

function ReLU:extra_repr()
    return self.inplace and 'inplace=True' or ''
end

return ReLU
