-- lua/ddplua/nn/SiLU.lua: nn.SiLU(), the silu activation as a module.
-- defines: SiLU: y = F.silu(x), elementwise, any shape.
local Module = require 'ddplua.nn.Module'
local F = require 'ddplua.nn.functional'

local SiLU = Module:extend('SiLU')

function SiLU:forward(x)
    return F.silu(x)
end

return SiLU
