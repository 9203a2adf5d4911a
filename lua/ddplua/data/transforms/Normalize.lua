-- lua/ddplua/data/transforms/Normalize.lua: per-channel standardisation of a float image.
-- defines: Normalize(mean, std [, {inplace=false}]): img (..., C, H, W) -> (img - mean[c]) / std[c].
--
-- mean and std are numbers or lists of 1 or C numbers (torchvision takes sequences; a number is
-- every channel's). A std of zero is refused here and again after conversion to the image's
-- dtype (a tiny std can round to zero in float32), as torchvision does.
local F = require 'ddplua.data.transforms.functional'
local Transform = require 'ddplua.data.transforms.Transform'

local Normalize = Transform:extend('Normalize')

function Normalize:init(mean, std, opts)
    opts = opts or {}
    if type(opts) ~= 'table' then error('Normalize: expected an options table, got ' .. type(opts), 3) end
    for k in pairs(opts) do
        if k ~= 'inplace' then error("Normalize: unknown option '" .. tostring(k) .. "'", 3) end
    end
    self.mean = F.number_list('Normalize', 'mean', mean, 3)
    self.std = F.number_list('Normalize', 'std', std, 3)
    for _, s in ipairs(self.std) do
        if s == 0 then error('Normalize: std must not be zero (division by zero)', 3) end
    end
    self.inplace = opts.inplace == true
end

function Normalize:forward(img)
    return F.normalize(img, self.mean, self.std, self.inplace)
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
