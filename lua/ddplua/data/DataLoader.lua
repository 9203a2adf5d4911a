-- lua/ddplua/data/DataLoader.lua: iterates a data set in (shuffled) batches.
-- defines: DataLoader(dataset [, {batch_size=1, shuffle=false, sampler, batch_sampler,
--          drop_last=false, collate_fn, seed, num_workers=0, prefetch_factor=2,
--          persistent_workers=false, worker_init_fn, timeout=0, pin_memory=false}]):
--          #loader (batches per pass), loader:iter() for `for x, y in loader:iter() do ... end`,
--          loader:close() (ends persistent workers), loader:state_dict() and
--          loader:load_state_dict(state) (a pass repeated exactly after a resume);
--          DataLoader.default_collate(items).
--
-- A pass asks the batch sampler for int64 index tensors, one per batch, then fetches each
-- batch: with the data set's get_batch(idx) when it has one and no collate_fn is given (one
-- native index_select per tensor for TensorDataset and MNIST), else item by item with get(i)
-- and then collate_fn(items) or default_collate (stacking, as PyTorch's default_collate).
-- With num_workers > 0 the fetches run in forked worker processes (data/worker_pool.lua) and
-- the batches come back, in order, through shared memory. Before fetching batch b, in whichever
-- process, data/transform_rng.lua is seeded with value b of the pass's base-seed stream
-- (data/random.lua stream_value): random transforms give the same batches whatever num_workers
-- is. The base seed is the `seed` option's stream value for the pass number when it is given,
-- else one draw from the engine RNG per pass (as PyTorch draws its base_seed).
-- pin_memory: where CUDA is available each batch lands in page-locked memory (a worker's
-- slots are registered with CUDA; without workers the batch is copied into such a slot), so
-- x:cuda() copies are asynchronous; without CUDA it does nothing, and says so once on stderr.
local ddpl = require 'ddplua'
local class = require 'ddplua.class'

local warned_pin = false -- the pin_memory warning was given in this process
local Sampler = require 'ddplua.data.Sampler'
local SequentialSampler = require 'ddplua.data.SequentialSampler'
local RandomSampler = require 'ddplua.data.RandomSampler'
local BatchSampler = require 'ddplua.data.BatchSampler'
local random = require 'ddplua.data.random'
local transform_rng = require 'ddplua.data.transform_rng'
local WorkerPool = require 'ddplua.data.worker_pool'
local transport = require 'ddplua.data.batch_transport'

local DataLoader = class.new('DataLoader')

local OPTIONS = {
    batch_size = true, shuffle = true, sampler = true, batch_sampler = true, drop_last = true,
    collate_fn = true, seed = true, num_workers = true, prefetch_factor = true,
    persistent_workers = true, worker_init_fn = true, timeout = true, pin_memory = true,
}

-- The worker options, checked as PyTorch checks them (its wording where it has one).
local function worker_options(opts)
    local n = opts.num_workers == nil and 0 or opts.num_workers
    if math.type(n) ~= 'integer' or n < 0 then
        error('DataLoader: num_workers option should be a non-negative integer; use '
            .. 'num_workers=0 to disable multiprocessing, got ' .. tostring(n), 4)
    end
    local prefetch = opts.prefetch_factor
    if prefetch ~= nil and n == 0 then
        error('DataLoader: prefetch_factor option could only be specified in multiprocessing; '
            .. 'let num_workers > 0 to enable multiprocessing', 4)
    end
    prefetch = prefetch == nil and 2 or prefetch
    if math.type(prefetch) ~= 'integer' or prefetch < 1 then
        error('DataLoader: prefetch_factor must be a positive integer, got '
            .. tostring(prefetch), 4)
    end
    local persistent = opts.persistent_workers or false
    if type(persistent) ~= 'boolean' then
        error('DataLoader: persistent_workers must be a boolean', 4)
    end
    if persistent and n == 0 then
        error('DataLoader: persistent_workers option needs num_workers > 0', 4)
    end
    local timeout = opts.timeout == nil and 0 or opts.timeout
    if type(timeout) ~= 'number' or timeout < 0 or timeout ~= timeout then
        error('DataLoader: timeout option should be non-negative, got ' .. tostring(timeout), 4)
    end
    if opts.worker_init_fn ~= nil and type(opts.worker_init_fn) ~= 'function' then
        error('DataLoader: worker_init_fn must be a function, got ' .. type(opts.worker_init_fn), 4)
    end
    local pin = opts.pin_memory or false
    if type(pin) ~= 'boolean' then error('DataLoader: pin_memory must be a boolean', 4) end
    if pin and not warned_pin and not ddpl.cuda.is_available() then
        warned_pin = true -- once per process, as PyTorch's UserWarning
        io.stderr:write('ddplua: DataLoader: pin_memory=true, but no CUDA device is available, '
            .. 'so pinned memory will not be used\n')
    end
    return { num_workers = n, prefetch_factor = prefetch, persistent_workers = persistent,
        timeout = timeout, worker_init_fn = opts.worker_init_fn, pin_memory = pin }
end

-- A fixed list of indices (a tensor or a Lua list) used as a sampler, as PyTorch accepts any
-- iterable of indices.
local FixedSampler = Sampler:extend('FixedSampler')
function FixedSampler:init(idx)
    if not ddpl.is_tensor(idx) then idx = random.index_tensor(idx) end
    self.idx = idx:long()
end
function FixedSampler:len() return self.idx:numel() end
function FixedSampler:indices() return self.idx end

local function sampler_of(s)
    if ddpl.is_tensor(s) then return FixedSampler(s) end
    if type(s) == 'table' and type(s.indices) == 'function' then return s end
    if type(s) == 'table' and (s[1] ~= nil or next(s) == nil) then return FixedSampler(s) end
    error('DataLoader: sampler must be a sampler (with indices() and len()), a tensor or a list '
        .. 'of indices, got ' .. type(s), 4)
end

function DataLoader:init(dataset, opts)
    opts = opts or {}
    if type(dataset) ~= 'table' or type(dataset.get) ~= 'function' then
        error('DataLoader: expected a data set (with get(i) and len()) as argument 1, got '
            .. type(dataset), 3)
    end
    if type(opts) ~= 'table' then
        error('DataLoader: expected an options table as argument 2, got ' .. type(opts), 3)
    end
    for k in pairs(opts) do
        if not OPTIONS[k] then error("DataLoader: unknown option '" .. tostring(k) .. "'", 3) end
    end
    local workers = worker_options(opts)
    if opts.collate_fn ~= nil and type(opts.collate_fn) ~= 'function' then
        error('DataLoader: collate_fn must be a function, got ' .. type(opts.collate_fn), 3)
    end
    if opts.seed ~= nil and math.type(opts.seed) ~= 'integer' then
        error('DataLoader: seed must be an integer, got ' .. tostring(opts.seed), 3)
    end
    local shuffle = opts.shuffle or false
    local drop_last = opts.drop_last or false
    if type(shuffle) ~= 'boolean' or type(drop_last) ~= 'boolean' then
        error('DataLoader: shuffle and drop_last must be booleans', 3)
    end
    -- PyTorch's checks and wording
    if opts.sampler ~= nil and shuffle then
        error('DataLoader: sampler option is mutually exclusive with shuffle', 3)
    end
    if opts.batch_sampler ~= nil then
        if opts.batch_size ~= nil or shuffle or opts.sampler ~= nil or drop_last then
            error('DataLoader: batch_sampler option is mutually exclusive with batch_size, '
                .. 'shuffle, sampler, and drop_last', 3)
        end
        local bs = opts.batch_sampler
        if type(bs) ~= 'table' or type(bs.batches) ~= 'function' then
            error('DataLoader: batch_sampler must have batches() (an iterator of index tensors) '
                .. 'and len(), got ' .. type(bs), 3)
        end
        self.batch_sampler = bs
    else
        local batch_size = opts.batch_size == nil and 1 or opts.batch_size
        if math.type(batch_size) ~= 'integer' or batch_size <= 0 then
            error('DataLoader: batch_size should be a positive integer value, but got batch_size='
                .. tostring(batch_size), 3)
        end
        local sampler
        if opts.sampler ~= nil then
            sampler = sampler_of(opts.sampler)
        elseif shuffle then
            sampler = RandomSampler(dataset, { seed = opts.seed })
        else
            sampler = SequentialSampler(dataset)
        end
        self.sampler = sampler
        self.batch_sampler = BatchSampler(sampler, batch_size, drop_last)
        self.batch_size, self.drop_last = batch_size, drop_last
    end
    self.dataset = dataset
    self.collate_fn = opts.collate_fn
    self.seed = opts.seed
    self.passes = 0 -- iter() calls so far: the pass number of the seed option's stream
    for k, v in pairs(workers) do self[k] = v end
end

function DataLoader:len()
    return #self.batch_sampler
end

function DataLoader:__len()
    return self:len()
end

-- ---- collation ----

local collate

-- list: the same field of every item of a batch
local function collate_field(list, where)
    local first = list[1]
    if ddpl.is_tensor(first) then
        local ok, out = pcall(ddpl.stack, list, 0)
        if not ok then error('DataLoader: cannot stack ' .. where .. ' of the batch: ' .. tostring(out), 0) end
        return out
    elseif math.type(first) == 'integer' then
        return ddpl.tensor(list, { dtype = 'int64' })
    elseif type(first) == 'number' then
        return ddpl.tensor(list, { dtype = 'float64' }) -- Python floats collate to float64
    elseif type(first) == 'boolean' then
        return ddpl.tensor(list, { dtype = 'bool' })
    elseif type(first) == 'string' then
        return list
    elseif type(first) == 'table' then
        return collate(list, where)
    end
    error(string.format('DataLoader: default_collate cannot batch %s values (%s); pass a collate_fn',
        type(first), where), 0)
end

-- list of tables -> one table whose fields are collated (per position or per key)
function collate(list, where)
    local out = {}
    for k in pairs(list[1]) do
        local column = {}
        for j, item in ipairs(list) do
            if type(item) ~= 'table' or item[k] == nil then
                error(string.format('DataLoader: item %d of the batch has no field %s (%s)', j,
                    tostring(k), where), 0)
            end
            column[j] = item[k]
        end
        out[k] = collate_field(column, where .. '.' .. tostring(k))
    end
    return out
end

-- items: list of packed get() results {v1, v2, ..., n = k}; returns the k collated fields.
function DataLoader.default_collate(items)
    local nfields = items[1].n or #items[1]
    local out = {}
    for f = 1, nfields do
        local column = {}
        for j, item in ipairs(items) do
            if item[f] == nil then
                error(string.format('DataLoader: item %d of the batch has no value %d', j, f), 0)
            end
            column[j] = item[f]
        end
        out[f] = collate_field(column, 'value ' .. f)
    end
    return table.unpack(out, 1, nfields)
end

-- ---- iteration ----

function DataLoader:fetch(idx)
    if not ddpl.is_tensor(idx) then idx = random.index_tensor(idx) end
    local ds = self.dataset
    if not self.collate_fn and type(ds.get_batch) == 'function' then return ds:get_batch(idx) end
    local items = {}
    for j, i in ipairs(idx:tolist()) do
        items[j] = table.pack(ds:get(i))
    end
    if #items == 0 then return nil end
    if self.collate_fn then
        -- one value per item when get returns one value, else the list of its values
        for j, item in ipairs(items) do
            if item.n == 1 then items[j] = item[1] else item.n = nil end
        end
        return self.collate_fn(items)
    end
    return DataLoader.default_collate(items)
end

-- The base seed of the next pass (random transforms are seeded from it, batch by batch).
local function pass_seed(self)
    local pass = self.passes
    self.passes = pass + 1
    if self.seed ~= nil then return random.stream_value(self.seed, pass) end
    return ddpl.randint(0, 1 << 62, { 1 }):item()
end

-- Closes a pass's non-persistent workers when a generic for ends (break, error, or the end).
local PassCloser = {
    __close = function(c) if c.pool ~= c.loader._pool then c.pool:close() end end,
}

local function worker_pass(self, base, next_batch)
    local pool = self._pool
    if pool then pool:drain() end -- answers of a pass left early
    if pool and pool.closed then pool = nil end
    if not pool then
        pool = WorkerPool.start(self, { num_workers = self.num_workers, base_seed = base,
            worker_init_fn = self.worker_init_fn, timeout = self.timeout,
            pin_memory = self.pin_memory })
        if self.persistent_workers then self._pool = pool end
    end
    -- A persistent pool serves one pass at a time: a newer pass of the loader ends this one
    -- (as PyTorch resets its one iterator).
    local token = {}
    pool.current_pass = token
    local queue, head, tail = {}, 1, 0 -- seqs of the tasks in flight, in order
    local b = 0
    local exhausted = false
    local limit = self.prefetch_factor * self.num_workers
    local function fill()
        while not exhausted and tail - head + 1 < limit do
            local idx = next_batch()
            if idx == nil then
                exhausted = true
            else
                tail = tail + 1
                queue[tail] = pool:submit({ idx = idx, seed = random.stream_value(base, b),
                    batch = b })
                b = b + 1
            end
        end
    end
    fill()
    local function step()
        if head > tail then
            if pool ~= self._pool then pool:close() end
            return nil
        end
        if pool.current_pass ~= token then
            error('DataLoader: this pass was ended by a newer pass of the same loader '
                .. '(persistent_workers serve one pass at a time)', 2)
        end
        local seq = queue[head]
        queue[head] = nil
        head = head + 1
        local values = pool:result(seq)
        fill()
        return table.unpack(values, 1, values.n)
    end
    return step, nil, nil, setmetatable({ pool = pool, loader = self }, PassCloser)
end

-- One pass: for x, y in loader:iter() do ... end. With workers, a fourth value closes the
-- pass's workers when the loop is left early (Lua 5.4's to-be-closed loop variable).
function DataLoader:iter()
    local replay = self._replay
    self._replay = nil
    local now
    if replay then -- the saved pass again: its draws from the engine RNG as they were then
        now = ddpl.get_rng_state()
        ddpl.set_rng_state(replay.rng)
        self.passes = replay.passes
        if replay.sampler_epoch then self.sampler:set_epoch(replay.sampler_epoch) end
    end
    local smp = self.sampler
    local sampler_epoch = smp and math.type(smp.epoch) == 'integer' and smp.set_epoch
        and smp.epoch or nil
    self._pass_start = { passes = self.passes, rng = ddpl.get_rng_state(),
        sampler_epoch = sampler_epoch }
    local base = pass_seed(self)
    local next_batch = self.batch_sampler:batches()
    if replay then ddpl.set_rng_state(now) end -- the engine RNG as load_state_dict found it
    if self.num_workers > 0 then return worker_pass(self, base, next_batch) end
    local b = 0
    local pin = self.pin_memory and ddpl.cuda.is_available()
    return function()
        local idx = next_batch()
        if idx == nil then return nil end
        transform_rng.seed(random.stream_value(base, b))
        b = b + 1
        if not pin then return self:fetch(idx) end
        self._pinner = self._pinner or transport.Pinner()
        local values = self._pinner:pin(table.pack(self:fetch(idx)))
        return table.unpack(values, 1, values.n)
    end
