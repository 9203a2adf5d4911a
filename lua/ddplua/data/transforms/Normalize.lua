-- lua/ddplua/data/transforms/Normalize.lua: per-channel standardisation of a float image.
-- defines: Normalize(mean, std [, {inplace=false}]): img (..., C, H, W) -> (img - mean[c]) / std[c].
--
-- mean and std are numbers or lists of 1 or C numbers (torchvision takes sequences; a number is
-- every channel's). A std of zero is refused here and again after conversion to the image's
-- dtype (a tiny std can round to zero in float32), as torchvision does.
local ddpl = require 'ddplua'
local F = require 'ddplua.data.transforms.image_ops'
local Transform = require 'ddplua.data.transforms.Transform'

local Normalize = Transform:extend('Normalize')

function Normalize:init(mean, std, opts)
    opts = opts or {}
    if type(opts) ~= 'table' then
        error('Normalize: expected an options table, got ' .. type(opts), 3)
    end
    for k in pairs(opts) do
        if k ~= 'inplace' then error("Normalize: unknown option '" .. tostring(k) .. "'", 3) end
    end
    self.mean = F.number_list('Normalize', 'mean', mean, 3)
    self.std = F.number_list('Normalize', 'std', std, 3)
    for _, s in ipairs(self.std) do
        if s == 0 then error('Normalize: std must not be zero (division by zero)', 3) end
    end
    self.inplace = opts.inplace == true
    self.params = {}
end

-- The mean and std tensors are made (and checked) once per dtype, device and channel count and
-- kept: rebuilding them for every item cost as much as the arithmetic.
function Normalize:forward(img)
    local key = ddpl.is_tensor(img) and img:dim() >= 3
        and ('%s %s %d'):format(tostring(img.dtype), tostring(img.device), img:size(img:dim() - 3))
    local p = key and self.params[key]
    if not p then
        p = { F.normalize_params(img, self.mean, self.std) }
        self.params = { [key] = p } -- one entry: a data set's images all look alike
    end
    if self.inplace then return img:sub_(p[1]):div_(p[2]) end
    return (img - p[1]) / p[2]
end

local function list_string(l)
    local s = {}
    for k, v in ipairs(l) do s[k] = tostring(v) end
    return '{' .. table.concat(s, ', ') .. '}'
end

function Normalize:__tostring()
    return string.format('Normalize(mean=%s, std=%s)', list_string(self.mean), list_string(self.std))
end

return Normalize
