-- lua/ddplua/utils/histogram.lua: the numbers of a TensorBoard HistogramProto from a tensor or a
-- list, bucketed as PyTorch's SummaryWriter.add_histogram does.
-- defines: histogram.compute(values, bins, who) -> {min, max, num, sum, sum_squares,
--          bucket_limit, bucket}; histogram.tensorflow_bins() -> PyTorch's default edges.
--
-- bins: 'tensorflow' (the default) is PyTorch's default_bins: 0 and +-1e-12 * 1.1^k for every k
-- with 1e-12 * 1.1^k < 1e20 (multiplied up in doubles as PyTorch does: 1549 edges); an integer n
-- is n equal bins from the minimum to the maximum (+-0.5 around a single value), numpy's
-- np.histogram(values, n); a list gives the edges (increasing). Bins hold [edge_i, edge_i+1),
-- the last one also its right edge; values outside the edges are not counted (np.histogram).
-- Then, as PyTorch's make_histogram: only the bins from the first to the last non-empty one are
-- kept, plus the bin before them (an empty one added when there is none), because TensorBoard
-- stores right edges only (bucket_limit[i] is bucket[i]'s right edge). min, max, sum and
-- sum_squares are of all the values, in doubles (PyTorch sums a float32 tensor in float32).
local histogram = {}

local tf_edges

function histogram.tensorflow_bins()
    if not tf_edges then
        local pos = {}
        local v = 1e-12
        while v < 1e20 do
            pos[#pos + 1] = v
            v = v * 1.1
        end
        local edges = {}
        for i = #pos, 1, -1 do edges[#edges + 1] = -pos[i] end
        edges[#edges + 1] = 0.0
        for i = 1, #pos do edges[#edges + 1] = pos[i] end
        tf_edges = edges
    end
    return tf_edges
end

-- The values as a flat Lua list of numbers: a tensor of any shape, dtype and device, or a list.
local function flatten(values, who)
    local ddpl = require 'ddplua'
    if ddpl.is_tensor(values) then
        return values:detach():cpu():double():reshape(-1):tolist()
    end
    if type(values) ~= 'table' then
        error(('%s: values must be a tensor or a list of numbers, got %s'):format(who,
            type(values)), 0)
    end
    for i = 1, #values do
        if type(values[i]) ~= 'number' then
            error(('%s: values[%d] is a %s, not a number'):format(who, i, type(values[i])), 0)
        end
    end
    return values
end

local function edges_for(bins, lo, hi, who)
    if bins == nil or bins == 'tensorflow' then return histogram.tensorflow_bins() end
    if math.type(bins) == 'integer' then
        if bins < 1 then error(('%s: bins must be >= 1, got %d'):format(who, bins), 0) end
        if lo == hi then lo, hi = lo - 0.5, hi + 0.5 end
        local edges = {}
        for i = 0, bins do edges[i + 1] = lo + (hi - lo) * i / bins end
        edges[bins + 1] = hi
        return edges
    end
    if type(bins) == 'table' then
        if #bins < 2 then
            error(('%s: bins needs at least 2 edges, got %d'):format(who, #bins), 0)
        end
        for i = 1, #bins do
            local e = bins[i]
            if type(e) ~= 'number' or e ~= e or math.abs(e) == math.huge then
                error(('%s: bins[%d] is not a finite number: %s'):format(who, i, tostring(e)), 0)
            end
            if i > 1 and e <= bins[i - 1] then
                error(('%s: bins must increase, but bins[%d] = %g follows %g'):format(who, i, e,
                    bins[i - 1]), 0)
            end
        end
        return bins
    end
    error(("%s: bins must be 'tensorflow', a bin count or a list of edges, got %s"):format(who,
        tostring(bins)), 0)
end

-- A function giving a bin index near the right one for a value (the caller steps to the exact
-- one by comparing with the edges): a closed form for the default and the equal bins (1e6 values
-- in a fraction of a second), a binary search for edges given as a list.
local LOG_1_1 = math.log(1.1)

local function guesser(bins, edges, lo, hi)
    local nb = #edges - 1
    local function clamp(a) return a < 1 and 1 or (a > nb and nb or a) end
    if bins == nil or bins == 'tensorflow' then
        local zero = (nb + 2) // 2 -- edges[zero] == 0; edges[zero + k] == 1e-12 * 1.1^(k-1)
        return function(v)
            if v == 0 then return zero end
            local k = math.floor(math.log(math.abs(v) * 1e12) / LOG_1_1)
            if k < 0 then return v > 0 and zero or zero - 1 end
            return clamp(v > 0 and zero + 1 + k or zero - 2 - k)
        end
    end
    if math.type(bins) == 'integer' then
        local a, width = edges[1], (edges[nb + 1] - edges[1]) / nb
        return function(v) return clamp(math.floor((v - a) / width) + 1) end
    end
    return function(v)
        local a, b = 1, nb + 1 -- edges[a] <= v < edges[b]
        while b - a > 1 do
            local m = (a + b) // 2
            if edges[m] <= v then a = m else b = m end
        end
        return a
    end
end

function histogram.compute(values, bins, who)
    who = who or 'histogram'
    local list = flatten(values, who)
    local n = #list
    if n == 0 then error(('%s: the values are empty'):format(who), 0) end
    local lo, hi, sum, sum_sq = math.huge, -math.huge, 0.0, 0.0
    for i = 1, n do
        local v = list[i]
        if v ~= v or v == math.huge or v == -math.huge then
            error(('%s: the values hold %s (element %d): a histogram needs finite values'):format(
                who, v ~= v and 'NaN' or (v > 0 and 'inf' or '-inf'), i), 0)
        end
        if v < lo then lo = v end
        if v > hi then hi = v end
        sum, sum_sq = sum + v, sum_sq + v * v
    end

    local edges = edges_for(bins, lo, hi, who)
    local nb = #edges - 1
    local counts = {}
    for i = 1, nb do counts[i] = 0 end
    local guess = guesser(bins, edges, lo, hi)
    local first, last = edges[1], edges[nb + 1]
    for i = 1, n do
        local v = list[i]
        if v >= first and v <= last then
            -- the bin a with edges[a] <= v < edges[a + 1] (the last bin also holds its right edge)
            local a = guess(v)
            while a > 1 and edges[a] > v do a = a - 1 end
            while a < nb and edges[a + 1] <= v do a = a + 1 end
            counts[a] = counts[a] + 1
        end
    end

    local s, e -- the first and last non-empty bins
    for i = 1, nb do
        if counts[i] > 0 then
            s = s or i
            e = i
        end
    end
    if not s then error(('%s: no value lies within the bins (%g to %g)'):format(who, first,
        last), 0) end
    local bucket, bucket_limit = {}, {}
    if s == 1 then bucket[1] = 0 end -- the empty bin whose right edge is the first left edge
    for i = math.max(s - 1, 1), e do bucket[#bucket + 1] = counts[i] end
    for i = s, e + 1 do bucket_limit[#bucket_limit + 1] = edges[i] end
    return {min = lo, max = hi, num = n, sum = sum, sum_squares = sum_sq,
        bucket_limit = bucket_limit, bucket = bucket}
end

return histogram
