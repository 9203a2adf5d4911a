-- spec/dist/future_spec.lua: dist.Future (lua/ddplua/distributed/future.lua), the futures DDP comm
-- hooks return: completed futures, then_ chains that run when waited for, the errors, and what a
-- hook's result resolves to. Work handles of real collectives are checked in
-- spec/ddp/workers/features.lua ('luahook') and join.lua.
local H = require 'helpers'
local ddpl = H.ddpl
local Future = ddpl.distributed.Future
local resolve = require('ddplua.distributed.future').resolve

describe('dist.Future', function()
    it('completed futures give their value; then_ chains run once, when waited for', function()
        local f = Future.completed(ddpl.tensor({1.0, 2.0}))
        assert.is_true(f:done())
        local runs = 0
        local g = f:then_(function(p)
            runs = runs + 1
            return p:value() * 10
        end)
        local h = g:then_(function(p) return p:value() + 1 end)
        assert.are.equal(0, runs)
        assert.is_false(h:done())
        H.assert_close(h:wait(), {11, 21})
        H.assert_close(g:value(), {10, 20})
        h:wait()
        assert.are.equal(1, runs)
    end)

    it('set_result once; value before a result and a non-function callback are errors', function()
        local f = Future.new()
        H.assert_error(function() f:value() end, 'value', 'not completed')
        H.assert_error(function() f:wait() end, 'wait', 'no value')
        f:set_result(3)
        assert.are.equal(3, f:wait())
        H.assert_error(function() f:set_result(4) end, 'set_result', 'already')
        H.assert_error(function() f:then_(5) end, 'then_', 'function')
    end)

    it("resolve a hook's result: a tensor, a future of one or of a one-tensor list", function()
        local t = ddpl.ones(3)
        assert.is_true(rawequal(t, resolve('hook', t)))
        assert.is_true(rawequal(t, resolve('hook', Future.completed(t))))
        assert.is_true(rawequal(t, resolve('hook', Future.completed({t}))))
        H.assert_error(function() resolve('hook', 42) end, 'hook', 'work/future', 'number')
        H.assert_error(function() resolve('hook', Future.completed('x')) end, 'hook', 'string')
    end)
end)
