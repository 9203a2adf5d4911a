-- lua/ddplua/nn/Sigmoid.lua: nn.Sigmoid(), the sigmoid activation as a module.
-- defines: Sigmoid: y = F.sigmoid(x), elementwise, any shape.
local Module = require 'ddplua.nn.Module'
local F = require 'ddplua.nn.functional'

local Sigmoid = Module:extend('Sigmoid')

function Sigmoid:forward(x)
    return F.sigmoid(x)
end

return Sigmoid
