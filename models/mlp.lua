-- models/mlp.lua: the reference multilayer perceptron for 28x28 images, 784-256-256-10 with ReLU.
-- defines: a constructor mlp([opts]) -> nn.Sequential; opts: in_features (784),
--          hidden ({256, 256}, one Linear+ReLU per entry), num_classes (10).
--
-- The same layers as shared/reference/torch/train_ref.py's "mlp", with PyTorch's default Linear
-- initialisation, so accuracy and speed compare one to one with the PyTorch reference. Input is
-- (N, 1, 28, 28) or (N, 784): Flatten makes both (N, 784). Output: logits (N, num_classes).
local nn = require('ddplua').nn

return function(opts)
    opts = opts or {}
    local in_features = opts.in_features or 784
    local hidden = opts.hidden or { 256, 256 }
    local num_classes = opts.num_classes or 10

    local layers = { nn.Flatten() }
    local width = in_features
    for _, h in ipairs(hidden) do
        layers[#layers + 1] = nn.Linear(width, h)
        layers[#layers + 1] = nn.ReLU()
        width = h
    end
    layers[#layers + 1] = nn.Linear(width, num_classes)
    return nn.Sequential(table.unpack(layers))
end
