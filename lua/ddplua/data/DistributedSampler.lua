-- lua/ddplua/data/DistributedSampler.lua: each rank's share of a data set, as PyTorch splits it.
-- defines: DistributedSampler(dataset [, {num_replicas, rank, shuffle=true, seed=0,
--          drop_last=false}]): #s, s:set_epoch(e), s:indices() (this rank's int64 indices).
--
-- PyTorch's index semantics (torch/utils/data/distributed.py), step by step:
--   1. order: the permutation of seed + epoch when shuffling (the same on every rank, since all
--      ranks pass the same seed and call set_epoch with the same epoch), else 0..n-1;
--   2. without drop_last, pad to total_size = ceil(n / R) * R by repeating indices from the
--      start (the list repeated as often as needed); with drop_last, cut it to
--      total_size = floor(n / R) * R;
--   3. rank r takes indices[r], indices[r + R], ... (the strided split, indices[r::R]).
-- The permutation comes from data/random.lua, so its values differ from PyTorch's Mersenne
-- Twister but not its structure, and the engine RNG (ddpl.manual_seed) is left alone.
local ddpl = require 'ddplua'
local Sampler = require 'ddplua.data.Sampler'
local random = require 'ddplua.data.random'

local DistributedSampler = Sampler:extend('DistributedSampler')

local OPTIONS = { num_replicas = true, rank = true, shuffle = true, seed = true, drop_last = true }

-- The process group's world size and rank, or nil when there is none.
local function process_group()
    local ok, dist = pcall(require, 'ddplua.distributed')
    if not ok or type(dist) ~= 'table' or type(dist.is_initialized) ~= 'function' then return nil end
    if not dist.is_initialized() then return nil end
    return dist.get_world_size(), dist.get_rank()
end

local function check_int(name, v)
    if math.type(v) ~= 'integer' then
        error(string.format('DistributedSampler: %s must be an integer, got %s', name, tostring(v)), 4)
    end
end

function DistributedSampler:init(dataset, opts)
    opts = opts or {}
    if type(opts) ~= 'table' then
        error('DistributedSampler: expected an options table as argument 2, got ' .. type(opts), 3)
    end
    for k in pairs(opts) do
        if not OPTIONS[k] then error("DistributedSampler: unknown option '" .. tostring(k) .. "'", 3) end
    end
    local num_replicas, rank = opts.num_replicas, opts.rank
    if num_replicas == nil or rank == nil then
        local world, my_rank = process_group()
        if not world then
            error('DistributedSampler: default process group has not been initialized; '
                .. 'pass num_replicas and rank', 3)
        end
        num_replicas = num_replicas or world
        rank = rank or my_rank
    end
    check_int('num_replicas', num_replicas)
    check_int('rank', rank)
    if num_replicas < 1 then
        error('DistributedSampler: num_replicas must be at least 1, got ' .. num_replicas, 3)
    end
    if rank < 0 or rank >= num_replicas then
        -- PyTorch's wording
        error(string.format('DistributedSampler: Invalid rank %d, rank should be in the interval '
            .. '[0, %d]', rank, num_replicas - 1), 3)
    end
    local seed = opts.seed == nil and 0 or opts.seed
    check_int('seed', seed)
    local shuffle = opts.shuffle == nil or opts.shuffle
    local drop_last = opts.drop_last == true
    if type(shuffle) ~= 'boolean' or (opts.drop_last ~= nil and type(opts.drop_last) ~= 'boolean') then
        error('DistributedSampler: shuffle and drop_last must be booleans', 3)
    end

    local n = Sampler.source_len('DistributedSampler', dataset)
    self.dataset, self.n = dataset, n
    self.num_replicas, self.rank = num_replicas, rank
    self.shuffle, self.seed, self.drop_last = shuffle, seed, drop_last
    self.epoch = 0
    if drop_last and n % num_replicas ~= 0 then
        -- the tail that not every rank could get is dropped
        self.num_samples = n // num_replicas
    else
        self.num_samples = (n + num_replicas - 1) // num_replicas
    end
    self.total_size = self.num_samples * num_replicas
end

function DistributedSampler:len()
    return self.num_samples
end

-- Makes the next indices() use this epoch's permutation; call it at the start of every epoch
-- (with the same value on every rank), or each epoch repeats the same order.
function DistributedSampler:set_epoch(epoch)
    if math.type(epoch) ~= 'integer' then
        error('DistributedSampler:set_epoch: expected an integer, got ' .. tostring(epoch), 2)
    end
    self.epoch = epoch
end

function DistributedSampler:indices()
    local n, total = self.n, self.total_size
    if self.num_samples == 0 then return random.index_tensor({}) end
    local order
    if self.shuffle then
        order = random.permutation(n, self.seed + self.epoch)
    else
        order = ddpl.arange(n, { dtype = 'int64' })
    end
    if total > n then
        -- pad by repeating the order from its start, as many times as needed
        local parts, have = { order }, n
        while have < total do
            local take = math.min(n, total - have)
            parts[#parts + 1] = order:narrow(0, 0, take)
            have = have + take
        end
        order = ddpl.cat(parts, 0)
    elseif total < n then
        order = order:narrow(0, 0, total)
    end
    -- indices[rank::R]: row-major (num_samples, R) puts index k*R + r at [k][r]
    return order:view(self.num_samples, self.num_replicas):select(1, self.rank):contiguous()
end

function DistributedSampler:__tostring()
    return string.format('DistributedSampler(len=%d, rank=%d, num_replicas=%d, shuffle=%s, epoch=%d)',
        self.num_samples, self.rank, self.num_replicas, tostring(self.shuffle), self.epoch)
end

return DistributedSampler
