-- lua/ddplua/distributed/grad_bucket.lua: the bucket a DDP comm hook gets, PyTorch's
-- torch.distributed.GradBucket.
-- defines: GradBucket.new(buffer, index, params, is_last), GradBucket.is_bucket(x),
--          bucket:buffer(), bucket:index(), bucket:parameters(), bucket:gradients(),
--          bucket:is_last(), bucket:set_buffer(t).
--
-- buffer is the bucket's flat gradient (the sum of this rank's gradients, not yet reduced or
-- divided), laid out as the parameters in bucket order, one after the other; index is 0-based
-- (PyTorch's); is_last tells the hook that this is the step's last bucket.
local ddpl = require 'ddplua'

local GradBucket = {}
GradBucket.__index = GradBucket
GradBucket.__name = 'ddplua.GradBucket'

function GradBucket.new(buffer, index, params, is_last)
    return setmetatable({_buffer = buffer, _index = index, _params = params, _last = is_last},
        GradBucket)
end

function GradBucket.is_bucket(x) return getmetatable(x) == GradBucket end

-- A method called on something else (bucket.buffer() for bucket:buffer(), or on nil) names
-- itself, as PyTorch's "descriptor 'buffer' requires a GradBucket object" does.
local function check_self(self, method)
    if getmetatable(self) ~= GradBucket then
        error(('GradBucket.%s: expected a GradBucket as self (call it as bucket:%s()), got %s')
            :format(method, method, ddpl.is_tensor(self) and 'a tensor' or type(self)), 3)
    end
end

function GradBucket:buffer()
    check_self(self, 'buffer')
    return self._buffer
end

function GradBucket:index()
    check_self(self, 'index')
    return self._index
end

function GradBucket:is_last()
    check_self(self, 'is_last')
    return self._last
end

-- The parameters whose gradients the bucket holds, in its order (a Lua list).
function GradBucket:parameters()
    check_self(self, 'parameters')
    local out = {}
    for i, p in ipairs(self._params) do out[i] = p end
    return out
end

-- Each parameter's gradient as a view of the buffer, shaped as the parameter (a Lua list).
function GradBucket:gradients()
    check_self(self, 'gradients')
    local out, at = {}, 0
    for i, p in ipairs(self._params) do
        local n = p:numel()
        out[i] = self._buffer:narrow(0, at, n):view(p:shape())
        at = at + n
    end
    return out
end

-- Replaces the buffer's values (t: as many elements; PyTorch swaps the tensor, here the values
-- are copied so the reducer keeps its memory).
function GradBucket:set_buffer(t)
    check_self(self, 'set_buffer')
    if not ddpl.is_tensor(t) or t:numel() ~= self._buffer:numel() then
        error(('GradBucket.set_buffer: expected a tensor of %d elements, got %s'):format(
            self._buffer:numel(), ddpl.is_tensor(t) and t:numel() .. ' elements' or type(t)), 2)
    end
    self._buffer:copy_(t:reshape(self._buffer:numel()))
end

function GradBucket:__tostring()
    return ('GradBucket(index=%d, %d parameters, %d elements%s)'):format(self._index,
        #self._params, self._buffer:numel(), self._last and ', last' or '')
end

return GradBucket
