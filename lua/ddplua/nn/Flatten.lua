-- lua/ddplua/nn/Flatten.lua: nn.Flatten([start_dim=1 [, end_dim=-1]]).
-- defines: Flatten: merges dimensions start_dim..end_dim into one (a view where possible);
--          the default keeps the batch dimension: (N, C, H, W) -> (N, C*H*W).
local Module = require 'ddplua.nn.Module'

local Flatten = Module:extend('Flatten')

function Flatten:init(start_dim, end_dim)
    if type(start_dim) == 'table' then
        start_dim, end_dim = start_dim.start_dim, start_dim.end_dim
    end
    -- dimensions may count from the end; x:flatten checks them against the input
    local check = Module.check_int
    self.start_dim = start_dim == nil and 1 or check('Flatten', start_dim, 'start_dim', -64)
    self.end_dim = end_dim == nil and -1 or check('Flatten', end_dim, 'end_dim', -64)
end

function Flatten:forward(x)
    return x:flatten(self.start_dim, self.end_dim)
end

function Flatten:extra_repr()
    return string.format('start_dim=%d, end_dim=%d', self.start_dim, self.end_dim)
end

return Flatten
