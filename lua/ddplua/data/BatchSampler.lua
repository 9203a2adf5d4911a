-- lua/ddplua/data/BatchSampler.lua: groups a sampler's indices into batches.
-- defines: BatchSampler(sampler, batch_size, drop_last): #bs (batches per pass) and
--          bs:batches() -> an iterator of int64 index tensors, one per batch.
--
-- A batch is a narrow() view of the pass's index tensor: no Lua list per batch.
local ddpl = require 'ddplua'
local class = require 'ddplua.class'
local random = require 'ddplua.data.random'

local BatchSampler = class.new('BatchSampler')

function BatchSampler:init(sampler, batch_size, drop_last)
    if type(sampler) ~= 'table' or type(sampler.indices) ~= 'function' then
        error('BatchSampler: expected a sampler (with indices() and len()) as argument 1, got '
            .. type(sampler), 3)
    end
    if math.type(batch_size) ~= 'integer' or batch_size <= 0 then
        -- PyTorch: "batch_size should be a positive integer value, but got batch_size=..."
        error('BatchSampler: batch_size should be a positive integer value, but got batch_size='
            .. tostring(batch_size), 3)
    end
    if type(drop_last) ~= 'boolean' then
        error('BatchSampler: drop_last should be a boolean value, but got drop_last='
            .. tostring(drop_last), 3)
    end
    self.sampler, self.batch_size, self.drop_last = sampler, batch_size, drop_last
end

function BatchSampler:len()
    local n = #self.sampler
    if self.drop_last then return n // self.batch_size end
    return (n + self.batch_size - 1) // self.batch_size
end

function BatchSampler:__len()
    return self:len()
end

-- The pass's indices as a 1-D int64 tensor (a sampler may return a Lua list instead).
local function pass_indices(sampler)
    local idx = sampler:indices()
    if type(idx) == 'table' and not ddpl.is_tensor(idx) then idx = random.index_tensor(idx) end
    if not ddpl.is_tensor(idx) or idx:dim() ~= 1 then
        error(string.format('%s:indices() must return a 1-D tensor or a list of indices',
            getmetatable(sampler) and getmetatable(sampler).__name or 'sampler'), 3)
    end
    if tostring(idx.dtype):match('int64$') == nil then idx = idx:long() end
    return idx
end

function BatchSampler:batches()
    local idx = pass_indices(self.sampler)
    local n, bs, drop_last = idx:size(0), self.batch_size, self.drop_last
    local start = 0
    return function()
        local len = math.min(bs, n - start)
        if len <= 0 or (drop_last and len < bs) then return nil end
        local batch = idx:narrow(0, start, len)
        start = start + bs
        return batch
    end
end

return BatchSampler
