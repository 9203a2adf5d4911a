-- lua/ddplua/nn/Identity.lua: nn.Identity(...), a placeholder that returns its input.
-- defines: Identity: forward(x) = x; constructor arguments are accepted and ignored, as in
--          PyTorch, so it can stand in for any layer.
local Module = require 'ddplua.nn.Module'

local Identity = Module:extend('Identity')

function Identity:forward(x)
    return x
end

return Identity
