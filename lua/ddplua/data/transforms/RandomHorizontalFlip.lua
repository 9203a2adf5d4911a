-- lua/ddplua/data/transforms/RandomHorizontalFlip.lua: mirrors an image left to right at random.
-- defines: RandomHorizontalFlip([p=0.5]): flips img (..., H, W) when transform_rng.random() < p.
--
-- One draw per call, whatever p is (torchvision draws torch.rand(1) every time too), from
-- data.transform_rng, never from ddpl's generator: see transform_rng.lua.
local F = require 'ddplua.data.transforms.image_ops'
local rng = require 'ddplua.data.transform_rng'
local Transform = require 'ddplua.data.transforms.Transform'

local RandomHorizontalFlip = Transform:extend('RandomHorizontalFlip')

function RandomHorizontalFlip:init(p)
    if p == nil then p = 0.5 end
    if type(p) ~= 'number' or not (p >= 0 and p <= 1) then
        error('RandomHorizontalFlip: p must be a probability in [0, 1], got ' .. tostring(p), 3)
    end
    self.p = p
end

function RandomHorizontalFlip:forward(img)
    F.check_image('RandomHorizontalFlip', img)
    if rng.random() < self.p then return F.hflip(img) end
    return img
end

function RandomHorizontalFlip:__tostring()
    return string.format('RandomHorizontalFlip(p=%s)', tostring(self.p))
end

return RandomHorizontalFlip
