-- lua/ddplua/data/batch_transport.lua: a batch (any Lua value holding tensors) to one shared-
-- memory segment in a DataLoader worker, and back to the same value in the main process.
-- defines: transport.pack(values) -> segment fd, transport.unpack(fd [, pin]) -> values,
--          transport.pin(values) -> values in page-locked memory.
--
-- values is the table.pack of what the loader's fetch returned (x, y, ... with n). In the worker,
-- every tensor is replaced by a placeholder {[TAG] = k}; the skeleton is encoded with the object
-- collectives' serializer (bind_serialize.c) and written, with the tensors' bytes, into one
-- segment (bind_worker_ipc.c). In the main process the segment is mapped and its tensors are
-- views of the mapping (no copy); the placeholders are swapped back for them. Tables shared
-- within a batch stay shared. A value the serializer cannot carry (a function, a table with a
-- metatable) is an error naming where it is in the batch.
local ddpl = require 'ddplua'
local ipc = require 'ddplua.core.worker_ipc'
local serialize = require 'ddplua.core.serialize'

local transport = {}

local TAG = '\0ddplua.batch_tensor' -- a key no batch of user data is expected to have

-- Copy of v with tensors swapped for placeholders; tensors collects them (contiguous, on the
-- CPU). seen keeps shared tables shared (and cycles finite).
local function strip(v, tensors, seen, where)
    if ddpl.is_tensor(v) then
        if v.device ~= 'cpu' then
            error(('DataLoader worker: the batch holds a %s tensor at %s; workers make CPU '
                .. 'batches (move them to the GPU in the main process)'):format(v:device(), where), 0)
        end
        tensors[#tensors + 1] = v:detach():contiguous()
        return { [TAG] = #tensors } -- tensors[1] is kept for the skeleton itself
    end
    if type(v) ~= 'table' then return v end
    if seen[v] then return seen[v] end
    if getmetatable(v) ~= nil then
        error(('DataLoader worker: cannot send a table with a metatable (at %s) to the main '
            .. 'process; return plain tables and tensors'):format(where), 0)
    end
    local out = {}
    seen[v] = out
    for k, x in pairs(v) do
        out[k] = strip(x, tensors, seen, where .. '.' .. tostring(k))
    end
    return out
end

function transport.pack(values)
    local tensors = { false }
    local skeleton = strip(values, tensors, {}, 'batch')
    tensors[1] = serialize.dumps(skeleton, 'DataLoader worker', 'batch')
    return ipc.segment_write(tensors)
end

local function restore(v, tensors, seen)
    if type(v) ~= 'table' then return v end
    local k = v[TAG]
    if k ~= nil then return tensors[k] end
    if seen[v] then return v end
    seen[v] = true
    for key, x in pairs(v) do v[key] = restore(x, tensors, seen) end
    return v
end

-- pin: the segment is page-locked where CUDA is available (pin_memory)
function transport.unpack(fd, pin)
    local tensors = ipc.segment_read(fd, pin)
    local skeleton = serialize.loads(tensors[1], 'DataLoader')
    return restore(skeleton, tensors, {})
end

-- The same values with their tensors in one page-locked segment (a copy; pin_memory with
-- num_workers=0 on CUDA, as PyTorch's pin_memory copies batches into pinned memory).
function transport.pin(values)
    local fd = transport.pack(values)
    local ok, out = pcall(transport.unpack, fd, true)
    if not ok then error('DataLoader: pin_memory: ' .. tostring(out), 0) end
    return out
end

return transport
