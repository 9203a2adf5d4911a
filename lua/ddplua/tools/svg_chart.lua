-- lua/ddplua/tools/svg_chart.lua: draws series of numbers as an SVG line chart, the picture of
-- `ddplua plot` (lua/ddplua/tools/plot.lua).
-- defines: svg_chart.panels(keys, runs) -> {{keys...}, ...},
--          svg_chart.kind(key) -> 'loss' | 'accuracy' | nil,
--          svg_chart.render(runs, keys [, {title, width}]) -> svg text, summary.
--
-- runs are lua/ddplua/tools/metrics_file.lua's (one per file, each with a `label`); keys the
-- series to draw. The chart is one or more panels stacked on a shared x axis, each with its own
-- y scale and its own legend to the right of it (outside the plot area, so it never covers a
-- curve). Series go to one panel when their values are comparable (see compatible()); loss and
-- accuracy never share one. One <path class="curve"> per series and file; colour tells series
-- apart, and with several files (several runs or ranks of one job) each file has its own dash
-- pattern, or its own colour where every panel holds one series. Curves with few points also get a dot per point, so a 2-epoch run still shows.
-- Elements carry classes (panel, plot-area, tick-x, tick-y, curve, legend-label) and data-
-- attributes so that tests and scripts can read the picture back.
local ticks = require 'ddplua.tools.ticks'

local svg_chart = {}

-- Tableau 10: distinct in colour and in lightness (legible when printed in grey).
local PALETTE = { '#4e79a7', '#f28e2b', '#e15759', '#76b7b2', '#59a14f', '#edc948', '#b07aa1',
    '#ff9da7', '#9c755f', '#bab0ac' }
local DASHES = { nil, '7 4', '2 3', '10 3 2 3', '4 4 1 4' }
local CHAR_W = 7         -- px per character at 12 px sans-serif (a little over the average)
local MARKER_MAX = 40    -- curves with at most this many points get a dot per point

-- ---- which series share a panel ----

-- The kind of quantity a name suggests ('loss', 'accuracy' or nil): different kinds never share
-- a y scale.
function svg_chart.kind(key)
    local k = key:lower()
    if k:find('acc') then return 'accuracy' end
    if k:find('loss') then return 'loss' end
    return nil
end

-- [lo, hi] widened to hold every value of list
local function extend(lo, hi, list)
    for _, v in ipairs(list) do
        if v < lo then lo = v end
        if v > hi then hi = v end
    end
    return lo, hi
end

-- [lo, hi] of a series over every run
local function key_range(key, runs)
    local lo, hi = math.huge, -math.huge
    for _, run in ipairs(runs) do
        if run.series[key] then lo, hi = extend(lo, hi, run.series[key].y) end
    end
    return lo, hi
end

-- a range with a span: a constant becomes a band of 10% around it (or +-1e-12 around 0)
local function widened(lo, hi)
    if hi > lo then return lo, hi end
    local pad = math.max(math.abs(lo) * 0.05, 1e-12)
    return lo - pad, hi + pad
end

-- Two ranges go on one scale when they overlap over at least half of the narrower one and
-- neither is more than 20 times wider than the other: each curve then fills a fair part of
-- the panel's height. (train and test loss: together; loss and a constant learning rate: not.)
local function compatible(alo, ahi, blo, bhi)
    alo, ahi = widened(alo, ahi)
    blo, bhi = widened(blo, bhi)
    local aspan, bspan = ahi - alo, bhi - blo
    local overlap = math.min(ahi, bhi) - math.max(alo, blo)
    local narrow, wide = math.min(aspan, bspan), math.max(aspan, bspan)
    return overlap >= 0.5 * narrow and wide <= 20 * narrow
end

