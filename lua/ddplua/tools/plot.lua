-- lua/ddplua/tools/plot.lua: `ddplua plot`, the metrics of one or more runs as an SVG chart.
-- defines: plot.USAGE, plot.parse_args(args) -> opts, plot.plot(opts) -> out_path, summary,
--          plot.main(args) -> exit status.
--
--   ddplua plot FILE.jsonl [FILE.jsonl ...] [-o OUT.svg] [--x FIELD] [--y A,B,...]
--               [--title TEXT] [--width PX]
--
-- Each FILE holds JSON lines (lua/ddplua/tools/metrics_file.lua reads them); several files are
-- several runs or ranks, drawn as one curve each per series. --x names the x field (default
-- `step`, else `epoch`; a file with neither is plotted against the record number; a file
-- without the field --x names is an error); --y picks and orders the series (default: every
-- numeric field with at least two points, counters such as epoch left out). The picture is
-- lua/ddplua/tools/svg_chart.lua's. The chart goes to OUT.svg, by default beside the first
-- input with its extension replaced (runs/a.jsonl -> runs/a.svg), written through a temporary
-- file and a rename so that a failure never leaves half a picture.
-- Also usable from a stock lua5.4: require('ddplua.tools.plot').main({'a.jsonl', '-o', 'a.svg'}).
local metrics_file = require 'ddplua.tools.metrics_file'
local svg_chart = require 'ddplua.tools.svg_chart'

local plot = {}

plot.USAGE = [[
usage: ddplua plot FILE.jsonl [FILE.jsonl ...] [-o OUT.svg] [--x FIELD] [--y A,B,...]
                   [--title TEXT] [--width PX]
Draws the metrics of training runs (JSON lines: one object per line, as
examples/train.lua --metrics and ddpl.utils.MetricsLogger write) as an SVG chart.
  FILE...        one or more metrics files: several runs or ranks, one curve each
  -o OUT.svg     the chart (default: the first FILE with its extension replaced by .svg)
  --x FIELD      the x axis (default: step, else epoch, else the record number)
  --y A,B,...    the series to draw, in this order (default: every numeric field with
                 two points or more, but the counters step, epoch, iteration)
  --title TEXT   the chart's title (default: the file names)
  --width PX     the picture's width in pixels (default 960)
Series of comparable range share a panel; others (loss and accuracy) get their own, stacked
on the shared x axis.
]]

local function fail(fmt, ...) error('plot: ' .. fmt:format(...), 0) end

-- options that take a value: long name -> field
local VALUED = { ['-o'] = 'output', ['--output'] = 'output', ['--x'] = 'x', ['--y'] = 'y',
    ['--title'] = 'title', ['--width'] = 'width' }

