-- spec/dist/spawn_spec.lua: ddpl.multiprocessing.spawn (lua/ddplua/multiprocessing.lua). Scripts
-- run by `ddplua` under `timeout`, so nothing can hang: 2 and 4 forked processes that
-- init_process_group and all_reduce (each writes its result and environment to a file the
-- parent checks; BLAS and the thread pool used in the parent before the fork and in the
-- children after it), a child that raises (the parent's error names the process and the message
-- with its traceback; the others, and what they started, are gone), a child killed by a signal,
-- a child that exits non-zero, join=false with join(timeout), and bad arguments in this process.
local S = require 'shell_util'
local H = require 'helpers'
local ddpl = H.ddpl
local mp = ddpl.multiprocessing

local tmpdir = S.new_tmpdir()

-- Runs the Lua chunk `body` as a script under `timeout 60`; returns its output and exit status.
local function run(body, env)
    local path = tmpdir .. '/script.lua'
    S.write(path, "local ddpl = require 'ddplua'\nlocal mp = ddpl.multiprocessing\n"
        .. "local dir = " .. ('%q'):format(tmpdir) .. "\n"
        .. "local function mypid() local f = io.open('/proc/self/stat'); local n = f:read('n'); "
        .. "f:close(); return n end\n" .. body)
    return S.sh(('env %s timeout 60 %s %s'):format(env or '', S.q(S.bin), S.q(path)))
end

local function assert_has(text, want)
    assert(tostring(text):find(want, 1, true), ('%q not found in:\n%s'):format(want, text))
end

