-- lua/ddplua/init.lua: the library table that `require 'ddplua'` returns.
-- defines: ddpl = the C core (tensors, ops, autograd, utilities) plus ddpl.autograd.gradcheck
--          and the lazily loaded submodules ddpl.nn, ddpl.F (= ddpl.nn.functional),
--          ddpl.optim, ddpl.data, ddpl.distributed (= ddpl.dist); ddpl.cuda is part of the core.
--
-- Submodules load on first use, so `require 'ddplua'` stays cheap and each one also loads
-- alone (`require 'ddplua.nn'`). A submodule that is not part of this build yet raises
-- "ddplua.optim is not available yet" instead of a long search-path listing.
--
-- Beyond API.md the core offers:
--   ddpl.frombytes(str, dtype [, shape])  a new CPU tensor holding the string's bytes as
--       elements of dtype (native byte order); shape defaults to 1-D and must hold exactly
--       #str bytes. The fast way to load binary files:
--           local f = io.open(path, 'rb'); local x = ddpl.frombytes(f:read('a'), 'float32', {n, d})
--   ddpl.is_tensor(v), ddpl.memory_allocated([device]), ddpl.set_grad_enabled(flag) (returns
--   the previous flag), x[i] = v (fills or copies row i), x.data, x.ndim, x:requires_grad_(),
--   x:register_hook(fn) returns a handle with :remove(), and every tensor method that PyTorch
--   also has as a function (ddpl.exp(x), ddpl.sum(x, 1), ...).
local ddpl = require 'ddplua.core'
require 'ddplua.autograd'

-- field of ddpl -> module name
local submodules = {
    nn = 'ddplua.nn',
    optim = 'ddplua.optim',
    data = 'ddplua.data',
    distributed = 'ddplua.distributed',
    dist = 'ddplua.distributed',
    F = 'ddplua.nn.functional',
}

-- Modules of API.md that later work adds; requiring one before it exists gets a clear error.
local planned = {
    ['ddplua.optim'] = true,
    ['ddplua.data'] = true,
    ['ddplua.distributed'] = true,
}

local function not_available(name)
    return function() error(name .. ' is not available yet', 3) end
end

-- Last in package.searchers: reached only when no file or preload provides a planned module.
local searchers = package.searchers
local function planned_searcher(name)
    if planned[name] then return not_available(name), ':planned' end
    return '\n\tno planned ddplua module ' .. name
end
local installed = false
for _, s in ipairs(searchers) do installed = installed or s == planned_searcher end
if not installed then searchers[#searchers + 1] = planned_searcher end

setmetatable(ddpl, {
    __index = function(t, key)
        local name = submodules[key]
        if not name then return nil end
        if planned[name] and not package.preload[name] and not package.searchpath(name, package.path) then
            error(name .. ' is not available yet', 2)
        end
        local mod = require(name)
        rawset(t, key, mod)
        return mod
    end,
})

return ddpl
