-- lua/ddplua/data/transform_rng.lua: the generator random transforms draw from.
-- defines: transform_rng.seed(n), transform_rng.random() -> float in [0, 1),
--          transform_rng.randint(low, high) -> integer in [low, high), transform_rng.state(),
--          transform_rng.set_state(s).
--
-- Random augmentation (RandomCrop, RandomHorizontalFlip, a user's Lambda) must give the same
-- batches whatever num_workers is, and must not disturb ddpl.manual_seed's stream (dropout and
-- initialisation draw from it). So transforms draw from this process-local generator, and the
-- DataLoader reseeds it before it fetches each batch, from (the epoch's base seed, the batch
-- index): the same batch gets the same draws in the main process and in any worker.
-- SplitMix64 (Steele, Lea, Flood 2014) in Lua 5.4's wrapping 64-bit integers, as data/random.lua.
local transform_rng = {}

local GOLDEN = 0x9E3779B97F4A7C15 -- wraps to a negative integer: Lua hex literals wrap
local state = 0

local function next_u64()
    state = state + GOLDEN
    local z = state
    z = (z ~ (z >> 30)) * 0xBF58476D1CE4E5B9
    z = (z ~ (z >> 27)) * 0x94D049BB133111EB
    return z ~ (z >> 31)
end

function transform_rng.seed(n)
    if math.type(n) ~= 'integer' then
        error('transform_rng.seed: seed must be an integer, got ' .. tostring(n), 2)
    end
    state = n
end

-- The top 53 bits as a double in [0, 1).
function transform_rng.random()
    return (next_u64() >> 11) * 0x1p-53
end

-- An integer in [low, high); the bias is at most (high - low) / 2^53.
function transform_rng.randint(low, high)
    if math.type(low) ~= 'integer' or math.type(high) ~= 'integer' or high <= low then
        error(('transform_rng.randint: need integers low < high, got %s, %s'):format(
            tostring(low), tostring(high)), 2)
    end
    return low + math.floor(transform_rng.random() * (high - low))
end

function transform_rng.state() return state end

function transform_rng.set_state(s) state = s end

return transform_rng
