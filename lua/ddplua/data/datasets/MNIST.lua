-- lua/ddplua/data/datasets/MNIST.lua: the MNIST digits read from their IDX files.
-- defines: MNIST([{root, train=true, transform, target_transform}]); fields data (uint8
--          (N,28,28)), targets (int64 (N)); get(i) -> float32 [1,28,28] image in [0,1], int64
--          label; get_batch(idx) for the DataLoader's native fast path.
--
-- root: the folder holding {train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz]; it defaults to
-- $MNIST_DIR, then /usr/share/datasets/mnist. FashionMNIST (same format) extends this class.
-- Only the uint8 pixels are kept (47 MB for 60000 images): a batch is gathered as uint8 with one
-- index_select, then converted and scaled, which costs little next to a training step and keeps
-- each DDP worker's memory a quarter of a float32 copy's.
local ddpl = require 'ddplua'
local Dataset = require 'ddplua.data.Dataset'

local MNIST = Dataset:extend('MNIST')

-- Overridden by subclasses: where to look and what to tell a user whose files are missing.
MNIST.env_var = 'MNIST_DIR'
MNIST.default_root = '/usr/share/datasets/mnist'
MNIST.install_hint = 'download MNIST into it or set MNIST_DIR'

local OPTIONS = { root = true, train = true, transform = true, target_transform = true }

local function exists(path)
    local f = io.open(path, 'rb')
    if f then f:close() end
    return f ~= nil
end

-- root/name.gz, else root/name (as unpacked by hand)
function MNIST:find_file(root, name)
    local who = getmetatable(self).__name
    for _, path in ipairs({ root .. '/' .. name .. '.gz', root .. '/' .. name }) do
        if exists(path) then return path end
    end
    error(string.format('%s: %s/%s.gz not found (nor %s without .gz); %s', who, root, name, name,
        self.install_hint), 0)
end

function MNIST:read(path)
    local ok, t = pcall(ddpl.read_idx, path)
    if not ok then
        error(getmetatable(self).__name .. ': ' .. tostring(t):gsub('^read_idx: ', ''), 0)
    end
    return t
end

function MNIST:init(opts)
    opts = opts or {}
    local who = getmetatable(self).__name
    if type(opts) ~= 'table' then error(who .. ': expected an options table, got ' .. type(opts), 3) end
    for k in pairs(opts) do
        if not OPTIONS[k] then error(who .. ": unknown option '" .. tostring(k) .. "'", 3) end
    end
    for _, k in ipairs({ 'transform', 'target_transform' }) do
        if opts[k] ~= nil and type(opts[k]) ~= 'function' then
            error(string.format('%s: %s must be a function, got %s', who, k, type(opts[k])), 3)
        end
    end
    local root = opts.root or os.getenv(self.env_var)
    if root == nil or root == '' then root = self.default_root end
    local train = opts.train == nil or opts.train
    local split = train and 'train' or 't10k'
    self.root, self.train = root, train
    self.transform, self.target_transform = opts.transform, opts.target_transform

    local images_path = self:find_file(root, split .. '-images-idx3-ubyte')
    local labels_path = self:find_file(root, split .. '-labels-idx1-ubyte')
    local images = self:read(images_path)
    local labels = self:read(labels_path)
    if images:dim() ~= 3 or tostring(images.dtype):match('uint8$') == nil then
        error(string.format('%s: %s: expected uint8 images of rank 3 (N,H,W), got %s of rank %d', who,
            images_path, tostring(images.dtype), images:dim()), 3)
    end
    if labels:dim() ~= 1 then
        error(string.format('%s: %s: expected labels of rank 1 (N), got rank %d', who, labels_path,
            labels:dim()), 3)
    end
    if labels:size(0) ~= images:size(0) then
        error(string.format('%s: %s holds %d images but %s holds %d labels', who, images_path,
            images:size(0), labels_path, labels:size(0)), 3)
    end
    self.data = images            -- uint8 (N, H, W), as torchvision's .data
    self.targets = labels:long()  -- int64 (N)
end

function MNIST:len()
    return self.data:size(0)
end

-- uint8 (..., H, W) -> float32 (..., 1, H, W) in [0, 1]
local function to_image(pixels)
    return (pixels:float() / 255):unsqueeze(-3)
end

function MNIST:get(i)
    i = Dataset.check_index(getmetatable(self).__name, i, self:len())
    local img, target = to_image(self.data:select(0, i)), self.targets:select(0, i)
    if self.transform then img = self.transform(img) end
    if self.target_transform then target = self.target_transform(target) end
    return img, target
end

-- A whole batch natively: float32 (B,1,H,W) images and int64 (B) labels. Transforms apply to
-- single items (as torchvision's do), so with one the DataLoader goes item by item instead.
function MNIST:get_batch(idx)
    if self.transform or self.target_transform then
        local imgs, targets = {}, {}
        for j, i in ipairs(idx:tolist()) do imgs[j], targets[j] = self:get(i) end
        local collate = require('ddplua.data.DataLoader').default_collate
        local items = {}
        for j = 1, #imgs do items[j] = { imgs[j], targets[j], n = 2 } end
        return collate(items)
    end
    return to_image(self.data:index_select(0, idx)), self.targets:index_select(0, idx)
end

function MNIST:__tostring()
    return string.format('%s(split=%s, len=%d, root=%s)', getmetatable(self).__name,
        self.train and 'train' or 'test', self:len(), self.root)
end

return MNIST