describe('spawn', function()
    for _, n in ipairs({2, 4}) do
        it(('runs %d processes that all_reduce'):format(n), function()
            local out, code = run(([[
local x = ddpl.randn(128, 128)
local before = x:matmul(x):sum():item() -- BLAS and the thread pool running in the parent
ddpl.set_num_threads(2)
mp.spawn(function(rank, prefix, missing, factor)
    assert(missing == nil and factor == 3, 'args arrive in order, holes included')
    ddpl.dist.init_process_group({backend = 'gloo', timeout = 30})
    local t = ddpl.full({5}, rank + 1)
    ddpl.dist.all_reduce(t)
    local y = ddpl.randn(128, 128)
    local z = y:matmul(y):add(1):sum():item() -- in the child after the fork
    assert(z == z)
    local f = assert(io.open(prefix .. rank, 'w'))
    f:write(('%%g %%s %%s %%s %%s %%s'):format(t[0]:item() * factor, os.getenv('RANK'),
        os.getenv('LOCAL_RANK'), os.getenv('WORLD_SIZE'), os.getenv('LOCAL_WORLD_SIZE'),
        os.getenv('MASTER_ADDR')))
    f:close()
    ddpl.dist.destroy_process_group()
end, {nprocs = %d, args = {dir .. '/result', nil, 3, n = 3}})
assert(x:matmul(x):sum():item() == before)
assert(os.getenv('RANK') == nil, 'the parent environment is left alone')
for r = 0, %d - 1 do
    local f = assert(io.open(dir .. '/result' .. r))
    print('RESULT ' .. r .. ' ' .. f:read('a'))
    f:close()
    os.remove(dir .. '/result' .. r)
end
print('SPAWN_OK')
]]):format(n, n))
            assert.are.equal(0, code, out)
            assert_has(out, 'SPAWN_OK')
            local sum = n * (n + 1) / 2 * 3
            for r = 0, n - 1 do
                assert_has(out, ('RESULT %d %g %d %d %d %d 127.0.0.1'):format(r, sum, r, r, n, n))
            end
        end)
    end

    it('keeps MASTER_ADDR and MASTER_PORT when they are set', function()
        local out, code = run([[
mp.spawn(function(rank)
    assert(os.getenv('MASTER_PORT') == '29123' and os.getenv('MASTER_ADDR') == 'localhost')
end, {nprocs = 2})
print('SPAWN_OK')
]], 'MASTER_PORT=29123 MASTER_ADDR=localhost')
        assert.are.equal(0, code, out)
        assert_has(out, 'SPAWN_OK')
    end)

    it('raises a failing child\'s error in the parent and stops the others', function()
        local out, code = run([[
local ok, err = pcall(mp.spawn, function(rank)
    local f = io.open(dir .. '/pid' .. rank, 'w'); f:write(mypid()); f:close()
    if rank == 1 then
        os.execute('sleep 1') -- the others are in their sleep by now
        error('boom from rank ' .. rank)
    end
    os.execute('sleep 50') -- a program the child started: stopped with it
end, {nprocs = 3})
print('ERR ' .. tostring(err))
assert(not ok)
for r = 0, 2 do
    local f = io.open(dir .. '/pid' .. r); local pid = f:read('n'); f:close()
    os.remove(dir .. '/pid' .. r)
    -- the child (reaped by spawn) and everything in its process group (signalled; allowed a
    -- few seconds to die, zombies waiting for init not counted)
    local alive = os.execute('kill -0 ' .. pid .. ' 2>/dev/null')
    local left
    for _ = 1, 50 do
        left = io.popen('ps -eo pgid=,stat= | awk \'$1 == ' .. pid .. ' && $2 !~ /^Z/\' | wc -l')
            :read('a'):match('%d+')
        if left == '0' then break end
        os.execute('sleep 0.1')
    end
    print(('GONE %d %s %s'):format(r, tostring(not alive), left))
end
]])
        assert.are.equal(0, code, out)
        assert_has(out, 'ERR spawn: process 1 failed: ')
        assert_has(out, 'boom from rank 1')
        assert_has(out, 'stack traceback:')
        assert.falsy(out:find('multiprocessing.lua', 1, true), 'spawn\'s own frames are cut')
        for r = 0, 2 do assert_has(out, ('GONE %d true 0'):format(r)) end
    end)

    it('names the signal that killed a child', function()
        local out, code = run([[
local ok, err = pcall(mp.spawn, function(rank)
    if rank == 0 then os.execute('kill -KILL ' .. mypid()) end
    os.execute('sleep 50')
end, {nprocs = 2})
print('ERR ' .. tostring(err))
]])
        assert.are.equal(0, code, out)
        assert_has(out, 'ERR spawn: process 0 was killed by signal SIGKILL')
    end)

    it('names the exit code of a child that exits non-zero', function()
        local out, code = run([[
local ok, err = pcall(mp.spawn, function(rank) if rank == 1 then os.exit(5) end end,
    {nprocs = 2})
print('ERR ' .. tostring(err))
]])
        assert.are.equal(0, code, out)
        assert_has(out, 'ERR spawn: process 1 failed with exit code 5')
    end)

    it('returns a context with join=false', function()
        local out, code = run([[
local ctx = mp.spawn(function(rank) os.execute('sleep 1') end, {nprocs = 2, join = false})
assert(#ctx:pids() == 2)
print('EARLY ' .. tostring(ctx:join(0)))
while not ctx:join(0.5) do end
print('JOINED')
]])
        assert.are.equal(0, code, out)
        assert_has(out, 'EARLY false')
        assert_has(out, 'JOINED')
    end)

    it('an uncaught failure in a script fails the script', function()
        local out, code = run("mp.spawn(function(rank) error('child says no') end, {nprocs = 1})\n")
        assert.are_not.equal(0, code)
        assert_has(out, 'spawn: process 0 failed: ')
        assert_has(out, 'child says no')
    end)

    it('refuses bad arguments', function()
        local function refuses(want, ...)
            local ok, err = pcall(mp.spawn, ...)
            assert.is_false(ok)
            assert_has(err, want)
        end
        local f = function() end
        refuses('spawn: expected a function as fn (argument 1), got string', 'x', {nprocs = 1})
        refuses('spawn: nprocs must be a positive integer, got 0', f, {nprocs = 0})
        refuses('spawn: nprocs must be a positive integer, got -2', f, {nprocs = -2})
        refuses('spawn: nprocs must be a positive integer, got 1.5', f, {nprocs = 1.5})
        refuses('spawn: args must be a table (a list of arguments), got string', f,
            {nprocs = 1, args = 'x'})
        refuses("spawn: unknown option 'nproc'", f, {nproc = 2})
        refuses('spawn: expected an options table as argument 2, got number', f, 2)
        local dist = ddpl.dist
        dist.init_process_group({backend = 'gloo', rank = 0, world_size = 1, timeout = 10,
            init_method = 'tcp://127.0.0.1:' .. S.free_port()})
        finally(function() dist.destroy_process_group() end)
        refuses('spawn: the default process group is initialized in this process', f,
            {nprocs = 1})
    end)
end)
