-- spec/tools/progress_spec.lua: ddpl.utils.progress (the line's text with a fake clock; periodic
-- plain lines when stdout is a file; '\r' redraws on a pseudo-terminal; nothing on rank 1) and
-- ddpl.utils.MetricsLogger (JSON lines, each readable as soon as it is logged).
local ddpl = require 'ddplua'
local json = require 'ddplua.json'
local S = require 'shell_util'

-- A clock that says what the spec sets.
local function fake_clock()
    local c = {t = 0}
    function c.now() return c.t end
    return c
end

-- A file to print into, and a function returning what was printed so far.
local function capture()
    local path = os.tmpname()
    local f = assert(io.open(path, 'w+'))
    return f, function()
        f:flush()
        local text = S.slurp(path)
        return text
    end, function() f:close(); os.remove(path) end
end

describe('ddpl.utils.progress', function()
    it('is reachable as ddpl.utils.progress and require "ddplua.utils"', function()
        assert.are.equal(require('ddplua.utils').progress, ddpl.utils.progress)
        assert.are.equal(require('ddplua.utils.tensorboard'), ddpl.utils.tensorboard)
    end)

    it('formats percent, bar, count, elapsed<remaining, rate, unit and postfix', function()
        local c = fake_clock()
        local f, _, done = capture()
        local bar = ddpl.utils.progress(100, {desc = 'epoch 1', unit = 'img', clock = c.now,
            file = f, terminal = true})
        c.t = 10
        bar:update(25)
        assert.are.equal('epoch 1:  25%|#######                       | 25/100 [00:10<00:30, '
            .. '2.50 img/s]', bar:line())
        bar:set_postfix({loss = 0.123456, acc = 0.5, step = 7})
        assert.are.equal('epoch 1:  25% 25/100 [00:10<00:30, 2.50 img/s, acc=0.5, loss=0.1235, '
            .. 'step=7]', bar:line(false))
        c.t = 4000
        bar:update(75)
        assert.are.equal('epoch 1: 100%|##############################| 100/100 [1:06:40<00:00, '
            .. '0.03 img/s, acc=0.5, loss=0.1235, step=7]', bar:line())
        -- before any time has passed the rate and the remaining time are unknown
        local fresh = ddpl.utils.progress(3, {clock = c.now, file = f, terminal = false})
        assert.are.equal('  0% 0/3 [00:00<?, ? it/s]', fresh:line())
        bar:close()
        done()
    end)

    it('on a terminal redraws in place with \\r, then ends the line at close', function()
        local c = fake_clock()
        local f, text, done = capture()
        local bar = ddpl.utils.progress(4, {desc = 'd', clock = c.now, file = f, terminal = true})
        for i = 1, 4 do
            c.t = i
            bar:update()
        end
        bar:set_postfix({loss = 1})
        bar:close()
        local out = text()
        local _, redraws = out:gsub('\r', '')
        assert.are.equal(5, redraws, out) -- each update a second apart, and the close
        assert.is_nil(out:sub(1, -2):find('\n'), out) -- one line, redrawn
        assert.truthy(out:find('\rd: 100%%|#+| 4/4 %[00:04<00:00, 1.00 it/s, loss=1%] *\n$'), out)
        done()
    end)

    it('not on a terminal prints a plain line at each tenth, none twice', function()
        local c = fake_clock()
        local f, text, done = capture()
        local bar = ddpl.utils.progress(20, {desc = 'w', clock = c.now, file = f,
            terminal = false})
        for i = 1, 20 do
            c.t = i * 0.5
            bar:update()
        end
        bar:close()
        local lines = {}
        for line in text():gmatch('[^\n]+') do lines[#lines + 1] = line end
        assert.are.equal(10, #lines, text())
        assert.are.equal('w:  10% 2/20 [00:01<00:09, 2.00 it/s]', lines[1])
        assert.are.equal('w: 100% 20/20 [00:10<00:00, 2.00 it/s]', lines[10])
        assert.is_nil(text():find('\r', 1, true))
        done()
    end)

    it('not on a terminal also prints every every_secs, and at close when behind', function()
        local c = fake_clock()
        local f, text, done = capture()
        local bar = ddpl.utils.progress(1000, {clock = c.now, file = f, terminal = false,
            every_secs = 30})
        c.t = 31
        bar:update(5) -- 0.5 %: not a tenth yet, but 31 s since the start
        c.t = 40
        bar:update(5)
        bar:close() -- behind: the last line printed was at 5
        local lines = {}
        for line in text():gmatch('[^\n]+') do lines[#lines + 1] = line end
        assert.are.same({'  0% 5/1000 [00:31<1:42:49, 0.16 it/s]',
            '  1% 10/1000 [00:40<1:06:00, 0.25 it/s]'}, lines)
        done()
    end)

    it('detects a file that is no terminal: a child process with stdout to a file', function()
        local dir = S.new_tmpdir()
        S.write(dir .. '/p.lua', "local bar = require('ddplua').utils.progress(50, "
            .. "{desc = 'child'}); for i = 1, 50 do bar:update() end; bar:close()")
        local out, code = S.sh(('%s %s > %s'):format(S.q(S.bin), S.q(dir .. '/p.lua'),
            S.q(dir .. '/out.txt')))
        assert.are.equal(0, code, out)
        local text = S.slurp(dir .. '/out.txt')
        assert.is_nil(text:find('\r', 1, true), text)
        local n = 0
        for line in text:gmatch('[^\n]+') do
            n = n + 1
            assert.truthy(line:find('^child: +%d+%% %d+/50 %['), line)
        end
        assert.are.equal(10, n, text)
        -- rank 1 of a job prints nothing
        out, code = S.sh(('RANK=1 %s %s'):format(S.q(S.bin), S.q(dir .. '/p.lua')))
        assert.are.equal(0, code, out)
        assert.are.equal('', out)
        os.execute('rm -rf ' .. S.q(dir))
    end)

    it('detects a terminal (util-linux script gives a pseudo-terminal)', function()
        if not os.execute('command -v script >/dev/null 2>&1') then
            return pending('util-linux script is not installed')
        end
        local dir = S.new_tmpdir()
        S.write(dir .. '/p.lua', "local bar = require('ddplua').utils.progress(3, "
            .. "{desc = 'tty'}); for i = 1, 3 do bar:update() end; bar:close()")
        local out = S.sh(('TERM=dumb timeout 30 script -qfc %s /dev/null < /dev/null'):format(
            S.q(S.q(S.bin) .. ' ' .. S.q(dir .. '/p.lua'))))
        assert.truthy(out:find('\rtty: 100%%|#+| 3/3 %['), out)
        os.execute('rm -rf ' .. S.q(dir))
    end)

    it('refuses bad arguments, naming them', function()
        assert.has_error(function() ddpl.utils.progress(-1) end,
            'progress: n must be a non-negative integer (the count of steps), got -1')
        assert.has_error(function() ddpl.utils.progress(3, {desc = 5}) end,
            'progress: opts.desc must be a string, got number')
        local bar = ddpl.utils.progress(3, {disable = true})
        assert.has_error(function() bar:update('x') end,
            'progress.update: k must be a non-negative number of steps, got x')
        assert.has_error(function() bar:set_postfix({loss = {}}) end,
            'progress.set_postfix: loss must be a number, string or boolean, got table')
        bar:close()
        assert.has_error(function() bar:update() end, 'progress.update: the bar is closed')
    end)
end)

describe('ddpl.utils.MetricsLogger', function()
    local dir
    before_each(function() dir = S.new_tmpdir() end)
    after_each(function() os.execute('rm -rf ' .. S.q(dir)) end)

    it('writes one JSON object per line, readable before close', function()
        local path = dir .. '/m.jsonl'
        local m = ddpl.utils.MetricsLogger(path)
        m:log({step = 1, loss = ddpl.tensor(0.5), lr = 0.05, note = 'a "quoted"\nline'})
        local lines = {}
        for line in io.lines(path) do lines[#lines + 1] = line end -- not closed yet
        assert.are.equal(1, #lines)
        m:log({step = 2, loss = 0 / 0, nested = {acc = {0.5, 0.75}}, ok = true})
        m:close()
        lines = {}
        for line in io.lines(path) do lines[#lines + 1] = json.decode(line, path) end
        assert.are.equal(2, #lines)
        assert.are.same({step = 1, loss = 0.5, lr = 0.05, note = 'a "quoted"\nline'}, lines[1])
        assert.are.same({step = 2, loss = json.null, nested = {acc = {0.5, 0.75}}, ok = true},
            lines[2])
        assert.are.equal('integer', math.type(lines[1].step))
        -- appends by default, starts afresh with mode 'w'
        local function count()
            local n = 0
            for _ in io.lines(path) do n = n + 1 end
            return n
        end
        local again = ddpl.utils.MetricsLogger(path)
        again:log({step = 3})
        again:close()
        assert.are.equal(3, count())
        local fresh = ddpl.utils.MetricsLogger(path, {mode = 'w'})
        fresh:log({step = 4})
        fresh:close()
        assert.are.equal(1, count())
    end)

    it('refuses what is no JSON object, naming the method and the value', function()
        local m = ddpl.utils.MetricsLogger(dir .. '/e.jsonl')
        assert.has_error(function() m:log('x') end,
            'MetricsLogger.log: record must be a table of named values, got string')
        assert.has_error(function() m:log({1, 2}) end,
            'MetricsLogger.log: record must have string keys (a JSON object), got a list')
        assert.has_error(function() m:log({step = 1, f = print}) end,
            'MetricsLogger.log: .f: cannot encode a function')
        m:close()
        assert.has_error(function() m:log({step = 1}) end,
            'MetricsLogger.log: the logger is closed')
        assert.are.equal('', S.slurp(dir .. '/e.jsonl')) -- nothing half-written
        assert.has_error(function() ddpl.utils.MetricsLogger(dir .. '/no/such/dir.jsonl') end)
        assert.has_error(function() ddpl.utils.MetricsLogger(dir .. '/x', {mode = 'r'}) end,
            "MetricsLogger.new: opts.mode must be 'a' or 'w', got r")
    end)

    it('writes on rank 0 only, unless all_ranks', function()
        local P = require 'ddplua.core.process'
        local old = os.getenv('RANK')
        P.setenv('RANK', '1')
        local ok, err = pcall(function()
            local m = ddpl.utils.MetricsLogger(dir .. '/r1.jsonl')
            m:log({step = 1})
            m:close()
            assert.is_nil(io.open(dir .. '/r1.jsonl'))
            m = ddpl.utils.MetricsLogger(dir .. '/all.jsonl', {all_ranks = true})
            m:log({step = 1})
            m:close()
            assert.are.equal('{"step":1}\n', S.slurp(dir .. '/all.jsonl'))
        end)
        P.setenv('RANK', old or '0')
        assert(ok, err)
    end)
end)