function plot.parse_args(args)
    local opts = { files = {} }
    local i = 1
    local only_files = false
    while i <= #args do
        local a = args[i]
        local name, inline = a:match('^(%-%-[%w-]+)=(.*)$')
        name = name or a
        if only_files or a == '-' or not a:match('^%-') then
            opts.files[#opts.files + 1] = a
        elseif a == '--' then
            only_files = true
        elseif a == '-h' or a == '--help' then
            opts.help = true
        elseif VALUED[name] then
            local v = inline
            if not v then
                i = i + 1
                v = args[i]
                if v == nil then fail('%s needs a value', name) end
            end
            opts[VALUED[name]] = v
        else
            fail('unknown option %s', a)
        end
        i = i + 1
    end
    if opts.help then return opts end
    if #opts.files == 0 then fail('no metrics file given') end
    if opts.width then
        local w = math.tointeger(tonumber(opts.width))
        if not w or w < 400 or w > 20000 then
            fail('--width expects an integer from 400 to 20000, got %s', opts.width)
        end
        opts.width = w
    end
    if opts.y then
        local keys = {}
        for k in opts.y:gmatch('[^,]+') do
            k = k:match('^%s*(.-)%s*$')
            if k ~= '' then keys[#keys + 1] = k end
        end
        if #keys == 0 then fail('--y expects field names separated by commas, got %q', opts.y) end
        opts.y = keys
    end
    return opts
end

-- "runs/a.jsonl" -> "runs/a.svg"
local function default_output(path)
    local stem = path:match('^(.*)%.[^./]*$') or path
    return stem .. '.svg'
end

local function basename(path) return path:match('([^/]*)$') end

-- A short name per file for legends: the file name without extension, or the path as given
-- when two files share a name (runs/a/metrics.jsonl and runs/b/metrics.jsonl).
local function label_runs(runs)
    local count = {}
    for _, r in ipairs(runs) do
        r.label = basename(r.path):gsub('%.[^.]*$', '')
        count[r.label] = (count[r.label] or 0) + 1
    end
    for _, r in ipairs(runs) do
        if count[r.label] > 1 then r.label = r.path end
    end
end

local function default_title(runs)
    local names = {}
    for _, r in ipairs(runs) do names[#names + 1] = basename(r.path) end
    local title = table.concat(names, ', ')
    if #title > 70 then title = ('%s and %d more'):format(names[1], #names - 1) end
    return title
end

local function write_atomically(path, text)
    local tmp = path .. '.tmp'
    local f, err = io.open(tmp, 'wb')
    if not f then fail('cannot write %s: %s', path, err) end
    local ok, werr = f:write(text)
    local closed, cerr = f:close()
    if not ok or not closed then
        os.remove(tmp)
        fail('cannot write %s: %s', path, werr or cerr)
    end
    local renamed, rerr = os.rename(tmp, path)
    if not renamed then
        os.remove(tmp)
        fail('cannot write %s: %s', path, rerr)
    end
end

-- Counters that only restate the x axis (an epoch number over steps) are not drawn unless --y
-- asks for them.
local COUNTERS = { step = true, epoch = true, iteration = true, iter = true }

-- The series to draw by default: every numeric series of the runs that has two points somewhere
-- (a value logged once, such as the parameter count of a start record, is not a curve) and is
-- not a counter; failing that, the single points; failing that, the counters. Losses first,
-- then accuracies, then the rest, each group in order of first appearance.
local function default_keys(runs)
    local all, seen = {}, {}
    for _, run in ipairs(runs) do
        for _, k in ipairs(run.keys) do
            if not seen[k] then
                seen[k] = true
                all[#all + 1] = k
            end
        end
    end
    local function points(k)
        local most = 0
        for _, run in ipairs(runs) do
            if run.series[k] then most = math.max(most, #run.series[k].x) end
        end
        return most
    end
    local picked
    for _, accept in ipairs({
        function(k) return not COUNTERS[k] and points(k) >= 2 end,
        function(k) return not COUNTERS[k] end,
        function() return true end,
    }) do
        picked = {}
        for _, k in ipairs(all) do
            if accept(k) then picked[#picked + 1] = k end
        end
        if #picked > 0 then break end
    end
    local groups = { loss = {}, accuracy = {}, other = {} }
    for _, k in ipairs(picked) do
        local g = groups[svg_chart.kind(k) or 'other']
        g[#g + 1] = k
    end
    local keys = {}
    for _, g in ipairs({ groups.loss, groups.accuracy, groups.other }) do
        table.move(g, 1, #g, #keys + 1, keys)
    end
    return keys
end

-- Reads the files, draws them, writes the SVG. Returns its path and {panels, curves, series}.
function plot.plot(opts)
    local xfields = opts.x and { opts.x } or { 'step', 'epoch' }
    local runs = {}
    for _, path in ipairs(opts.files) do
        local run = metrics_file.read(path, xfields, { x_required = opts.x ~= nil })
        if #run.keys == 0 then
            fail('%s: no numeric series in its %d records (fields other than the x axis, %s, '
                .. 'holding numbers)', path, run.n_records, run.x_label)
        end
        runs[#runs + 1] = run
    end
    local keys = opts.y
    if keys then
        -- every file must have at least one of the series asked for, and every series a file
        for _, run in ipairs(runs) do
            local any = false
            for _, k in ipairs(keys) do any = any or run.series[k] ~= nil end
            if not any then
                fail('%s: none of the series %s (--y) is in it; its numeric series: %s', run.path,
                    table.concat(keys, ', '), table.concat(run.keys, ', '))
            end
        end
        for _, k in ipairs(keys) do
            local found = false
            for _, run in ipairs(runs) do found = found or run.series[k] ~= nil end
            if not found then
                fail('no file has the series %q (--y); numeric series: %s', k,
                    table.concat(runs[1].keys, ', '))
            end
        end
    else
        keys = default_keys(runs)
    end
    label_runs(runs)
    -- files plotted against different fields say so on the axis: "step or record"
    local labels, seen = {}, {}
    for _, run in ipairs(runs) do
        if not seen[run.x_label] then
            seen[run.x_label] = true
            labels[#labels + 1] = run.x_label
        end
    end
    local x_label = table.concat(labels, ' or ')
    local out = opts.output or default_output(opts.files[1])
    for _, path in ipairs(opts.files) do
        if path == out then fail('the output %s would overwrite an input; choose -o', out) end
    end
    local svg, summary = svg_chart.render(runs, keys,
        { title = opts.title or default_title(runs), x_label = x_label, width = opts.width })
    write_atomically(out, svg)
    summary.series = #keys
    return out, summary
end

-- The command: returns 0 (done), 1 (an error, printed) or 2 (bad usage, printed with usage).
function plot.main(args)
    local ok, opts = pcall(plot.parse_args, args)
    if not ok then
        io.stderr:write('ddplua ', tostring(opts), '\n', plot.USAGE)
        return 2
    end
    if opts.help then
        io.stdout:write(plot.USAGE)
        return 0
    end
    local done, out, summary = xpcall(plot.plot, function(e)
        -- our own errors are for the user; anything else is a bug and keeps its traceback
        if type(e) == 'string' and e:match('^plot: ') then return e end
        return debug.traceback(tostring(e), 2)
    end, opts)
    if not done then
        io.stderr:write('ddplua ', out, '\n')
        return 1
    end
    io.stdout:write(('ddplua plot: wrote %s (%d curves of %d series in %d panels)\n'):format(out,
        summary.curves, summary.series, summary.panels))
    return 0
end

return plot
