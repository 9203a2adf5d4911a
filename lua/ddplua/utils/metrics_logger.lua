-- lua/ddplua/utils/metrics_logger.lua: a metrics file of JSON lines, one object per record,
-- written out (flushed) as each record is logged, so that a crashed or running job leaves every
-- record it made readable (by `ddplua plot`, jq, pandas.read_json(lines=True)).
-- defines: MetricsLogger(path [, {mode = 'a' | 'w', all_ranks}]) with :log(record), :close(),
--          .path.
--
-- mode 'a' (the default) appends to an existing file, 'w' starts it afresh. log(record): a
-- table of string keys; numbers, strings, booleans, nested tables, and one-element tensors
-- (written as their number) as values; encoded by json.encode (keys sorted, NaN and infinities
-- as null), then written with its newline in one write. In a distributed job only rank 0
-- writes unless all_ranks is true (then give each rank its own path).
local class = require 'ddplua.class'
local json = require 'ddplua.json'
local rank = require 'ddplua.utils.rank'

local M = {}

local MetricsLogger = class.new('MetricsLogger')
M.MetricsLogger = MetricsLogger

local function fail(method, msg) error(('MetricsLogger.%s: %s'):format(method, msg), 0) end

function MetricsLogger:init(path, opts)
    if type(path) ~= 'string' or path == '' then
        fail('new', ('path must be a non-empty string, got %s'):format(tostring(path)))
    end
    if opts ~= nil and type(opts) ~= 'table' then
        fail('new', ('opts must be a table, got %s'):format(type(opts)))
    end
    opts = opts or {}
    local mode = opts.mode or 'a'
    if mode ~= 'a' and mode ~= 'w' then
        fail('new', ("opts.mode must be 'a' or 'w', got %s"):format(tostring(mode)))
    end
    self.path = path
    self.closed = false
    if rank.writes(opts.all_ranks) then
        local f, err = io.open(path, mode)
        if not f then fail('new', 'cannot open ' .. err) end
        self.file = f
    end
end

-- One-element tensors as numbers (a loss straight from the graph), at any depth.
local function plain(v)
    if type(v) == 'userdata' then
        local ddpl = require 'ddplua'
        if ddpl.is_tensor(v) and v:numel() == 1 then return v:item() end
        return v -- json.encode names it in its error
    end
    if type(v) ~= 'table' then return v end
    local out = {}
    for k, x in pairs(v) do out[k] = plain(x) end
    return out
end

function MetricsLogger:log(record)
    if getmetatable(self) ~= MetricsLogger then fail('log', 'call it as logger:log(record)') end
    if self.closed then fail('log', 'the logger is closed') end
    if type(record) ~= 'table' then
        fail('log', ('record must be a table of named values, got %s'):format(type(record)))
    end
    if next(record) ~= nil and #record > 0 then
        fail('log', 'record must have string keys (a JSON object), got a list')
    end
    local line = json.encode(plain(record), 'MetricsLogger.log')
    if self.file then
        local written, err = self.file:write(line, '\n')
        if not written then fail('log', ('cannot write %s: %s'):format(self.path, err)) end
        self.file:flush()
    end
end

function MetricsLogger:close()
    if self.closed then return end
    if self.file then self.file:close() end
    self.closed = true
end

MetricsLogger.__close = MetricsLogger.close

return M