end

-- for x, y in loader do ... end: Lua's generic for calls the loader itself for each batch, with
-- the previous batch's first value as its control variable, which is nil only on a loop's first
-- call: there a new pass starts (ending the workers of a pass an earlier loop left early, which
-- loader:iter() would have closed at the break).
function DataLoader:__call(_, control)
    local pass = self._call_pass
    if control == nil then
        if pass and pass.closer then getmetatable(pass.closer).__close(pass.closer) end
        local step, _, _, closer = self:iter()
        pass = { step = step, closer = closer }
        self._call_pass = pass
    elseif not pass then
        error('DataLoader: called with a control value but no pass in progress; iterate with '
            .. '`for x, y in loader do` or `loader:iter()`', 2)
    end
    local values = table.pack(pass.step())
    if values[1] == nil then
        if pass.closer then getmetatable(pass.closer).__close(pass.closer) end
        self._call_pass = nil
    end
    return table.unpack(values, 1, values.n)
end

-- Ends the persistent workers (they also end when the loader is collected).
-- state_dict() -> the start of the pass in progress (or of the next one before any): its number,
-- the engine RNG's state before the pass drew its base seed and its sampler's order, and the
-- sampler's epoch. Saved with a checkpoint in the middle of a pass, it lets a resumed run repeat
-- that pass exactly (the same order, the same transform seeds) without a second draw from the
-- engine RNG, so the generator restored from the checkpoint goes on as in the run that never
-- stopped (dropout and the like). PyTorch's DataLoader has no state; torchdata's
-- StatefulDataLoader has this method for the same reason.
function DataLoader:state_dict()
    local s = self._pass_start
    if not s then return { passes = self.passes } end
    return { passes = s.passes, rng = s.rng, sampler_epoch = s.sampler_epoch }
