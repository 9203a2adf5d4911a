-- lua/ddplua/data/init.lua: the data library (ddpl.data, also require 'ddplua.data').
-- defines: Dataset, TensorDataset, Subset, DataLoader, Sampler, SequentialSampler, RandomSampler,
--          BatchSampler, DistributedSampler, datasets (MNIST, FashionMNIST, CIFAR10), transforms,
--          transform_rng, read_idx, default_collate, get_worker_info; each class loaded on first use.
--
-- Beyond API.md: data.Subset(dataset, indices) as PyTorch's; data.read_idx(path) (= ddpl.read_idx) reads an IDX file, gzip or plain, into a
-- tensor of the file's shape; data.Sampler is the base class of samplers (len(), indices()
-- returning the pass's int64 index tensor); data.RandomSampler(ds, {seed}),
-- data.SequentialSampler(ds), data.BatchSampler(sampler, batch_size, drop_last) (a DataLoader
-- also takes one as batch_sampler); data.Dataset items may come in batches through an optional
-- get_batch(idx) method (see Dataset.lua).
local ddpl = require 'ddplua'

local classes = {
    Dataset = 'ddplua.data.Dataset',
    TensorDataset = 'ddplua.data.TensorDataset',
    Subset = 'ddplua.data.Subset',
    DataLoader = 'ddplua.data.DataLoader',
    Sampler = 'ddplua.data.Sampler',
    SequentialSampler = 'ddplua.data.SequentialSampler',
    RandomSampler = 'ddplua.data.RandomSampler',
    BatchSampler = 'ddplua.data.BatchSampler',
    DistributedSampler = 'ddplua.data.DistributedSampler',
    datasets = 'ddplua.data.datasets',
    transforms = 'ddplua.data.transforms',
    transform_rng = 'ddplua.data.transform_rng',
}

local data = { read_idx = ddpl.read_idx }

function data.default_collate(items)
    return require('ddplua.data.DataLoader').default_collate(items)
end

-- Inside a DataLoader worker: {id, num_workers, seed, dataset} (as PyTorch's); nil elsewhere.
function data.get_worker_info()
    return require('ddplua.data.worker_pool').worker_info()
end

return require('ddplua.lazy')(classes, data)
