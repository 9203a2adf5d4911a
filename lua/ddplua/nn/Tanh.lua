-- lua/ddplua/nn/Tanh.lua: nn.Tanh(), the tanh activation as a module.
-- defines: Tanh: y = F.tanh(x), elementwise, any shape.
local Module = require 'ddplua.nn.Module'
local F = require 'ddplua.nn.functional'

local Tanh = Module:extend('Tanh')

function Tanh:forward(x)
    return F.tanh(x)
end

return Tanh
