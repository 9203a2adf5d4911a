-- lua/ddplua/tools/ticks.lua: "nice" axis ticks for the charts of `ddplua plot`
-- (lua/ddplua/tools/plot.lua).
-- defines: ticks.nice(lo, hi, target) -> {lo=, hi=, step=, values={...}, labels={...}}.
--
-- Ticks are k x step with step = 1, 2 or 5 x 10^e, chosen so that about `target` intervals
-- cover [lo, hi]; the axis is widened to the ticks just outside the data (so the first and last
-- labels sit on the frame). Labels share one number of decimals, enough to tell neighbours apart
-- (0.30 0.35 0.40, not 0.3 0.35 0.4); very small steps or very large values use %g, which
-- switches to an exponent (1e-05, 2.5e+07).
local ticks = {}

-- 1, 2 or 5 x 10^e, the smallest at least raw
local function nice_step(raw)
    local e = math.floor(math.log(raw, 10))
    local mag = 10.0 ^ e
    local f = raw / mag
    -- the factor 1 + 1e-9 absorbs log10's rounding (log(1000, 10) = 2.9999999999999996)
    if f <= 1 * (1 + 1e-9) then return mag end
    if f <= 2 * (1 + 1e-9) then return 2 * mag end
    if f <= 5 * (1 + 1e-9) then return 5 * mag end
    return 10 * mag
end

-- One format for every label of the axis.
local function label_format(step, maxabs)
    if step >= 1e-4 and maxabs < 1e7 then
        local decimals = math.max(0, -math.floor(math.log(step, 10) + 1e-9))
        return '%.' .. decimals .. 'f'
    end
    -- significant digits from the largest value down to the step's
    local digits = math.floor(math.log(math.max(maxabs, step), 10) + 1e-9)
        - math.floor(math.log(step, 10) + 1e-9) + 1
    return '%.' .. math.max(1, digits) .. 'g'
end

-- The ticks of an axis showing [lo, hi] (finite numbers, lo <= hi) with about `target`
-- intervals (>= 1).
function ticks.nice(lo, hi, target)
    assert(lo == lo and hi == hi and lo <= hi and lo > -math.huge and hi < math.huge,
        'ticks.nice: lo and hi must be finite with lo <= hi')
    if hi == lo then -- one value: a band around it (10% of it, or +-1 around 0)
        local pad = lo == 0 and 1 or math.abs(lo) * 0.1
        lo, hi = lo - pad, hi + pad
    end
    local step = nice_step((hi - lo) / math.max(1, target))
    -- k from floor to ceil, with slack for quotients such as 0.3 / 0.1 = 2.9999999999999996
    local k0 = math.floor(lo / step + 1e-9)
    local k1 = math.ceil(hi / step - 1e-9)
    local values = {}
    for k = k0, k1 do
        local v = k * step
        if v == 0 then v = 0.0 end -- never "-0.00"
        values[#values + 1] = v
    end
    local maxabs = math.max(math.abs(values[1]), math.abs(values[#values]))
    local fmt = label_format(step, maxabs)
    local labels = {}
    for i, v in ipairs(values) do
        local s = fmt:format(v)
        if s:match('^%-[0.]+$') then s = s:sub(2) end -- "-0.00" from a value within rounding of 0
        labels[i] = s
    end
    return { lo = values[1], hi = values[#values], step = step, values = values, labels = labels }
end

return ticks
