-- spec/fuzz/hostile_values_spec.lua: issue 29's hostile values. The API sweep
-- (fuzz_api_spec.lua) gives every function arguments of the wrong type; these are values of the
-- right types that break the functions added in issue 29: indices out of range or beyond
-- int64, masks of the wrong shape, empty tensors, counts and offsets that overflow a size,
-- singular, empty and non-finite matrices, lengths that do not fit, in-place writes into views.
-- Each case either raises a clean error naming the function and what was wrong (bad_input's
-- raises: the engine still works afterwards), or returns what PyTorch 1.13 returns (the torch
-- call is in a comment; values computed with /usr/bin/python3 and torch 1.13). Where PyTorch
-- 1.13 itself wraps int64 (tril(2^63 - 1), roll by -2^63, ...) the case asserts the exact
-- result and says what torch gave. Every case runs on the CPU and, when CUDA is available
-- (the emulation build: tools/cuda-emu.sh, tools/sanitize.sh), on 'cuda', with everything it
-- returns read back and the device synchronised inside the checked call: a CUDA kernel's
-- index check is reported at the next synchronisation, as in PyTorch. Each case writes its name
-- to stderr first, so a crash (ASan, UBSan) names the case that caused it.
-- docs/internals/hostile-input.md states the rules.
local ddpl = require 'ddplua'
local bad = require 'bad_input'

local F = ddpl.F
local LA = ddpl.linalg
local MI, mi = math.maxinteger, math.mininteger
local NAN, INF = 0 / 0, math.huge

