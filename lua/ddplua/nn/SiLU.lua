-- lua/ddplua/nn/SiLU.lua: nn.SiLU([inplace=false]) (or {inplace=}), the silu activation as a
-- module; inplace writes the result into the input, as PyTorch.
-- defines: SiLU: y = F.silu(x), elementwise, any shape.
local Module = require 'ddplua.nn.Module'
local F = require 'ddplua.nn.functional'

local SiLU = Module:extend('SiLU')

function SiLU:init(inplace)
    self.inplace = Module.inplace_option('SiLU', inplace)
end

function SiLU:forward(x)
    return F.silu(x, {inplace = self.inplace})
end

function SiLU:extra_repr()
    return self.inplace and 'inplace=True' or ''
end

return SiLU
