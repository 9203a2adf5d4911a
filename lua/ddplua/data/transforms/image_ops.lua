-- lua/ddplua/data/transforms/image_ops.lua: the per-image operations behind the transforms,
-- public as data.transforms.functional (torchvision.transforms.functional for tensors; the file
-- is not named functional.lua, which nn has); each a few native ops, never a Lua loop over
-- pixels.
-- defines: functional.check_image(who, img) -> dims of H and W; functional.parse_padding(who, p)
--          -> {left, top, right, bottom}; functional.check_padding_mode(who, mode, level);
--          functional.pad(img, padding [, fill [, mode]]);
--          functional.crop(img, top, left, height, width); functional.hflip(img);
--          functional.normalize(img, mean, std [, inplace]); functional.normalize_params(img,
--          mean, std) -> its checked (C, 1, 1) mean and std tensors;
--          functional.number_list(who, what, v, level) (a number or list of numbers, checked).
--
-- Images are tensors (..., C, H, W) as torchvision's tensor transforms take them: the last two
-- dimensions are height and width, so a batch (N, C, H, W) is transformed as one image (one
-- crop window, one flip decision for all of it), exactly as torchvision does.
local ddpl = require 'ddplua'

local functional = {}

local PAD_MODES = { constant = true, edge = true, reflect = true, symmetric = true }

-- Raises "<who>: padding_mode must be ..." unless mode is one of the four.
function functional.check_padding_mode(who, mode, level)
    if not PAD_MODES[mode] then
        error(string.format("%s: padding_mode must be 'constant', 'edge', 'reflect' or "
            .. "'symmetric', got %s", who, tostring(mode)), level + 1)
    end
end

local function shape_string(t) return '[' .. table.concat(t:shape(), ', ') .. ']' end

-- img must be a tensor of at least 2 dimensions (..., H, W); returns the 0-based dims of H and W.
function functional.check_image(who, img)
    if not ddpl.is_tensor(img) then
        error(string.format('%s: expected an image tensor (..., C, H, W), got %s', who, type(img)), 3)
    end
    local nd = img:dim()
    if nd < 2 then
        error(string.format('%s: expected an image tensor (..., H, W) of at least 2 dimensions, '
            .. 'got shape %s', who, shape_string(img)), 3)
    end
    return nd - 2, nd - 1
end

local function is_count(v) return math.type(v) == 'integer' and v >= 0 end

-- torchvision's padding forms: n (every side), {n}, {left/right, top/bottom},
-- {left, top, right, bottom}; non-negative integers.
function functional.parse_padding(who, p)
    local list
    if math.type(p) == 'integer' then
        list = { p }
    elseif type(p) == 'table' and not ddpl.is_tensor(p) then
        list = p
    else
        error(string.format('%s: padding must be an integer or a list of 1, 2 or 4 integers, got %s',
            who, type(p) == 'number' and tostring(p) or type(p)), 3)
    end
    local n = #list
    if n ~= 1 and n ~= 2 and n ~= 4 then
        error(string.format('%s: padding must be an integer or a list of 1, 2 or 4 integers, '
            .. 'got a list of %d', who, n), 3)
    end
    for k = 1, n do
        if not is_count(list[k]) then
            error(string.format('%s: padding must hold non-negative integers, got %s at position %d',
                who, tostring(list[k]), k), 3)
        end
    end
    if n == 1 then return { list[1], list[1], list[1], list[1] } end
    if n == 2 then return { list[1], list[2], list[1], list[2] } end
    return { list[1], list[2], list[3], list[4] }
end

