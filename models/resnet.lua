-- models/resnet.lua: a small pre-activation ResNet with BatchNorm for 28x28 or 32x32 images.
-- defines: a constructor resnet([opts]) -> nn.Module; opts: in_channels (1), num_classes (10),
--          widths ({16, 32, 64}: channels of each stage), blocks (2: residual blocks per stage).
--
-- He et al., "Identity Mappings in Deep Residual Networks" (2016): each block is
-- BN-ReLU-Conv3x3-BN-ReLU-Conv3x3 added to an identity shortcut, so the shortcut path carries no
-- normalisation or nonlinearity. The first block of every stage after the first halves the
-- resolution with stride 2 (28 -> 14 -> 7, or 32 -> 16 -> 8) and its shortcut becomes a 1x1
-- convolution applied to the pre-activated input, as in the paper's code. A final BN-ReLU,
-- global average pooling and a Linear give the logits, so any input size works.
-- The defaults give 6 blocks, 14 weighted layers (ResNet-14), about 0.17 M parameters.
local nn = require('ddplua').nn

local PreActBlock = nn.Module:extend('PreActBlock')

-- in_planes -> planes channels; stride 1 or 2
function PreActBlock:init(in_planes, planes, stride)
    self.bn1 = nn.BatchNorm2d(in_planes)
    self.conv1 = nn.Conv2d(in_planes, planes, 3, { stride = stride, padding = 1, bias = false })
    self.bn2 = nn.BatchNorm2d(planes)
    self.conv2 = nn.Conv2d(planes, planes, 3, { padding = 1, bias = false })
    if stride ~= 1 or in_planes ~= planes then
        self.shortcut = nn.Conv2d(in_planes, planes, 1, { stride = stride, bias = false })
    end
end

-- x (N, in_planes, H, W) -> (N, planes, H/stride, W/stride)
function PreActBlock:forward(x)
    local out = self.bn1(x):relu()
    -- the projection shortcut sees the normalised input; the identity shortcut the raw one
    local shortcut = self.shortcut and self.shortcut(out) or x
    out = self.conv1(out)
    out = self.conv2(self.bn2(out):relu())
    return out + shortcut
end

local ResNet = nn.Module:extend('PreActResNet')

function ResNet:init(opts)
    opts = opts or {}
    local widths = opts.widths or { 16, 32, 64 }
    local blocks = opts.blocks or 2
    if #widths == 0 or blocks < 1 then
        error('resnet: need at least one stage (widths) and one block per stage', 3)
    end
    self.stem = nn.Conv2d(opts.in_channels or 1, widths[1], 3, { padding = 1, bias = false })
    local layers = {}
    local in_planes = widths[1]
    for s, planes in ipairs(widths) do
        for b = 1, blocks do
            local stride = (s > 1 and b == 1) and 2 or 1
            layers[#layers + 1] = PreActBlock(in_planes, planes, stride)
            in_planes = planes
        end
    end
    self.layers = nn.Sequential(table.unpack(layers))
    self.bn = nn.BatchNorm2d(in_planes)
    self.pool = nn.AdaptiveAvgPool2d(1)
    self.fc = nn.Linear(in_planes, opts.num_classes or 10)
end

-- x (N, in_channels, H, W) -> logits (N, num_classes)
function ResNet:forward(x)
    local out = self.layers(self.stem(x))
    out = self.pool(self.bn(out):relu())
    return self.fc(out:flatten(1))
end

return function(opts) return ResNet(opts) end
