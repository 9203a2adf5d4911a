-- lua/ddplua/data/datasets/CIFAR10.lua: CIFAR-10 read from its binary version.
-- defines: CIFAR10([{root, train=true, transform, target_transform}]) and its class names;
--          fields data (uint8 (N,3,32,32)), targets (int64 (N)); get(i) -> float32 [3,32,32]
--          image in [0,1], int64 label; get_batch(idx) (both from VisionDataset).
--
-- The binary version (cifar-10-binary.tar.gz, https://www.cs.toronto.edu/~kriz/cifar.html):
-- data_batch_1.bin ... data_batch_5.bin (training, 10000 records each) and test_batch.bin; a
-- record is 1 label byte (0..9) then 3072 pixel bytes, the 1024 red, then green, then blue
-- values of a 32x32 image in row-major order. Each file is read with one read into a uint8
-- tensor; the pixels are kept as they come, channels first, so an item needs no permute
-- (torchvision's .data is (N,32,32,3), channels last, made for PIL).
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

local CHANNELS, SIZE = 3, 32
local PIXELS = CHANNELS * SIZE * SIZE -- 3072 bytes per image
local RECORD = 1 + PIXELS             -- the label byte, then the pixels
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

-- One file -> uint8 (n, 3073) records, n > 0; the size is checked before anything is kept.
local function read_records(path)
    local f, why = io.open(path, 'rb')
    if not f then error(string.format('CIFAR10: cannot open %s; %s', why, HINT), 0) end
    local bytes = f:read('a')
    f:close()
    if bytes == nil then error('CIFAR10: ' .. path .. ': cannot read the file', 0) end
    if #bytes == 0 or #bytes % RECORD ~= 0 then
        error(string.format('CIFAR10: %s: %d bytes is not a whole number of %d-byte records (1 label '
            .. 'byte + %d pixel bytes): the file is truncated or not from the binary version', path,
            #bytes, RECORD, PIXELS), 0)
    end
    return ddpl.frombytes(bytes, 'uint8', { #bytes // RECORD, RECORD })
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

    local images, labels = {}, {}
    for k, name in ipairs(files) do
        local path = dir .. '/' .. name
        local records = read_records(path)
        local label = records:select(1, 0)
        local top = label:max():item()
        if top >= #self.classes then
            local at = label:ge(#self.classes):long():argmax():item()
            error(string.format('CIFAR10: %s: record %d has label %d; labels are 0 to %d: not a '
                .. 'CIFAR-10 file (CIFAR-100 records have 2 label bytes)', path, at, top,
                #self.classes - 1), 0)
        end
        labels[k] = label:long()
        images[k] = records:narrow(1, 1, PIXELS):contiguous():view(-1, CHANNELS, SIZE, SIZE)
    end
    self.data = #images == 1 and images[1] or ddpl.cat(images, 0)     -- uint8 (N, 3, 32, 32)
    self.targets = #labels == 1 and labels[1] or ddpl.cat(labels, 0) -- int64 (N)
end

-- uint8 (B, 3, 32, 32) -> float32 (B, 3, 32, 32) in [0, 1]
function CIFAR10:to_image(pixels)
    return pixels:float() / 255
end

return CIFAR10
