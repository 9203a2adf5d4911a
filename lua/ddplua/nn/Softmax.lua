-- lua/ddplua/nn/Softmax.lua: nn.Softmax([dim]) and nn.LogSoftmax([dim]) (or {dim=}).
-- defines: Softmax (F.softmax over dim), LogSoftmax (F.log_softmax over dim); LogSoftmax is
--          also reachable as nn.LogSoftmax (lua/ddplua/nn/LogSoftmax.lua returns it).
--
-- Without dim, PyTorch's legacy rule picks it at each call: 0 for 0-, 1- and 3-D inputs, else 1
-- (PyTorch warns; pass dim).
local Module = require 'ddplua.nn.Module'
local F = require 'ddplua.nn.functional'

local function make(name, fn)
    local Cls = Module:extend(name)

    function Cls:init(dim)
        if type(dim) == 'table' then dim = Module.options(name, dim, {dim = false}).dim or nil end
        if dim ~= nil and math.type(dim) ~= 'integer' then
            error(name .. ': dim must be an integer, got ' .. tostring(dim), 2)
        end
        self.dim = dim
    end

    function Cls:forward(x)
        local dim = self.dim
        if dim == nil then
            local nd = x:dim()
            dim = (nd == 0 or nd == 1 or nd == 3) and 0 or 1
        end
        return fn(x, dim)
    end

    function Cls:extra_repr()
        return 'dim=' .. Module.repr(self.dim)
    end

    return Cls
end

local Softmax = make('Softmax', F.softmax)
Softmax.LogSoftmax = make('LogSoftmax', F.log_softmax)

return Softmax
