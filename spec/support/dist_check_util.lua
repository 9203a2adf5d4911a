-- spec/support/dist_check_util.lua: what the multi-process worker scripts of the collectives
-- (spec/dist/workers/collectives.lua, collectives_more.lua and their nccl_ twins) share: the
-- values each rank contributes and the checks that raise naming the rank. A worker in
-- spec/<area>/workers/ loads it with dofile:
--     local U = dofile(arg[0]:match('^(.*)/[^/]*/[^/]*/[^/]*$') .. '/support/dist_check_util.lua')(rank, world)
-- returns: value, values, moved_list, flat, expect, expect_error, reduced, fail.
return function(rank, world)
    local U = {}

    function U.fail(fmt, ...) error(('rank %d: ' .. fmt):format(rank, ...), 2) end

    -- rank q's element i for reductions: small integers of both signs, so sums and products are
    -- exact in every dtype and max/min differ between ranks
    function U.value(q, i) return (q * 7 + i * 3) % 5 - 2 end
    -- elements first .. first + n - 1 of rank q (first: 0 when nil)
    function U.values(q, n, first)
        local v = {}
        for i = 1, n do v[i] = U.value(q, (first or 0) + i - 1) end
        return v
    end

    -- the n elements rank `from` sends to rank `to` (data movement): distinct per pair, below 120
    -- so they fit uint8
    function U.moved_list(from, to, n)
        local v = {}
        for i = 1, n do v[i] = (from * 31 + to * 7 + i - 1) % 120 end
        return v
    end

    -- t's values (any device and dtype) as a flat list of numbers, in row-major order
    function U.flat(t)
        local out = {}
        local function walk(x)
            if type(x) == 'table' then for _, y in ipairs(x) do walk(y) end else out[#out + 1] = x end
        end
        walk(t:to('cpu'):to('float64'):tolist())
        return out
    end

    function U.expect(t, want, what, tol)
        local got = U.flat(t)
        if #got ~= #want then U.fail('%s: %d elements, expected %d', what, #got, #want) end
        for i = 1, #want do
            if math.abs(got[i] - want[i]) > (tol or 0) then
                U.fail('%s: element %d is %s, expected %s', what, i - 1, tostring(got[i]),
                    tostring(want[i]))
            end
        end
    end

    -- raises unless f(...) fails with a message containing want
    function U.expect_error(want, f, ...)
        local ok, err = pcall(f, ...)
        if ok then U.fail('expected an error containing %q, got none', want) end
        if not tostring(err):find(want, 1, true) then
            U.fail('expected an error containing %q, got: %s', want, tostring(err))
        end
    end

    local fold = {
        sum = function(a, b) return a + b end,
        avg = function(a, b) return a + b end,
        product = function(a, b) return a * b end,
        max = math.max,
        min = math.min,
    }

    -- the elementwise reduction over all ranks of values(q, n, first)
    function U.reduced(op, n, first)
        local acc = U.values(0, n, first)
        for q = 1, world - 1 do
            local v = U.values(q, n, first)
            for i = 1, n do acc[i] = fold[op](acc[i], v[i]) end
        end
        if op == 'avg' then for i = 1, n do acc[i] = acc[i] / world end end
        return acc
    end

    return U
end