local devices = {'cpu'}
if ddpl.cuda.is_available() then devices[#devices + 1] = 'cuda' end

-- constructors on one device
local function on(dev)
    local D = {dev = dev}
    function D.T(t) return ddpl.tensor(t, {dtype = 'float32', device = dev}) end
    function D.F64(t) return ddpl.tensor(t, {dtype = 'float64', device = dev}) end
    function D.L(t) return ddpl.tensor(t, {dtype = 'int64', device = dev}) end
    function D.I32(t) return ddpl.tensor(t, {dtype = 'int32', device = dev}) end
    function D.B(t) return ddpl.tensor(t, {dtype = 'bool', device = dev}) end
    function D.U8(t) return ddpl.tensor(t, {dtype = 'uint8', device = dev}) end
    function D.zeros(...) return ddpl.zeros({...}, {device = dev}) end
    function D.ones(...) return ddpl.ones({...}, {device = dev}) end
    function D.eye(n) return ddpl.eye(n, {device = dev}) end
    -- [[0, 1, 2], [3, 4, 5]]
    function D.x() return ddpl.arange(6, {device = dev}):float():view(2, 3) end
    -- 0 .. 15 as (1, 1, 4, 4)
    function D.img() return ddpl.arange(16, {device = dev}):float():view(1, 1, 4, 4) end
    -- a zero of size 1 expanded to n (stride 0)
    function D.expanded(...) return ddpl.zeros(1, {device = dev}):expand(...) end
    return D
end

-- fn's results, tensors (also in a Lua list) copied to the host, the device synchronised
local function host(v)
    if ddpl.is_tensor(v) then return v:cpu() end
    if type(v) == 'table' then
        local o = {}
        for i, t in ipairs(v) do o[i] = host(t) end
        return o
    end
    return v
end

local function run(D, fn)
    local r = table.pack(fn(D))
    for i = 1, r.n do r[i] = host(r[i]) end
    if D.dev ~= 'cpu' then ddpl.cuda.synchronize() end
    return r
end

-- plain values of a result: tensors as tolist(), lists of tensors as lists of those
local function plain(v)
    if ddpl.is_tensor(v) then return v:tolist() end
    if type(v) == 'table' then
        local o = {}
        for i, t in ipairs(v) do o[i] = plain(t) end
        return o
    end
    return v
end

-- equal up to 1e-5 relative, NaN equal to NaN
local function close(a, b, path)
    if type(a) == 'table' and type(b) == 'table' then
        assert(#a == #b, ('%s: %d entries expected, got %d'):format(path, #a, #b))
        for i = 1, #a do close(a[i], b[i], path .. '[' .. i .. ']') end
        return
    end
    assert(type(a) == type(b), ('%s: expected %s, got %s'):format(path, tostring(a), tostring(b)))
    if type(a) == 'number' then
        local ok = (a ~= a and b ~= b) or a == b or math.abs(a - b) <= 1e-5 * math.max(1, math.abs(a))
        assert(ok, ('%s: expected %s, got %s'):format(path, tostring(a), tostring(b)))
    else
        assert(a == b, ('%s: expected %s, got %s'):format(path, tostring(a), tostring(b)))
    end
end

-- A case is {name, fn, err = {parts}} (a clean error whose message has every part; a part
-- that is a list lists alternatives) or {name, fn, val = {expected results}} (plain values of
-- each result; a shape given as {shape = {...}} checks only the shape). fn gets the device's
-- constructors.
local function check(D, c)
    if c.err then
        bad.raises(function() return run(D, c[2]) end, c.err)
        return
    end
    local r = run(D, c[2])
    assert(r.n >= #c.val, ('%d results expected, got %d'):format(#c.val, r.n))
    for i, want in ipairs(c.val) do
        if type(want) == 'table' and want.shape then
            assert.are.same(want.shape, r[i]:shape())
        else
            close(want, plain(r[i]), 'result ' .. i)
        end
    end
end

local function cases(title, list, devs)
    describe(title, function()
        for _, dev in ipairs(devs or devices) do
            local D = on(dev)
            for _, c in ipairs(list) do
                if c.cpu_only and dev ~= 'cpu' then goto next end
                it(('%s on %s'):format(c[1], dev), function()
                    io.stderr:write(('hostile_values: %s on %s\n'):format(c[1], dev))
                    check(D, c)
                end)
                ::next::
            end
        end
    end)
end

local function oob(op, i, dim, size)
    return {op, ('index %d is out of range for dimension %d with size %d'):format(i, dim, size)}
end

local OVERLAP = 'more than one element of the written-to tensor'

cases('scatter, gather, index_* and masks with hostile indices', {
    {'scatter index past the end', function(D) return D.x():scatter(1, D.L{{3}}, 1) end,
     err = oob('scatter', 3, 1, 3)},
    {'scatter negative index', function(D) return D.x():scatter(1, D.L{{-1}}, 1) end,
     err = oob('scatter', -1, 1, 3)},
    {'scatter maxinteger index', function(D) return D.x():scatter(0, D.L{{MI}}, 1) end,
     err = oob('scatter', MI, 0, 2)},
    {'scatter mininteger index', function(D) return D.x():scatter(0, D.L{{mi}}, 1) end,
     err = oob('scatter', mi, 0, 2)},
    {'scatter int32 index', function(D) return D.x():scatter(1, D.I32{{0}}, 1) end,
     err = {'scatter', 'int64', 'int32'}},
    {'scatter float index', function(D) return D.x():scatter(1, D.T{{0}}, 1) end,
     err = {'scatter', 'int64', 'float32'}},
    {'scatter index larger than src', function(D) return D.x():scatter(1, D.L{{0, 1, 2}}, D.T{{1}}) end,
     err = {'scatter', '[1,3]', '[1,1]'}},
    {'scatter into an empty tensor', function(D) return D.zeros(0, 3):scatter(1, D.L{{0}}, 1) end,
     err = {'scatter', '[0,3]'}},
    {'scatter dim maxinteger', function(D) return D.x():scatter(MI, D.L{{0}}, 1) end,
     err = {'scatter', '9223372036854775807'}},
    -- torch.arange(6.).view(2, 3).scatter(1, torch.zeros(2, 0, dtype=torch.long), 1): unchanged
    {'scatter with an empty index', function(D) return D.x():scatter(1, D.L{}:view(2, 0), 1) end,
     val = {{{0, 1, 2}, {3, 4, 5}}}},
    {'scatter_add index past the end', function(D) return D.x():scatter_add(1, D.L{{7}}, D.T{{1}}) end,
     err = oob('scatter_add', 7, 1, 3)},
    {'scatter_reduce mininteger index', function(D)
        return D.x():scatter_reduce(1, D.L{{mi}}, D.T{{1}}, 'amax') end,
     err = oob('scatter_reduce', mi, 1, 3)},
    {'scatter_reduce unknown reduction', function(D)
        return D.x():scatter_reduce(0, D.L{{0}}, D.T{{1}}, 'median') end,
     err = {'scatter_reduce', 'median'}},
    -- torch.tensor([5, 6]).scatter_reduce(0, torch.tensor([0, 0]), torch.tensor([1, 2]), 'mean',
    -- include_self=False) -> [1, 6] (integers floor-divide)
    {'scatter_reduce integer mean', function(D)
        return D.L{5, 6}:scatter_reduce(0, D.L{0, 0}, D.L{1, 2}, 'mean', {include_self = false}) end,
     val = {{1, 6}}},
    {'scatter_ into an expanded tensor', function(D)
        return D.expanded(2, 3):scatter_(1, D.L{{0}, {1}}, 5) end, err = {'scatter_', OVERLAP}},
    {'index_add negative index', function(D) return D.x():index_add(0, D.L{-1}, D.T{{1, 1, 1}}) end,
     err = oob('index_add', -1, 0, 2)},
    {'index_add mininteger index', function(D) return D.x():index_add(0, D.L{mi}, D.T{{1, 1, 1}}) end,
     err = oob('index_add', mi, 0, 2)},
    {'index_add 2-D index', function(D) return D.x():index_add(0, D.L{{0}}, D.T{{1, 1, 1}}) end,
     err = {'index_add', 'dimension'}},
    {'index_add float index', function(D) return D.x():index_add(0, D.T{0}, D.T{{1, 1, 1}}) end,
     err = {'index_add', 'float32'}},
    {'index_add source rows', function(D) return D.x():index_add(0, D.L{0, 1}, D.T{{1, 1, 1}}) end,
     err = {'index_add', 'number of indices (2)'}},
    -- an integral tensor's alpha past int64 (was a float-to-int64 conversion UBSan reported);
    -- torch.tensor([1, 2]).index_add(0, torch.tensor([0]), torch.tensor([1]), alpha=1e300):
    -- "value cannot be converted to type int64_t without overflow"
    {'index_add integer alpha 1e300', function(D)
        return D.L{1, 2}:index_add(0, D.L{0}, D.L{1}, {alpha = 1e300}) end,
     err = {'index_add', 'alpha', '1e+300'}},
    {'index_add integer alpha NaN', function(D)
        return D.L{1, 2}:index_add(0, D.L{0}, D.L{1}, {alpha = NAN}) end, err = {'index_add', 'alpha'}},
    -- torch.arange(6.).view(2, 3).index_add(0, torch.tensor([0]), torch.ones(1, 3), alpha=nan)
    {'index_add float alpha NaN', function(D)
        return D.x():index_add(0, D.L{0}, D.T{{1, 1, 1}}, {alpha = NAN}) end,
     val = {{{NAN, NAN, NAN}, {3, 4, 5}}}},
    {'index_add_ into an expanded tensor', function(D)
        return D.expanded(4):index_add_(0, D.L{0, 1}, D.T{1, 1}) end, err = {'index_add_', OVERLAP}},
    {'index_copy negative index', function(D) return D.x():index_copy(1, D.L{-4}, D.T{{1}, {1}}) end,
     err = oob('index_copy', -4, 1, 3)},
    {'index_copy a 0-dim tensor out of range', function(D) return D.T(1):index_copy(0, D.L{1}, D.T(2)) end,
     err = oob('index_copy', 1, 0, 1)},
    -- torch.tensor(1.).index_copy(0, torch.tensor([0]), torch.tensor(2.)) -> 2.
    {'index_copy a 0-dim tensor', function(D) return D.T(1):index_copy(0, D.L{0}, D.T(2)) end, val = {2}},
    {'index_fill maxinteger index', function(D) return D.x():index_fill(1, D.L{MI}, 1) end,
     err = oob('index_fill', MI, 1, 3)},
    {'index_fill inf into int64', function(D) return D.L{1, 2}:index_fill(0, D.L{0}, INF) end,
     err = {'index_fill', 'inf', 'int64'}},
    {'index_fill a 1-D value', function(D) return D.x():index_fill(1, D.L{0}, D.T{1, 2}) end,
     err = {'index_fill', '0-dimensional'}},
    {'take past the end', function(D) return D.x():take(D.L{6}) end, err = {'take', 'index 6', 'out of range'}},
    {'take negative beyond -n', function(D) return D.x():take(D.L{-7}) end,
     err = {'take', 'index -7', 'out of range'}},
    {'take mininteger', function(D) return D.x():take(D.L{mi}) end,
     err = {'take', '-9223372036854775808', 'out of range'}},
    {'take from an empty tensor', function(D) return D.zeros(0):take(D.L{0}) end,
     err = {'take', 'empty'}},
    {'take int32 index', function(D) return D.x():take(D.I32{1}) end, err = {'take', 'int32'}},
    -- torch.arange(6.).view(2, 3).take(torch.tensor([], dtype=torch.long)).shape -> [0]
    {'take an empty index', function(D) return D.x():take(D.L{}) end, val = {{shape = {0}}}},
    {'take_along_dim past the end', function(D) return D.x():take_along_dim(D.L{{3}}, 1) end,
     err = {'take_along_dim', 'index 3 is out of range for dimension 1 with size 3'}},
    {'take_along_dim negative', function(D) return D.x():take_along_dim(D.L{{-1}}, 1) end,
     err = {'take_along_dim', 'index -1 is out of range'}},
    {'take_along_dim flattened past the end', function(D) return D.x():take_along_dim(D.L{6}) end,
     err = {'take_along_dim', 'index 6 is out of range'}},
    {'take_along_dim shapes that do not broadcast', function(D)
        return D.x():take_along_dim(D.L{{0}, {0}, {0}}, 1) end, err = {'take_along_dim', '[3,1]'}},
    {'gather mininteger', function(D) return D.x():gather(1, D.L{{mi}}) end,
     err = oob('gather', mi, 1, 3)},
    {'gather a 0-dim tensor out of range', function(D) return D.T(3):gather(0, D.L(1)) end,
     err = oob('gather', 1, 0, 1)},
    -- torch.arange(6.).view(2, 3).gather(0, torch.zeros(3, 1, dtype=torch.long)): [[0], [0], [0]]
    {'gather an index longer along dim', function(D) return D.x():gather(0, D.L{{0}, {0}, {0}}) end,
     val = {{{0}, {0}, {0}}}},
    {'masked_select mask of the wrong shape', function(D) return D.x():masked_select(D.B{true, false}) end,
     err = {'masked_select', '[2,3]', '[2]'}},
    {'masked_select int64 mask', function(D) return D.x():masked_select(D.L{1, 0, 1}) end,
     err = {'masked_select', 'bool', 'int64'}},
    -- torch.tensor([1., 2.]).masked_select(torch.tensor([[1, 0], [0, 1], [1, 1]]).bool())
    {'masked_select mask broadcasting x', function(D)
        return D.T{1, 2}:masked_select(D.B{{true, false}, {false, true}, {true, true}}) end,
     val = {{1, 2, 1, 2}}},
    {'masked_scatter too few source elements', function(D)
        return D.x():masked_scatter(D.B{true, true, true}, D.T{1, 2}) end,
     err = {'masked_scatter', '6 true', '2 elements'}},
    {'masked_scatter empty source', function(D)
        return D.x():masked_scatter(D.B{true, false, false}, D.zeros(0)) end,
     err = {'masked_scatter', '0 elements'}},
    {'masked_scatter_ mask larger than x', function(D)
        return D.T{1, 2}:masked_scatter_(D.B{{true, false}, {true, true}}, D.T{5, 6, 7}) end,
     err = {'masked_scatter_', '[2,2]', '[2]'}},
    -- torch.tensor([1., 2.]).masked_scatter(torch.tensor([[1, 0], [1, 1]]).bool(),
    -- torch.tensor([5., 6., 7.])) -> [[5, 2], [6, 7]]
    {'masked_scatter mask larger than x', function(D)
        return D.T{1, 2}:masked_scatter(D.B{{true, false}, {true, true}}, D.T{5, 6, 7}) end,
     val = {{{5, 2}, {6, 7}}}},
    {'masked_fill NaN into int64', function(D) return D.L{1, 2}:masked_fill(D.B{true, false}, NAN) end,
     err = {'masked_fill', 'int64'}},
    {'masked_fill_ into an expanded tensor', function(D)
        return D.expanded(2, 3):masked_fill_(D.B{true, false, true}, 1) end,
     err = {'masked_fill_', OVERLAP}},
    -- torch.tensor([nan, 0.]).nonzero() -> [[0]]
    {'nonzero of NaN', function(D) return D.T{NAN, 0}:nonzero() end, val = {{{0}}}},
    -- torch.tensor(0.).nonzero().shape -> [0, 0]
    {'nonzero of a 0-dim zero', function(D) return D.T(0):nonzero() end, val = {{shape = {0, 0}}}},
    {'nonzero of 2^40 expanded elements', function(D) return D.ones(1):expand(1 << 40):nonzero() end,
     err = {'nonzero', 'out of memory'}},
    {'index_put_ mininteger with accumulate', function(D)
        return D.x():index_put_({D.L{mi}}, D.T(1), {accumulate = true}) end,
     err = {'index_put', '-9223372036854775808', 'out of range'}},
    {'index_put_ indices that do not broadcast', function(D)
        return D.x():index_put_({D.L{0, 1}, D.L{0, 1, 2}}, D.T(1)) end,
     err = {'index_put_', '[2]', '[3]'}},
    {'index_put_ too many indices', function(D)
        return D.x():index_put_({D.L{0}, D.L{0}, D.L{0}}, D.T(1)) end,
     err = {'index_put_', 'too many indices'}},
    {'index_put_ into an expanded tensor', function(D)
        return D.expanded(2, 3):index_put_({D.L{0, 1}, D.L{0, 0}}, D.T(1), {accumulate = true}) end,
     err = {'index_put_', OVERLAP}},
})

cases('advanced indexing x[key] and x[key] = v with hostile keys', {
    {'index past the end', function(D) return D.x()[D.L{2}] end, err = oob('index', 2, 0, 2)},
    {'index negative beyond -n', function(D) return D.x()[D.L{-3}] end, err = oob('index', -3, 0, 2)},
    {'index maxinteger', function(D) return D.x()[D.L{MI}] end, err = oob('index', MI, 0, 2)},
    {'index int32 past the end', function(D) return D.x()[D.I32{5}] end, err = oob('index', 5, 0, 2)},
    {'index with a float tensor', function(D) return D.x()[D.T{0}] end,
     err = {'index', 'must be long, int, byte or bool', 'float32'}},
    {'index with a uint8 mask', function(D) return D.x()[D.U8{0, 1}] end, err = {'index', 'uint8'}},
    {'bool mask of the wrong shape', function(D) return D.x()[D.B{true, false, true}] end,
     err = {'index', 'mask [3]', '[2,3]'}},
    {'bool mask of more dims than x', function(D) return D.x()[D.B{{{true}}}] end,
     err = {'index', 'too many indices'}},
    {'index an empty tensor', function(D) return D.zeros(0, 3)[D.L{0}] end, err = oob('index', 0, 0, 0)},
    -- torch.arange(6.).view(2, 3)[torch.tensor([], dtype=torch.long)].shape -> [0, 3]
    {'empty index', function(D) return D.x()[D.L{}] end, val = {{shape = {0, 3}}}},
    {'empty mask of an empty tensor', function(D) return D.zeros(0, 3)[D.B{}] end,
     val = {{shape = {0, 3}}}},
    -- torch.tensor(3.)[torch.tensor(True)] is [3.]: here an error naming the limitation
    {'0-dim bool mask', function(D) return D.T(3)[D.B(true)] end, err = {'index', '0-dim bool mask'}},
    -- torch.arange(6.).view(2, 3)[torch.tensor([True, False]), torch.tensor([0, 2])] -> [0, 2]
    {'a mask and an index together', function(D) return D.x()[{D.B{true, false}, D.L{0, 2}}] end,
     val = {{0, 2}}},
    {'a mask and an index that do not broadcast', function(D)
        return D.x()[{D.B{true, true}, D.L{0, 1, 2}}] end, err = {'index', '[2]', '[3]'}},
    {'slice step 0', function(D) return D.x()[{{0, 2, 0}}] end, err = {'index', 'step', '0'}},
    {'slice step -1', function(D) return D.x()[{{0, 2, -1}}] end, err = {'index', 'step', '-1'}},
    -- a step of 2^63 - 1 (end - start + step wrapped); torch 1.13's x[:, 0:3:sys.maxsize]
    -- fails with "Storage size calculation overflowed", Python's [0, 1, 2][0:3:sys.maxsize] is [0]
    {'slice step maxinteger', function(D) return D.x()[{{}, {0, 3, MI}}] end, val = {{{0}, {3}}}},
    {'slice from -3 to maxinteger by maxinteger', function(D) return D.x()[{{}, {-3, MI, MI}}] end,
     val = {{{0}, {3}}}},
    {'slice mininteger to maxinteger (all)', function(D) return D.x()[{{mi, MI}}] end,
     val = {{{0, 1, 2}, {3, 4, 5}}}},
    {'slice maxinteger to mininteger (none)', function(D) return D.x()[{{MI, mi}}] end,
     val = {{shape = {0, 3}}}},
    {'integer maxinteger', function(D) return D.x()[{MI}] end, err = {'index', '9223372036854775807'}},
    {'integer mininteger', function(D) return D.x()[{mi}] end, err = {'index', '-9223372036854775808'}},
    {'a float entry', function(D) return D.x()[{1.5}] end, err = {'index', 'entry 1'}},
    {'a float slice bound', function(D) return D.x()[{{0.5}}] end, err = {'index', 'entry 1', 'integers'}},
    {'a hole in the key', function(D) return D.x()[{0, nil, 1}] end, err = {'index', 'entry 2', 'nil'}},
    {'more entries than dims', function(D) return D.x()[{0, 0, 0}] end, err = {'index', 'too many indices'}},
    {'70 index tensors', function(D)
        local k = {}
        for i = 1, 70 do k[i] = D.L{0} end
        return D.x()[k]
    end, err = {'index', 'too many indices'}},
    -- torch.arange(6.).view(2, 3)[1, :, ...] style: an int, a slice and a tensor mixed
    -- torch.arange(24.).view(2, 3, 4)[torch.tensor([0, 1]), 0:3:2, torch.tensor([1, 3])]
    {'tensor, slice, tensor', function(D)
        return ddpl.arange(24, {device = D.dev}):float():view(2, 3, 4)[{D.L{0, 1}, {0, 3, 2}, D.L{1, 3}}] end,
     val = {{{1, 9}, {15, 23}}}},
    {'a 2^40 index of broadcast indices', function(D)
        return D.x()[{D.L{0}:expand(1 << 40), D.L{0}}] end, err = {'index', 'memory'}},
    {'set past the end', function(D) local t = D.x(); t[D.L{2}] = 1; return t end,
     err = {{'setindex', 'index_put'}, 'index 2 is out of range for dimension 0 with size 2'}},
    {'set mininteger', function(D) local t = D.x(); t[D.L{mi}] = 1; return t end,
     err = {{'setindex', 'index_put'}, '-9223372036854775808'}},
    {'set into an empty tensor', function(D) local t = D.zeros(0, 3); t[D.L{0}] = 1; return t end,
     err = {{'setindex', 'index_put'}, 'out of range for dimension 0 with size 0'}},
    {'set a wrong-shaped mask', function(D) local t = D.x(); t[D.B{true, false, true}] = 7; return t end,
     err = {'setindex', 'mask [3]'}},
    {'set values that do not broadcast', function(D)
        local t = D.x(); t[D.B{true, true}] = D.T{1, 2}; return t end, err = {'setindex', 'shape mismatch'}},
    {'set NaN into int64', function(D) local t = D.L{1, 2}; t[D.L{0}] = NAN; return t end,
     err = {'setindex', 'int64'}},
    {'set inf into an int64 slice', function(D) local t = D.L{1, 2}; t[{{}}] = INF; return t end,
     err = {'setindex', 'inf', 'int64'}},
    {'set int64 values into float32', function(D) local t = D.x(); t[D.L{0}] = D.L{1, 2, 3}; return t end,
     err = {'setindex', 'float32', 'int64'}},
    {'set step 0', function(D) local t = D.x(); t[{{0, 2, 0}}] = 1; return t end,
     err = {'setindex', 'step'}},
    -- t[:, 0:3:sys.maxsize] = 9 (torch 1.13: storage size overflow; Python slices: column 0)
    {'set step maxinteger', function(D) local t = D.x(); t[{{}, {0, 3, MI}}] = 9; return t end,
     val = {{{9, 1, 2}, {9, 4, 5}}}},
    {'set into an expanded tensor', function(D) local t = D.expanded(2, 3); t[D.L{0}] = 1; return t end,
     err = {'setindex', OVERLAP}},
    {'set into a leaf that requires grad', function(D)
        local t = ddpl.ones(3, {requires_grad = true, device = D.dev}); t[D.L{0}] = 2; return t end,
     err = {'setindex', 'leaf'}},
    -- t = torch.arange(6.).view(2, 3); t.index_put_((torch.tensor([0, 0]), torch.tensor([1, 1])),
    -- torch.tensor([1., 2.])): the last duplicate wins on the CPU -> [[0, 2, 2], [3, 4, 5]]
    {'set duplicate positions', function(D)
        local t = D.x(); t[{D.L{0, 0}, D.L{1, 1}}] = D.T{1, 2}; return t end,
     val = {{{0, 2, 2}, {3, 4, 5}}}, cpu_only = true},
})

local R = function(t, ...) return t['repeat'](t, ...) end
cases('shape functions with hostile counts, offsets and dims', {
    {'repeat to 2^81 elements', function(D) return R(D.x(), 1 << 40, 1 << 40) end,
     err = {'repeat', 'too large'}},
    {'repeat maxinteger times', function(D) return R(D.x(), MI, 2) end, err = {'repeat', 'overflow'}},
    {'repeat a negative count', function(D) return R(D.x(), -1, 2) end, err = {'repeat', 'negative'}},
    {'repeat mininteger times', function(D) return R(D.x(), mi, 1) end, err = {'repeat', 'negative'}},
    {'repeat 0 x 2^62 (wraps)', function(D) return R(D.x(), 0, 1 << 62) end, err = {'repeat', 'overflow'}},
    {'repeat 67 counts', function(D)
        local c = {}
        for i = 1, 67 do c[i] = 1 end
        return R(D.x(), c)
    end, err = {'repeat', '67 dimensions'}},
    -- torch.zeros(0).repeat(2**62).shape -> [0]
    {'repeat an empty tensor 2^62 times', function(D) return R(D.zeros(0), 1 << 62) end,
     val = {{shape = {0}}}},
    {'tile to 2^81 elements', function(D) return D.x():tile({1 << 40, 1 << 40}) end,
     err = {'tile', 'too large'}},
    {'tile a negative count', function(D) return D.x():tile({-2}) end, err = {'tile', 'negative'}},
    {'repeat_interleave maxinteger', function(D) return D.x():repeat_interleave(MI) end,
     err = {'repeat_interleave', 'overflow'}},
    {'repeat_interleave -1', function(D) return D.x():repeat_interleave(-1) end,
     err = {'repeat_interleave', 'negative'}},
    {'repeat_interleave counts adding up past 2^63', function(D)
        return D.x():repeat_interleave(D.L{1 << 62, 1 << 62}, 0) end, err = {'repeat_interleave', '2^63'}},
    {'repeat_interleave a negative count', function(D)
        return D.x():repeat_interleave(D.L{1, -1}, 0) end, err = {'repeat_interleave', 'negative'}},
    {'repeat_interleave counts of the wrong length', function(D)
        return D.x():repeat_interleave(D.L{1, 2, 3}, 0) end, err = {'repeat_interleave', '3 repeats'}},
    {'repeat_interleave a wrong output_size', function(D)
        return D.x():repeat_interleave(D.L{1, 2}, 0, {output_size = 5}) end,
     err = {'repeat_interleave', 'output_size 5'}},
    -- torch.arange(6.).view(2, 3).repeat_interleave(2, 0, output_size=-1): "Trying to create
    -- tensor with negative dimension -1" (it was ignored)
    {'repeat_interleave output_size -1', function(D)
        return D.x():repeat_interleave(2, 0, {output_size = -1}) end,
     err = {'repeat_interleave', 'output_size', '-1'}},
    {'repeat_interleave of maxinteger counts alone', function(D)
        return ddpl.repeat_interleave(D.L{MI}) end, err = {'repeat_interleave'}},
    {'flip a dim twice', function(D) return D.x():flip(0, 0) end, err = {'flip', 'multiple times'}},
    {'flip dim mininteger', function(D) return D.x():flip(mi) end, err = {'flip', '-9223372036854775808'}},
    -- torch.arange(6.).view(2, 3).roll(sys.maxsize, 1): (2^63 - 1) mod 3 = 1
    {'roll by maxinteger', function(D) return D.x():roll(MI, 1) end, val = {{{2, 0, 1}, {5, 3, 4}}}},
    -- -2^63 mod 3 = 1, mod 6 = 4; torch 1.13 wraps (-shift) and gives [[1, 2, 0], [4, 5, 3]] and
    -- [[4, 5, 0], [1, 2, 3]]
    {'roll by mininteger', function(D) return D.x():roll(mi, 1) end, val = {{{2, 0, 1}, {5, 3, 4}}}},
    {'roll flattened by mininteger', function(D) return D.x():roll(mi) end,
     val = {{{2, 3, 4}, {5, 0, 1}}}},
    {'roll an empty tensor', function(D) return D.zeros(0):roll(mi) end, val = {{shape = {0}}}},
    {'roll shifts and dims of other lengths', function(D) return D.x():roll({1, 2}, {0}) end,
     err = {'roll', 'align'}},
    -- torch.arange(6.).view(2, 3).rot90(sys.maxsize) (k mod 4 = 3) and rot90(-sys.maxsize - 1)
    {'rot90 maxinteger turns', function(D) return D.x():rot90(MI) end, val = {{{3, 0}, {4, 1}, {5, 2}}}},
    {'rot90 mininteger turns', function(D) return D.x():rot90(mi) end, val = {{{0, 1, 2}, {3, 4, 5}}}},
    {'rot90 about one dim twice', function(D) return D.x():rot90(1, {0, 0}) end,
     err = {'rot90', 'dim0 = 0 and dim1 = 0'}},
    {'movedim a dim twice', function(D) return D.x():movedim({0, 0}, {0, 1}) end,
     err = {'movedim', 'repeated dim'}},
    {'movedim mininteger', function(D) return D.x():movedim(mi, 0) end,
     err = {'movedim', '-9223372036854775808'}},
    {'tensor_split 0 sections', function(D) return D.x():tensor_split(0) end,
     err = {'tensor_split', 'sections', 'got 0'}},
    {'tensor_split maxinteger sections', function(D) return D.x():tensor_split(MI) end,
     err = {'tensor_split', '9223372036854775807'}},
    -- split points maxinteger, mininteger, 1 (clamped as slices): [0:max], [max:min], [min:1], [1:]
    -- (torch 1.13 fails with "Expected !is_symbolic()")
    {'tensor_split at the int64 extremes', function(D) return D.x():tensor_split({MI, mi, 1}, 1) end,
     val = {{{{0, 1, 2}, {3, 4, 5}}, {{}, {}}, {{0}, {3}}, {{1, 2}, {4, 5}}}}},
    {'tensor_split a 0-dim tensor', function(D) return D.T(1):tensor_split(2) end,
     err = {'tensor_split', '0 dims'}},
    -- exact results; torch 1.13 wraps j - i > k: tril(sys.maxsize) gives zeros, triu(sys.maxsize)
    -- keeps the second row
    {'tril maxinteger', function(D) return D.x():tril(MI) end, val = {{{0, 1, 2}, {3, 4, 5}}}},
    {'tril mininteger', function(D) return D.x():tril(mi) end, val = {{{0, 0, 0}, {0, 0, 0}}}},
    {'triu maxinteger', function(D) return D.x():triu(MI) end, val = {{{0, 0, 0}, {0, 0, 0}}}},
    -- torch.arange(6.).view(2, 3).triu(-sys.maxsize - 1)
    {'triu mininteger', function(D) return D.x():triu(mi) end, val = {{{0, 1, 2}, {3, 4, 5}}}},
    {'tril_ mininteger in place', function(D) return D.x():tril_(mi) end, val = {{{0, 0, 0}, {0, 0, 0}}}},
    {'tril_ into an expanded tensor', function(D) return D.expanded(3, 3):tril_() end,
     err = {'tril_', OVERLAP}},
    -- torch.arange(6.).view(2, 3).diagonal(sys.maxsize) and (-sys.maxsize - 1): empty
    {'diagonal offset maxinteger', function(D) return D.x():diagonal(MI) end, val = {{shape = {0}}}},
    {'diagonal offset mininteger', function(D) return D.x():diagonal(mi) end, val = {{shape = {0}}}},
    {'diagonal of one dim twice', function(D) return D.x():diagonal(0, 1, 1) end,
     err = {'diagonal', 'identical'}},
    -- torch 1.13's x.diag(sys.maxsize) fails with "numel: integer multiplication overflow"
    {'diag of a matrix, offset maxinteger', function(D) return D.x():diag(MI) end, val = {{shape = {0}}}},
    {'diag of a vector, offset maxinteger', function(D) return D.T{1, 2}:diag(MI) end,
     err = {'diag', '9223372036854775807', 'too large'}},
    {'diag of a vector, offset mininteger', function(D) return D.T{1, 2}:diag(mi) end,
     err = {'diag', 'too large'}},
    {'diag_embed offset 2^31', function(D) return D.T{1, 2}:diag_embed(1 << 31) end,
     err = {'diag_embed', '2147483648', 'too large'}},
    {'diag_embed into one dim twice', function(D) return D.T{1, 2}:diag_embed(0, 0, 0) end,
     err = {'diag_embed', 'identical'}},
    {'tril_indices 2^40 x 2^40', function() return ddpl.tril_indices(1 << 40, 1 << 40) end,
     err = {'tril_indices', 'too many entries'}},
    {'tril_indices maxinteger', function() return ddpl.tril_indices(MI, MI) end,
     err = {'tril_indices', 'too many entries'}},
    {'tril_indices a negative row count', function() return ddpl.tril_indices(-1, 3) end,
     err = {'tril_indices', 'non-negative', '-1'}},
    -- exact: the whole 3 x 3 (torch 1.13: "Storage size calculation overflowed")
    {'tril_indices offset maxinteger', function() return ddpl.tril_indices(3, 3, MI) end,
     val = {{{0, 0, 0, 1, 1, 1, 2, 2, 2}, {0, 1, 2, 0, 1, 2, 0, 1, 2}}}},
    -- torch.tril_indices(3, 3, -sys.maxsize - 1) -> shape [2, 0]
    {'tril_indices offset mininteger', function() return ddpl.tril_indices(3, 3, mi) end,
     val = {{shape = {2, 0}}}},
    -- exact: nothing (torch 1.13 returns 6 garbage columns)
    {'triu_indices offset maxinteger', function() return ddpl.triu_indices(3, 3, MI) end,
     val = {{shape = {2, 0}}}},
    {'triu_indices offset mininteger', function() return ddpl.triu_indices(3, 3, mi) end,
     val = {{{0, 0, 0, 1, 1, 1, 2, 2, 2}, {0, 1, 2, 0, 1, 2, 0, 1, 2}}}},
    -- torch.tril_indices(0, sys.maxsize) -> shape [2, 0]
    {'tril_indices 0 rows, maxinteger columns', function() return ddpl.tril_indices(0, MI) end,
     val = {{shape = {2, 0}}}},
    {'meshgrid of 2^120 points', function(D)
        local a = D.ones(1):expand(1 << 40)
        return ddpl.meshgrid(a, a, a)
    end, err = {'meshgrid', 'too large'}},
    {'meshgrid of a matrix', function(D) return ddpl.meshgrid(D.x(), D.T{1}) end,
     err = {'meshgrid', '[2,3]'}},
    {'meshgrid of two dtypes', function(D) return ddpl.meshgrid(D.T{1}, D.L{1}) end,
     err = {'meshgrid', 'float32', 'int64'}},
    {'meshgrid indexing ji', function(D) return ddpl.meshgrid(D.T{1}, D.T{2}, {indexing = 'ji'}) end,
     err = {'meshgrid', 'ji'}},
    -- [t.shape for t in torch.meshgrid(torch.tensor([]), torch.tensor([1., 2.]), indexing='ij')]
    {'meshgrid with an empty tensor', function(D)
        local g = ddpl.meshgrid(D.T{}, D.T{1, 2})
        return g[1], g[2]
    end, val = {{shape = {0, 2}}, {shape = {0, 2}}}},
    {'block_diag of a 3-D tensor', function(D) return ddpl.block_diag(D.zeros(1, 1, 1)) end,
     err = {'block_diag', '3 dimensions'}},
    {'block_diag of two 2^31 x 2^31 blocks', function(D)
        local a = D.ones(1, 1):expand(1 << 31, 1 << 31)
        return ddpl.block_diag(a, a)
    end, err = {'block_diag'}},
    -- torch.block_diag(torch.zeros(0, 3), torch.tensor([1.])) -> [[0, 0, 0, 1]]
    {'block_diag with an empty block', function(D) return ddpl.block_diag(D.zeros(0, 3), D.T{1}) end,
     val = {{{0, 0, 0, 1}}}},
    {'cartesian_prod of 2^93 rows', function(D)
        local a = D.ones(1):expand(1 << 31)
        return ddpl.cartesian_prod(a, a, a)
    end, err = {'cartesian_prod', 'too large'}},
    -- torch.cartesian_prod(torch.tensor([]), torch.tensor([1., 2.])).shape -> [0, 2]
    {'cartesian_prod with an empty tensor', function(D) return ddpl.cartesian_prod(D.T{}, D.T{1, 2}) end,
     val = {{shape = {0, 2}}}},
    {'unflatten sizes whose product wraps', function(D) return D.x():unflatten(1, {-1, 1 << 62, 4}) end,
     err = {'unflatten', "don't multiply up"}},
})

cases('linear algebra on singular, empty, non-finite and mismatched input', {
    {'einsum an empty equation', function(D) return ddpl.einsum('', D.x()) end,
     err = {'einsum', 'subscripts'}},
    {'einsum a digit', function(D) return ddpl.einsum('i1->i', D.x()) end, err = {'einsum', '[a-zA-Z]'}},
    {'einsum two arrows', function(D) return ddpl.einsum('ij->j->i', D.x()) end, err = {'einsum'}},
    {'einsum an output label no input has', function(D) return ddpl.einsum('ij->k', D.x()) end,
     err = {'einsum', 'output subscript k'}},
    {'einsum an output label twice', function(D) return ddpl.einsum('ij->ii', D.x()) end,
     err = {'einsum', 'more than once'}},
    {'einsum a repeated label of two sizes', function(D) return ddpl.einsum('ii->i', D.x()) end,
     err = {'einsum', 'subscript i is repeated', '2 != 3'}},
    -- torch.einsum('ii->i', torch.tensor([[1., 2.], [3., 4.]])) -> [1, 4]
    {'einsum a diagonal', function(D) return ddpl.einsum('ii->i', D.T{{1, 2}, {3, 4}}) end, val = {{1, 4}}},
    -- torch.einsum('iii->i', torch.ones(2, 2, 2)) -> [1, 1]
    {'einsum a label three times', function(D) return ddpl.einsum('iii->i', D.ones(2, 2, 2)) end,
     val = {{1, 1}}},
    {'einsum a broken ellipsis', function(D) return ddpl.einsum('..i->i', D.x()) end,
     err = {'einsum', "'.'"}},
    {'einsum two ellipses', function(D) return ddpl.einsum('...i...->i', D.x()) end,
     err = {'einsum', "'.'"}},
    {'einsum ellipses that do not broadcast', function(D)
        return ddpl.einsum('...i,...i->...', D.ones(2, 3), D.ones(4, 3)) end,
     err = {'einsum', 'broadcast'}},
    -- torch.einsum('ij->...', torch.arange(6.).view(2, 3)) -> 15.
    {'einsum an ellipsis only in the output', function(D) return ddpl.einsum('ij->...', D.x()) end,
     val = {15}},
    {'einsum 52 labels on a matrix', function(D)
        return ddpl.einsum('abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ->', D.x()) end,
     err = {'einsum', 'too many dimensions'}},
    {'einsum 100 operands', function(D)
        local t, eq = {}, {}
        for i = 1, 100 do t[i], eq[i] = D.T{1, 2}, 'i' end
        return ddpl.einsum(table.concat(eq, ',') .. '->i', t)
    end, err = {'einsum', 'too many operands'}},
    {'einsum 52 operands of distinct labels', function(D)
        local t, eq = {}, {}
        local labels = 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ'
        for i = 1, 52 do t[i], eq[i] = D.T{1, 1}, labels:sub(i, i) end
        return ddpl.einsum(table.concat(eq, ','), t)
    end, err = {'einsum', 'too many dimensions'}},
    {'einsum an outer product of 2^80 elements', function(D)
        local a = D.ones(1):expand(1 << 40)
        return ddpl.einsum('i,j->ij', a, a)
    end, err = {'einsum', 'too large'}},
    -- torch.einsum(',->', torch.tensor(2.), torch.tensor(3.)) -> 6.
    {'einsum of 0-dim operands', function(D) return ddpl.einsum(',->', D.T(2), D.T(3)) end, val = {6}},
    {'inv of a singular matrix', function(D) return LA.inv(D.T{{1, 2}, {2, 4}}) end,
     err = {'linalg.inv', 'singular'}},
    {'inv of a non-square matrix', function(D) return LA.inv(D.x()) end,
     err = {'linalg.inv', 'square', '2 by 3'}},
    {'inv of int64', function(D) return LA.inv(D.L{{1, 0}, {0, 1}}) end, err = {'linalg.inv', 'int64'}},
    -- torch.linalg.inv(torch.zeros(0, 0)).shape -> [0, 0]; inv of NaN is NaN; of [[inf, 1],
    -- [1, 1]] -> [[0, 0], [0, 1]]
    {'inv of an empty matrix', function(D) return LA.inv(D.zeros(0, 0)) end, val = {{shape = {0, 0}}}},
    {'inv of a batch of none', function(D) return LA.inv(D.zeros(0, 2, 2)) end, val = {{shape = {0, 2, 2}}}},
    {'inv of NaN', function(D) return LA.inv(D.T{{NAN, 1}, {1, 1}}) end,
     val = {{{NAN, NAN}, {NAN, NAN}}}},
    {'inv of inf', function(D) return LA.inv(D.T{{INF, 1}, {1, 1}}) end, val = {{{0, 0}, {0, 1}}}},
    {'solve a singular system', function(D) return LA.solve(D.T{{1, 2}, {2, 4}}, D.T{1, 2}) end,
     err = {'linalg.solve', 'singular'}},
    {'solve mismatched batches', function(D)
        return LA.solve(D.eye(2):expand(3, 2, 2), D.ones(4, 2, 1)) end,
     err = {'linalg.solve', '[3]', '[4]'}},
    {'solve a right side of the wrong size', function(D) return LA.solve(D.T{{1, 2}, {3, 4}}, D.T{1, 2, 3}) end,
     err = {'linalg.solve', 'Incompatible shapes'}},
    {'solve float32 with float64', function(D)
        return LA.solve(D.T{{1, 2}, {3, 4}}, D.F64{1, 2}) end,
     err = {'linalg.solve', 'float32', 'float64'}},
    -- torch.linalg.solve(torch.zeros(0, 0), torch.zeros(0)).shape -> [0]
    {'solve an empty system', function(D) return LA.solve(D.zeros(0, 0), D.zeros(0)) end,
     val = {{shape = {0}}}},
    -- torch.linalg.det(torch.tensor([[1., 2.], [2., 4.]])) -> 0, det(torch.zeros(0, 0)) -> 1
    {'det of a singular matrix', function(D) return LA.det(D.T{{1, 2}, {2, 4}}) end, val = {0}},
    {'det of an empty matrix', function(D) return LA.det(D.zeros(0, 0)) end, val = {1}},
    {'det of a 0-dim tensor', function(D) return LA.det(D.T(1)) end, err = {'linalg.det', '2 dimensions'}},
    -- torch.linalg.slogdet(torch.tensor([[1., 2.], [2., 4.]])) -> (0, -inf)
    {'slogdet of a singular matrix', function(D) return LA.slogdet(D.T{{1, 2}, {2, 4}}) end,
     val = {0, -INF}},
    {'cholesky of an indefinite matrix', function(D) return LA.cholesky(D.T{{1, 2}, {2, 1}}) end,
     err = {'linalg.cholesky', 'positive-definite', 'order 2'}},
    {'cholesky of a batch with one bad matrix', function(D)
        return LA.cholesky(ddpl.stack({D.eye(2), -D.eye(2)})) end,
     err = {'linalg.cholesky', 'Batch element 1'}},
    -- torch.linalg.cholesky(torch.zeros(0, 0)).shape -> [0, 0]
    {'cholesky of an empty matrix', function(D) return LA.cholesky(D.zeros(0, 0)) end,
     val = {{shape = {0, 0}}}},
    {'qr mode full', function(D) return LA.qr(D.T{{1, 2}, {3, 4}}, 'full') end,
     err = {'linalg.qr', "'full'"}},
    -- [t.shape for t in torch.linalg.qr(torch.zeros(0, 3))] -> [0, 0], [0, 3]
    {'qr of an empty matrix', function(D) return LA.qr(D.zeros(0, 3)) end,
     val = {{shape = {0, 0}}, {shape = {0, 3}}}},
    -- torch: "linalg.svd: The algorithm failed to converge because the input matrix contained
    -- non-finite values."
    {'svd of NaN', function(D) return LA.svd(D.T{{NAN, 1}, {1, 1}}) end,
     err = {'linalg.svd', 'converge'}},
    -- [t.shape for t in torch.linalg.svd(torch.zeros(0, 3))] -> [0, 0], [0], [3, 3]
    {'svd of an empty matrix', function(D) return LA.svd(D.zeros(0, 3)) end,
     val = {{shape = {0, 0}}, {shape = {0}}, {shape = {3, 3}}}},
    {'eigh of a non-square matrix', function(D) return LA.eigh(D.x()) end,
     err = {'linalg.eigh', 'square'}},
    {'eigh UPLO X', function(D) return LA.eigh(D.T{{1, 2}, {3, 4}}, 'X') end,
     err = {'linalg.eigh', 'UPLO', 'X'}},
    {'pinv of NaN', function(D) return LA.pinv(D.T{{NAN, 1}, {1, 1}}) end,
     err = {'linalg.pinv', 'converge'}},
    -- torch.linalg.pinv(torch.tensor([[1., 2.], [3., 4.]]), rtol=nan) -> zeros
    {'pinv rtol NaN', function(D) return LA.pinv(D.T{{1, 2}, {3, 4}}, NAN) end,
     val = {{{0, 0}, {0, 0}}}},
    -- torch.linalg.pinv(torch.zeros(0, 3)).shape -> [3, 0]
    {'pinv of an empty matrix', function(D) return LA.pinv(D.zeros(0, 3)) end, val = {{shape = {3, 0}}}},
    -- torch.linalg.matrix_rank: singular -> 1, empty (0, 3) -> 0, atol=inf -> 0 (clamp's min
    -- was inf: its CUDA bounds were converted to int64 unchecked)
    {'matrix_rank of a singular matrix', function(D) return LA.matrix_rank(D.T{{1, 2}, {2, 4}}) end,
     val = {1}},
    {'matrix_rank of an empty matrix', function(D) return LA.matrix_rank(D.zeros(0, 3)) end, val = {0}},
    {'matrix_rank atol inf', function(D) return LA.matrix_rank(D.T{{1, 2}, {3, 4}}, {atol = INF}) end,
     val = {0}},
    {'clamp min inf', function(D) return D.T{1, -1}:clamp(INF) end, val = {{INF, INF}}},
    {'matrix_rank of NaN', function(D) return LA.matrix_rank(D.T{{NAN, 1}, {1, 1}}) end,
     err = {'linalg.matrix_rank', 'converge'}},
    -- torch.cdist(torch.arange(6.).view(2, 3), torch.zeros(1, 3), p): p=0 -> [[2], [3]],
    -- p=inf -> [[2], [5]]
    {'cdist p 0', function(D) return ddpl.cdist(D.x(), D.T{{0, 0, 0}}, 0) end, val = {{{2}, {3}}}},
    {'cdist p inf', function(D) return ddpl.cdist(D.x(), D.T{{0, 0, 0}}, INF) end, val = {{{2}, {5}}}},
    {'cdist p -1', function(D) return ddpl.cdist(D.x(), D.T{{0, 0, 0}}, -1) end,
     err = {'cdist', 'non-negative p'}},
    {'cdist p NaN', function(D) return ddpl.cdist(D.x(), D.T{{0, 0, 0}}, NAN) end,
     err = {'cdist', 'non-negative p'}},
    {'cdist rows of other lengths', function(D) return ddpl.cdist(D.x(), D.T{{0, 0}}) end,
     err = {'cdist', 'X1: 3 X2: 2'}},
    {'cdist mismatched batches', function(D) return ddpl.cdist(D.zeros(2, 2, 3), D.zeros(3, 2, 3)) end,
     err = {'cdist', '[2]', '[3]'}},
    -- torch.cdist(torch.zeros(2, 0), torch.zeros(3, 0)) -> zeros (2, 3)
    {'cdist of empty rows', function(D) return ddpl.cdist(D.zeros(2, 0), D.zeros(3, 0)) end,
     val = {{{0, 0, 0}, {0, 0, 0}}}},
    {'kron of 2^124 elements', function(D)
        local a = D.ones(1, 1):expand(1 << 31, 1 << 31)
        return ddpl.kron(a, a)
    end, err = {'kron', 'too large'}},
    -- torch.kron(torch.zeros(0), torch.tensor([1., 2.])).shape -> [0]
    {'kron of an empty tensor', function(D) return ddpl.kron(D.zeros(0), D.T{1, 2}) end,
     val = {{shape = {0}}}},
    {'tensordot dims -1', function(D) return ddpl.tensordot(D.x(), D.x(), -1) end,
     err = {'tensordot', 'dims=-1'}},
    {'tensordot dims maxinteger', function(D) return ddpl.tensordot(D.x(), D.x(), MI) end,
     err = {'tensordot', '9223372036854775807'}},
    {'tensordot a dim twice', function(D) return ddpl.tensordot(D.x(), D.x(), {{0, 0}, {0, 0}}) end,
     err = {'tensordot', 'multiple times'}},
    {'tensordot dim mininteger', function(D) return ddpl.tensordot(D.x(), D.x(), {{mi}, {0}}) end,
     err = {'tensordot', '-9223372036854775808'}},
    {'tensordot sizes that do not match', function(D) return ddpl.tensordot(D.x(), D.x(), 1) end,
     err = {'tensordot', 'size 3', 'size 2'}},
    {'tensordot an outer product of 2^80 elements', function(D)
        local a = D.ones(1):expand(1 << 40)
        return ddpl.tensordot(a, a, 0)
    end, err = {'tensordot', 'too large'}},
})

cases('statistics with hostile k, q, bins and lengths', {
    -- torch.zeros(0).median() -> nan; torch.zeros(0, 3).median(1) -> empty values and indices
    {'median of nothing', function(D) return D.zeros(0):median() end, val = {NAN}},
    {'median along an empty dim', function(D) return D.zeros(2, 0):median(1) end,
     err = {'median', 'non-zero size'}},
    {'median of no rows', function(D) return D.zeros(0, 3):median(1) end,
     val = {{shape = {0}}, {shape = {0}}}},
    {'median dim mininteger', function(D) return D.x():median(mi) end,
     err = {'median', '-9223372036854775808'}},
    {'median of 2^40 expanded elements', function(D) return D.ones(1):expand(1 << 40):median() end,
     err = {'median', 'allocate'}},
    -- torch.tensor([nan, nan]).nanmedian(0) -> (nan, 0)
    {'nanmedian of all NaN', function(D) return D.T{NAN, NAN}:nanmedian(0) end, val = {NAN, 0}},
    {'quantile q 1.5', function(D) return D.x():quantile(1.5) end, err = {'quantile', '[0, 1]', '1.5'}},
    {'quantile q -0.1', function(D) return D.x():quantile(-0.1) end, err = {'quantile', '[0, 1]'}},
    {'quantile q NaN', function(D) return D.x():quantile(NAN) end, err = {'quantile', '[0, 1]', 'nan'}},
    {'quantile q inf', function(D) return D.x():quantile(INF) end, err = {'quantile', 'inf'}},
    {'quantile a q tensor with 2', function(D) return D.x():quantile(D.T{0.5, 2}) end,
     err = {'quantile', '[0, 1]', '2'}},
    {'quantile a 2-D q', function(D) return D.x():quantile(D.T{{0.5}}) end,
     err = {'quantile', '[1,1]'}},
    {'quantile of nothing', function(D) return D.zeros(0):quantile(0.5) end,
     err = {'quantile', 'non-empty'}},
    {'quantile along an empty dim', function(D) return D.zeros(2, 0):quantile(0.5, 1) end,
     err = {'quantile', 'non-empty'}},
    {'quantile interpolation cubic', function(D)
        return D.x():quantile(0.5, 0, false, {interpolation = 'cubic'}) end,
     err = {'quantile', 'cubic'}},
    -- torch.tensor([1., nan, 3.]).quantile(0.5) -> nan; x.quantile(torch.tensor([])) -> []
    {'quantile with a NaN', function(D) return D.T{1, NAN, 3}:quantile(0.5) end, val = {NAN}},
    {'quantile of an empty q', function(D) return D.x():quantile(D.T{}) end, val = {{shape = {0}}}},
    {'kthvalue k 0', function(D) return D.x():kthvalue(0) end, err = {'kthvalue', 'k (0)', 'out of range'}},
    {'kthvalue k past the size', function(D) return D.x():kthvalue(4) end,
     err = {'kthvalue', 'k (4)'}},
    {'kthvalue k maxinteger', function(D) return D.x():kthvalue(MI) end,
     err = {'kthvalue', '9223372036854775807'}},
    {'kthvalue k mininteger', function(D) return D.x():kthvalue(mi) end,
     err = {'kthvalue', '-9223372036854775808'}},
    {'kthvalue along an empty dim', function(D) return D.zeros(2, 0):kthvalue(1) end,
     err = {'kthvalue', 'k (1)'}},
    -- torch.tensor([nan, 1., 2.]).kthvalue(3) -> (nan, 0)
    {'kthvalue with a NaN', function(D) return D.T{NAN, 1, 2}:kthvalue(3) end, val = {NAN, 0}},
    {'topk k past the size', function(D) return D.x():topk(4) end, err = {'topk', 'k (4)'}},
    {'topk k -1', function(D) return D.x():topk(-1) end, err = {'topk', 'non-negative'}},
    {'topk k maxinteger', function(D) return D.x():topk(MI) end, err = {'topk', '9223372036854775807'}},
    {'topk k mininteger', function(D) return D.x():topk(mi) end, err = {'topk', 'non-negative'}},
    -- torch.arange(6.).view(2, 3).topk(0) -> two (2, 0) tensors
    {'topk k 0', function(D) return D.x():topk(0) end, val = {{shape = {2, 0}}, {shape = {2, 0}}}},
    {'bincount of -1', function(D) return D.L{1, -1}:bincount() end, err = {'bincount', 'non-negative', '-1'}},
    {'bincount of mininteger', function(D) return D.L{mi}:bincount() end,
     err = {'bincount', '-9223372036854775808'}},
    {'bincount of maxinteger', function(D) return D.L{MI}:bincount() end,
     err = {'bincount', '9223372036854775807'}},
    {'bincount of 2^40', function(D) return D.L{1 << 40}:bincount() end, err = {'bincount', 'memory'}},
    {'bincount minlength -1', function(D) return D.L{1}:bincount({minlength = -1}) end,
     err = {'bincount', 'minlength', '-1'}},
    {'bincount minlength maxinteger', function(D) return D.L{1}:bincount({minlength = MI}) end,
     err = {'bincount', 'too large'}},
    {'bincount weights of another length', function(D) return D.L{1, 2}:bincount({weights = D.T{1}}) end,
     err = {'bincount', 'weights [1]'}},
    -- torch.tensor([], dtype=torch.long).bincount(minlength=3) -> [0, 0, 0];
    -- torch.tensor([1, 2]).bincount(weights=torch.tensor([nan, 1.])) -> [0, nan, 1]
    {'bincount of nothing', function(D) return D.L{}:bincount({minlength = 3}) end, val = {{0, 0, 0}}},
    {'bincount NaN weights', function(D) return D.L{1, 2}:bincount({weights = D.T{NAN, 1}}) end,
     val = {{0, NAN, 1}}},
    {'histc min > max', function(D) return D.x():histc({min = 3, max = 1}) end,
     err = {'histc', 'max', 'min'}},
    {'histc 0 bins', function(D) return D.x():histc({bins = 0}) end, err = {'histc', 'bins', '0'}},
    {'histc -1 bins', function(D) return D.x():histc({bins = -1}) end, err = {'histc', 'bins', '-1'}},
    {'histc maxinteger bins', function(D) return D.x():histc({bins = MI}) end, err = {'histc', 'too large'}},
    {'histc min NaN', function(D) return D.x():histc({min = NAN, max = 1}) end,
     err = {'histc', 'not finite'}},
    {'histc range of the doubles (inf in float32)', function(D)
        return D.x():histc({min = -1.7e308, max = 1.7e308, bins = 4}) end, err = {'histc', 'not finite'}},
    -- torch.tensor([nan, 1.]).histc(bins=2): "range of [-nan, -nan] is not finite"
    {'histc of NaN data', function(D) return D.T{NAN, 1}:histc({bins = 2}) end,
     err = {'histc', 'not finite'}},
    -- torch.tensor([2., 2.]).histc(bins=4) -> [0, 0, 2, 0]; torch.zeros(0).histc(bins=3) -> zeros
    {'histc of constant data', function(D) return D.T{2, 2}:histc({bins = 4}) end, val = {{0, 0, 2, 0}}},
    {'histc of nothing', function(D) return D.zeros(0):histc({bins = 3}) end, val = {{0, 0, 0}}},
    -- torch.searchsorted: unsorted [3, 1, 2] with 2 -> [2]; empty sequence -> [0];
    -- [1, nan, 2] with [nan, 1.5] -> [3, 2]
    {'searchsorted an unsorted sequence', function(D) return ddpl.searchsorted(D.T{3, 1, 2}, D.T{2}) end,
     val = {{2}}},
    {'searchsorted an empty sequence', function(D) return ddpl.searchsorted(D.T{}, D.T{2}) end, val = {{0}}},
    {'searchsorted NaN', function(D) return ddpl.searchsorted(D.T{1, NAN, 2}, D.T{NAN, 1.5}) end,
     val = {{3, 2}}},
    -- torch.searchsorted(torch.tensor([1., 2.]), 1.5) -> 1 (a number on a CUDA sequence was a
    -- CPU tensor: a device mismatch)
    {'searchsorted a number', function(D) return ddpl.searchsorted(D.T{1, 2}, 1.5) end, val = {1}},
    {'searchsorted leading dims that differ', function(D)
        return ddpl.searchsorted(D.T{{1, 2}, {3, 4}}, D.T{{1}, {2}, {3}}) end,
     err = {'searchsorted', '[2,2]', '[3,1]'}},
    {'searchsorted side middle', function(D) return ddpl.searchsorted(D.T{1, 2}, D.T{1}, {side = 'middle'}) end,
     err = {'searchsorted', 'middle'}},
    {'searchsorted side left with right', function(D)
        return ddpl.searchsorted(D.T{1, 2}, D.T{1}, {side = 'left', right = true}) end,
     err = {'searchsorted', 'opposites'}},
    {'unique dim mininteger', function(D) return D.x():unique({dim = mi}) end,
     err = {'unique', '-9223372036854775808'}},
    {'unique dim 0 of a 0-dim tensor', function(D) return D.T(1):unique({dim = 0}) end,
     err = {'unique', '0-dim'}},
    -- torch.zeros(0, 3).unique(dim=0, return_inverse=True, return_counts=True): empty x3
    {'unique along an empty dim', function(D)
        return D.zeros(0, 3):unique({dim = 0, return_inverse = true, return_counts = true}) end,
     val = {{shape = {0, 3}}, {shape = {0}}, {shape = {0}}}},
    {'unique with another dim empty', function(D) return D.zeros(3, 0):unique({dim = 0}) end,
     err = {'unique', 'size 0'}},
    -- torch.tensor([[nan], [nan]]).unique(dim=0) -> [[nan], [nan]] (NaN rows are distinct)
    {'unique NaN rows', function(D) return D.T{{NAN}, {NAN}}:unique({dim = 0}) end,
     val = {{{NAN}, {NAN}}}},
})

local function lp(D, T, N, C)
    ddpl.manual_seed(0)
    return ddpl.randn(T, N, C, {device = D.dev}):log_softmax(2)
end
cases('pooling, convolution padding, pad and CTC lengths', {
    -- torch.nn.functional.max_pool2d / avg_pool2d on torch.arange(16.).view(1, 1, 4, 4)
    {'max_pool2d ceil_mode', function(D) return F.max_pool2d(D.img(), 3, {stride = 2, ceil_mode = true}) end,
     val = {{{{{10, 11}, {14, 15}}}}}},
    {'max_pool2d ceil_mode with padding', function(D)
        return F.max_pool2d(D.img(), 3, {stride = 2, padding = 1, ceil_mode = true}) end,
     val = {{{{{5, 7, 7}, {13, 15, 15}, {13, 15, 15}}}}}},
    -- F.max_pool2d(img, 5, ceil_mode=True) -> [[[[15]]]] (the window starts inside the input)
    {'max_pool2d a kernel larger than the input', function(D)
        return F.max_pool2d(D.img(), 5, {ceil_mode = true}) end,
     val = {{{{{15}}}}}},
    {'avg_pool2d ceil_mode', function(D) return F.avg_pool2d(D.img(), 3, {stride = 2, ceil_mode = true}) end,
     val = {{{{{5, 6.5}, {11, 12.5}}}}}},
    {'avg_pool2d ceil_mode, padding, count_include_pad=false', function(D)
        return F.avg_pool2d(D.img(), 3, {stride = 2, padding = 1, ceil_mode = true,
                                         count_include_pad = false}) end,
     val = {{{{{2.5, 4, 5}, {8.5, 10, 11}, {12.5, 14, 15}}}}}},
    {'avg_pool2d divisor_override -2', function(D) return F.avg_pool2d(D.img(), 2, {divisor_override = -2}) end,
     val = {{{{{-5, -9}, {-21, -25}}}}}},
    {'avg_pool2d divisor_override 0', function(D) return F.avg_pool2d(D.img(), 2, {divisor_override = 0}) end,
     err = {'avg_pool2d', 'divisor_override', '0'}},
    {'avg_pool2d divisor_override maxinteger', function(D)
        return F.avg_pool2d(D.img(), 2, {divisor_override = MI}) end,
     err = {'avg_pool2d', '9223372036854775807'}},
    {'max_pool2d padding past half the kernel', function(D) return F.max_pool2d(D.img(), 2, {padding = 2}) end,
     err = {'max_pool2d', 'half of the kernel'}},
    {'max_pool2d stride 0', function(D) return F.max_pool2d(D.img(), 2, {stride = 0}) end,
     err = {'max_pool2d', 'stride (0, 0)'}},
    {'max_pool2d stride maxinteger', function(D)
        return F.max_pool2d(D.img(), 2, {stride = MI, ceil_mode = true}) end,
     err = {'max_pool2d', 'stride', '9223372036854775807'}},
    {'max_pool2d kernel maxinteger', function(D) return F.max_pool2d(D.img(), MI) end,
     err = {'max_pool2d', '9223372036854775807'}},
    -- torch: max_pool2d(torch.zeros(0, 1, 4, 4), 2, ceil_mode=True).shape -> [0, 1, 2, 2]
    {'max_pool2d of no images', function(D) return F.max_pool2d(D.zeros(0, 1, 4, 4), 2, {ceil_mode = true}) end,
     val = {{shape = {0, 1, 2, 2}}}},
    {'Conv2d padding_mode mirror', function() return ddpl.nn.Conv2d(1, 1, 3, {padding_mode = 'mirror'}) end,
     err = {'Conv2d', 'padding_mode', 'mirror'}},
    {'Conv2d padding_mode 1', function() return ddpl.nn.Conv2d(1, 1, 3, {padding_mode = 1}) end,
     err = {'Conv2d', 'padding_mode'}},
    {'Conv2d reflect padding past the size', function(D)
        local c = ddpl.nn.Conv2d(1, 1, 3, {padding = 4, padding_mode = 'reflect'}):to(D.dev)
        return c(D.img())
    end, err = {'pad', "mode 'reflect'", 'too large'}},
    {'Conv2d circular padding past the size', function(D)
        local c = ddpl.nn.Conv2d(1, 1, 3, {padding = 9, padding_mode = 'circular'}):to(D.dev)
        return c(D.img())
    end, err = {'pad', "mode 'circular'", 'too large'}},
    -- a Lua list of 2^41 source positions filled memory until Lua's own "not enough memory"
    {'Conv2d replicate padding 2^40', function(D)
        local c = ddpl.nn.Conv2d(1, 1, 3, {padding = 1 << 40, padding_mode = 'replicate'}):to(D.dev)
        return c(D.img())
    end, err = {'pad', 'memory'}},
    -- n + l + r wrapped to 2: a (1, 1, 4, 2) result
    {'pad replicate maxinteger twice', function(D)
        return F.pad(D.ones(1, 1, 4), {MI, MI}, {mode = 'replicate'}) end,
     err = {'pad', '9223372036854775807', '2^62'}},
    -- torch F.pad(torch.arange(5.).view(1, 1, 5), (4, 3), mode='reflect') and (-2, 2), 'circular'
    {'pad reflect the most it can', function(D)
        return F.pad(ddpl.arange(5, {device = D.dev}):float():view(1, 1, 5), {4, 3}, {mode = 'reflect'}) end,
     val = {{{{4, 3, 2, 1, 0, 1, 2, 3, 4, 3, 2, 1}}}}},
    {'pad circular cropping and wrapping', function(D)
        return F.pad(ddpl.arange(5, {device = D.dev}):float():view(1, 1, 5), {-2, 2}, {mode = 'circular'}) end,
     val = {{{{2, 3, 4, 2, 3}}}}},
    {'pad constant maxinteger', function(D) return F.pad(D.img(), {MI, 0}) end, err = {'pad'}},
    {'pad cropping everything', function(D) return F.pad(D.img(), {-2, -2}) end,
     err = {'pad', 'negative or empty size'}},
    {'conv2d groups maxinteger (was reported as -1)', function(D)
        return F.conv2d(D.img(), D.ones(1, 1, 3, 3), nil, {groups = MI}) end,
     err = {'conv2d', 'groups', '9223372036854775807'}},
    {'conv2d groups 0', function(D) return F.conv2d(D.img(), D.ones(1, 1, 3, 3), nil, {groups = 0}) end,
     err = {'conv2d', 'groups', '0'}},
    {'conv2d padding maxinteger', function(D)
        return F.conv2d(D.img(), D.ones(1, 1, 3, 3), nil, {padding = MI}) end,
     err = {'conv2d', 'padding', '9223372036854775807'}},
    {'conv2d stride 0', function(D) return F.conv2d(D.img(), D.ones(1, 1, 3, 3), nil, {stride = 0}) end,
     err = {'conv2d', 'stride'}},
    -- torch F.ctc_loss(lp, torch.tensor([[1, 2, 1, 2]]), [2], [4]) -> inf; with
    -- zero_infinity=True -> 0 and a zero gradient
    {'ctc_loss a target longer than the input', function(D)
        return F.ctc_loss(lp(D, 2, 1, 3), D.L{{1, 2, 1, 2}}, {2}, {4}) end, val = {INF}},
    {'ctc_loss a target longer than the input, zero_infinity', function(D)
        local l = lp(D, 2, 1, 3):detach():requires_grad_()
        local loss = F.ctc_loss(l, D.L{{1, 2, 1, 2}}, {2}, {4}, {zero_infinity = true})
        loss:backward()
        return loss, l.grad
    end, val = {0, {{{0, 0, 0}}, {{0, 0, 0}}}}},
    {'ctc_loss input length -1', function(D) return F.ctc_loss(lp(D, 2, 1, 3), D.L{{1}}, {-1}, {1}) end,
     err = {'ctc_loss', 'input_lengths', '-1'}},
    {'ctc_loss input length past T', function(D) return F.ctc_loss(lp(D, 2, 1, 3), D.L{{1}}, {5}, {1}) end,
     err = {'ctc_loss', 'input_lengths', '5'}},
    {'ctc_loss input length maxinteger', function(D)
        return F.ctc_loss(lp(D, 2, 1, 3), D.L{{1}}, {MI}, {1}) end,
     err = {'ctc_loss', '9223372036854775807'}},
    {'ctc_loss target length -1', function(D) return F.ctc_loss(lp(D, 2, 1, 3), D.L{{1}}, {2}, {-1}) end,
     err = {'ctc_loss', 'target_lengths', '-1'}},
    {'ctc_loss target length past the padded targets', function(D)
        return F.ctc_loss(lp(D, 2, 1, 3), D.L{{1}}, {2}, {MI}) end,
     err = {'ctc_loss', 'narrower', '9223372036854775807'}},
    -- the sum of the target lengths wrapped (UBSan); torch 1.13 says "Expected tensor to have
    -- size -2"
    {'ctc_loss concatenated target lengths adding up past 2^63', function(D)
        return F.ctc_loss(lp(D, 2, 2, 3), D.L{1, 1}, {2, 2}, {MI, MI}) end,
     err = {'ctc_loss', 'target_lengths', '2^63'}},
    {'ctc_loss concatenated targets of the wrong length', function(D)
        return F.ctc_loss(lp(D, 2, 2, 3), D.L{1, 1}, {2, 2}, {1, 5}) end,
     err = {'ctc_loss', '6 elements'}},
    {'ctc_loss blank 3 of 3 classes', function(D)
        return F.ctc_loss(lp(D, 2, 1, 3), D.L{{1}}, {2}, {1}, {blank = 3}) end,
     err = {'ctc_loss', 'blank (3)'}},
    {'ctc_loss blank -1', function(D) return F.ctc_loss(lp(D, 2, 1, 3), D.L{{1}}, {2}, {1}, {blank = -1}) end,
     err = {'ctc_loss', 'blank (-1)'}},
    {'ctc_loss blank maxinteger', function(D)
        return F.ctc_loss(lp(D, 2, 1, 3), D.L{{1}}, {2}, {1}, {blank = MI}) end,
     err = {'ctc_loss', '9223372036854775807'}},
    {'ctc_loss target label 3 of 3 classes', function(D) return F.ctc_loss(lp(D, 2, 1, 3), D.L{{3}}, {2}, {1}) end,
     err = {'ctc_loss', 'label 3'}},
    {'ctc_loss target label mininteger', function(D)
        return F.ctc_loss(lp(D, 2, 1, 3), D.L{{mi}}, {2}, {1}) end,
     err = {'ctc_loss', '-9223372036854775808'}},
    {'ctc_loss lengths of another batch size', function(D)
        return F.ctc_loss(lp(D, 2, 2, 3), D.L{{1}, {1}}, {2}, {1, 1}) end,
     err = {'ctc_loss', 'input_lengths', '2 elements'}},
    {'ctc_loss float targets', function(D) return F.ctc_loss(lp(D, 2, 1, 3), D.T{{1}}, {2}, {1}) end,
     err = {'ctc_loss', 'float32'}},
    {'ctc_loss no classes', function(D) return F.ctc_loss(D.zeros(2, 1, 0), D.L{{1}}, {2}, {1}) end,
     err = {'ctc_loss', 'no classes'}},
    -- torch F.ctc_loss(..., reduction='avg'): "avg is not a valid value for reduction"
    {'ctc_loss reduction avg', function(D)
        return F.ctc_loss(lp(D, 2, 1, 3), D.L{{1}}, {2}, {1}, {reduction = 'avg'}) end,
     err = {'ctc_loss', 'reduction', "'avg'"}},
    {'ctc_loss reduction 1', function(D)
        return F.ctc_loss(lp(D, 2, 1, 3), D.L{{1}}, {2}, {1}, {reduction = 1}) end,
     err = {'ctc_loss', 'reduction', 'number'}},
    {'CTCLoss reduction avg', function() return ddpl.nn.CTCLoss({reduction = 'avg'}) end,
     err = {'CTCLoss', 'reduction', "'avg'"}},
    -- torch F.ctc_loss(torch.full((2, 1, 3), -inf), torch.tensor([[1]]), [2], [1]) -> inf
    {'ctc_loss -inf log-probabilities', function(D)
        return F.ctc_loss(ddpl.full({2, 1, 3}, -INF, {device = D.dev}), D.L{{1}}, {2}, {1}) end,
     val = {INF}},
    {'ctc_loss 2^40 expanded targets', function(D)
        return F.ctc_loss(lp(D, 2, 1, 3), D.L{{1}}:expand(1, 1 << 40), {2}, {1 << 40}) end,
     err = {'ctc_loss'}},
})

-- b = torch.tensor(...); v = b.as_strided((3, 2), (1, 1), 0) (rows overlap: PyTorch's
-- internal-overlap check cannot decide, and lets the write through); each op's result as torch's
local function overlapping(D, t) return D.T(t):as_strided({3, 2}, {1, 1}, 0) end
cases('in-place writes into overlapping and expanded views', {
    {'relu_ on overlapping rows', function(D) return overlapping(D, {-1, 2, -3, 4}):relu_() end,
     val = {{{0, 2}, {2, 0}, {0, 4}}}},
    {'scatter_ on overlapping rows', function(D)
        return overlapping(D, {1, 2, 3, 4}):scatter_(1, D.L{{0}, {0}, {0}}, 9) end,
     val = {{{9, 9}, {9, 9}, {9, 4}}}},
    {'index_add_ on overlapping rows', function(D)
        return overlapping(D, {1, 2, 3, 4}):index_add_(0, D.L{0}, D.T{{1, 1}}) end,
     val = {{{2, 3}, {3, 3}, {3, 4}}}},
    {'masked_fill_ on overlapping rows', function(D)
        return overlapping(D, {1, 2, 3, 4}):masked_fill_(D.B{true, false}, 0) end,
     val = {{{0, 0}, {0, 0}, {0, 4}}}},
    {'clamp_ on overlapping rows', function(D) return overlapping(D, {1, 2, 3, 4}):clamp_(0, 2) end,
     val = {{{1, 2}, {2, 2}, {2, 2}}}},
    {'fill_ on overlapping rows', function(D)
        local b = D.T{1, 2, 3, 4}
        b:as_strided({3, 2}, {1, 1}, 0):fill_(7)
        return b
    end, val = {{7, 7, 7, 7}}},
    -- torch.zeros(1).expand(4).relu_(), ... : "unsupported operation: more than one element of
    -- the written-to tensor refers to a single memory location"
    {'relu_ on an expanded tensor', function(D) return D.expanded(4):relu_() end,
     err = {'relu_', OVERLAP}},
    {'sigmoid_ on an expanded tensor', function(D) return D.expanded(4):sigmoid_() end,
     err = {'sigmoid_', OVERLAP}},
    {'index_copy_ into an expanded tensor', function(D)
        return D.expanded(4):index_copy_(0, D.L{0}, D.T{1}) end, err = {'index_copy_', OVERLAP}},
    {'index_fill_ into an expanded tensor', function(D) return D.expanded(4):index_fill_(0, D.L{0}, 1) end,
     err = {'index_fill_', OVERLAP}},
    {'scatter_reduce_ into an expanded tensor', function(D)
        return D.expanded(4):scatter_reduce_(0, D.L{0}, D.T{1}, 'sum') end,
     err = {'scatter_reduce_', OVERLAP}},
    {'masked_scatter_ into an expanded tensor', function(D)
        return D.expanded(4):masked_scatter_(D.B{true, false, true, false}, D.T{1, 2}) end,
     err = {'masked_scatter_', OVERLAP}},
})

-- The comm-hook classes reachable without a process group (lua/ddplua/distributed/)
local PS = require 'ddplua.distributed.algorithms.powersgd'
local GradBucket = require 'ddplua.distributed.grad_bucket'
local hooks = require 'ddplua.distributed.algorithms.default_hooks'
local function bucket(D, n, params) return GradBucket.new(D.ones(n), 0, params or {}, true) end
cases('comm-hook classes without a process group', {
    {'PowerSGDState rank 0', function() return PS.PowerSGDState({matrix_approximation_rank = 0}) end,
     err = {'PowerSGDState', 'matrix_approximation_rank', '0'}},
    {'PowerSGDState rank 1.5', function() return PS.PowerSGDState({matrix_approximation_rank = 1.5}) end,
     err = {'PowerSGDState', '1.5'}},
    {'PowerSGDState start -1', function() return PS.PowerSGDState({start_powerSGD_iter = -1}) end,
     err = {'PowerSGDState', 'start_powerSGD_iter', '-1'}},
    {'PowerSGDState start 1 with error feedback', function()
        return PS.PowerSGDState({start_powerSGD_iter = 1}) end,
     err = {'PowerSGDState', 'start_powerSGD_iter must be > 1'}},
    {'PowerSGDState seed -1', function() return PS.PowerSGDState({random_seed = -1}) end,
     err = {'PowerSGDState', 'random_seed'}},
    {'PowerSGDState min_compression_rate NaN', function()
        return PS.PowerSGDState({min_compression_rate = NAN}) end,
     err = {'PowerSGDState', 'min_compression_rate'}},
    {'PowerSGDState orthogonalization_epsilon inf', function()
        return PS.PowerSGDState({orthogonalization_epsilon = INF}) end,
     err = {'PowerSGDState', 'orthogonalization_epsilon', 'inf'}},
    {'PowerSGDState an unknown option', function() return PS.PowerSGDState({foo = 1}) end,
     err = {'PowerSGDState', "'foo'"}},
    -- errors name the hook the user registered, not get_world_size or a method of nil: a hook
    -- fails inside backward, far from the line that registered it
    {'PowerSGD hook without a process group', function(D)
        local st = PS.PowerSGDState({start_powerSGD_iter = 2})
        st.iter = 5
        return PS.hook(st, bucket(D, 4, {D.ones(2, 2)}))
    end, err = {'powerSGD_hook', 'not initialized'}},
    {'PowerSGD hook without a state', function(D) return PS.powerSGD_hook(nil, bucket(D, 2)) end,
     err = {'powerSGD_hook', 'PowerSGDState', 'nil'}},
    {'PowerSGD hook given a tensor for the bucket', function(D)
        return PS.hook(PS.PowerSGDState(), D.ones(2)) end,
     err = {'powerSGD_hook', 'GradBucket', 'a tensor'}},
    {'allreduce_hook without a process group', function(D) return hooks.allreduce_hook(nil, bucket(D, 2)) end,
     err = {'allreduce_hook', 'not initialized'}},
    {'allreduce_hook given a tensor for the bucket', function(D)
        return hooks.allreduce_hook(nil, D.ones(2)) end, err = {'allreduce_hook', 'GradBucket'}},
    {'fp16_compress_hook without a process group', function(D)
        return hooks.fp16_compress_hook(nil, bucket(D, 2)) end,
     err = {'fp16_compress_hook', 'not initialized'}},
    {'bf16_compress_hook given nothing for the bucket', function()
        return hooks.bf16_compress_hook(nil, nil) end, err = {'bf16_compress_hook', 'GradBucket', 'nil'}},
    {'GradBucket set_buffer of another size', function(D) return bucket(D, 2):set_buffer(D.ones(3)) end,
     err = {'GradBucket.set_buffer', '2 elements', '3 elements'}},
    {'GradBucket method called with a dot', function(D)
        local b = bucket(D, 2)
        return b.buffer()
    end, err = {'GradBucket.buffer', 'bucket:buffer()'}},
    {'orthogonalize a 1-D tensor', function(D) return PS.orthogonalize(D.ones(3), 0) end,
     err = {'orthogonalize', '2-D', '1-D'}},
    {'orthogonalize without epsilon', function(D) return PS.orthogonalize(D.ones(3, 2)) end,
     err = {'orthogonalize', 'epsilon', 'nil'}},
    -- Gram-Schmidt leaves a zero column at 0 (PyTorch's epsilon = 0 gives NaN: the documented
    -- difference, powersgd.lua)
    {'orthogonalize zero columns', function(D)
        local m = D.zeros(3, 2)
        PS.orthogonalize(m, 0)
        return m
    end, val = {{{0, 0}, {0, 0}, {0, 0}}}},
})
