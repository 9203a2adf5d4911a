-- lua/ddplua/data/datasets/CIFAR10.lua: CIFAR-10 read from its binary version.
-- defines: CIFAR10([{root, train=true, transform, target_transform}]) and its class names;
--          fields data (uint8 (N,3,32,32)), targets (int64 (N)); get(i) -> float32 [3,32,32]
--          image in [0,1], int64 label; get_batch(idx) (both from VisionDataset).
--
-- The binary version (cifar-10-binary.tar.gz, https://www.cs.toronto.edu/~kriz/cifar.html):
-- data_batch_1.bin ... data_batch_5.bin (training, 10000 records each) and test_batch.bin; a
-- record is 1 label byte (0..9) then 3072 pixel bytes, the 1024 red, then green, then blue
-- values of a 32x32 image in row-major order. ddpl.read_cifar10 (engine/io/cifar.c) checks the
-- files' sizes and labels and reads all of a split's records straight into the two tensors; the
-- pixels are kept as they come, channels first, so an item needs no permute (torchvision's
-- .data is (N,32,32,3), channels last, made for PIL).
-- root defaults to $CIFAR10_DIR; the files may sit in root or in root/cifar-10-batches-bin (the
-- folder the archive unpacks to).
local ddpl = require 'ddplua'
local VisionDataset = require 'ddplua.data.datasets.VisionDataset'

local CIFAR10 = VisionDataset:extend('CIFAR10')

CIFAR10.env_var = 'CIFAR10_DIR'
CIFAR10.folder = 'cifar-10-batches-bin'
CIFAR10.train_files = { 'data_batch_1.bin', 'data_batch_2.bin', 'data_batch_3.bin',
    'data_batch_4.bin', 'data_batch_5.bin' }
CIFAR10.test_files = { 'test_batch.bin' }
-- label -> name, indexed by label + 1 (labels are 0-based)
CIFAR10.classes = { 'airplane', 'automobile', 'bird', 'cat', 'deer', 'dog', 'frog', 'horse',
    'ship', 'truck' }

local HINT = 'download the binary version from https://www.cs.toronto.edu/~kriz/cifar.html '
    .. '(cifar-10-binary.tar.gz), unpack it into root, or set CIFAR10_DIR'

local OPTIONS = { root = true, train = true }

local exists = VisionDataset.file_exists

-- The folder holding the split's files: root itself or root/cifar-10-batches-bin.
function CIFAR10:find_dir(root, first)
    local nested = root .. '/' .. self.folder
    if exists(root .. '/' .. first) then return root end
    if exists(nested .. '/' .. first) then return nested end
    error(string.format('CIFAR10: %s/%s not found (nor %s/%s); %s', root, first, nested, first,
        HINT), 0)
end

function CIFAR10:init(opts)
    opts = self:parse_options(opts, OPTIONS)
    local root = opts.root or os.getenv(self.env_var)
    if root == nil or root == '' then
        error('CIFAR10: no root given and CIFAR10_DIR is not set; pass {root = DIR}, the folder '
            .. 'holding data_batch_1.bin ... test_batch.bin (or ' .. self.folder .. '/ with them); '
            .. HINT, 3)
    end
    local train = opts.train == nil or opts.train
    local files = train and self.train_files or self.test_files
    local dir = self:find_dir(root, files[1])
    self.root, self.train = root, train

    local paths = {}
    for k, name in ipairs(files) do paths[k] = dir .. '/' .. name end
    local ok, images, labels = pcall(ddpl.read_cifar10, paths)
    if not ok then
        local msg = tostring(images):gsub('^read_cifar10: ', '')
        if msg:find(': cannot open: ', 1, true) then msg = msg .. '; ' .. HINT end
        error('CIFAR10: ' .. msg, 0)
    end
    self.data = images    -- uint8 (N, 3, 32, 32)
    self.targets = labels -- int64 (N)
end

-- uint8 (B, 3, 32, 32) -> float32 (B, 3, 32, 32) in [0, 1]
function CIFAR10:to_image(pixels)
    return pixels:float() / 255
end

return CIFAR10