-- The source index of each of the before + n + after output positions of a padded dimension of
-- size n, as an int64 tensor on device, for the modes that repeat input values (numpy's names,
-- as torchvision's):
--   edge       a a a | a b c d | d d d
--   reflect    d c b | a b c d | c b a   (the edge not repeated: before, after < n)
--   symmetric  c b a | a b c d | d c b   (the edge repeated: before, after <= n)
local function source_index(mode, before, n, after, device)
    local idx = {}
    for k = -before, n + after - 1 do
        local s = k
        if mode == 'edge' then
            s = math.min(math.max(k, 0), n - 1)
        elseif mode == 'reflect' then
            if k < 0 then s = -k elseif k >= n then s = 2 * (n - 1) - k end
        else -- symmetric
            if k < 0 then s = -k - 1 elseif k >= n then s = 2 * n - 1 - k end
        end
        idx[#idx + 1] = s
    end
    return ddpl.tensor(idx, { dtype = 'int64', device = device })
end

local function check_mode_fits(mode, before, n, after, dim_name)
    local limit = mode == 'reflect' and n - 1 or n -- symmetric repeats the edge: n fits
    if (mode == 'reflect' or mode == 'symmetric') and (before > limit or after > limit) then
        error(string.format("pad: padding (%d, %d) of the %s (%d) is too large for mode '%s' "
            .. '(at most %d)', before, after, dim_name, n, mode, limit), 3)
    end
end

-- img (..., H, W) -> (..., H + top + bottom, W + left + right). padding: any form of
-- parse_padding; fill: the value of constant padding (0); mode: 'constant' (default), 'edge',
-- 'reflect' or 'symmetric'. Constant padding is one full() and one copy_ into a view; the
-- other modes are one index_select per padded dimension.
function functional.pad(img, padding, fill, mode)
    local hd, wd = functional.check_image('pad', img)
    local l, t, r, b = table.unpack(functional.parse_padding('pad', padding))
    fill, mode = fill or 0, mode or 'constant'
    if type(fill) ~= 'number' then
        error('pad: fill must be a number, got ' .. type(fill), 2)
    end
    functional.check_padding_mode('pad', mode, 2)
    local h, w = img:size(hd), img:size(wd)
    if mode == 'constant' then
        local shape = img:shape()
        shape[hd + 1], shape[wd + 1] = h + t + b, w + l + r
        local out = ddpl.full(shape, fill, { dtype = img.dtype, device = img.device })
        out:narrow(hd, t, h):narrow(wd, l, w):copy_(img)
        return out
    end
    check_mode_fits(mode, l, w, r, 'width')
    check_mode_fits(mode, t, h, b, 'height')
    local out = img
    if l > 0 or r > 0 then out = out:index_select(wd, source_index(mode, l, w, r, img.device)) end
    if t > 0 or b > 0 then out = out:index_select(hd, source_index(mode, t, h, b, img.device)) end
    return out
end

-- The window [top, top + height) x [left, left + width) of img (..., H, W): a view, as
-- torchvision's crop of a tensor is. The window must lie inside the image.
function functional.crop(img, top, left, height, width)
    local hd, wd = functional.check_image('crop', img)
    local h, w = img:size(hd), img:size(wd)
    for _, v in ipairs({ top, left, height, width }) do
        if math.type(v) ~= 'integer' then
            error('crop: top, left, height and width must be integers, got ' .. tostring(v), 2)
        end
    end
    if top < 0 or left < 0 or height < 1 or width < 1 or top + height > h or left + width > w then
        error(string.format('crop: window (top %d, left %d, height %d, width %d) does not fit in an '
            .. 'image of height %d and width %d', top, left, height, width, h, w), 2)
    end
    return img:narrow(hd, top, height):narrow(wd, left, width)
end

-- img (..., H, W) mirrored left to right: one index_select with the reversed column index.
function functional.hflip(img)
    local _, wd = functional.check_image('hflip', img)
    local w = img:size(wd)
    if w == 0 then return img:clone() end
    return img:index_select(wd, ddpl.arange(w - 1, -1, -1, { device = img.device }))
end

local function dtype_name(t) return tostring(t.dtype):match('(%w+)$') end
local function is_float(t) return dtype_name(t):match('float') ~= nil end

-- v: a number or a non-empty list of numbers -> a fresh list of them; errors name who and what
-- and are raised at `level` (as error's).
function functional.number_list(who, what, v, level)
    local list = type(v) == 'number' and { v } or v
    if type(list) ~= 'table' or ddpl.is_tensor(list) or #list == 0 then
        error(string.format('%s: %s must be a number or a non-empty list of numbers, got %s', who,
            what, type(v)), level + 1)
    end
    for k = 1, #list do
        if type(list[k]) ~= 'number' then
            error(string.format('%s: %s must hold numbers, got %s at position %d', who, what,
                type(list[k]), k), level + 1)
        end
    end
    return table.move(list, 1, #list, 1, {})
end

-- mean or std as a (C, 1, 1) tensor of dtype, C being 1 or the image's channel count c.
local function channel_values(name, v, c, dtype, device)
    local list = functional.number_list('normalize', name, v, 4)
    if #list ~= 1 and #list ~= c then
        error(string.format('normalize: %s has %d values but the image has %d channels', name,
            #list, c), 3)
    end
    return ddpl.tensor(list, { dtype = dtype, device = device }):view(#list, 1, 1)
end

-- Checks img (..., C, H, W), a floating tensor, and returns mean and std (numbers or lists of 1
-- or C numbers) as (C or 1, 1, 1) tensors of its dtype and device, for normalize.
function functional.normalize_params(img, mean, std)
    if not ddpl.is_tensor(img) then
        error('normalize: expected an image tensor (..., C, H, W), got ' .. type(img), 3)
    end
    if not is_float(img) then
        error('normalize: expected a floating point image tensor, got ' .. dtype_name(img)
            .. ' (convert it with :float() first)', 3)
    end
    if img:dim() < 3 then
        error('normalize: expected an image tensor (..., C, H, W) of at least 3 dimensions, got shape '
            .. shape_string(img), 3)
    end
    local c = img:size(img:dim() - 3)
    local m = channel_values('mean', mean, c, img.dtype, img.device)
    local s = channel_values('std', std, c, img.dtype, img.device)
    if s:eq(0):sum():item() > 0 then
        error(string.format('normalize: std evaluated to zero after conversion to %s, leading to '
            .. 'division by zero', dtype_name(img)), 3)
    end
    return m, s
end

-- (img - mean[c]) / std[c] for each channel c of img (..., C, H, W), a floating tensor; mean and
-- std are numbers or lists of 1 or C numbers. inplace: overwrite img instead of a new tensor.
function functional.normalize(img, mean, std, inplace)
    local m, s = functional.normalize_params(img, mean, std)
    if inplace then return img:sub_(m):div_(s) end
    return (img - m) / s
end

return functional
