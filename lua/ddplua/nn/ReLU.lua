-- lua/ddplua/nn/ReLU.lua: nn.ReLU(), the relu activation as a module.
-- defines: ReLU: y = F.relu(x), elementwise, any shape.
local Module = require 'ddplua.nn.Module'
local F = require 'ddplua.nn.functional'

local ReLU = Module:extend('ReLU')

function ReLU:forward(x)
    return F.relu(x)
end

return ReLU
