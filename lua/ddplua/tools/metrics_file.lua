-- lua/ddplua/tools/metrics_file.lua: reads a metrics file (JSON lines, one object per record, as
-- examples/train.lua --metrics and ddpl.utils.MetricsLogger write) into numeric series, for
-- `ddplua plot` (lua/ddplua/tools/plot.lua).
-- defines: metrics_file.read(path, xfields [, {x_required}]) -> run.
--
-- run = { path, n_records, x_label, keys = {series names in order of first appearance},
--         series = { [name] = { x = {...}, y = {...} } } }.
-- A series is every field (other than the x field) that holds a finite number; strings,
-- booleans, null, nested values and records without the field are skipped, so records of
-- several kinds (start, epoch, end) mix freely. The x field is the first of the list xfields
-- that some record holds as a finite number (`ddplua plot` asks for step, then epoch); a file
-- with none of them counts records instead (1, 2, ...: x_label "record") unless
-- opts.x_required, which makes it an error. Records without the x field are skipped.
-- Blank lines are ignored. A line that is not a JSON object is an error naming the file and
-- line, except a last line without its newline (a run still writing it), which is left out with
-- a warning on stderr.
local json = require 'ddplua.json'

local metrics_file = {}

local function finite_number(v)
    return math.type(v) ~= nil and v == v and v ~= math.huge and v ~= -math.huge
end

local function fail(fmt, ...) error('plot: ' .. fmt:format(...), 0) end

-- The JSON records of the file, each with its line number.
local function read_records(path)
    local f, err = io.open(path, 'rb')
    if not f then fail('cannot read %s', err) end
    local text, rerr = f:read('a')
    f:close()
    if not text then fail('cannot read %s: %s', path, rerr) end
    local records, line_no = {}, 0
    for line, newline in text:gmatch('([^\n]*)(\n?)') do
        line_no = line_no + 1
        if newline == '' and line == '' then break end -- the end after a final newline
        if line:find('%S') then
            local ok, rec = pcall(json.decode, line, 'JSON')
            local unfinished = newline == ''
            if not ok then
                if unfinished then
                    io.stderr:write(('ddplua plot: %s:%d: incomplete last line left out\n')
                        :format(path, line_no))
                    break
                end
                -- json's "JSON: line 1, column C: ..." becomes "path:LINE: column C: ..."
                fail('%s:%d: %s', path, line_no, (tostring(rec):gsub('^JSON: line 1, ', '')))
            end
            if type(rec) ~= 'table' or rec == json.null or (rec[1] ~= nil) then
                fail('%s:%d: expected a JSON object per line, got %s', path, line_no,
                    rec == json.null and 'null' or type(rec) == 'table' and 'an array'
                    or type(rec))
            end
            records[#records + 1] = { line = line_no, fields = rec }
        end
    end
    return records
end

-- the first of xfields that some record holds as a number, or nil
local function pick_x(records, xfields)
    for _, name in ipairs(xfields) do
        for _, r in ipairs(records) do
            if finite_number(r.fields[name]) then return name end
        end
    end
    return nil
end

function metrics_file.read(path, xfields, opts)
    opts = opts or {}
    local records = read_records(path)
    if #records == 0 then fail('%s: no records (an empty file?)', path) end
    local xfield = pick_x(records, xfields)
    local has_x = xfield ~= nil
    if not has_x and opts.x_required then
        fail('%s: no record has a number in the x field %q (--x)', path, xfields[1])
    end
    local run = { path = path, n_records = #records, keys = {}, series = {},
        x_label = has_x and xfield or 'record' }
    for i, r in ipairs(records) do
        local x = i
        if has_x then x = r.fields[xfield] end
        if finite_number(x) then
            -- field order within a JSON object is lost in a Lua table: sort the names, so that
            -- the order of first appearance is the same on every run
            local names = {}
            for k, v in pairs(r.fields) do
                if k ~= xfield and finite_number(v) then names[#names + 1] = k end
            end
            table.sort(names)
            for _, k in ipairs(names) do
                local s = run.series[k]
                if not s then
                    s = { x = {}, y = {} }
                    run.series[k] = s
                    run.keys[#run.keys + 1] = k
                end
                s.x[#s.x + 1] = x
                s.y[#s.y + 1] = r.fields[k]
            end
        end
    end
    return run
end

return metrics_file
