-- lua/ddplua/nn/functional_layers.lua: nn.functional forms of the layers added for issue 16.
-- defines: group_norm, rms_norm, conv1d (installed into ddpl.F by functional.lua).
--
-- group_norm(x (N, C, *), num_groups [, weight (C) [, bias (C) [, eps=1e-5]]]): each sample's
--   channels split into num_groups groups, each normalised by its mean and biased variance:
--   the native layer_norm over x seen as (N, G, C/G * prod(*)), then the per-channel affine.
-- rms_norm(x, normalized_shape [, weight [, eps]]): PyTorch 2.4's definition (1.13 has none):
--   x * rsqrt(mean(x^2 over the trailing normalized_shape dims) + eps) * weight, computed in
--   float32 for 16-bit inputs; eps nil means the machine epsilon of the compute dtype
--   (float64: 2^-52, else float32's 2^-23), as PyTorch.
-- conv1d(x (N, C, L) or (C, L), weight (O, C/groups, K) [, bias (O) [, stride=1 [, padding=0
--   [, dilation=1 [, groups=1]]]]]): conv2d on a unit-height image (one implementation);
--   padding an int, 'valid' or 'same' (stride 1; an odd total pads one more on the right).
local ddpl = require 'ddplua'
local C = require 'ddplua.core.functional'
local Args = require 'ddplua.nn.functional_args'
local Shape = require 'ddplua.nn.functional_shape'

local Lay = {}

local function shape_str(t) return '[' .. table.concat(t:shape(), ',') .. ']' end

local function check_channel_param(fname, what, p, c)
    if p ~= nil and (p:dim() ~= 1 or p:size(0) ~= c) then
        error(string.format('%s: %s must have shape [%d], got %s', fname, what, c, shape_str(p)),
              3)
    end
end

function Lay.group_norm(...)
    local fname = 'group_norm'
    local a = Args.parse(fname, {{'input', 'ftensor'}, {'num_groups', 'int'},
                                 {'weight', 'ftensor?'}, {'bias', 'ftensor?'},
                                 {'eps', 'number', 1e-5}}, ...)
    local x, G = a.input, a.num_groups
    if x:dim() < 2 then
        error(fname .. ': expected an input of at least 2 dimensions (N, C, *), got '
              .. shape_str(x), 2)
    end
    local N, Cn = x:size(0), x:size(1)
    if G < 1 or Cn % G ~= 0 then
        error(string.format('%s: the number of channels (%d) of input %s must be divisible by '
                            .. 'num_groups (%d)', fname, Cn, shape_str(x), G), 2)
    end
    check_channel_param(fname, 'weight', a.weight, Cn)
    check_channel_param(fname, 'bias', a.bias, Cn)
    local M = N > 0 and x:numel() // (N * G) or 0
    local y = C.layer_norm(x:reshape(N, G, M), {M}, nil, nil, {eps = a.eps}):reshape(x:shape())
    if a.weight == nil and a.bias == nil then return y end
    local pshape = {1, Cn} -- (1, C, 1, ...) broadcasts over N and the spatial dims
    for _ = 3, x:dim() do pshape[#pshape + 1] = 1 end
    if a.weight ~= nil then y = y * a.weight:reshape(pshape) end
    if a.bias ~= nil then y = y + a.bias:reshape(pshape) end
    return y
end

-- machine epsilon of rms_norm's compute dtype (PyTorch's opmath type)
local function default_eps(dtype)
    return dtype == 'float64' and 2.0 ^ -52 or 2.0 ^ -23
end

function Lay.rms_norm(...)
    local fname = 'rms_norm'
    local a = Args.parse(fname, {{'input', 'ftensor'}, {'normalized_shape', 'any-shape'},
                                 {'weight', 'ftensor?'}, {'eps', 'number?'}}, ...)
    local x = a.input
    local shape = a.normalized_shape
    local nd, xs = #shape, x:shape()
    local ok = nd >= 1 and nd <= #xs
    for i = 1, nd do ok = ok and xs[#xs - nd + i] == shape[i] end
    if not ok then
        error(string.format('%s: normalized_shape [%s] must match the trailing dimensions of '
                            .. 'input %s', fname, table.concat(shape, ','), shape_str(x)), 2)
    end
    if a.weight ~= nil then
        local ws, same = a.weight:shape(), a.weight:dim() == nd
        for i = 1, nd do same = same and ws[i] == shape[i] end
        if not same then
            error(string.format('%s: weight must have shape [%s], got %s', fname,
                                table.concat(shape, ','), shape_str(a.weight)), 2)
        end
    end
    local in_dtype = x.dtype
    local low = in_dtype == 'float16' or in_dtype == 'bfloat16'
    local xc = low and x:float() or x
    local eps = a.eps or default_eps(xc.dtype)
    -- mean of squares over the trailing nd dims, kept as size-1 dims so it broadcasts
    local lead, P = {}, 1
    for i = 1, #xs - nd do lead[i] = xs[i] end
    for i = 1, nd do P = P * shape[i] end
    local flat = {table.unpack(lead)}
    flat[#flat + 1] = P
    local kept = {table.unpack(lead)}
    for _ = 1, nd do kept[#kept + 1] = 1 end
    local ms = (xc * xc):reshape(flat):mean(#flat - 1, true):reshape(kept)
    local y = xc * (ms + eps):rsqrt()
    if low then y = y:to(in_dtype) end
    if a.weight ~= nil then y = y * a.weight end
    return y
end

-- an int or a one-element list -> the int
local function single(fname, what, v)
    if type(v) == 'table' then
        if #v ~= 1 then
            error(string.format('%s: %s must be an integer or a list of one, got %d values',
                                fname, what, #v), 4)
        end
        v = v[1]
    end
    if math.type(v) ~= 'integer' and not (type(v) == 'number' and v == math.floor(v)) then
        error(string.format('%s: %s must be an integer, got %s', fname, what, tostring(v)), 4)
    end
    return math.tointeger(v)
end

function Lay.conv1d(...)
    local fname = 'conv1d'
    local a = Args.parse(fname, {{'input', 'ftensor'}, {'weight', 'ftensor'}, {'bias', 'ftensor?'},
                                 {'stride', 'any', 1}, {'padding', 'any', 0},
                                 {'dilation', 'any', 1}, {'groups', 'int', 1}}, ...)
    local x, w = a.input, a.weight
    if x:dim() ~= 2 and x:dim() ~= 3 then
        error(fname .. ': expected a 2-D (C, L) or 3-D (N, C, L) input, got ' .. shape_str(x), 2)
    end
    if w:dim() ~= 3 then
        error(fname .. ': expected a 3-D weight (out, in/groups, k), got ' .. shape_str(w), 2)
    end
    local cin = x:size(-2)
    if a.groups < 1 or cin ~= w:size(1) * a.groups then
        error(string.format('%s: input %s has %d channels, but weight %s with groups=%d expects '
                            .. '%d', fname, shape_str(x), cin, shape_str(w), a.groups,
                            w:size(1) * a.groups), 2)
    end
    local stride = single(fname, 'stride', a.stride)
    local dilation = single(fname, 'dilation', a.dilation)
    local padding = a.padding
    if padding == 'valid' then
        padding = 0
    elseif padding == 'same' then
        -- PyTorch's rule: total dilation * (k - 1), the odd one on the right; conv2d pads
        -- symmetrically, so an uneven total pads the input first
        if stride ~= 1 then
            error(fname .. ": padding='same' is not supported for strided convolutions", 2)
        end
        local total = dilation * (w:size(2) - 1)
        padding = total // 2
        if total % 2 == 1 then x = Shape.pad(x, {0, 1}) end
    else
        padding = single(fname, 'padding', padding)
    end
    local y = C.conv2d(x:unsqueeze(-2), w:unsqueeze(-2), a.bias,
                       {stride = {1, stride}, padding = {0, padding}, dilation = {1, dilation},
                        groups = a.groups})
    return y:squeeze(-2)
end

return Lay
