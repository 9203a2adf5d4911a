-- lua/ddplua/data/datasets/MNIST.lua: the MNIST digits read from their IDX files.
-- defines: MNIST([{root, train=true, transform, target_transform}]); fields data (uint8
--          (N,28,28)), targets (int64 (N)); get(i) -> float32 [1,28,28] image in [0,1], int64
--          label; get_batch(idx) for the DataLoader's native fast path (both from VisionDataset).
--
-- root: the folder holding {train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz]; it defaults to
-- $MNIST_DIR, then /usr/share/datasets/mnist. FashionMNIST (same format) extends this class.
-- Only the uint8 pixels are kept (47 MB for 60000 images): a batch is gathered as uint8 with one
-- index_select, then converted and scaled, which costs little next to a training step and keeps
-- each DDP worker's memory a quarter of a float32 copy's.
local ddpl = require 'ddplua'
local VisionDataset = require 'ddplua.data.datasets.VisionDataset'

local MNIST = VisionDataset:extend('MNIST')

-- Overridden by subclasses: where to look and what to tell a user whose files are missing.
MNIST.env_var = 'MNIST_DIR'
MNIST.default_root = '/usr/share/datasets/mnist'
MNIST.install_hint = 'download MNIST into it or set MNIST_DIR'

local OPTIONS = { root = true, train = true }

local exists = VisionDataset.file_exists

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
    opts = self:parse_options(opts, OPTIONS)
    local who = getmetatable(self).__name
    local root = opts.root or os.getenv(self.env_var)
    if root == nil or root == '' then root = self.default_root end
    local train = opts.train == nil or opts.train
    local split = train and 'train' or 't10k'
    self.root, self.train = root, train

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

-- uint8 (B, H, W) -> float32 (B, 1, H, W) in [0, 1]
function MNIST:to_image(pixels)
    return (pixels:float() / 255):unsqueeze(-3)
end

return MNIST
