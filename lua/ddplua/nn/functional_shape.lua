-- lua/ddplua/nn/functional_shape.lua: nn.functional functions that change a tensor's shape.
-- defines: one_hot, pad (installed into ddpl.F by functional.lua).
--
-- one_hot(t [, num_classes=-1]): int64 class indices (any shape) -> int64 (*, num_classes);
-- num_classes -1 means max(t) + 1. Errors as PyTorch for negative classes, classes >= num_classes
-- and an empty t without num_classes.
--
-- pad(x, pad [, mode='constant' [, value=0]]): pad = {left, right [, top, bottom [, front,
-- back]] ...}, PyTorch's order (the last dimension first). Differentiable.
--   'constant'  any number of dimensions; negative amounts crop. Built with narrow and cat.
--   'reflect', 'replicate', 'circular'  the last 1, 2 or 3 dimensions of an input with one or
--   two more dimensions (PyTorch's (C, W)/(N, C, W) ... rule; circular only with two);
--   reflect needs pad < size, circular pad <= size; negative amounts crop (circular wraps what
--   is kept); one index_select per padded dimension (its backward sums the gradient of the
--   repeated positions).
local ddpl = require 'ddplua'
local Args = require 'ddplua.nn.functional_args'

local S = {}

function S.one_hot(...)
    local fname = 'one_hot'
    local a = Args.parse(fname, {{'tensor', 'tensor'}, {'num_classes', 'int', -1}}, ...)
    local t, C = a.tensor, a.num_classes
    if t.dtype ~= 'int64' then
        error(fname .. ': one_hot is only applicable to index tensors (int64), got ' .. t.dtype, 2)
    end
    if C < -1 or C == 0 and t:numel() > 0 then
        error(fname .. ': num_classes should be -1 or positive, got ' .. C, 2)
    end
    if t:numel() == 0 then
        if C == -1 then
            error(fname .. ': can not infer the total number of classes from an empty tensor', 2)
        end
    else
        local lo, hi = t:min():item(), t:max():item()
        if lo < 0 then error(fname .. ': class values must be non-negative, got ' .. lo, 2) end
        if C == -1 then
            C = hi + 1
        elseif hi >= C then
            error(string.format('%s: class values must be smaller than num_classes (%d), got %d',
                                fname, C, hi), 2)
        end
    end
    local classes = ddpl.arange(C, {dtype = 'int64', device = t.device})
    return t:unsqueeze(-1):eq(classes):long()
end

-- {left, right} pairs per dimension, last dimension first -> dims[d] (0-based) = {l, r}
local function pad_pairs(fname, pad, ndim)
    if #pad % 2 ~= 0 then
        error(string.format('%s: padding length must be divisible by 2, got %d', fname, #pad), 3)
    end
    if #pad // 2 > ndim then
        error(string.format('%s: padding length %d is too large for a %d-D input (at most %d)',
                            fname, #pad, ndim, 2 * ndim), 3)
    end
    local pairs_ = {}
    for i = 1, #pad do
        if math.type(pad[i]) ~= 'integer' and not (type(pad[i]) == 'number'
                                                   and pad[i] == math.floor(pad[i])) then
            error(string.format('%s: pad[%d] must be an integer, got %s', fname, i,
                                tostring(pad[i])), 3)
        end
    end
    for k = 1, #pad // 2 do
        pairs_[ndim - k] = {math.tointeger(pad[2 * k - 1]), math.tointeger(pad[2 * k])}
    end
    return pairs_
end

local function pad_constant(fname, x, pairs_, value)
    local out = x
    for d, lr in pairs(pairs_) do
        local l, r = lr[1], lr[2]
        local size = out:size(d)
        if size + l + r < 0 or (size + l + r == 0 and (l < 0 or r < 0)) then
            error(string.format('%s: the input size %d of dimension %d plus padding %d and %d '
                                .. 'gives a negative or empty size', fname, size, d, l, r), 3)
        end
        if l < 0 then out, size, l = out:narrow(d, -l, size + l), size + l, 0 end
        if r < 0 then out, size, r = out:narrow(d, 0, size + r), size + r, 0 end
        if l > 0 or r > 0 then
            local parts = {}
            local function block(n)
                local shape = out:shape()
                shape[d + 1] = n
                local ok, t = pcall(ddpl.full, shape, value, {dtype = out.dtype, device = out.device})
                if not ok then error(fname .. ': ' .. tostring(t), 4) end -- e.g. a huge padding
                return t
            end
            if l > 0 then parts[#parts + 1] = block(l) end
            parts[#parts + 1] = out
            if r > 0 then parts[#parts + 1] = block(r) end
            out = ddpl.cat(parts, d)
        end
    end
    return out
end

-- source index of each output position along one dimension of size n, as an int64 tensor
-- (built with tensor ops: a Lua list of a huge padding's positions filled memory for minutes)
local function source_index(fname, mode, n, l, r, device)
    local ok, o = pcall(ddpl.arange, -l, n + r, {dtype = 'int64', device = device})
    if not ok then error(fname .. ': ' .. tostring(o), 4) end -- e.g. out of memory
    if mode == 'replicate' then return o:clamp(0, n - 1) end
    if mode == 'circular' then return o % n end
    -- reflect (|pad| < n): mirror without repeating the edge, -o before 0, 2 (n - 1) - o past n - 1
    return ((o:abs() - (n - 1)):abs() - (n - 1)):neg()
end

local function pad_indexed(fname, x, pairs_, mode, npad)
    local ndim = x:dim()
    -- PyTorch 1.13: reflect/replicate pad 1-3 dims of an input with one or two more (unbatched
    -- or batched); circular only the batched form (N, C, *)
    local ok = npad <= 3 and (ndim == npad + 2 or (mode ~= 'circular' and ndim == npad + 1))
    if not ok then
        error(string.format("%s: mode '%s' pads the last 1, 2 or 3 dimensions of an input with "
                            .. '%s more dimensions; got padding for %d dimension(s) of a '
                            .. '%d-D input', fname, mode,
                            mode == 'circular' and 'two' or 'one or two', npad, ndim), 3)
    end
    local out = x
    for d, lr in pairs(pairs_) do
        local l, r, n = lr[1], lr[2], x:size(d)
        -- negative amounts crop, as PyTorch's; reflect needs pad < size, circular pad <= size
        local limit = mode == 'reflect' and n - 1 or mode == 'circular' and n or math.huge
        if l > limit or r > limit or n == 0 or n + l + r <= 0 or -l > n or -r > n then
            error(string.format("%s: padding (%d, %d) is too large for mode '%s' on dimension %d "
                                .. 'of size %d (at most %s each, and a non-empty result)', fname,
                                l, r, mode, d, n, tostring(limit)), 3)
        end
        -- n + l + r in floats: in integers a huge padding wraps (maxinteger twice gave size 2)
        if n + 0.0 + l + r > 2.0 ^ 62 then
            error(string.format("%s: padding (%d, %d) on dimension %d of size %d gives a size "
                                .. 'past the limit of 2^62 elements', fname, l, r, d, n), 3)
        end
        if mode == 'circular' then -- crop first: the wrapped values come from what is kept
            if l < 0 then out, n, l = out:narrow(d, -l, n + l), n + l, 0 end
            if r < 0 then out, n, r = out:narrow(d, 0, n + r), n + r, 0 end
        end
        if l ~= 0 or r ~= 0 then
            out = out:index_select(d, source_index(fname, mode, n, l, r, out.device))
        end
    end
    return out
end

local MODES = {constant = true, reflect = true, replicate = true, circular = true}

function S.pad(...)
    local fname = 'pad'
    local a = Args.parse(fname, {{'input', 'tensor'}, {'pad', 'list'},
                                 {'mode', 'string', 'constant'}, {'value', 'number', 0}}, ...)
    if not MODES[a.mode] then
        error(string.format("%s: mode must be 'constant', 'reflect', 'replicate' or 'circular', "
                            .. "got '%s'", fname, a.mode), 2)
    end
    local x = a.input
    local pairs_ = pad_pairs(fname, a.pad, x:dim())
    if a.mode == 'constant' then return pad_constant(fname, x, pairs_, a.value) end
    if a.value ~= 0 then
        error(string.format("%s: padding value %s is only used by mode 'constant'", fname,
                            tostring(a.value)), 2)
    end
    return pad_indexed(fname, x, pairs_, a.mode, #a.pad // 2)
end

return S
