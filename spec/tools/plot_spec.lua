-- spec/tools/plot_spec.lua: `ddplua plot` (lua/ddplua/tools/plot.lua and its svg_chart, ticks and
-- metrics_file modules): the SVG read back as XML-ish text (balanced tags, one curve per series
-- and file, legend entries outside the plot area, tick labels monotone and evenly spaced by
-- 1, 2 or 5 x 10^k, every point inside its panel), the choice of panels, series and x axis,
-- values that are skipped, the error messages (file and line named) and exit statuses, the
-- command line (subcommand, help, a script named plot), and that rsvg-convert renders the
-- picture where it is installed (tools/install-deps.sh does not install it: see
-- docs/guide/tools.md).
local S = require 'shell_util'
local ticks = require 'ddplua.tools.ticks'
local plot = require 'ddplua.tools.plot'

local tmp = S.new_tmpdir()

local function file(name, text)
    local path = tmp .. '/' .. name
    S.write(path, text)
    return path
end

-- `ddplua <args>` in tmp: output (stdout and stderr) and exit status
local function ddplua(args) return S.sh(('cd %s && %s %s'):format(S.q(tmp), S.q(S.bin), args)) end

-- Two ranks of a training run: loss falls from ~2.3, accuracy rises, a constant lr, a string
-- and a boolean field (skipped), a start record without step (skipped: the file has steps).
local function rank_file(name, rank)
    local lines = { '{"event":"start","params":1234,"lr":0.1}' }
    for s = 1, 60 do
        local loss = 2.3 * math.exp(-s / 15) + 0.3 + 0.01 * rank
        lines[#lines + 1] = ('{"step":%d,"epoch":%d,"loss":%.6f,"accuracy":%.6f,"lr":0.1,'
            .. '"phase":"train","ok":true,"extra":null,"nested":{"a":1}}'):format(s * 10, s // 20,
                loss, 1 - loss / 2.7)
    end
    return file(name, table.concat(lines, '\n') .. '\n')
end

-- ---- reading the SVG back ----

-- attributes of a tag's text
local function attrs(s)
    local a = {}
    for k, v in s:gmatch('([%w:-]+)="([^"]*)"') do a[k] = v end
    return a
end

