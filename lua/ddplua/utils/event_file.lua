-- lua/ddplua/utils/event_file.lua: one TensorBoard event file: TFRecord framing of Event messages.
-- defines: EventFile(dir, {max_queue, flush_secs, filename_suffix}) with :add_summary(summary,
--          step, walltime), :flush(), :close(), .path; EventFile.wall_time().
--
-- The file is dir/events.out.tfevents.<unix seconds, 10 digits>.<hostname>.<pid>.<n><suffix>,
-- the name TensorBoard's EventFileWriter (which PyTorch uses) gives, n counting the files this
-- process opened, so that writers made in the same second never share a file. Every record is
--     uint64 length | uint32 masked CRC-32C of those 8 bytes | data | uint32 masked CRC-32C of data
-- little-endian, and its data an Event message (tensorflow/core/util/event.proto):
--     wall_time = 1 (double, seconds since the epoch), step = 2 (int64, left out when 0 as proto3
--     does), file_version = 3 (string) | summary = 5 (a Summary message, built by the caller).
-- The first record holds file_version "brain.Event:2". Each record is framed whole, then written
-- into the file's stdio buffer, which goes to disk when max_queue (10) records are waiting,
-- flush_secs (120 s) have passed since the last flush, on flush() and on close(), as PyTorch's
-- writer does; and when a writer never closed is collected, at the latest when the interpreter
-- closes (the buffer is the Lua file's, which closes itself).
local class = require 'ddplua.class'
local crc32c = require 'ddplua.utils.crc32c'
local pb = require 'ddplua.utils.protobuf'
require 'ddplua' -- registers ddplua.core.process
local P = require 'ddplua.core.process'

local EventFile = class.new('EventFile')

EventFile.wall_time = P.wall_time

local files_opened = 0

local function q(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end

-- Makes dir and its parents; a clear error when that fails (a file in the way, no permission).
local function make_dirs(dir, who)
    local ok = os.execute('mkdir -p ' .. q(dir) .. ' 2>/dev/null')
    if not ok then error(('%s: cannot create the log directory %s'):format(who, dir), 0) end
end

-- One TFRecord around data.
local function frame(data)
    local len = string.pack('<I8', #data)
    return len .. string.pack('<I4', crc32c.masked(len)) .. data ..
        string.pack('<I4', crc32c.masked(data))
end

-- An Event's bytes: wall_time, step (proto3 leaves a zero out) and one of its payload fields.
local function event(wall_time, step, payload)
    return pb.double(1, wall_time) .. ((step and step ~= 0) and pb.uint(2, step) or '') .. payload
end

-- who names the caller in errors ("SummaryWriter").
function EventFile:init(dir, opts, who)
    opts = opts or {}
    self.who = who or 'EventFile'
    self.max_queue = opts.max_queue or 10
    self.flush_secs = opts.flush_secs or 120
    make_dirs(dir, self.who)
    files_opened = files_opened + 1
    local now = P.wall_time()
    self.path = ('%s/events.out.tfevents.%010d.%s.%d.%d%s'):format(dir, math.floor(now),
        P.hostname(), P.getpid(), files_opened, opts.filename_suffix or '')
    local f, err = io.open(self.path, 'wb')
    if not f then error(('%s: cannot open an event file: %s'):format(self.who, err), 0) end
    f:setvbuf('full', 1 << 16)
    self.file = f
    self.pending = 0 -- records written since the last flush
    self.last_flush = now
    self:_add(frame(event(now, nil, pb.bytes(3, 'brain.Event:2'))))
    self:flush() -- the file is valid (and found by TensorBoard) from the start
end

function EventFile:_add(record)
    local ok, err = self.file:write(record)
    if not ok then error(('%s: cannot write %s: %s'):format(self.who, self.path, err), 0) end
    self.pending = self.pending + 1
    if self.pending >= self.max_queue or P.wall_time() - self.last_flush >= self.flush_secs then
        self:flush()
    end
end

-- summary: the bytes of a Summary message; step an integer or nil; walltime seconds or nil (now).
function EventFile:add_summary(summary, step, walltime)
    self:_add(frame(event(walltime or P.wall_time(), step, pb.bytes(5, summary))))
end

function EventFile:flush()
    if not self.file then return end
    local ok, err = self.file:flush()
    if not ok then error(('%s: cannot write %s: %s'):format(self.who, self.path, err), 0) end
    self.pending = 0
    self.last_flush = P.wall_time()
end

function EventFile:close()
    if not self.file then return end
    self:flush()
    self.file:close()
    self.file = nil
end

return EventFile
