-- bench/util.lua: helpers the benchmark drivers share (loaded with dofile from their folder).
-- defines: median(list), parse_args(argv, defaults, prog), sh_quote(s), loadavg(),
--          minor_faults(), scaling_line(label, one, many, rounds, target, times),
--          write_section(header, lines), selector(list), median_of(list, key).
local util = {}

-- Median of a list of numbers (nil for an empty list); the list is not modified.
function util.median(v)
    local s = {}
    for i, x in ipairs(v) do s[i] = x end
    table.sort(s)
    local n = #s
    if n == 0 then return nil end
    return n % 2 == 1 and s[(n + 1) // 2] or 0.5 * (s[n // 2] + s[n // 2 + 1])
end

-- Median of the field `key` over a list of tables (nil for an empty or missing list).
function util.median_of(list, key)
    local v = {}
    for _, x in ipairs(list or {}) do v[#v + 1] = x[key] end
    return util.median(v)
end

-- `--some-key value` into o.some_key for the keys of defaults; boolean keys are flags; number
-- keys must parse as numbers. Errors name prog and the argument.
function util.parse_args(argv, defaults, prog)
    local o = {}
    for k, v in pairs(defaults) do o[k] = v end
    local i = 1
    while i <= #argv do
        local a = argv[i]
        local key = a:match('^%-%-([%w%-]+)$')
        key = key and key:gsub('%-', '_')
        if not key or defaults[key] == nil then error(prog .. ': unknown argument ' .. a, 0) end
        if type(defaults[key]) == 'boolean' then
            o[key] = true
        else
            i = i + 1
            local v = argv[i] or error(prog .. ': ' .. a .. ' needs a value', 0)
            o[key] = type(defaults[key]) == 'number' and
                (tonumber(v) or error(prog .. ': ' .. a .. ' needs a number', 0)) or v
        end
        i = i + 1
    end
    return o
end

-- s quoted for a POSIX shell command line.
function util.sh_quote(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end

-- A workload filter from a comma-separated list of Lua patterns, each matched against a whole
-- workload name ('nansum,roll_.*'); an empty list selects everything. The result is callable
-- (wanted(name)) and has .any(names), true when one of names is selected.
function util.selector(list)
    local pats = {}
    for p in tostring(list or ''):gmatch('[^,%s]+') do pats[#pats + 1] = '^' .. p .. '$' end
    local function one(name)
        if #pats == 0 then return true end
        for _, p in ipairs(pats) do
            if name:match(p) then return true end
        end
        return false
    end
    return setmetatable({any = function(names)
        for _, n in ipairs(names) do
            if one(n) then return true end
        end
        return false
    end}, {__call = function(_, name) return one(name) end})
end

-- The 1-, 5- and 15-minute load averages as one string ('?' where /proc/loadavg is missing).
function util.loadavg()
    local f = io.open('/proc/loadavg')
    if not f then return '?' end
    local s = f:read('l')
    f:close()
    return s:match('^(%S+ %S+ %S+)') or '?'
end

-- The process's minor page faults so far (/proc/self/stat, field 10; Linux).
function util.minor_faults()
    local f = assert(io.open('/proc/self/stat'))
    local rest = f:read('a'):match('%) (.*)$') -- after the command name, which may hold spaces
    f:close()
    local i = 2
    for x in rest:gmatch('%S+') do
        i = i + 1
        if i == 10 then return tonumber(x) end
    end
end

-- One line of thread scaling: per round, a configuration at T threads against the same round's
-- run at 1 thread (minutes apart at most, so the host's drift cancels better than in a ratio
-- of medians). one and many map a round to samples/s, or to step times when `times` (then the
-- ratio is one / many). "label median [min-max]", and "target >= x: ok|BELOW" when a target is
-- given; nil when no round has both figures.
function util.scaling_line(label, one, many, rounds, target, times)
    local per_round = {}
    for r = 1, rounds do
        local a, b = one[r], many[r]
        if a and b then per_round[#per_round + 1] = times and a / b or b / a end
    end
    if #per_round == 0 then return nil end
    table.sort(per_round)
    local m = util.median(per_round)
    return ('%s %.2f [%.2f-%.2f]%s'):format(label, m, per_round[1], per_round[#per_round],
        target and ('  target >= %.1f: %s'):format(target, m >= target and 'ok' or 'BELOW') or '')
end

-- Writes a blank line, header and the lines, one per line; nothing when lines is empty.
function util.write_section(header, lines)
    if #lines == 0 then return end
    io.write('\n', header, '\n', table.concat(lines, '\n'), '\n')
end

return util