end

-- load_state_dict(state): the next iter() is the pass state_dict() described, drawn as it was
-- then; the engine RNG is left as it is (restore it from the checkpoint too). The caller skips
-- the batches done before the checkpoint, as after any resume.
function DataLoader:load_state_dict(state)
    if type(state) ~= 'table' or math.type(state.passes) ~= 'integer' or state.passes < 0 then
        error('DataLoader:load_state_dict: expected a table from state_dict() (with an integer '
            .. '`passes`), got ' .. (type(state) == 'table' and 'a table without one'
            or type(state)), 2)
    end
    if state.rng ~= nil and not ddpl.is_tensor(state.rng) then
        error('DataLoader:load_state_dict: `rng` must be the tensor state_dict() gave, got '
            .. type(state.rng), 2)
    end
    if state.sampler_epoch ~= nil and not (math.type(state.sampler_epoch) == 'integer'
        and self.sampler and self.sampler.set_epoch) then
        error('DataLoader:load_state_dict: `sampler_epoch` does not fit this loader\'s sampler', 2)
    end
    if state.rng then
        self._replay = { passes = state.passes, rng = state.rng,
            sampler_epoch = state.sampler_epoch }
    else
        self.passes = state.passes
    end
end

function DataLoader:close()
    if self._pool then
        self._pool:close()
        self._pool = nil
    end
end

function DataLoader:__tostring()
    return string.format('DataLoader(%s, batches=%d)', tostring(self.dataset), self:len())
end

return DataLoader
