-- lua/ddplua/distributed/future.lua: futures over collectives, as torch.futures.Future and
-- Work.get_future(), for DDP comm hooks (API.md: a hook returns a work/future whose :wait()
-- gives the reduced tensor).
-- defines: Future.new(), Future.completed(value), fut:wait(), fut:value(), fut:then_(fn),
--          fut:done(), fut:set_result(v), Future.install_work_methods(work_metatable, results),
--          Future.resolve(fname, r) (a hook's result: a tensor, or what its future's wait gives).
--
-- A collective's work handle is a C object; the async collectives remember the tensor each
-- fills (distributed.lua: a weak table from work to tensor), and these methods are added to the
-- work type: work:value() waits and returns that tensor (wait returns true, as PyTorch's),
-- work:get_future() is the work itself, work:then_(fn) a Future of fn(work).
-- `then` is a Lua keyword, hence then_. Callbacks run when a waiter asks (the collectives here
-- complete on their own threads and a callback must run on the Lua thread), not at completion.
local ddpl = require 'ddplua'

local Future = {}
Future.__index = Future
Future.__name = 'ddplua.Future'

function Future.new()
    return setmetatable({_done = false}, Future)
end

function Future.completed(value)
    local f = Future.new()
    f:set_result(value)
    return f
end

function Future:set_result(value)
    if self._done then error('set_result: the future already has a value', 2) end
    self._done, self._value = true, value
    return self
end

-- Whether the value is there (a then_ future gets it when waited for).
function Future:done()
    return self._done
end

-- Waits for the parent (a work or a future) and runs the callback once.
function Future:wait()
    if not self._done then
        local p, fn = self._parent, self._fn
        if not p then error('wait: the future has no value and nothing will give it one', 2) end
        p:wait()
        self._parent, self._fn = nil, nil
        self._done, self._value = true, fn(p)
    end
    return self._value
end

function Future:value()
    if not self._done then error('value: the future is not completed (call wait first)', 2) end
    return self._value
end

-- A future of fn(self), computed when it is waited for.
function Future:then_(fn)
    if type(fn) ~= 'function' then
        error('then_: expected a function, got ' .. type(fn), 2)
    end
    return setmetatable({_done = false, _parent = self, _fn = fn}, Future)
end

function Future:__tostring()
    return self._done and 'Future(completed)' or 'Future(pending)'
end

-- Adds value/get_future/then_ to the work type (wait keeps PyTorch's true).
function Future.install_work_methods(methods, results)
    if methods._futures then return end
    methods._futures = true
    function methods.value(w)
        w:wait()
        return results[w]
    end
    function methods.get_future(w) return w end
    function methods.then_(w, fn)
        if type(fn) ~= 'function' then
            error('then_: expected a function, got ' .. type(fn), 2)
        end
        return setmetatable({_done = false, _parent = w, _fn = fn}, Future)
    end
end

-- What a comm hook handed back, as the tensor of reduced values: a tensor itself, or the value a
-- work or future gives when waited for (a one-tensor list, as PyTorch's futures hold, counts).
function Future.resolve(fname, r)
    if ddpl.is_tensor(r) then return r end
    local ok, wait = pcall(function() return r.wait end)
    if ok and type(wait) == 'function' then
        local v = r:wait()
        if v == true and type(r.value) == 'function' then v = r:value() end -- a work handle
        if type(v) == 'table' and not ddpl.is_tensor(v) and #v == 1 then v = v[1] end
        if ddpl.is_tensor(v) then return v end
        error(('%s: the future the hook returned gave %s, expected a tensor'):format(fname,
            type(v)), 0)
    end
    error(('%s: the hook must return a tensor or a work/future of one, got %s'):format(fname,
        type(r)), 0)
end

return Future
