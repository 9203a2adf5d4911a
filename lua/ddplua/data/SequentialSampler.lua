-- lua/ddplua/data/SequentialSampler.lua: visits every item in order, 0 to n-1.
-- defines: SequentialSampler(data_source) (a data set or a count).
local ddpl = require 'ddplua'
local Sampler = require 'ddplua.data.Sampler'

local SequentialSampler = Sampler:extend('SequentialSampler')

function SequentialSampler:init(data_source)
    self.n = Sampler.source_len('SequentialSampler', data_source)
end

function SequentialSampler:len()
    return self.n
end

function SequentialSampler:indices()
    return ddpl.arange(self.n, { dtype = 'int64' })
end

return SequentialSampler
