-- lua/ddplua/init.lua: the library table that `require 'ddplua'` returns.
-- defines: ddpl = the C core (tensors, ops, autograd, utilities) plus ddpl.autograd.gradcheck
--          and the lazily loaded submodules ddpl.nn, ddpl.F (= ddpl.nn.functional),
--          ddpl.optim, ddpl.amp, ddpl.data, ddpl.distributed (= ddpl.dist), ddpl.multiprocessing,
--          ddpl.utils (tensorboard, progress, MetricsLogger); ddpl.cuda is part of the core.
--
-- Submodules load on first use, so `require 'ddplua'` stays cheap and each one also loads
-- alone (`require 'ddplua.nn'`).
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

-- Closes every tensor of list (their __close): each lets go of its memory now instead of at
-- the next garbage collection, and cannot be used afterwards. For library code that reads
-- gradients (every `p.grad` is a new tensor holding the gradient): DDP computes the next
-- gradient into the memory of the last one only when nothing else holds that (gradient
-- homes, docs/internals/reducer.md), and copies it away first otherwise.
function ddpl._release(list)
    if type(list) ~= 'table' then
        error('_release: expected a list of tensors, got ' .. type(list), 2)
    end
    for i = 1, #list do
        if not ddpl.is_tensor(list[i]) then
            error(('_release: expected a list of tensors, got %s at position %d'):format(
                type(list[i]), i), 2)
        end
    end
    for i = 1, #list do getmetatable(list[i]).__close(list[i]) end
end

-- field of ddpl -> module name
local submodules = {
    nn = 'ddplua.nn',
    optim = 'ddplua.optim',
    amp = 'ddplua.amp',
    data = 'ddplua.data',
    distributed = 'ddplua.distributed',
    dist = 'ddplua.distributed',
    multiprocessing = 'ddplua.multiprocessing',
    F = 'ddplua.nn.functional',
    utils = 'ddplua.utils',
}

require('ddplua.lazy')(submodules, ddpl)

return ddpl
