-- lua/ddplua/data/random.lua: seeded permutations for samplers, independent of the engine RNG.
-- defines: random.permutation(n, seed) -> int64 tensor; random.index_tensor(list) -> int64 tensor;
--          random.stream_value(seed, k) -> integer (the k-th value, 0-based, of seed's stream).
--
-- DistributedSampler needs the same permutation on every rank for a given seed + epoch, and a
-- seeded DataLoader must shuffle reproducibly, without disturbing ddpl.manual_seed's stream
-- (PyTorch builds a local torch.Generator for this). Here: Fisher-Yates driven by SplitMix64
-- (Steele, Lea, Flood 2014), in Lua 5.4's wrapping 64-bit integers. The values differ from
-- PyTorch's (its generator is a Mersenne Twister) but the structure is the same.
local ddpl = require 'ddplua'

local random = {}

local GOLDEN = 0x9E3779B97F4A7C15 -- wraps to a negative integer: Lua hex literals wrap

-- An int64 tensor from a Lua list of integers (empty lists included).
function random.index_tensor(list)
    if #list == 0 then return ddpl.empty(0, { dtype = 'int64' }) end
    return ddpl.tensor(list, { dtype = 'int64' })
end

-- SplitMix64's output function: a bijective mix of a 64-bit state.
local function mix(z)
    z = (z ~ (z >> 30)) * 0xBF58476D1CE4E5B9
    z = (z ~ (z >> 27)) * 0x94D049BB133111EB
    return z ~ (z >> 31)
end

-- Value k (0, 1, ...) of the SplitMix64 stream seeded with seed, in O(1): the DataLoader's
-- per-batch seeds for random transforms (batch k of a pass whose base seed is seed).
function random.stream_value(seed, k)
    if math.type(seed) ~= 'integer' or math.type(k) ~= 'integer' then
        error('stream_value: seed and k must be integers', 2)
    end
    return mix(seed + (k + 1) * GOLDEN)
end

-- A permutation of 0..n-1 as an int64 tensor, a function of (n, seed) only.
function random.permutation(n, seed)
    if math.type(seed) ~= 'integer' then
        error('permutation: seed must be an integer, got ' .. tostring(seed), 2)
    end
    local state = seed
    local p = {}
    for k = 1, n do p[k] = k - 1 end
    for i = n - 1, 1, -1 do
        state = state + GOLDEN
        local z = mix(state)
        -- top 53 bits as a double in [0, 1) scaled to 0..i: the bias is at most n / 2^53
        local j = math.floor((z >> 11) * 0x1p-53 * (i + 1))
        p[i + 1], p[j + 1] = p[j + 1], p[i + 1]
    end
    return random.index_tensor(p)
end

return random