-- Every element in document order: {name, attrs, text (for <text>), depth}; fails unless every
-- tag is closed in order (well-formed as XML, bar entities, which esc() writes).
local function elements(svg)
    local list, stack = {}, {}
    local body = svg:gsub('^<%?xml[^>]*%?>%s*', '')
    assert.is_nil(body:find('&[^#%a]'), 'a bare & in the SVG')
    local pos = 1
    while true do
        local s, e, close, name, rest, selfclose = body:find('<(/?)([%w:-]+)([^>]-)(/?)>', pos)
        if not s then break end
        if close == '/' then
            assert.are.equal(table.remove(stack), name, 'unbalanced </' .. name .. '>')
        else
            local el = { name = name, attrs = attrs(rest), depth = #stack }
            if name == 'text' and selfclose == '' then
                el.text = body:match('^([^<]*)</text>', e + 1)
            end
            list[#list + 1] = el
            if selfclose == '' then stack[#stack + 1] = name end
        end
        pos = e + 1
    end
    assert.are.equal(0, #stack, 'unclosed elements: ' .. table.concat(stack, ' '))
    assert.are.equal('svg', list[1].name)
    return list
end

local function of_class(els, class)
    local out = {}
    for _, el in ipairs(els) do
        if el.attrs.class == class then out[#out + 1] = el end
    end
    return out
end

-- The panels in order, each with its plot area rectangle, curves, tick-y and legend labels.
local function panels(els)
    local list, cur = {}, nil
    for _, el in ipairs(els) do
        local c = el.attrs.class
        if c == 'panel' then
            cur = { keys = el.attrs['data-keys'], curves = {}, ticks = {}, legend = {} }
            list[#list + 1] = cur
        elseif cur and c == 'plot-area' then
            local a = el.attrs
            cur.x0, cur.y0 = tonumber(a.x), tonumber(a.y)
            cur.x1, cur.y1 = cur.x0 + tonumber(a.width), cur.y0 + tonumber(a.height)
        elseif cur and c == 'curve' then
            cur.curves[#cur.curves + 1] = el.attrs
        elseif cur and c == 'tick-y' then
            cur.ticks[#cur.ticks + 1] = { pos = tonumber(el.attrs.y), label = el.text }
        elseif cur and c == 'legend-label' then
            cur.legend[#cur.legend + 1] = { x = tonumber(el.attrs.x), text = el.text }
        end
    end
    return list
end

local function points(d)
    local pts = {}
    for x, y in d:gmatch('[ML]([-%d.]+),([-%d.]+)') do pts[#pts + 1] = { tonumber(x), tonumber(y) } end
    return pts
end

-- tick labels in screen order read as numbers rise monotonically by one 1/2/5 x 10^k step
local function assert_ticks(list, descending_pos)
    table.sort(list, function(a, b)
        if descending_pos then return a.pos > b.pos end
        return a.pos < b.pos
    end)
    assert.is_true(#list >= 3, 'fewer than 3 ticks')
    local values = {}
    for i, t in ipairs(list) do values[i] = assert(tonumber(t.label), t.label) end
    local step = values[2] - values[1]
    local mant = step / 10 ^ math.floor(math.log(step, 10) + 1e-9)
    local nice = false
    for _, m in ipairs({ 1, 2, 5, 10 }) do nice = nice or math.abs(mant - m) < 1e-6 end
    assert.is_true(nice, 'tick step ' .. step)
    for i = 2, #values do
        assert.is_true(values[i] > values[i - 1], 'ticks not increasing')
        assert.is_near(step, values[i] - values[i - 1], step * 1e-6)
    end
    local decimals = #(list[1].label:match('%.(%d+)$') or '')
    for _, t in ipairs(list) do assert.are.equal(decimals, #(t.label:match('%.(%d+)$') or '')) end
end

teardown(function() os.execute('rm -rf ' .. S.q(tmp)) end)

describe('ddplua plot: the chart', function()
    rank_file('rank0.jsonl', 0)
    rank_file('rank1.jsonl', 1)
    local out, code = ddplua('plot rank0.jsonl rank1.jsonl -o two.svg')
    local svg = S.slurp(tmp .. '/two.svg')

    it('writes the SVG and says what it drew', function()
        assert.are.equal(0, code, out)
        assert.is_truthy(out:find('wrote two.svg (6 curves of 3 series in 3 panels)', 1, true), out)
        assert.is_truthy(svg:find('^<%?xml'))
        assert.is_falsy(S.slurp(tmp .. '/two.svg.tmp') ~= '', 'temporary file left behind')
    end)

    it('is well-formed, with a title and an x axis label', function()
        local els = elements(svg)
        assert.are.equal('rank0.jsonl, rank1.jsonl', of_class(els, 'title')[1].text)
        assert.are.equal('step', of_class(els, 'axis-label-x')[1].text)
    end)

    it('one curve per series and file, one legend entry each, outside the plot area', function()
        local ps = panels(elements(svg))
        -- loss, accuracy and lr: three scales; epoch is a counter, params a single point,
        -- phase/ok/extra/nested not numbers
        assert.are.same({ 'loss', 'accuracy', 'lr' }, { ps[1].keys, ps[2].keys, ps[3].keys })
        local seen = {}
        for _, p in ipairs(ps) do
            assert.are.equal(2, #p.curves)
            assert.are.equal(2, #p.legend)
            for i, c in ipairs(p.curves) do
                local id = c['data-series'] .. '/' .. c['data-file']
                assert.is_nil(seen[id], id)
                seen[id] = true
                assert.are.equal(('%s (%s)'):format(c['data-series'], c['data-file']),
                    p.legend[i].text)
                assert.is_true(p.legend[i].x > p.x1, 'legend inside the plot area')
                assert.are.equal(60, #points(c.d)) -- the start record has no step
            end
            -- one series per panel: the ranks differ by colour
            assert.are_not.equal(p.curves[1].stroke, p.curves[2].stroke)
        end
        assert.is_true(seen['loss/rank0'] and seen['loss/rank1'] and seen['accuracy/rank1'])
    end)

    it('every point lies inside its plot area; panels do not overlap', function()
        local ps = panels(elements(svg))
        for i, p in ipairs(ps) do
            for _, c in ipairs(p.curves) do
                for _, pt in ipairs(points(c.d)) do
                    assert.is_true(pt[1] >= p.x0 - 1e-6 and pt[1] <= p.x1 + 1e-6, 'x ' .. pt[1])
                    assert.is_true(pt[2] >= p.y0 - 1e-6 and pt[2] <= p.y1 + 1e-6, 'y ' .. pt[2])
                end
            end
            if i > 1 then assert.is_true(p.y0 > ps[i - 1].y1 + 10) end
        end
    end)

    it('tick labels are monotone, evenly spaced by 1, 2 or 5 x 10^k, one format per axis', function()
        local els = elements(svg)
        for _, p in ipairs(panels(els)) do assert_ticks(p.ticks, true) end
        local xt = {}
        for _, el in ipairs(of_class(els, 'tick-x')) do
            xt[#xt + 1] = { pos = tonumber(el.attrs.x), label = el.text }
        end
        assert_ticks(xt, false)
        assert.are.equal('0', xt[1].label)
        assert.are.equal('600', xt[#xt].label)
    end)

    it('rsvg-convert renders it, where installed', function()
        local have = os.execute('command -v rsvg-convert >/dev/null 2>&1') == true
        if have then
            local png = tmp .. '/two.png'
            local msg, rc = S.sh(('rsvg-convert -o %s %s'):format(S.q(png), S.q(tmp .. '/two.svg')))
            assert.are.equal(0, rc, msg)
            assert.are.equal('\137PNG', S.slurp(png):sub(1, 4))
        end
        -- without it the structure checks above are what stands for the renderer
        assert.is_true(#svg > 1000)
    end)
end)

describe('ddplua plot: series, panels and axes', function()
    it('series of one kind and range share a panel; several files get a dash pattern each', function()
        local lines1, lines2 = {}, {}
        for e = 1, 5 do
            lines1[#lines1 + 1] = ('{"epoch":%d,"train_loss":%.3f,"test_loss":%.3f,"test_acc":%.3f}')
                :format(e, 0.6 - 0.05 * e, 0.55 - 0.03 * e, 0.8 + 0.01 * e)
            lines2[#lines2 + 1] = ('{"epoch":%d,"train_loss":%.3f,"test_loss":%.3f,"test_acc":%.3f}')
                :format(e, 0.62 - 0.05 * e, 0.56 - 0.03 * e, 0.79 + 0.01 * e)
        end
        file('r1.jsonl', table.concat(lines1, '\n') .. '\n')
        file('r2.jsonl', table.concat(lines2, '\n') .. '\n')
        local out, code = ddplua('plot r1.jsonl r2.jsonl')
        assert.are.equal(0, code, out)
        local els = elements(S.slurp(tmp .. '/r1.svg')) -- default: beside the first input
        local ps = panels(els)
        -- within a record fields come in name order (a Lua table keeps none)
        assert.are.same({ 'test_loss,train_loss', 'test_acc' }, { ps[1].keys, ps[2].keys })
        assert.are.equal('epoch', of_class(els, 'axis-label-x')[1].text) -- no step: epoch
        local dash = {}
        for _, c in ipairs(ps[1].curves) do
            dash[c['data-file']] = dash[c['data-file']] or (c['stroke-dasharray'] or 'solid')
            assert.are.equal(dash[c['data-file']], c['stroke-dasharray'] or 'solid')
        end
        assert.are_not.equal(dash.r1, dash.r2)
        assert.are.equal(4, #ps[1].curves)
        assert.are.equal(2, #ps[2].curves)
        for _, p in ipairs(ps) do
            for _, c in ipairs(p.curves) do assert.are.equal(5, #points(c.d)) end
        end
    end)

    it('--y picks and orders series; --x picks the axis; no x field: the record number', function()
        file('plain.jsonl', '{"a":1,"b":10}\n{"a":2,"b":30}\n\n{"a":3,"b":20}\n')
        local out, code = ddplua('plot plain.jsonl --y b -o b.svg --title "B only"')
        assert.are.equal(0, code, out)
        local els = elements(S.slurp(tmp .. '/b.svg'))
        assert.are.equal('record', of_class(els, 'axis-label-x')[1].text)
        assert.are.equal('B only', of_class(els, 'title')[1].text)
        local curves = of_class(els, 'curve')
        assert.are.equal(1, #curves)
        assert.are.equal('b', curves[1].attrs['data-series'])
        assert.are.equal(3, #points(curves[1].attrs.d))

        out, code = ddplua('plot plain.jsonl --x=a -o a.svg')
        assert.are.equal(0, code, out)
        els = elements(S.slurp(tmp .. '/a.svg'))
        assert.are.equal('a', of_class(els, 'axis-label-x')[1].text)
        assert.are.equal(1, #of_class(els, 'curve'))
    end)

    it('an incomplete last line (a run still writing) is left out with a warning', function()
        file('live.jsonl', '{"step":1,"loss":2}\n{"step":2,"loss":1.5}\n{"step":3,"lo')
        local out, code = ddplua('plot live.jsonl')
        assert.are.equal(0, code, out)
        assert.is_truthy(out:find('live.jsonl:3: incomplete last line left out', 1, true), out)
        local curves = of_class(elements(S.slurp(tmp .. '/live.svg')), 'curve')
        assert.are.equal(2, #points(curves[1].attrs.d))
    end)

    it('the library call returns the path and what was drawn', function()
        local path, summary = plot.plot({ files = { tmp .. '/r1.jsonl' }, output = tmp .. '/lib.svg',
            y = { 'test_acc' } })
        assert.are.equal(tmp .. '/lib.svg', path)
        assert.are.same({ panels = 1, curves = 1, series = 1 }, summary)
    end)
end)

describe('ddplua plot: errors', function()
    local function fails(args, status, pattern)
        local out, code = ddplua(args)
        assert.are.equal(status, code, out)
        assert.is_truthy(out:find(pattern, 1, true), out)
        return out
    end

    it('a missing file, named', function()
        fails('plot nothere.jsonl', 1, 'ddplua plot: cannot read nothere.jsonl: No such file')
    end)

    it('a line that is not JSON, or not an object: file and line named', function()
        file('bad.jsonl', '{"step":1,"loss":2}\n\n{"step":2,"loss":}\n{"step":3}\n')
        fails('plot bad.jsonl', 1, "ddplua plot: bad.jsonl:3: column 18: expected a value")
        file('arr.jsonl', '{"step":1,"loss":2}\n[1,2]\n')
        fails('plot arr.jsonl', 1, 'ddplua plot: arr.jsonl:2: expected a JSON object per line, got an array')
        file('num.jsonl', '3\n')
        fails('plot num.jsonl', 1, 'num.jsonl:1: expected a JSON object per line, got number')
    end)

    it('a file with no numeric series, or no records', function()
        file('words.jsonl', '{"step":1,"phase":"a"}\n{"step":2,"phase":"b","ok":true}\n')
        fails('plot words.jsonl', 1, 'ddplua plot: words.jsonl: no numeric series in its 2 records')
        file('empty.jsonl', '\n\n')
        fails('plot empty.jsonl', 1, 'ddplua plot: empty.jsonl: no records')
    end)

    it('--y naming a series that no file has; a file with none of them; --x missing', function()
        file('l.jsonl', '{"step":1,"loss":2}\n{"step":2,"loss":1}\n')
        file('acc.jsonl', '{"step":1,"acc":0.5}\n{"step":2,"acc":0.6}\n')
        fails('plot l.jsonl --y loss,lossy', 1, 'no file has the series "lossy" (--y)')
        fails('plot l.jsonl acc.jsonl --y loss', 1, 'acc.jsonl: none of the series loss (--y)')
        fails('plot l.jsonl --x time', 1, 'l.jsonl: no record has a number in the x field "time"')
    end)

    it('bad usage: exit status 2 and the usage', function()
        fails('plot', 2, 'no metrics file given')
        fails('plot l.jsonl --colour red', 2, 'unknown option --colour')
        fails('plot l.jsonl -o', 2, '-o needs a value')
        fails('plot l.jsonl --width 5', 2, '--width expects an integer from 400 to 20000')
        fails('plot l.jsonl --y ,', 2, '--y expects field names')
    end)

    it('never overwrites an input, never leaves half a file', function()
        file('x.svg', '{"step":1,"loss":2}\n{"step":2,"loss":1}\n')
        fails('plot x.svg', 1, 'the output x.svg would overwrite an input')
        fails('plot l.jsonl -o nodir/out.svg', 1, 'cannot write nodir/out.svg')
        assert.are.equal('', S.slurp(tmp .. '/nodir/out.svg.tmp'))
    end)
end)

describe('ddplua plot: the command line', function()
    it('plot --help prints the usage; ddplua --help lists plot', function()
        local out, code = ddplua('plot --help')
        assert.are.equal(0, code)
        assert.is_truthy(out:find('usage: ddplua plot FILE.jsonl', 1, true), out)
        out = ddplua('--help')
        assert.is_truthy(out:find('\n  plot FILE.jsonl...', 1, true), out)
    end)

    it('the subcommand wins over a script named plot; ./plot and -- plot run the script', function()
        file('plot', 'print("the script", ...)\n')
        local out, code = ddplua('plot')
        assert.are.equal(2, code, out)
        assert.is_truthy(out:find('no metrics file given', 1, true), out)
        out, code = ddplua('./plot x')
        assert.are.equal(0, code, out)
        assert.are.equal('the script\tx\n', out)
        out, code = ddplua('-- plot y')
        assert.are.equal(0, code, out)
        assert.are.equal('the script\ty\n', out)
        file('plot.lua', 'print("plot.lua ran")\n')
        out, code = ddplua('plot.lua')
        assert.are.equal(0, code, out)
        assert.are.equal('plot.lua ran\n', out)
    end)
end)

describe('ticks.nice', function()
    it('steps of 1, 2 or 5 x 10^k covering the range, one format', function()
        local t = ticks.nice(0.28, 0.52, 4)
        assert.are.equal(0.1, t.step)
        assert.are.same({ '0.2', '0.3', '0.4', '0.5', '0.6' }, t.labels)
        t = ticks.nice(3, 1994, 8)
        assert.are.equal(500, t.step)
        assert.are.same({ '0', '500', '1000', '1500', '2000' }, t.labels)
        t = ticks.nice(-0.3, 0.3, 6)
        assert.are.same({ '-0.3', '-0.2', '-0.1', '0.0', '0.1', '0.2', '0.3' }, t.labels)
        t = ticks.nice(0.8, 0.95, 5)
        assert.are.same({ '0.80', '0.85', '0.90', '0.95' }, t.labels)
    end)

    it('a constant gets a band around it; tiny and huge values use exponents', function()
        assert.are.same({ '-1.0', '-0.5', '0.0', '0.5', '1.0' }, ticks.nice(0, 0, 4).labels)
        local t = ticks.nice(5, 5, 4)
        assert.is_true(t.lo < 5 and t.hi > 5)
        t = ticks.nice(1e-6, 5e-6, 4)
        assert.are.equal('1e-06', t.labels[1])
        t = ticks.nice(1e8, 3e8, 4)
        assert.are.equal('1.5e+08', t.labels[2])
    end)

    it('refuses a range that is not finite', function()
        assert.has_error(function() ticks.nice(0, math.huge, 4) end)
        assert.has_error(function() ticks.nice(2, 1, 4) end)
    end)
end)
