-- lua/ddplua/data/datasets/FashionMNIST.lua: Zalando's Fashion-MNIST (same files as MNIST).
-- defines: FashionMNIST([{root, train=true, transform, target_transform}]) and its class names.
--
-- root defaults to $FASHION_MNIST_DIR, then Debian's dataset-fashion-mnist package folder.
local MNIST = require 'ddplua.data.datasets.MNIST'

local FashionMNIST = MNIST:extend('FashionMNIST')

FashionMNIST.env_var = 'FASHION_MNIST_DIR'
FashionMNIST.default_root = '/usr/share/datasets/fashion-mnist'
FashionMNIST.install_hint = 'install the Debian package dataset-fashion-mnist or set FASHION_MNIST_DIR'
-- label -> name, indexed by label + 1 (labels are 0-based)
FashionMNIST.classes = {
    'T-shirt/top', 'Trouser', 'Pullover', 'Dress', 'Coat',
    'Sandal', 'Shirt', 'Sneaker', 'Bag', 'Ankle boot',
}

return FashionMNIST
