-- models/lenet.lua: the reference convolutional network ("cnn") for 1x28x28 images.
-- defines: a constructor lenet([opts]) -> nn.Sequential; opts: in_channels (1), num_classes (10),
--          image_size (28; must be divisible by 4).
--
-- Conv(1,32,3,p1)-ReLU-MaxPool2-Conv(32,64,3,p1)-ReLU-MaxPool2-Linear(64*7*7=3136,128)-ReLU-
-- Linear(128,10): the "cnn" of shared/reference/torch/train_ref.py, a LeNet-style network with
-- "same" padding so only the two poolings shrink the image (28 -> 14 -> 7). PyTorch's default
-- initialisation comes with the layers. Input (N, C, H, W), output logits (N, num_classes).
local nn = require('ddplua').nn

return function(opts)
    opts = opts or {}
    local in_channels = opts.in_channels or 1
    local num_classes = opts.num_classes or 10
    local size = opts.image_size or 28
    if size % 4 ~= 0 then
        error(('lenet: image_size %d is not divisible by 4 (two 2x2 poolings)'):format(size), 2)
    end
    local flat = 64 * (size // 4) * (size // 4)
    return nn.Sequential(
        nn.Conv2d(in_channels, 32, 3, { padding = 1 }), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, { padding = 1 }), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(flat, 128), nn.ReLU(),
        nn.Linear(128, num_classes))
end
