-- lua/ddplua/data/datasets/init.lua: the ready-made data sets (ddpl.data.datasets).
-- defines: MNIST, FashionMNIST, CIFAR10, VisionDataset (their base class); each loaded on first use.
local names = {
    MNIST = 'ddplua.data.datasets.MNIST',
    FashionMNIST = 'ddplua.data.datasets.FashionMNIST',
    CIFAR10 = 'ddplua.data.datasets.CIFAR10',
    VisionDataset = 'ddplua.data.datasets.VisionDataset',
}

return require('ddplua.lazy')(names)
