-- spec/support/shell_util.lua: what the specs that start processes share (dist, ddp, nccl).
-- defines: bin, src, q, slurp, read, write, script_file, sh, free_port, new_tmpdir, run_world, run_reporting.
-- Usage: local S = require 'shell_util'; local out, code = S.sh(S.q(S.bin) .. ' -e "print(1)"')
local S = {}

-- the ddplua executable under test, and the source tree
S.bin = os.getenv('DDPLUA_BIN') or ((os.getenv('DDPLUA_BUILD_DIR') or 'build') .. '/ddplua')
S.src = os.getenv('DDPLUA_SOURCE_DIR') or '.'

-- s quoted for sh
function S.q(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end

-- The file's contents, '' when it cannot be read.
function S.slurp(path)
    local f = io.open(path, 'rb')
    if not f then return '' end
    local s = f:read('a')
    f:close()
    return s
end

-- The whole file; an error when it cannot be read (S.slurp gives '' instead).
function S.read(path)
    local f = assert(io.open(path, 'rb'))
    local s = f:read('a')
    f:close()
    return s
end

-- A new temporary .lua file holding text; returns its path.
function S.script_file(text)
    local path = os.tmpname() .. '.lua'
    S.write(path, text)
    return path
end

function S.write(path, text)
    local f = assert(io.open(path, 'wb'))
    f:write(text)
    f:close()
end

-- Runs a shell command line; returns its stdout and stderr together, and the exit status.
function S.sh(cmd)
    local p = assert(io.popen(cmd .. ' 2>&1'))
    local out = p:read('a')
    local ok, _, code = p:close()
    return out, ok and 0 or code
end

-- A free TCP port on loopback (the kernel picks it), else a random high one.
function S.free_port()
    local out = S.sh("/usr/bin/python3 -c 'import socket; s=socket.socket(); "
        .. 's.bind(("127.0.0.1",0)); print(s.getsockname()[1])\'')
    local port = tonumber(out:match('^(%d+)'))
    if port then return port end
    math.randomseed(os.time())
    return math.random(20000, 60000)
end

-- A new empty directory.
function S.new_tmpdir()
    local dir = os.tmpname()
    os.remove(dir)
    assert(os.execute('mkdir -p ' .. S.q(dir)))
    return dir
end

-- Runs `script` as ranks 0..world-1 of one job on loopback (the torchrun environment: RANK,
-- LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT; plus opts.env, a string of
-- VAR=value words), every process under `timeout` (opts.kill_after seconds, default 60) so none
-- can hang; waits for all. Returns outs[rank] (stdout and stderr, then "EXIT <status>") and
-- codes[rank] (124: killed by the timeout; 128 + n: died of signal n).
function S.run_world(world, script, opts)
    opts = opts or {}
    local dir = S.new_tmpdir()
    local port = S.free_port()
    local parts = {}
    for r = 0, world - 1 do
        local out = ('%s/out%d'):format(dir, r)
        parts[#parts + 1] = ('( env %s RANK=%d LOCAL_RANK=%d WORLD_SIZE=%d LOCAL_WORLD_SIZE=%d '
            .. 'MASTER_ADDR=127.0.0.1 MASTER_PORT=%d timeout %d %s %s > %s 2>&1; '
            .. 'echo "EXIT $?" >> %s ) &'):format(opts.env or '', r, r, world, world, port,
            opts.kill_after or 60, S.q(S.bin), S.q(script), S.q(out), S.q(out))
    end
    S.sh(table.concat(parts, ' ') .. ' wait')
    local outs, codes = {}, {}
    for r = 0, world - 1 do
        outs[r] = S.slurp(('%s/out%d'):format(dir, r))
        codes[r] = tonumber(outs[r]:match('EXIT (%d+)%s*$'))
    end
    os.execute('rm -rf ' .. S.q(dir))
    return outs, codes
end

-- Asserts that ranks 0 .. n-1 of a run_world exited 0 and printed "<marker> <rank>"; the failure
-- names the rank and shows its output.
function S.assert_ranks_ok(outs, codes, n, marker)
    for r = 0, n - 1 do
        assert(codes[r] == 0 and outs[r]:find(marker .. ' ' .. r, 1, true),
            ('rank %d failed (exit %s):\n%s'):format(r, tostring(codes[r]), outs[r]))
    end
end

-- Runs `ddplua script --nproc n -- args` (env: VAR=value words put in front) under `timeout`
-- (kill_after seconds, default 60, so no run can hang); returns the combined output and the exit
-- status.
function S.launch(script, n, args, env, kill_after)
    return S.sh(('%s timeout %d %s %s --nproc %d -- %s'):format(env or '', kill_after or 60,
        S.q(S.bin), S.q(script), n, args or ''))
end

-- Asserts that a run exited 0 and printed `marker` (a Lua pattern) once per rank: n times.
function S.expect_ranks(out, code, marker, n)
    assert(code == 0, out)
    local seen = select(2, out:gsub(marker, ''))
    assert(seen == n, ('expected %d "%s" lines, got %d:\n%s'):format(n, marker, seen, out))
end

-- Runs the Lua source `code` in a child `interpreter` (lua5.4, or the ddplua command) with the
-- further arguments as its `...`; the child must exit cleanly. Returns the numbers it wrote as
-- `REPORT key value` lines, {key = number}, and its whole output (for failure messages).
-- A child process measures its own memory and page faults without the spec runner's.
function S.run_reporting(interpreter, code, ...)
    local path = os.tmpname()
    local f = assert(io.open(path, 'w'))
    f:write(code)
    f:close()
    local cmd = S.q(interpreter) .. ' ' .. S.q(path)
    for _, a in ipairs({ ... }) do cmd = cmd .. ' ' .. S.q(a) end
    local p = assert(io.popen(cmd .. ' 2>&1', 'r'))
    local out = p:read('a')
    local ok, how, code_ = p:close()
    os.remove(path)
    assert(ok, ('child failed (%s %s):\n%s'):format(how, code_, out))
    local r = {}
    for k, v in out:gmatch('REPORT (%S+) (%S+)') do r[k] = tonumber(v) end
    return r, out
end

return S
