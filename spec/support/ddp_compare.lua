-- spec/support/ddp_compare.lua: the parameter check the DDP worker scripts
-- (spec/ddp/workers/train_equiv.lua, spec/ddp/workers/join.lua) share. A worker in
-- spec/<area>/workers/ loads it with dofile:
--     local compare = dofile(arg[0]:match('^(.*)/[^/]*/[^/]*/[^/]*$') .. '/support/ddp_compare.lua')
-- defines: compare(got, want, tol, who) -> the largest relative difference; got and want are
-- named_parameters() lists of the same model; raises, naming `who` and the parameter, when
-- max|got - want| > tol * max|want| for some parameter. compare.options(defaults, args): the
-- worker's key=value arguments over the defaults (numbers converted), as a table.
local M = {}

function M.options(defaults, args)
    local o = {}
    for k, v in pairs(defaults) do o[k] = v end
    for _, a in ipairs(args) do
        local k, v = a:match('^(%w+)=(.*)$')
        if k then o[k] = tonumber(v) or v end
    end
    return o
end

local function compare(got, want, tol, who)
    local maxrel = 0
    for i, pair in ipairs(want) do
        local a, b = got[i][2], pair[2]
        local scale = b:abs():max():item()
        local diff = (a - b):abs():max():item()
        local rel = diff / math.max(scale, 1e-12)
        if rel > maxrel then maxrel = rel end
        if not (rel <= tol) then
            error(('%s: parameter %s differs from the single-process reference: max|diff| %.3g, '
                .. 'relative %.3g > %.3g'):format(who, pair[1], diff, rel, tol), 2)
        end
    end
    return maxrel
end

return setmetatable(M, {__call = function(_, ...) return compare(...) end})
