-- lua/ddplua/data/transforms/init.lua: the data transforms (ddpl.data.transforms), as
-- torchvision.transforms for tensor images.
-- defines: Compose, Normalize, RandomCrop, RandomHorizontalFlip, Lambda, Transform (the base
--          class), functional (pad, crop, hflip, normalize); each loaded on first use.
--
-- Transforms act on one item, a tensor (..., C, H, W) (a batch given whole gets one crop window
-- and one flip for all its images, as in torchvision). Random ones draw from data.transform_rng,
-- which the DataLoader reseeds per batch, so augmentation does not depend on num_workers.
-- docs/internals/transforms.md records the decisions.
local names = {
    Compose = 'ddplua.data.transforms.Compose',
    Normalize = 'ddplua.data.transforms.Normalize',
    RandomCrop = 'ddplua.data.transforms.RandomCrop',
    RandomHorizontalFlip = 'ddplua.data.transforms.RandomHorizontalFlip',
    Lambda = 'ddplua.data.transforms.Lambda',
    Transform = 'ddplua.data.transforms.Transform',
    functional = 'ddplua.data.transforms.image_ops', -- torchvision's name for it
}

return require('ddplua.lazy')(names)
