-- lua/ddplua/data/datasets/init.lua: the ready-made data sets (ddpl.data.datasets).
-- defines: MNIST, FashionMNIST (each loaded on first use).
local names = {
    MNIST = 'ddplua.data.datasets.MNIST',
    FashionMNIST = 'ddplua.data.datasets.FashionMNIST',
}

return setmetatable({}, {
    __index = function(t, key)
        local name = names[key]
        if not name then return nil end
        local mod = require(name)
        rawset(t, key, mod)
        return mod
    end,
})
