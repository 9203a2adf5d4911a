-- lua/ddplua/data/RandomSampler.lua: visits every item once per pass in a random order.
-- defines: RandomSampler(data_source [, {seed}]).
--
-- Without a seed each pass draws ddpl.randperm from the engine RNG (so ddpl.manual_seed makes a
-- run reproducible, as in PyTorch). With a seed, pass e (0, 1, 2, ...) uses the permutation of
-- seed + e from data/random.lua: reproducible and independent of the engine RNG.
local ddpl = require 'ddplua'
local Sampler = require 'ddplua.data.Sampler'
local random = require 'ddplua.data.random'

local RandomSampler = Sampler:extend('RandomSampler')

function RandomSampler:init(data_source, opts)
    opts = opts or {}
    for k in pairs(opts) do
        if k ~= 'seed' then error("RandomSampler: unknown option '" .. tostring(k) .. "'", 3) end
    end
    if opts.seed ~= nil and math.type(opts.seed) ~= 'integer' then
        error('RandomSampler: seed must be an integer, got ' .. tostring(opts.seed), 3)
    end
    self.n = Sampler.source_len('RandomSampler', data_source)
    self.seed = opts.seed
    self.epoch = 0 -- passes drawn so far
end

function RandomSampler:len()
    return self.n
end

-- Sets the pass counter, so a seeded sampler can resume at a given epoch.
function RandomSampler:set_epoch(epoch)
    if math.type(epoch) ~= 'integer' then
        error('RandomSampler:set_epoch: expected an integer, got ' .. tostring(epoch), 2)
    end
    self.epoch = epoch
end

function RandomSampler:indices()
    local e = self.epoch
    self.epoch = e + 1
    if self.seed == nil then
        if self.n == 0 then return random.index_tensor({}) end
        return ddpl.randperm(self.n)
    end
    return random.permutation(self.n, self.seed + e)
end

return RandomSampler
