-- lua/ddplua/utils/tensorboard.lua: TensorBoard event files written natively (no protobuf
-- library), as PyTorch's torch.utils.tensorboard.SummaryWriter writes them.
-- defines: tensorboard.SummaryWriter(log_dir [, opts]) with add_scalar, add_scalars,
--          add_histogram, add_text, flush, close, get_logdir.
--
--   w = SummaryWriter('runs/exp1' [, {all_ranks, max_queue = 10, flush_secs = 120,
--                     filename_suffix = ''}])
--   w:add_scalar(tag, value, step [, walltime])      value: a number or a one-element tensor
--   w:add_scalars(main_tag, {name = value, ...}, step [, walltime])
--   w:add_histogram(tag, tensor_or_list, step [, {bins = 'tensorflow' | n | edges, walltime}])
--   w:add_text(tag, text, step [, walltime])
--   w:flush(); w:close()
-- log_dir defaults to runs/<date>_<hostname> as in PyTorch. step may be nil (no step, as
-- PyTorch's global_step=None); walltime is seconds since the epoch (default now).
-- The messages (tensorflow's summary.proto; field numbers in docs/internals/utils.md):
--   scalar:    Summary{value = [Value{tag = 1, simple_value = 2 (float)}]}
--   histogram: Value{tag, histo = 5: HistogramProto{min 1, max 2, num 3, sum 4, sum_squares 5,
--              bucket_limit 6, bucket 7 (packed doubles)}} (lua/ddplua/utils/histogram.lua)
--   text:      Value{tag = tag .. '/text_summary', tensor = 8: TensorProto{dtype = 1: DT_STRING
--              (7), tensor_shape = 2: {dim = 2: {size = 1: 1}}, string_val = 8: text},
--              metadata = 9: SummaryMetadata{plugin_data = 1: {plugin_name = 1: 'text'}}}
-- add_scalars writes each name to its own event file in log_dir/<main_tag with '/' -> '_'>_<name>
-- under the tag main_tag, so TensorBoard draws the series as runs on one chart (PyTorch's layout).
-- In a distributed job only rank 0 writes (lua/ddplua/utils/rank.lua); {all_ranks = true} makes
-- every rank write (give each its own log_dir). On the other ranks the methods check their
-- arguments and write nothing, and no file is made.
local class = require 'ddplua.class'
local pb = require 'ddplua.utils.protobuf'
local histogram = require 'ddplua.utils.histogram'
local rank = require 'ddplua.utils.rank'
local EventFile = require 'ddplua.utils.event_file'

local tensorboard = {}

local SummaryWriter = class.new('SummaryWriter')
tensorboard.SummaryWriter = SummaryWriter

local DT_STRING = 7

local function fail(method, msg) error(('SummaryWriter.%s: %s'):format(method, msg), 0) end

local function check_tag(method, name, tag)
    if type(tag) ~= 'string' or tag == '' then
        fail(method, ('%s must be a non-empty string, got %s'):format(name, tostring(tag)))
    end
end

local function check_step(method, step)
    if step ~= nil and not math.tointeger(step) then
        fail(method, ('step must be an integer or nil, got %s'):format(tostring(step)))
    end
    return step and math.tointeger(step)
end

local function check_walltime(method, walltime)
    if walltime ~= nil and (type(walltime) ~= 'number' or walltime ~= walltime) then
        fail(method, ('walltime must be seconds since the epoch, got %s'):format(
            tostring(walltime)))
    end
end

-- A Lua number from a number or a one-element tensor.
local function scalar_value(method, name, v)
    if type(v) == 'number' then return v end
    local ddpl = require 'ddplua'
    if ddpl.is_tensor(v) then
        if v:numel() ~= 1 then
            fail(method, ('%s must be a number or a one-element tensor, got a tensor of %d '
                .. 'elements'):format(name, v:numel()))
        end
        return v:item()
    end
    fail(method, ('%s must be a number or a one-element tensor, got %s'):format(name, type(v)))
end

function SummaryWriter:init(log_dir, opts)
    if log_dir ~= nil and (type(log_dir) ~= 'string' or log_dir == '') then
        fail('new', ('log_dir must be a non-empty string, got %s'):format(tostring(log_dir)))
    end
    if opts ~= nil and type(opts) ~= 'table' then
        fail('new', ('opts must be a table, got %s'):format(type(opts)))
    end
    opts = opts or {}
    for _, k in ipairs({'max_queue', 'flush_secs'}) do
        local v = opts[k]
        if v ~= nil and (type(v) ~= 'number' or v < (k == 'max_queue' and 1 or 0)) then
            fail('new', ('opts.%s must be a %s number, got %s'):format(k,
                k == 'max_queue' and 'positive' or 'non-negative', tostring(v)))
        end
    end
    if opts.filename_suffix ~= nil and (type(opts.filename_suffix) ~= 'string'
            or opts.filename_suffix:find('/')) then
        fail('new', 'opts.filename_suffix must be a string without "/"')
    end
    if not log_dir then
        require 'ddplua'
        log_dir = ('runs/%s_%s'):format(os.date('%b%d_%H-%M-%S'),
            require('ddplua.core.process').hostname())
    end
    self.log_dir = log_dir
    self.opts = {max_queue = opts.max_queue, flush_secs = opts.flush_secs,
        filename_suffix = opts.filename_suffix}
    self.active = rank.writes(opts.all_ranks)
    self.closed = false
    self.sub_writers = {} -- add_scalars: directory -> EventFile
    if self.active then self.file = EventFile(log_dir, self.opts, 'SummaryWriter') end
end

function SummaryWriter:get_logdir() return self.log_dir end

-- The event file path (nil on ranks that do not write).
function SummaryWriter:get_path() return self.file and self.file.path end

local function check_open(self, method)
    if getmetatable(self) ~= SummaryWriter then
        fail(method, 'call it as writer:' .. method .. '(...), with a colon')
    end
    if self.closed then fail(method, 'the writer is closed') end
end

local function scalar_summary(tag, value)
    return pb.message(1, pb.bytes(1, tag), pb.float(2, value))
end

function SummaryWriter:add_scalar(tag, value, step, walltime)
    check_open(self, 'add_scalar')
    check_tag('add_scalar', 'tag', tag)
    value = scalar_value('add_scalar', 'value', value)
    step = check_step('add_scalar', step)
    check_walltime('add_scalar', walltime)
    if self.active then self.file:add_summary(scalar_summary(tag, value), step, walltime) end
end

function SummaryWriter:add_scalars(main_tag, values, step, walltime)
    check_open(self, 'add_scalars')
    check_tag('add_scalars', 'main_tag', main_tag)
    if type(values) ~= 'table' then
        fail('add_scalars', ('values must be a table {name = value}, got %s'):format(
            type(values)))
    end
    local names = {}
    for name, v in pairs(values) do
        if type(name) ~= 'string' or name == '' or name:find('/') then
            fail('add_scalars', ('the names of values must be non-empty strings without "/", '
                .. 'got %s'):format(tostring(name)))
        end
        names[#names + 1] = name
    end
    table.sort(names)
    local numbers = {}
    for _, name in ipairs(names) do
        numbers[name] = scalar_value('add_scalars', 'values.' .. name, values[name])
    end
    step = check_step('add_scalars', step)
    check_walltime('add_scalars', walltime)
    if not self.active then return end
    for _, name in ipairs(names) do
        local dir = self.log_dir .. '/' .. main_tag:gsub('/', '_') .. '_' .. name
        local w = self.sub_writers[dir]
        if not w then
            w = EventFile(dir, self.opts, 'SummaryWriter.add_scalars')
            self.sub_writers[dir] = w
        end
        w:add_summary(scalar_summary(main_tag, numbers[name]), step, walltime)
    end
end

function SummaryWriter:add_histogram(tag, values, step, opts)
    check_open(self, 'add_histogram')
    check_tag('add_histogram', 'tag', tag)
    step = check_step('add_histogram', step)
    if opts ~= nil and type(opts) ~= 'table' then
        fail('add_histogram', ('opts must be a table {bins, walltime}, got %s'):format(type(opts)))
    end
    opts = opts or {}
    check_walltime('add_histogram', opts.walltime)
    if not self.active then return end
    local h = histogram.compute(values, opts.bins, 'SummaryWriter.add_histogram')
    -- proto3 leaves zero numbers out
    local function nonzero(field, x) return x ~= 0 and pb.double(field, x) or '' end
    local histo = pb.message(5, nonzero(1, h.min), nonzero(2, h.max), nonzero(3, h.num),
        nonzero(4, h.sum), nonzero(5, h.sum_squares), pb.packed_doubles(6, h.bucket_limit),
        pb.packed_doubles(7, h.bucket))
    self.file:add_summary(pb.message(1, pb.bytes(1, tag), histo), step, opts.walltime)
end

function SummaryWriter:add_text(tag, text, step, walltime)
    check_open(self, 'add_text')
    check_tag('add_text', 'tag', tag)
    if type(text) ~= 'string' then
        fail('add_text', ('text must be a string, got %s'):format(type(text)))
    end
    step = check_step('add_text', step)
    check_walltime('add_text', walltime)
    if not self.active then return end
    local tensor = pb.message(8, pb.uint(1, DT_STRING), pb.message(2, pb.message(2, pb.uint(1, 1))),
        pb.bytes(8, text))
    local metadata = pb.message(9, pb.message(1, pb.bytes(1, 'text')))
    self.file:add_summary(pb.message(1, pb.bytes(1, tag .. '/text_summary'), tensor, metadata),
        step, walltime)
end

function SummaryWriter:flush()
    check_open(self, 'flush')
    if self.file then self.file:flush() end
    for _, w in pairs(self.sub_writers) do w:flush() end
end

-- Writes out what is buffered and closes the files; closing twice is allowed (as PyTorch).
function SummaryWriter:close()
    if self.closed then return end
    if self.file then self.file:close() end
    for _, w in pairs(self.sub_writers) do w:close() end
    self.closed = true
end

SummaryWriter.__close = SummaryWriter.close

return tensorboard
