-- spec/cli/launcher_spec.lua: `ddplua script --nproc N` (engine/cli/launch*.c): the torchrun
-- environment of every rank (one node, two "nodes" on 127.0.0.1, srun and mpirun variables),
-- script arguments, gang failure (an error, a signal), SIGTERM to the launcher, free ports for
-- two jobs at once, per-rank log files and output prefixes; the store's token across nodes
-- (refused without one, a token file's mode checked, --no-store-auth).
-- Every command runs under `timeout`; the specs never wait on a worker that might hang.
local S = require 'shell_util'
local core = require 'ddplua.core'
local bin = os.getenv('DDPLUA_BIN') or ((os.getenv('DDPLUA_BUILD_DIR') or 'build') .. '/ddplua')

local function q(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end

local function slurp(path)
    local f = io.open(path, 'rb')
    if not f then return nil end
    local s = f:read('a')
    f:close()
    return s
end

local function has(text, pattern)
    assert.truthy(text:find(pattern, 1, true), ('expected %q in:\n%s'):format(pattern, text))
end

-- Runs a shell command line; returns stdout, stderr, exit status.
local function sh(cmd)
    local err = os.tmpname()
    local p = assert(io.popen(('%s 2> %s'):format(cmd, q(err))))
    local out = p:read('a')
    local _, _, code = p:close()
    local errtext = slurp(err)
    os.remove(err)
    return out, errtext, code
end

local function ddplua(args, env)
    return sh(('%s timeout 30 %s %s'):format(env or '', q(bin), args))
end

local script_file = S.script_file

-- A script that prints one line per rank: RANK=..;LOCAL_RANK=..;... then its arguments.
local env_names = {'RANK', 'LOCAL_RANK', 'WORLD_SIZE', 'LOCAL_WORLD_SIZE', 'GROUP_RANK',
                   'GROUP_WORLD_SIZE', 'ROLE_NAME', 'ROLE_RANK', 'ROLE_WORLD_SIZE',
                   'MASTER_ADDR', 'MASTER_PORT', 'OMP_NUM_THREADS', 'DDPLUA_RUN_ID',
                   'DDPLUA_STORE_TOKEN'}
local env_script = script_file(([[
local parts = {}
for _, name in ipairs(%s) do parts[#parts + 1] = name .. '=' .. (os.getenv(name) or '') end
parts[#parts + 1] = 'ARGS=' .. table.concat({...}, ',')
print(table.concat(parts, ';'))
]]):format('{' .. "'" .. table.concat(env_names, "','") .. "'" .. '}'))

-- {rank -> {NAME = value}} from env_script's output
local function parse_env(out)
    local ranks = {}
    for line in out:gmatch('[^\n]+') do
        local t = {}
        for k, v in line:gmatch('([%w_]+)=([^;]*)') do t[k] = v end
        assert.truthy(t.RANK, 'unexpected line: ' .. line)
        ranks[tonumber(t.RANK)] = t
    end
    return ranks
end

local function count(t)
    local n = 0
    for _ in pairs(t) do n = n + 1 end
    return n
end

-- whether pid is gone (no such process, or a zombie nobody reaped yet)
local function gone(pid)
    assert(tostring(pid):match('^%d+$'), 'not a pid: ' .. tostring(pid))
    local stat = slurp('/proc/' .. pid .. '/stat')
    return stat == nil or stat:match('^%d+ %b() (%a)') == 'Z'
end

local function wait_until(fn, seconds)
    local t0 = core.time()
    while core.time() - t0 < seconds do
        if fn() then return true end
        os.execute('sleep 0.05')
    end
    return fn()
end

describe('launcher environment', function()
    for _, n in ipairs({2, 4}) do
        it('sets the torchrun variables of each of ' .. n .. ' ranks', function()
            local out, err, code = ddplua(('--nproc %d %s'):format(n, q(env_script)),
                                          'env -u OMP_NUM_THREADS -u DDPLUA_STORE_TOKEN')
            assert.are.equal(0, code, err)
            local ranks = parse_env(out)
            assert.are.equal(n, count(ranks))
            local port = ranks[0].MASTER_PORT
            assert.truthy(tonumber(port) and tonumber(port) > 0, 'port ' .. port)
            for r = 0, n - 1 do
                local e = ranks[r]
                assert.are.equal(tostring(r), e.LOCAL_RANK)
                assert.are.equal(tostring(n), e.WORLD_SIZE)
                assert.are.equal(tostring(n), e.LOCAL_WORLD_SIZE)
                assert.are.equal('default', e.ROLE_NAME) -- torchrun's role variables
                assert.are.equal(tostring(r), e.ROLE_RANK)
                assert.are.equal(tostring(n), e.ROLE_WORLD_SIZE)
                assert.are.equal('0', e.GROUP_RANK)
                assert.are.equal('127.0.0.1', e.MASTER_ADDR)
                assert.are.equal(port, e.MASTER_PORT)
                assert.are.equal('1', e.OMP_NUM_THREADS)
                assert.are.equal(ranks[0].DDPLUA_RUN_ID, e.DDPLUA_RUN_ID)
                assert.are.equal(32, #e.DDPLUA_STORE_TOKEN) -- a job token, the same for all
                assert.are.equal(ranks[0].DDPLUA_STORE_TOKEN, e.DDPLUA_STORE_TOKEN)
            end
        end)
    end

    it('keeps OMP_NUM_THREADS, passes script arguments, takes flags before the script', function()
        local out, err, code = ddplua(('--nproc 2 %s a --nproc 3 "b c"'):format(q(env_script)),
                                      'OMP_NUM_THREADS=3')
        assert.are.equal(0, code, err)
        local ranks = parse_env(out)
        assert.are.equal(2, count(ranks))
        for r = 0, 1 do
            assert.are.equal('3', ranks[r].OMP_NUM_THREADS)
            assert.are.equal('a,--nproc,3,b c', ranks[r].ARGS)
        end
        out, err, code = ddplua(('%s --nproc=2 -- --nproc 5'):format(q(env_script)))
        assert.are.equal(0, code, err)
        ranks = parse_env(out)
        assert.are.equal(2, count(ranks))
        assert.are.equal('--nproc,5', ranks[1].ARGS)
    end)

    it("takes torchrun's --nproc-per-node and --standalone", function()
        local out, err, code = ddplua(('--standalone --nproc-per-node 3 %s x'):format(q(env_script)))
        assert.are.equal(0, code, err)
        local ranks = parse_env(out)
        assert.are.equal(3, count(ranks))
        for r = 0, 2 do
            assert.are.equal('3', ranks[r].WORLD_SIZE)
            assert.are.equal('127.0.0.1', ranks[r].MASTER_ADDR)
            assert.are.equal('x', ranks[r].ARGS)
        end
        out, err, code = ddplua(('%s --nproc-per-node=2'):format(q(env_script)))
        assert.are.equal(0, code, err)
        assert.are.equal(2, count(parse_env(out)))
        out, err, code = ddplua(('--standalone --nnodes 2 --nproc 2 %s'):format(q(env_script)))
        assert.are_not.equal(0, code)
        assert.truthy(err:find('--standalone runs one machine; it cannot go with --nnodes 2', 1,
                               true), err)
        out, err, code = ddplua(('--standalone=yes --nproc 2 %s'):format(q(env_script)))
        assert.are_not.equal(0, code)
        assert.truthy(err:find('--standalone takes no value', 1, true), err)
        out, err, code = ddplua(('--nproc-per-node 0 %s'):format(q(env_script)))
        assert.are_not.equal(0, code)
        assert.truthy(err:find('--nproc-per-node expects an integer from 1', 1, true), err)
    end)

    it('computes ranks for --nnodes 2 --node-rank K, both nodes on one master port', function()
        -- a free port: a store picks one and lets it go
        local s = core._store.TCPStore('127.0.0.1', 0, {is_master = true, timeout = 5, token = ''})
        local port = s.port
        s:close()
        local path = script_file(([[
local rank = tonumber(os.getenv('RANK'))
local store = require('ddplua.core')._store.TCPStore('127.0.0.1', %d,
                  {is_master = rank == 0, timeout = 20})
store:add('joined', 1)
store:set('env/' .. rank, table.concat({os.getenv('WORLD_SIZE'), os.getenv('LOCAL_RANK'),
          os.getenv('LOCAL_WORLD_SIZE'), os.getenv('GROUP_RANK')}, ','))
if rank == 0 then
    store:wait({'env/0', 'env/1', 'env/2', 'env/3'})
    for r = 0, 3 do print(r, store:get('env/' .. r)) end
    print('joined', store:get('joined'))
    print('token', os.getenv('DDPLUA_STORE_TOKEN'))
end
store:close()
]]):format(port))
        -- several nodes need a shared secret: here from a file only its owner can read
        local token_file = os.tmpname()
        local f = assert(io.open(token_file, 'wb'))
        f:write('s3cret-of-the-job\n')
        f:close()
        os.execute('chmod 600 ' .. q(token_file))
        local flags = ('--nnodes 2 --nproc 2 --master-addr 127.0.0.1 --master-port %d '
                       .. '--store-token-file %s'):format(port, q(token_file))
        local out, err, code = sh(('env -u DDPLUA_STORE_TOKEN timeout 30 %s %s --node-rank 1 %s '
                                   .. '> /dev/null & env -u DDPLUA_STORE_TOKEN timeout 30 %s %s '
                                   .. '--node-rank 0 %s; r=$?; wait $! || r=$?; exit $r')
                                  :format(q(bin), flags, q(path), q(bin), flags, q(path)))
        os.remove(path)
        os.remove(token_file)
        assert.are.equal(0, code, err)
        has(out, '0\t4,0,2,0\n1\t4,1,2,0\n2\t4,0,2,1\n3\t4,1,2,1\n')
        has(out, 'joined\t4\n')
        has(out, 'token\ts3cret-of-the-job\n') -- the file's secret, its newline dropped
    end)

    it('refuses several nodes with an open store unless told so', function()
        local _, err, code = ddplua('--nnodes 2 --nproc 1 ' .. q(env_script),
                                    'env -u DDPLUA_STORE_TOKEN')
        assert.are.equal(1, code)
        has(err, 'ddplua: --nnodes 2: the rendezvous store would be open to anyone who can reach '
            .. '127.0.0.1:29500. Give every node the same secret: DDPLUA_STORE_TOKEN=<secret> in '
            .. 'the environment, or --store-token-file FILE')
        -- elastic ranges count their largest size
        _, err, code = ddplua('--nnodes 1:2 --nproc 1 ' .. q(env_script),
                              'env -u DDPLUA_STORE_TOKEN')
        assert.are.equal(1, code)
        has(err, '--no-store-auth to run with an open store')
        -- a token file others can read is refused, as ssh refuses such keys
        local token_file = os.tmpname()
        local f = assert(io.open(token_file, 'wb'))
        f:write('t')
        f:close()
        os.execute('chmod 644 ' .. q(token_file))
        _, err, code = ddplua('--nnodes 2 --nproc 1 --store-token-file ' .. q(token_file) .. ' '
                              .. q(env_script))
        assert.are.equal(1, code)
        has(err, 'can be read or written by others (mode 0644; chmod 600 it)')
        os.execute('chmod 600 ' .. q(token_file))
        f = assert(io.open(token_file, 'wb'))
        f:close()
        _, err, code = ddplua('--nnodes 2 --nproc 1 --store-token-file ' .. q(token_file) .. ' '
                              .. q(env_script))
        assert.are.equal(1, code)
        has(err, 'is empty')
        os.remove(token_file)
        _, err, code = ddplua('--nnodes 2 --nproc 1 --store-token-file /nonexistent/tok '
                              .. q(env_script))
        assert.are.equal(1, code)
        has(err, '--store-token-file /nonexistent/tok: No such file or directory')
    end)

    it('runs several nodes without a token only with --no-store-auth', function()
        -- one node of two, alone: its rank 0 hosts an open store (no token in the workers)
        local out, err, code = ddplua('--nnodes 2 --node-rank 0 --nproc 1 --no-store-auth -e '
            .. q("print('TOKEN=' .. tostring(os.getenv('DDPLUA_STORE_TOKEN')))"),
            'env -u DDPLUA_STORE_TOKEN')
        assert.are.equal(0, code, err)
        has(out, 'TOKEN=nil')
    end)

    it('runs as the srun or mpirun rank when their variables are set and --nproc is not', function()
        local out, err, code = ddplua(q(env_script), 'env -u RANK -u MASTER_ADDR SLURM_PROCID=5 '
            .. 'SLURM_NTASKS=8 SLURM_LOCALID=1 SLURM_NNODES=4 SLURM_NODEID=2')
        assert.are.equal(0, code, err)
        local e = parse_env(out)[5]
        assert.are.equal('8', e.WORLD_SIZE)
        assert.are.equal('1', e.LOCAL_RANK)
        assert.are.equal('2', e.GROUP_RANK)
        assert.are.equal('default', e.ROLE_NAME) -- torchrun's one role, holding every rank
        assert.are.equal('5', e.ROLE_RANK)
        assert.are.equal('8', e.ROLE_WORLD_SIZE)
        assert.are.equal('', e.MASTER_ADDR) -- several nodes: the user must say where rank 0 is
        assert.are.equal('29500', e.MASTER_PORT)
        out, err, code = ddplua('--master-addr 10.1.2.3 --master-port 1234 ' .. q(env_script),
                                'env -u RANK OMPI_COMM_WORLD_RANK=2 OMPI_COMM_WORLD_SIZE=4 '
                                .. 'OMPI_COMM_WORLD_LOCAL_RANK=0 OMPI_COMM_WORLD_LOCAL_SIZE=2')
        assert.are.equal(0, code, err)
        e = parse_env(out)[2]
        assert.are.equal('4', e.WORLD_SIZE)
        assert.are.equal('0', e.LOCAL_RANK)
        assert.are.equal('2', e.LOCAL_WORLD_SIZE)
        assert.are.equal('1', e.GROUP_RANK)
        assert.are.equal('10.1.2.3', e.MASTER_ADDR)
        assert.are.equal('1234', e.MASTER_PORT)
    end)

    it('takes rank 0\'s host from the Slurm node list, and MPICH\'s PMI variables', function()
        local slurm = 'env -u RANK -u MASTER_ADDR SLURM_PROCID=3 SLURM_NTASKS=8 SLURM_NNODES=4 '
            .. "SLURM_TASKS_PER_NODE='2(x4)' "
        local cases = {
            {"SLURM_JOB_NODELIST='gpu[07-10,12],cpu3'", 'gpu07'},
            {"SLURM_NODELIST='rack1-n[3-5]-ib[2-3]'", 'rack1-n3-ib2'},
            {"SLURM_JOB_NODELIST='node5,node1'", 'node5'},
            {"SLURM_JOB_NODELIST='bad[1-2'", ''}, -- malformed: the user must say
            {"SLURM_JOB_NODELIST='gpu[1-2]' MASTER_ADDR=10.0.0.9", '10.0.0.9'}, -- theirs wins
        }
        for _, c in ipairs(cases) do
            local out, err, code = ddplua(q(env_script), slurm .. c[1])
            assert.are.equal(0, code, err)
            local e = parse_env(out)[3]
            assert.are.equal(c[2], e.MASTER_ADDR, c[1])
            assert.are.equal('2', e.LOCAL_WORLD_SIZE) -- 2(x4): two tasks on each node
            assert.are.equal('1', e.GROUP_RANK) -- task 3 on the second node
            assert.are.equal('4', e.GROUP_WORLD_SIZE)
        end
        local out, err, code = ddplua(q(env_script), 'env -u RANK -u MASTER_ADDR PMI_RANK=3 '
            .. 'PMI_SIZE=4 MPI_LOCALRANKID=1 MPI_LOCALNRANKS=2')
        assert.are.equal(0, code, err)
        local e = parse_env(out)[3]
        assert.are.equal('4', e.WORLD_SIZE)
        assert.are.equal('1', e.LOCAL_RANK)
        assert.are.equal('1', e.GROUP_RANK)
    end)

    it('joins a job of srun tasks with no flags: init_process_group() and all_reduce', function()
        -- two "srun tasks" on this machine: only the Slurm variables, no RANK or MASTER_ADDR
        local src = os.getenv('DDPLUA_SOURCE_DIR') or '.'
        local port = require('ddplua.core.process').free_port()
        local base = os.tmpname()
        local cmd = {}
        for r = 0, 1 do
            cmd[#cmd + 1] = ('env -u RANK -u WORLD_SIZE -u MASTER_ADDR SLURM_PROCID=%d '
                .. 'SLURM_NTASKS=2 SLURM_LOCALID=%d SLURM_NNODES=1 SLURM_NODEID=0 '
                .. 'SLURM_JOB_NODELIST=localhost MASTER_PORT=%d timeout 60 %s %s > %s 2>&1 &')
                :format(r, r, port, q(bin), q(src .. '/examples/dist_hello.lua'),
                    q(base .. '.' .. r))
        end
        sh(table.concat(cmd, ' ') .. ' wait')
        for r = 0, 1 do
            local out = slurp(base .. '.' .. r) or ''
            os.remove(base .. '.' .. r)
            has(out, ('rank %d: all_reduce(rank + 1) = 3 (expected 3)'):format(r))
            has(out, 'master localhost:' .. port)
        end
        os.remove(base)
    end)

    it('refuses impossible layouts with a message', function()
        local _, err, code = ddplua('--nnodes 2 --node-rank 2 --nproc 2 ' .. q(env_script))
        assert.are.equal(1, code)
        has(err, '--node-rank must be smaller than --nnodes')
        _, err, code = ddplua('--nproc 2 -i ' .. q(env_script))
        assert.are.equal(1, code)
        has(err, '-i cannot be used with the launcher')
    end)
end)

describe('launcher failures', function()
    it('stops the others within seconds when rank 1 errors, and names rank 1', function()
        local path = script_file([[
if os.getenv('RANK') == '1' then error('rank one gives up') end
local t0 = ddpl.time()
while ddpl.time() - t0 < 25 do end -- the launcher must stop this
]])
        local t0 = core.time()
        local _, err, code = ddplua('--nproc 3 ' .. q(path))
        local dt = core.time() - t0
        os.remove(path)
        assert.are.equal(1, code)
        assert.is_true(dt < 10, 'took ' .. dt .. ' s')
        has(err, 'rank one gives up')
        assert.truthy(err:find('ddplua: rank 1 %(pid %d+%) failed with exit code 1; '
            .. 'stopping the other 2 workers'), err)
    end)

    it('reports a worker killed by a signal, with the signal', function()
        local path = script_file([[
if os.getenv('RANK') == '1' then os.execute('kill -KILL $PPID') end
local t0 = ddpl.time()
while ddpl.time() - t0 < 25 do end
]])
        local t0 = core.time()
        local _, err, code = ddplua('--nproc 2 ' .. q(path))
        os.remove(path)
        assert.are.equal(128 + 9, code)
        assert.is_true(core.time() - t0 < 10)
        assert.truthy(err:find('ddplua: rank 1 %(pid %d+%) was killed by signal SIGKILL'), err)
    end)

    it('stops its workers when it gets SIGTERM', function()
        local dir = os.tmpname()
        os.remove(dir)
        assert(os.execute('mkdir ' .. q(dir)))
        local path = script_file(([[
local path = %q .. '/pid.' .. os.getenv('RANK')
local f = assert(io.open(path .. '.tmp', 'w'))
f:write(io.open('/proc/self/stat'):read('l'):match('^%%d+'))
f:close()
assert(os.rename(path .. '.tmp', path)) -- whole or absent, never half written
local t0 = ddpl.time()
while ddpl.time() - t0 < 25 do end
]]):format(dir))
        local p = assert(io.popen(('(%s --nproc 2 %s > %s/out 2> %s/err & echo $!)')
                                  :format(q(bin), q(path), q(dir), q(dir))))
        local launcher = p:read('l')
        p:close()
        local ok = wait_until(function()
            return slurp(dir .. '/pid.0') and slurp(dir .. '/pid.1')
        end, 15)
        local pids = {slurp(dir .. '/pid.0'), slurp(dir .. '/pid.1')}
        os.execute('kill -TERM ' .. launcher)
        local stopped = wait_until(function() return gone(launcher) end, 10)
        local workers_gone = wait_until(function()
            return (not pids[1] or gone(pids[1])) and (not pids[2] or gone(pids[2]))
        end, 5)
        -- never leave processes behind, whatever failed
        for _, pid in ipairs({launcher, pids[1], pids[2]}) do
            if not gone(pid) then os.execute('kill -KILL ' .. pid .. ' 2>/dev/null') end
        end
        local err = slurp(dir .. '/err') or ''
        os.execute('rm -rf ' .. q(dir))
        os.remove(path)
        assert.is_true(ok and #pids == 2, 'the workers did not start: ' .. err)
        assert.is_true(stopped, 'the launcher did not stop')
        assert.is_true(workers_gone, 'workers outlived the launcher: ' .. tostring(pids[1]) .. ' '
            .. tostring(pids[2]))
        has(err, 'ddplua: got SIGTERM; stopping the 2 workers')
    end)
end)

describe('launcher ports and output', function()
    it('gives two jobs started at once different free ports, each with a working store', function()
        local path = script_file([[
local rank = tonumber(os.getenv('RANK'))
local port = tonumber(os.getenv('MASTER_PORT'))
local store = require('ddplua.core')._store.TCPStore('127.0.0.1', port,
                                                     {is_master = rank == 0, timeout = 20})
store:set('r' .. rank, 'x')
store:wait({'r0', 'r1'})
if rank == 0 then print('port', port) end
store:close()
]])
        local job = ('timeout 30 %s --nproc 2 %s'):format(q(bin), q(path))
        local out, err, code = sh(job .. ' & ' .. job .. '; r=$?; wait $! || r=$?; exit $r')
        os.remove(path)
        assert.are.equal(0, code, err)
        local ports = {}
        for p in out:gmatch('port\t(%d+)') do ports[#ports + 1] = p end
        assert.are.equal(2, #ports, out)
        assert.are_not.equal(ports[1], ports[2])
    end)

    it('--log-dir writes each rank\'s stdout and stderr to its own files', function()
        local dir = os.tmpname()
        os.remove(dir)
        local out, err, code = ddplua(('--log-dir %s --nproc 2 -e %s'):format(q(dir),
            q([[print('out of ' .. os.getenv('RANK'))
                io.stderr:write('err of ', os.getenv('RANK'), '\n')]])))
        assert.are.equal(0, code, err)
        for r = 0, 1 do
            assert.are.equal('out of ' .. r .. '\n', slurp(('%s/rank%d.stdout'):format(dir, r)))
            assert.are.equal('err of ' .. r .. '\n', slurp(('%s/rank%d.stderr'):format(dir, r)))
            has(out, 'out of ' .. r .. '\n') -- the console still gets everything
            has(err, 'err of ' .. r .. '\n')
        end
        os.execute('rm -rf ' .. q(dir))
    end)

    it('runs examples/dist_hello.lua on 2 ranks, its all_reduce included', function()
        local src = os.getenv('DDPLUA_SOURCE_DIR') or '.'
        local out, err, code = ddplua(q(src .. '/examples/dist_hello.lua') .. ' --nproc 2')
        assert.are.equal(0, code, err)
        for r = 0, 1 do
            has(out, ('hello from rank %d of 2'):format(r))
            has(out, ('rank %d: all_reduce(rank + 1) = 3 (expected 3)'):format(r))
        end
    end)

    it('--prefix-output prefixes every line with its rank', function()
        local out, err, code = ddplua('--prefix-output --nproc 2 -e ' ..
            q([[io.write('a', os.getenv('RANK'), '\nb'); io.flush(); io.write('c\n', 'tail')]]))
        assert.are.equal(0, code, err)
        for r = 0, 1 do
            has(out, ('[rank%d]: a%d\n'):format(r, r))
            has(out, ('[rank%d]: bc\n'):format(r))
            has(out, ('[rank%d]: tail\n'):format(r))
        end
    end)
end)
