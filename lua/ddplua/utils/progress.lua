-- lua/ddplua/utils/progress.lua: a progress bar for loops of known length (tqdm's shape).
-- defines: progress.progress(n [, opts]) -> a Progress (ddpl.utils.progress); progress.Progress
--          with :update([k]), :set_postfix(table), :set_description(s), :line(), :close(), .n.
--
--   local bar = ddpl.utils.progress(#loader, {desc = 'epoch 1', unit = 'batch'})
--   for x, y in loader:iter() do ...; bar:set_postfix({loss = l}); bar:update() end
--   bar:close()
-- On a terminal the bar is redrawn in place ('\r', at most every mininterval = 0.1 s, and when
-- it completes):
--   epoch 1:  42%|############                  | 396/938 [00:03<00:04, 121.57 batch/s, loss=0.41]
-- elapsed<remaining as [h:]mm:ss, the rate over the whole run so far. When the output is not a
-- terminal (a log file, a pipe) redrawing would leave a line per redraw, so a plain line without
-- the bar is printed each time another tenth of n is done (opts.every, a fraction) or
-- every_secs (30 s) have passed, and at close() if the last line was not at the end:
--   epoch 1:  40% 376/938 [00:03<00:04, 121.57 batch/s, loss=0.41]
-- opts: desc, unit ('it'), initial (steps done before this start, e.g. on resuming: counted in
-- the bar, not in the rate), file (io.stdout, or anything with write and flush), terminal
-- (true/false; default: whether file is a terminal, asked with isatty), disable, all_ranks,
-- mininterval, every, every_secs, clock (a function returning seconds, ddpl.time by default:
-- specs pass a fake one). In a distributed job only rank 0 prints unless all_ranks is true; the
-- others count silently.
local class = require 'ddplua.class'
local ddpl = require 'ddplua'
local rank = require 'ddplua.utils.rank'
local P = require 'ddplua.core.process'

local M = {}

local Progress = class.new('Progress')
M.Progress = Progress

local BAR_WIDTH = 30

local function fail(method, msg) error(('progress%s: %s'):format(method, msg), 0) end

local function check_opts(opts)
    if opts == nil then return {} end
    if type(opts) ~= 'table' then fail('', ('opts must be a table, got %s'):format(type(opts))) end
    for _, k in ipairs({'desc', 'unit'}) do
        if opts[k] ~= nil and type(opts[k]) ~= 'string' then
            fail('', ('opts.%s must be a string, got %s'):format(k, type(opts[k])))
        end
    end
    for _, k in ipairs({'mininterval', 'every_secs'}) do
        local v = opts[k]
        if v ~= nil and (type(v) ~= 'number' or v < 0) then
            fail('', ('opts.%s must be a non-negative number of seconds, got %s'):format(k,
                tostring(v)))
        end
    end
    local e = opts.every
    if e ~= nil and (type(e) ~= 'number' or e <= 0 or e > 1) then
        fail('', ('opts.every must be a fraction in (0, 1], got %s'):format(tostring(e)))
    end
    local i = opts.initial
    if i ~= nil and (type(i) ~= 'number' or i < 0 or i ~= i) then
        fail('', ('opts.initial must be a non-negative number, got %s'):format(tostring(i)))
    end
    if opts.clock ~= nil and type(opts.clock) ~= 'function' then
        fail('', 'opts.clock must be a function returning seconds')
    end
    return opts
end

function Progress:init(n, opts)
    if not (math.tointeger(n) and n >= 0) then
        fail('', ('n must be a non-negative integer (the count of steps), got %s'):format(
            tostring(n)))
    end
    opts = check_opts(opts)
    self.total = math.tointeger(n)
    self.initial = opts.initial or 0
    self.n = self.initial
    self.desc = opts.desc
    self.unit = opts.unit or 'it'
    self.file = opts.file or io.stdout
    self.clock = opts.clock or ddpl.time
    self.mininterval = opts.mininterval or 0.1
    self.every = opts.every or 0.1
    self.every_secs = opts.every_secs or 30
    self.postfix = nil
    self.active = not opts.disable and rank.writes(opts.all_ranks)
    if opts.terminal ~= nil then
        self.terminal = opts.terminal and true or false
    else
        -- only a real file can be a terminal; anything else with a write method prints plain
        self.terminal = self.active and io.type(self.file) == 'file' and P.isatty(self.file)
    end
    self.start = self.clock()
    self.last_draw = -math.huge -- terminal: when the bar was last drawn
    self.drawn_width = 0        -- terminal: the length of the line on screen, to blank it out
    self.printed_n = nil        -- plain: the count of the last line printed
    self.last_print = self.start
    -- plain: the next multiple of `every` (of n) that prints a line
    self.next_mark = self.total > 0
        and math.floor(self.initial / (self.total * self.every) + 1e-9) + 1 or 1
    self.closed = false
end

-- seconds as [h:]mm:ss
local function clock_text(s)
    if s ~= s or s == math.huge then return '?' end
    s = math.floor(s + 0.5)
    local h, m = s // 3600, s % 3600 // 60
    if h > 0 then return ('%d:%02d:%02d'):format(h, m, s % 60) end
    return ('%02d:%02d'):format(m, s % 60)
end

local function value_text(v)
    if math.type(v) == 'float' then return ('%.4g'):format(v) end
    return tostring(v)
end

-- The text of the bar as it stands; with_bar: the terminal form.
function Progress:line(with_bar)
    if with_bar == nil then with_bar = self.terminal end
    local elapsed = math.max(self.clock() - self.start, 0)
    local rate = elapsed > 0 and (self.n - self.initial) / elapsed or nil
    local remaining = (rate and rate > 0) and math.max(self.total - self.n, 0) / rate or math.huge
    local frac = self.total > 0 and math.min(self.n / self.total, 1) or 1
    local parts = {}
    if self.desc and self.desc ~= '' then parts[#parts + 1] = self.desc .. ': ' end
    parts[#parts + 1] = ('%3d%%'):format(math.floor(frac * 100))
    if with_bar then
        local filled = math.floor(frac * BAR_WIDTH)
        parts[#parts + 1] = '|' .. ('#'):rep(filled) .. (' '):rep(BAR_WIDTH - filled) .. '| '
    else
        parts[#parts + 1] = ' '
    end
    local rate_text = not rate and '?' or (rate >= 100 and ('%.0f'):format(rate)
        or ('%.2f'):format(rate))
    parts[#parts + 1] = ('%d/%d [%s<%s, %s %s/s'):format(self.n, self.total, clock_text(elapsed),
        clock_text(remaining), rate_text, self.unit)
    if self.postfix then parts[#parts + 1] = ', ' .. self.postfix end
    parts[#parts + 1] = ']'
    return table.concat(parts)
end

function Progress:_draw()
    local text = self:line(true)
    local pad = math.max(self.drawn_width - #text, 0)
    self.file:write('\r', text, (' '):rep(pad))
    self.file:flush()
    self.drawn_width = #text
    self.last_draw = self.clock()
end

function Progress:_print()
    self.file:write(self:line(false), '\n')
    self.file:flush()
    self.printed_n = self.n
    self.last_print = self.clock()
end

-- Shows the bar if it is due: every mininterval on a terminal, else at each `every` of n.
function Progress:_refresh()
    if not self.active then return end
    local now = self.clock()
    if self.terminal then
        if now - self.last_draw >= self.mininterval or self.n >= self.total then self:_draw() end
        return
    end
    local due = now - self.last_print >= self.every_secs
    if self.total > 0 then
        local mark = math.floor(self.n / (self.total * self.every) + 1e-9)
        if mark >= self.next_mark then
            due = true
            self.next_mark = mark + 1
        end
    end
    if due and self.printed_n ~= self.n then self:_print() end
end

-- k more steps done (default 1).
function Progress:update(k)
    if self.closed then fail('.update', 'the bar is closed') end
    k = k == nil and 1 or k
    if type(k) ~= 'number' or k < 0 or k ~= k then
        fail('.update', ('k must be a non-negative number of steps, got %s'):format(tostring(k)))
    end
    self.n = self.n + k
    self:_refresh()
end

-- Figures shown after the rate, as name=value (floats with 4 significant digits), names
-- sorted; nil clears them.
function Progress:set_postfix(values)
    if values == nil then
        self.postfix = nil
        return
    end
    if type(values) ~= 'table' then
        fail('.set_postfix', ('values must be a table {name = value}, got %s'):format(
            type(values)))
    end
    local names = {}
    for name, v in pairs(values) do
        if type(name) ~= 'string' then
            fail('.set_postfix', ('names must be strings, got %s'):format(tostring(name)))
        end
        local t = type(v)
        if t ~= 'number' and t ~= 'string' and t ~= 'boolean' then
            fail('.set_postfix', ('%s must be a number, string or boolean, got %s'):format(name,
                t))
        end
        names[#names + 1] = name
    end
    table.sort(names)
    for i, name in ipairs(names) do names[i] = name .. '=' .. value_text(values[name]) end
    self.postfix = #names > 0 and table.concat(names, ', ') or nil
end

function Progress:set_description(desc)
    if desc ~= nil and type(desc) ~= 'string' then
        fail('.set_description', ('desc must be a string, got %s'):format(type(desc)))
    end
    self.desc = desc
end

-- The final state: the bar drawn once more and the line ended (terminal), or the last plain line
-- when the previous one was not at the current count. Closing twice does nothing.
function Progress:close()
    if self.closed then return end
    self.closed = true
    if not self.active then return end
    if self.terminal then
        self:_draw()
        self.file:write('\n')
        self.file:flush()
    elseif self.printed_n ~= self.n then
        self:_print()
    end
end

Progress.__close = Progress.close

function M.progress(n, opts) return Progress(n, opts) end

return M
