-- lua/ddplua/data/batch_transport.lua: a batch (any Lua value holding tensors) into shared
-- memory in a DataLoader worker, and back to the same value in the main process.
-- defines: transport.Sender() with sender:pack(values) -> note, fd | nil, sender:close();
--          transport.Receiver(pin) with receiver:unpack(note, fd) -> values, receiver:close();
--          transport.Pinner() with pinner:pin(values) -> values in page-locked memory.
--
-- values is the table.pack of what the loader's fetch returned (x, y, ... with n). The sender
-- replaces every tensor by a placeholder {[TAG] = k}, encodes the skeleton with the object
-- collectives' serializer (bind_serialize.c) and writes it, with the tensors' bytes, into one of
-- its shared-memory slots (bind_worker_ipc.c): a free one large enough, else a new one. note
-- ({slot = id, retired = {ids}}) says which; fd is the slot's file, only when it is new (sent
-- once, with the note). The receiver maps each slot once, reads the batch's tensors as views of
-- the mapping (no copy) and swaps the placeholders back; the slot returns to the sender when
-- those tensors are freed. A free slot too small for a batch is retired (both ends unmap it).
-- Tables shared within a batch stay shared. A value the serializer cannot carry (a function, a
-- table with a metatable) is an error naming where it is in the batch.
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
                .. 'batches (move them to the GPU in the main process)'):format(v.device, where),
                0)
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

-- ---- the worker's side ----

local Sender = {}
Sender.__index = Sender

function transport.Sender()
    return setmetatable({ slots = {}, next_id = 0 }, Sender)
end

function Sender:pack(values)
    local tensors = { false }
    local skeleton = strip(values, tensors, {}, 'batch')
    tensors[1] = serialize.dumps(skeleton, 'DataLoader worker', 'batch')
    local need = ipc.segment_size(tensors)
    local chosen, retired = nil, {}
    for id, slot in pairs(self.slots) do
        if ipc.slot_is_free(slot) then
            if ipc.slot_size(slot) >= need then
                if not chosen then chosen = id end
            else
                ipc.slot_close(slot)
                self.slots[id] = nil
                retired[#retired + 1] = id
            end
        end
    end
    local fd
    if not chosen then
        chosen = self.next_id
        self.next_id = chosen + 1
        -- a quarter more, so batches that grow a little (variable-length items) still fit
        self.slots[chosen] = ipc.slot_new(need + need // 4)
        fd = ipc.slot_fd(self.slots[chosen])
    end
    ipc.slot_write(self.slots[chosen], tensors)
    return { slot = chosen, retired = retired }, fd
end

function Sender:close()
    for id, slot in pairs(self.slots) do
        ipc.slot_close(slot)
        self.slots[id] = nil
    end
end

-- ---- the main process's side ----

local Receiver = {}
Receiver.__index = Receiver

-- pin: map slots page-locked (pin_memory where CUDA is available)
function transport.Receiver(pin)
    return setmetatable({ views = {}, pin = pin or false }, Receiver)
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

-- note and fd as the sender's pack returned them (fd stays the caller's to close).
function Receiver:unpack(note, fd)
    for _, id in ipairs(note.retired) do
        if self.views[id] then ipc.view_close(self.views[id]) end
        self.views[id] = nil
    end
    if fd then
        if self.views[note.slot] then ipc.view_close(self.views[note.slot]) end
        self.views[note.slot] = ipc.view_map(fd, self.pin)
    end
    local view = self.views[note.slot]
    if not view then
        error('DataLoader: a batch arrived in unknown slot ' .. tostring(note.slot), 0)
    end
    local tensors = ipc.view_read(view)
    local skeleton
    do
        local meta <close> = tensors[1] -- freed now, not at the next collection
        skeleton = serialize.loads(meta, 'DataLoader')
    end
    return restore(skeleton, tensors, {})
end

-- slots mapped
function Receiver:count()
    local n = 0
    for _ in pairs(self.views) do n = n + 1 end
    return n
end

function Receiver:close()
    for id, view in pairs(self.views) do
        ipc.view_close(view)
        self.views[id] = nil
    end
end

-- ---- pin_memory without workers: both ends in this process ----

local Pinner = {}
Pinner.__index = Pinner

function transport.Pinner()
    return setmetatable({ sender = transport.Sender(), receiver = transport.Receiver(true) },
        Pinner)
end

function Pinner:pin(values)
    local note, fd = self.sender:pack(values)
    local ok, out = pcall(self.receiver.unpack, self.receiver, note, fd)
    if not ok then error('DataLoader: pin_memory: ' .. tostring(out), 0) end
    return out
end

return transport
