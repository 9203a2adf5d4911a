-- spec/cli/cli_spec.lua: the ddplua command, driven through pipes and a pseudo-terminal: -e, -v,
-- scripts with arguments, exit statuses and messages on errors, the launcher flags, the REPL
-- fed from a pipe (values printed, multi-line input, errors that do not end the session), and
-- on a terminal (Ctrl-C interrupts a running statement, clears the line at the prompt; history).
-- Every external command runs under `timeout 20`, so no case can hang.
local S = require 'shell_util'
local bin = os.getenv('DDPLUA_BIN') or ((os.getenv('DDPLUA_BUILD_DIR') or 'build') .. '/ddplua')

local function q(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end

local slurp, write = S.read, S.write

-- Runs `ddplua <args>` with `input` on stdin; returns stdout, stderr, exit status.
local function run(args, input)
    local inp, err = os.tmpname(), os.tmpname()
    write(inp, input or '')
    local p = assert(io.popen(('timeout 20 %s %s < %s 2> %s'):format(q(bin), args, q(inp), q(err))))
    local out = p:read('a')
    local _, _, code = p:close()
    local errtext = slurp(err)
    os.remove(inp)
    os.remove(err)
    return out, errtext, code
end

local function script_file(text)
    local path = os.tmpname() .. '.lua'
    write(path, text)
    return path
end

local function has(text, pattern)
    assert.truthy(text:find(pattern, 1, true), ('expected %q in:\n%s'):format(pattern, text))
end

describe('ddplua command', function()
    it('-e runs code with ddpl preloaded', function()
        local out, err, code = run("-e 'print(ddpl.ones(2) + 1)'")
        assert.are.equal('tensor([2., 2.])\n', out)
        assert.are.equal('', err)
        assert.are.equal(0, code)
    end)

    it('-v prints the version', function()
        local out, _, code = run('-v')
        has(out, 'ddplua 0.')
        has(out, 'Lua 5.4')
        assert.are.equal(0, code)
    end)

    it('runs a script with arg and ... as lua does', function()
        local path = script_file('print(arg[0] == ..., select("#", ...), ...) print(arg[-1], #arg)')
        local out, err, code = run(q(path) .. ' a "b c"')
        os.remove(path)
        assert.are.equal(0, code, err)
        assert.are.equal('false\t2\ta\tb c\n' .. bin .. '\t2\n', out)
    end)

    it('exits with status 1 and "ddplua: <message>" plus a traceback when a script fails', function()
        local path = script_file('local x = ddpl.ones(2, 3)\nlocal y = x:matmul(x)\n')
        local out, err, code = run(q(path))
        os.remove(path)
        assert.are.equal(1, code)
        assert.are.equal('', out)
        has(err, 'ddplua: ')
        has(err, ':2: matmul: shapes [2,3] and [2,3]')
        has(err, 'stack traceback:')
    end)

    it('exits with status 1 for a failing -e, a missing script and a bad option', function()
        local _, err, code = run("-e 'error(\"nope\")'")
        assert.are.equal(1, code)
        has(err, 'ddplua: (command line):1: nope')
        _, err, code = run('/nonexistent/script.lua')
        assert.are.equal(1, code)
        has(err, 'cannot open /nonexistent/script.lua')
        _, err, code = run('-Q')
        assert.are.equal(1, code)
        has(err, "unrecognized option '-Q'")
        has(err, 'usage: ddplua')
    end)

    it('runs a script from stdin with -', function()
        local out, _, code = run('- x', 'print(..., ddpl.arange(3):sum():item())')
        assert.are.equal('x\t3\n', out)
        assert.are.equal(0, code)
    end)

    it('parses the launcher flags around the script; -- passes them to the script', function()
        local path = script_file('print(#arg, ...)')
        local out, err, code = run('--nproc 1 ' .. q(path) .. ' --nproc=1 x')
        assert.are.equal(0, code, err)
        assert.are.equal('1\tx\n', out)
        out, err, code = run(q(path) .. ' -- --nproc 4')
        assert.are.equal(0, code, err)
        assert.are.equal('2\t--nproc\t4\n', out)
        out, err, code = run(q(path) .. ' --nproc 2 x') -- two workers (spec/cli/launcher_spec.lua)
        assert.are.equal(0, code, err)
        assert.are.equal('1\tx\n1\tx\n', out)
        _, err, code = run('--nproc zero ' .. q(path))
        assert.are.equal(1, code)
        has(err, '--nproc expects an integer')
        os.remove(path)
    end)
end)

describe('REPL through a pipe', function()
    it('prints the values of expressions, tab-separated, with tensors pretty-printed', function()
        local out, err, code = run('', 'x = ddpl.ones(2)\nx + 1\n1, "a", nil\n=2*3\n')
        assert.are.equal(0, code, err)
        assert.are.equal('tensor([2., 2.])\n1\ta\tnil\n6\n', out)
    end)

    it('continues multi-line input and keeps going after an error', function()
        local input = table.concat({
            'function twice(t)',
            '  return t * 2',
            'end',
            'error("first")',
            'ddpl.ones(2):matmul(ddpl.ones(3))',
            'twice(ddpl.arange(3))',
        }, '\n') .. '\n'
        local out, err, code = run('', input)
        assert.are.equal(0, code)
        assert.are.equal('tensor([0, 2, 4])\n', out)
        has(err, 'ddplua: stdin:1: first')
        has(err, 'matmul')
    end)

    it('reports a statement left incomplete at the end of input', function()
        local out, err, code = run('', 'for i = 1, 2 do\n')
        assert.are.equal(0, code)
        assert.are.equal('', out)
        has(err, "'end' expected")
    end)

    it('starts after -e when -i is given', function()
        local out, _, code = run("-e 'y = 41' -i", 'y + 1\n')
        assert.are.equal(0, code)
        assert.are.equal('42\n', out)
    end)
end)

describe('REPL on a terminal', function()
    local have_script = os.execute('command -v script >/dev/null 2>&1')

    -- Feeds `steps` ({text, seconds to wait after}) to ddplua on a pseudo-terminal (util-linux
    -- script); returns everything the terminal showed and the HOME used.
    local function on_pty(steps)
        local home = os.tmpname()
        os.remove(home)
        assert(os.execute('mkdir ' .. q(home)))
        local feed = {}
        for _, s in ipairs(steps) do
            feed[#feed + 1] = ('printf %s; sleep %s'):format(q(s[1]), s[2])
        end
        local cmd = ('(%s) | HOME=%s TERM=dumb timeout 20 script -qfc %s /dev/null 2>&1')
            :format(table.concat(feed, '; '), q(home), q(bin))
        local p = assert(io.popen(cmd))
        local out = p:read('a')
        p:close()
        return out, home
    end

    it('Ctrl-C interrupts a running statement and the session goes on; history is kept', function()
        if not have_script then return pending('util-linux script is not installed') end
        local out, home = on_pty({
            { 'x = 0\n', 0.3 },
            { 'while true do x = x + 1 end\n', 0.8 },
            { '\003', 0.4 },
            { 'print("alive", x > 0)\n', 0.3 },
            { 'half a line\003', 0.3 },
            { 'print("cleared")\n', 0.3 },
            { '\004', 0.3 },
        })
        has(out, 'interrupted!')
        has(out, 'alive\ttrue')
        has(out, 'cleared')
        assert.is_nil(out:find('syntax error', 1, true), out) -- the cleared line never ran
        local history = slurp(home .. '/.ddplua_history')
        has(history, 'while true do x = x + 1 end')
        has(history, 'print("cleared")')
        os.execute('rm -rf ' .. q(home))
    end)
end)
