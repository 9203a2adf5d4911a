-- lua/ddplua/data/transforms/RandomCrop.lua: a window of fixed size at a random place.
-- defines: RandomCrop(size [, {padding, pad_if_needed=false, fill=0, padding_mode='constant'}]);
--          RandomCrop.get_params(img, {th, tw}) -> top, left, th, tw.
--
-- torchvision's semantics: size is n (square) or {h, w}; padding (any form of
-- functional.parse_padding: n, {left/right, top/bottom}, {left, top, right, bottom}) is added
-- first; then, with pad_if_needed, a narrower image is padded by tw - w on the left AND the
-- right, a shorter one by th - h at the top and the bottom (torchvision's quirk, kept); then the
-- window's top i = randint(0, h - th + 1) is drawn before its left j = randint(0, w - tw + 1),
-- both from data.transform_rng (see transform_rng.lua). An image exactly the window's size is
-- returned without a draw. The result is a view of the (padded) image.
local F = require 'ddplua.data.transforms.image_ops'
local rng = require 'ddplua.data.transform_rng'
local Transform = require 'ddplua.data.transforms.Transform'

local RandomCrop = Transform:extend('RandomCrop')

local OPTIONS = { padding = true, pad_if_needed = true, fill = true, padding_mode = true }

local function parse_size(size)
    local list = math.type(size) == 'integer' and { size, size } or size
    if type(list) == 'table' and #list == 1 then list = { list[1], list[1] } end
    local ok = type(list) == 'table' and #list == 2
    for k = 1, 2 do ok = ok and math.type(list[k]) == 'integer' and list[k] > 0 end
    if not ok then
        local got = tostring(size)
        if type(size) == 'table' then
            local parts = {}
            for k, v in ipairs(size) do parts[k] = tostring(v) end
            got = ('a list of %d {%s}'):format(#size, table.concat(parts, ', '))
        end
        error('RandomCrop: size must be a positive integer or a list {h, w} of two, got ' .. got, 4)
    end
    return { list[1], list[2] }
end

function RandomCrop:init(size, opts)
    opts = opts or {}
    if type(opts) ~= 'table' then
        error('RandomCrop: expected an options table as argument 2, got ' .. type(opts), 3)
    end
    for k in pairs(opts) do
        if not OPTIONS[k] then error("RandomCrop: unknown option '" .. tostring(k) .. "'", 3) end
    end
    self.size = parse_size(size)
    if opts.padding ~= nil then
        self.padding = F.parse_padding('RandomCrop', opts.padding)
    end
    self.pad_if_needed = opts.pad_if_needed == true
    self.fill = opts.fill or 0
    if type(self.fill) ~= 'number' then
        error('RandomCrop: fill must be a number, got ' .. type(self.fill), 3)
    end
    self.padding_mode = opts.padding_mode or 'constant'
    F.check_padding_mode('RandomCrop', self.padding_mode, 3)
end

-- The window (top, left, th, tw) for img (..., H, W), drawn from transform_rng: top first.
function RandomCrop.get_params(img, output_size)
    local hd, wd = F.check_image('RandomCrop', img)
    local h, w = img:size(hd), img:size(wd)
    local th, tw = output_size[1], output_size[2]
    if h < th or w < tw then
        error(string.format('RandomCrop: required crop size (%d, %d) is larger than the input image '
            .. 'size (%d, %d)', th, tw, h, w), 3)
    end
    if h == th and w == tw then return 0, 0, h, w end
    local i = rng.randint(0, h - th + 1)
    local j = rng.randint(0, w - tw + 1)
    return i, j, th, tw
end

function RandomCrop:forward(img)
    local hd, wd = F.check_image('RandomCrop', img)
    local pad = function(x, p) return F.pad(x, p, self.fill, self.padding_mode) end
    if self.padding then img = pad(img, self.padding) end
    local th, tw = self.size[1], self.size[2]
    if self.pad_if_needed and img:size(wd) < tw then img = pad(img, { tw - img:size(wd), 0 }) end
    if self.pad_if_needed and img:size(hd) < th then img = pad(img, { 0, th - img:size(hd) }) end
    return F.crop(img, RandomCrop.get_params(img, self.size))
end

function RandomCrop:__tostring()
    local s = string.format('RandomCrop(size={%d, %d}', self.size[1], self.size[2])
    if self.padding then s = s .. ', padding={' .. table.concat(self.padding, ', ') .. '}' end
    if self.pad_if_needed then s = s .. ', pad_if_needed=true' end
    if self.fill ~= 0 then s = s .. ', fill=' .. tostring(self.fill) end
    if self.padding_mode ~= 'constant' then s = s .. ", padding_mode='" .. self.padding_mode .. "'" end
    return s .. ')'
end

return RandomCrop