-- Groups keys (in order) into panels: a key joins the first panel it is compatible with.
function svg_chart.panels(keys, runs)
    local panels = {}
    for _, key in ipairs(keys) do
        local lo, hi = key_range(key, runs)
        local home
        for _, p in ipairs(panels) do
            if p.kind == svg_chart.kind(key) and compatible(p.lo, p.hi, lo, hi) then
                home = p
                break
            end
        end
        if home then
            home.keys[#home.keys + 1] = key
            home.lo, home.hi = math.min(home.lo, lo), math.max(home.hi, hi)
        else
            panels[#panels + 1] = { keys = { key }, lo = lo, hi = hi, kind = svg_chart.kind(key) }
        end
    end
    return panels
end

-- ---- SVG text ----

local function esc(s)
    return (tostring(s):gsub('[&<>"\']', { ['&'] = '&amp;', ['<'] = '&lt;', ['>'] = '&gt;',
        ['"'] = '&quot;', ["'"] = '&#39;' }))
end

local function num(v) return ('%.2f'):format(v) end

local function text_width(s) return #s * CHAR_W end

-- ---- the chart ----

-- The curves of a panel: one per key and run that has the series. by_run: colour tells runs
-- apart (every panel has one series); otherwise colour tells series apart (key_index: a key's
-- place among all keys, so no two series of the chart share a colour) and, with several runs,
-- a dash pattern per run, the same in every panel.
local function panel_curves(panel, runs, by_run, key_index)
    local curves = {}
    local several_runs = #runs > 1
    for _, key in ipairs(panel.keys) do
        for ri, run in ipairs(runs) do
            local s = run.series[key]
            if s then
                local ci = by_run and ri or key_index[key]
                curves[#curves + 1] = { key = key, run = run, x = s.x, y = s.y,
                    label = several_runs and ('%s (%s)'):format(key, run.label) or key,
                    color = PALETTE[(ci - 1) % #PALETTE + 1],
                    dash = (several_runs and not by_run) and DASHES[(ri - 1) % #DASHES + 1] or nil }
            end
        end
    end
    return curves
end

-- Draws the chart. Returns the SVG text and {panels = n, curves = n}.
function svg_chart.render(runs, keys, opts)
    opts = opts or {}
    local panels = svg_chart.panels(keys, runs)
    local xlo, xhi = math.huge, -math.huge
    local legend_chars, n_curves = 0, 0
    local by_run = #runs > 1
    for _, p in ipairs(panels) do by_run = by_run and #p.keys == 1 end
    local key_index = {}
    for i, k in ipairs(keys) do key_index[k] = i end
    for _, p in ipairs(panels) do
        p.curves = panel_curves(p, runs, by_run, key_index)
        for _, c in ipairs(p.curves) do
            n_curves = n_curves + 1
            legend_chars = math.max(legend_chars, #c.label)
            xlo, xhi = extend(xlo, xhi, c.x)
        end
    end

    -- layout (px): title, panels stacked with gaps, x tick labels and axis name below
    local n = #panels
    local base_h = n <= 2 and 220 or 170
    local gap, top, bottom = 30, 50, 58
    local legend_w = 24 + 8 + legend_chars * CHAR_W + 16
    for _, p in ipairs(panels) do
        p.h = math.max(base_h, #p.curves * 18 + 16)
        p.yt = ticks.nice(p.lo, p.hi, math.max(3, math.floor(p.h / 45)))
    end
    local ylabel_chars = 0
    for _, p in ipairs(panels) do
        for _, l in ipairs(p.yt.labels) do ylabel_chars = math.max(ylabel_chars, #l) end
    end
    local left = 30 + ylabel_chars * CHAR_W + 10
    local width = math.max(opts.width or 960, left + 360 + 16 + legend_w)
    local x0, x1 = left, width - 16 - legend_w
    local xt = ticks.nice(xlo, xhi, math.max(2, math.floor((x1 - x0) / 100)))
    local height = top
    for i, p in ipairs(panels) do
        p.y0 = height
        height = height + p.h + (i < n and gap or 0)
    end
    height = height + bottom

    local function sx(v) return x0 + (v - xt.lo) / (xt.hi - xt.lo) * (x1 - x0) end

    local out = {}
    local function add(fmt, ...) out[#out + 1] = fmt:format(...) end
    add('<?xml version="1.0" encoding="UTF-8"?>')
    add('<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" '
        .. 'font-family="DejaVu Sans, Helvetica, Arial, sans-serif" font-size="12">',
        width, height, width, height)
    add('<rect width="100%%" height="100%%" fill="white"/>')
    add('<text class="title" x="%s" y="30" text-anchor="middle" font-size="16" '
        .. 'font-weight="bold">%s</text>', num(width / 2), esc(opts.title or 'metrics'))

    for i, p in ipairs(panels) do
        local ya, yb = p.y0, p.y0 + p.h -- top and bottom of the plot area
        local function sy(v) return yb - (v - p.yt.lo) / (p.yt.hi - p.yt.lo) * (yb - ya) end
        add('<g class="panel" data-keys="%s">', esc(table.concat(p.keys, ',')))
        add('<rect class="plot-area" x="%s" y="%s" width="%s" height="%s" fill="#fcfcfc" '
            .. 'stroke="#888"/>', num(x0), num(ya), num(x1 - x0), num(p.h))
        for k, v in ipairs(p.yt.values) do
            local y = sy(v)
            if k > 1 and k < #p.yt.values then
                add('<line class="grid" x1="%s" y1="%s" x2="%s" y2="%s" stroke="#e4e4e4"/>',
                    num(x0), num(y), num(x1), num(y))
            end
            add('<text class="tick-y" x="%s" y="%s" dy="0.35em" text-anchor="end">%s</text>',
                num(x0 - 6), num(y), esc(p.yt.labels[k]))
        end
        for k, v in ipairs(xt.values) do
            local x = sx(v)
            if k > 1 and k < #xt.values then
                add('<line class="grid" x1="%s" y1="%s" x2="%s" y2="%s" stroke="#e4e4e4"/>',
                    num(x), num(ya), num(x), num(yb))
            end
            if i == n then
                add('<text class="tick-x" x="%s" y="%s" text-anchor="middle">%s</text>',
                    num(x), num(yb + 18), esc(xt.labels[k]))
            end
        end
        if #p.keys == 1 then -- the series' name along the y axis (the legend names several)
            local cx, cy = 14, (ya + yb) / 2
            add('<text class="axis-label-y" x="%s" y="%s" text-anchor="middle" '
                .. 'transform="rotate(-90 %s %s)">%s</text>', num(cx), num(cy), num(cx), num(cy),
                esc(p.keys[1]))
        end
        for _, c in ipairs(p.curves) do
            local d = {}
            for j = 1, #c.x do
                d[#d + 1] = (j == 1 and 'M' or 'L') .. num(sx(c.x[j])) .. ',' .. num(sy(c.y[j]))
            end
            add('<path class="curve" data-series="%s" data-file="%s" d="%s" fill="none" '
                .. 'stroke="%s" stroke-width="1.8" stroke-linejoin="round"%s/>', esc(c.key),
                esc(c.run.label), table.concat(d, ' '), c.color,
                c.dash and (' stroke-dasharray="%s"'):format(c.dash) or '')
            if #c.x <= MARKER_MAX then
                for j = 1, #c.x do
                    add('<circle class="marker" cx="%s" cy="%s" r="2.6" fill="%s"/>',
                        num(sx(c.x[j])), num(sy(c.y[j])), c.color)
                end
            end
        end
        add('<g class="legend">')
        for k, c in ipairs(p.curves) do
            local lx, ly = x1 + 16, ya + 10 + (k - 1) * 18
            add('<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s" stroke-width="2.2"%s/>',
                num(lx), num(ly), num(lx + 24), num(ly), c.color,
                c.dash and (' stroke-dasharray="%s"'):format(c.dash) or '')
            add('<text class="legend-label" x="%s" y="%s" dy="0.35em">%s</text>',
                num(lx + 32), num(ly), esc(c.label))
        end
        add('</g>')
        add('</g>')
    end
    local last = panels[n]
    add('<text class="axis-label-x" x="%s" y="%s" text-anchor="middle">%s</text>',
        num((x0 + x1) / 2), num(last.y0 + last.h + 44), esc(opts.x_label or 'x'))
    add('</svg>')
    return table.concat(out, '\n') .. '\n', { panels = n, curves = n_curves }
end

return svg_chart
