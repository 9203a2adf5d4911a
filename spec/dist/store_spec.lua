-- spec/dist/store_spec.lua: the TCP key-value store (engine/distributed/store.c) through its Lua
-- binding: in one process a server and clients (set/get/add/check/wait/delete_key/num_keys, binary
-- values, timeouts naming the keys, token refusal, unreachable server), and across processes
-- started by the launcher (concurrent add from 4 ranks, a get woken by another process's set);
-- ddpl.distributed.TCPStore waiting for world_size stores.
-- Every external command runs under `timeout`, every store call has a short timeout.
local S = require 'shell_util'
local H = require 'helpers'
local ddpl = H.ddpl
local core = require 'ddplua.core'
local TCPStore = core._store.TCPStore
local bin = os.getenv('DDPLUA_BIN') or ((os.getenv('DDPLUA_BUILD_DIR') or 'build') .. '/ddplua')

local function q(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end

local function has(text, pattern)
    assert.truthy(text:find(pattern, 1, true), ('expected %q in:\n%s'):format(pattern, text))
end

local function now() return core.time() end

-- Runs `ddplua <args>`; returns stdout, stderr, exit status.
local function run(args)
    local err = os.tmpname()
    local p = assert(io.popen(('timeout 30 %s %s 2> %s'):format(q(bin), args, q(err))))
    local out = p:read('a')
    local _, _, code = p:close()
    local f = assert(io.open(err, 'rb'))
    local errtext = f:read('a')
    f:close()
    os.remove(err)
    return out, errtext, code
end

local script_file = S.script_file

describe('TCPStore in one process', function()
    local master, client
    before_each(function()
        master = TCPStore('127.0.0.1', 0, {is_master = true, timeout = 5, token = ''})
        client = TCPStore('127.0.0.1', master.port, {timeout = 5, token = ''})
    end)
    after_each(function()
        client:close()
        master:close()
    end)

    it('picks a free port and reports it', function()
        assert.is_true(master.port > 0 and master.port < 65536)
        assert.are.equal(master.port, client.port)
        assert.is_true(master.is_master)
        assert.is_false(client.is_master)
        has(tostring(master), 'TCPStore(127.0.0.1:' .. master.port .. ', master)')
    end)

    it('set and get, between clients, with binary values', function()
        client:set('a', 'hello')
        assert.are.equal('hello', master:get('a'))
        master:set('a', 'x\0y\255')
        assert.are.equal('x\0y\255', client:get('a'))
        client:set('empty', '')
        assert.are.equal('', master:get('empty'))
        client:set('n', 12)
        assert.are.equal('12', client:get('n'))
        local big = string.rep('0123456789', 200000) -- 2 MB
        client:set('big', big)
        assert.are.equal(big, master:get('big'))
    end)

    it('add is a counter kept as decimal text', function()
        assert.are.equal(3, client:add('c', 3))
        assert.are.equal(10, master:add('c', 7))
        assert.are.equal(8, client:add('c', -2))
        assert.are.equal('8', master:get('c'))
        client:set('text', 'abc')
        local ok, err = pcall(client.add, client, 'text', 1)
        assert.is_false(ok)
        has(err, "store: add on key 'text' failed: its value is not an integer")
        -- a counter never wraps (issue 32): past the largest integer is an error, the value kept
        assert.are.equal(math.maxinteger, client:add('top', math.maxinteger))
        ok, err = pcall(client.add, client, 'top', 1)
        assert.is_false(ok)
        has(err, ("store: add on key 'top' failed: adding 1 to %d overflows a 64-bit integer")
            :format(math.maxinteger))
        assert.are.equal(tostring(math.maxinteger), master:get('top'))
        assert.are.equal(math.mininteger, client:add('bottom', math.mininteger))
        ok, err = pcall(client.add, client, 'bottom', -1)
        assert.is_false(ok)
        has(err, 'overflows a 64-bit integer')
        assert.are.equal(math.mininteger + 1, client:add('bottom', 1)) -- still usable
    end)

    it('check, wait and delete_key', function()
        assert.is_false(client:check('k1'))
        client:set('k1', '1')
        assert.is_true(master:check('k1'))
        assert.is_true(master:check({'k1'}))
        assert.is_false(master:check({'k1', 'k2'}))
        master:set('k2', '2')
        client:wait({'k1', 'k2'})
        client:wait('k1', 0.1)
        assert.is_true(client:delete_key('k1'))
        assert.is_false(client:delete_key('k1'))
        assert.is_false(master:check('k1'))
    end)

    it('get and wait time out naming the keys, after the timeout and not much later', function()
        client:set_timeout(0.3)
        assert.are.equal(0.3, client.timeout)
        local t0 = now()
        local ok, err = pcall(client.get, client, 'gloo/1')
        local dt = now() - t0
        assert.is_false(ok)
        has(err, "store: timed out after 0.3 s waiting for key 'gloo/1'")
        assert.is_true(dt >= 0.29 and dt < 3, 'took ' .. dt .. ' s')
        client:set('here', '1')
        ok, err = pcall(client.wait, client, {'here', 'rank2', 'rank3'}, 0.2)
        assert.is_false(ok)
        has(err, "store: timed out after 0.2 s waiting for 3 keys (missing: 'rank2', 'rank3')")
        -- the connection is still in step after timeouts
        assert.are.equal('1', client:get('here'))
    end)

    it('refuses arguments of the wrong type before sending anything', function()
        local ok, err = pcall(client.set, client, 'k', {})
        assert.is_false(ok)
        has(err, "TCPStore.set: expected a string value for key 'k', got table")
        ok, err = pcall(client.get, client, 1)
        assert.is_false(ok)
        has(err, 'TCPStore.get: expected a string key')
        ok, err = pcall(TCPStore, '127.0.0.1', 1, {timeout = 1, colour = 'red'})
        assert.is_false(ok)
        has(err, "TCPStore: unknown option 'colour'")
        ok, err = pcall(TCPStore, '127.0.0.1', 0, {timeout = 1})
        assert.is_false(ok)
        has(err, 'port 0 is not valid for a client')
    end)
end)

describe('TCPStore: num_keys and ddpl.distributed.TCPStore', function()
    it('num_keys counts every key, add counters too; delete_key lowers it', function()
        local master = TCPStore('127.0.0.1', 0, {is_master = true, timeout = 5, token = ''})
        local client = TCPStore('127.0.0.1', master.port, {timeout = 5, token = ''})
        local base = master:num_keys()
        client:set('a', '1')
        client:set('b', '2')
        client:set('a', '3') -- the same key again
        client:add('n', 4)
        assert.are.equal(base + 3, master:num_keys())
        assert.are.equal(base + 3, client:num_keys())
        assert.is_true(client:delete_key('b'))
        assert.are.equal(base + 2, client:num_keys())
        client:close()
        master:close()
    end)

    it('dist.TCPStore waits for world_size stores, and names the count on a timeout', function()
        local dist = ddpl.distributed
        local master = dist.TCPStore('127.0.0.1', 0, {is_master = true, world_size = 2,
                                                      timeout = 5, wait_for_workers = false})
        -- the second store completes the count, so it returns at once
        local client = dist.TCPStore('127.0.0.1', master.port, {world_size = 2, timeout = 5})
        assert.are.equal('1', master:get('ddplua/tcpstore/all_joined'))
        client:set('k', 'v')
        assert.are.equal('v', master:get('k'))
        -- a gang of three whose third store never comes
        local lone = dist.TCPStore('127.0.0.1', 0, {is_master = true, world_size = 3,
                                                    timeout = 5, wait_for_workers = false})
        local err = H.assert_error(function()
            dist.TCPStore('127.0.0.1', lone.port, {world_size = 3, timeout = 0.2})
        end, 'TCPStore: 2 of world_size 3 stores joined within the timeout')
        has(err, '0.2 s')
        lone:close()
        H.assert_error(function() dist.TCPStore('127.0.0.1', master.port, {world_size = 0}) end,
                       'TCPStore: world_size must be a positive integer, got 0')
        H.assert_error(function() dist.TCPStore('127.0.0.1', master.port, {wrold_size = 2}) end,
                       "TCPStore: unknown option 'wrold_size'")
        client:close()
        master:close()
    end)
end)

describe('TCPStore token and connection errors', function()
    it('refuses a client with a wrong or missing token, accepts the right one', function()
        local master = TCPStore('127.0.0.1', 0, {is_master = true, timeout = 5, token = 'secret'})
        local ok, err = pcall(TCPStore, '127.0.0.1', master.port, {timeout = 2, token = 'guess'})
        assert.is_false(ok)
        has(err, 'store: the server at 127.0.0.1:' .. master.port ..
            ' refused this client: wrong DDPLUA_STORE_TOKEN')
        ok, err = pcall(TCPStore, '127.0.0.1', master.port, {timeout = 2, token = ''})
        assert.is_false(ok)
        has(err, 'refused this client: this client has no DDPLUA_STORE_TOKEN')
        local good = TCPStore('127.0.0.1', master.port, {timeout = 2, token = 'secret'})
        good:set('k', 'v')
        assert.are.equal('v', master:get('k'))
        good:close()
        master:close()
    end)

    it('names the address and the reason when no server comes within the timeout', function()
        local master = TCPStore('127.0.0.1', 0, {is_master = true, timeout = 5, token = ''})
        local port = master.port
        master:close() -- nothing listens there now
        local t0 = now()
        local ok, err = pcall(TCPStore, '127.0.0.1', port, {timeout = 0.5, token = ''})
        local dt = now() - t0
        assert.is_false(ok)
        has(err, ('store: cannot reach 127.0.0.1:%d after 0.5 s (connection refused)'):format(port))
        assert.is_true(dt >= 0.45 and dt < 3, 'took ' .. dt .. ' s')
    end)

    it('a second server on a port in use says which port', function()
        local master = TCPStore('127.0.0.1', 0, {is_master = true, timeout = 5, token = ''})
        local port = master.port
        local ok, err = pcall(TCPStore, '127.0.0.1', port, {is_master = true, timeout = 1})
        master:close()
        assert.is_false(ok)
        has(err, ('store: cannot listen on port %d (address already in use)'):format(port))
    end)

    it('a closed store says so', function()
        local master = TCPStore('127.0.0.1', 0, {is_master = true, timeout = 5, token = ''})
        master:close()
        master:close() -- twice is harmless
        local ok, err = pcall(master.get, master, 'k')
        assert.is_false(ok)
        has(err, 'attempt to use a closed TCPStore')
        do
            local s <close> = TCPStore('127.0.0.1', 0, {is_master = true, timeout = 5, token = ''})
            s:set('k', 'v')
        end
    end)
end)

describe('TCPStore across processes', function()
    it('4 processes x 100 concurrent adds make 400; a get waits for another process', function()
        local path = script_file([[
local TCPStore = require('ddplua.core')._store.TCPStore
local rank = tonumber(os.getenv('RANK'))
local store = TCPStore(os.getenv('MASTER_ADDR'), tonumber(os.getenv('MASTER_PORT')),
                       {is_master = rank == 0, timeout = 20})
for _ = 1, 100 do store:add('count', 1) end
store:set('done/' .. rank, 'yes')
if rank == 1 then
    local t0 = ddpl.time()
    print('late', store:get('late'), ddpl.time() - t0 > 0.15)
end
if rank == 0 then
    store:wait({'done/0', 'done/1', 'done/2', 'done/3'})
    print('count', store:get('count'))
    local t0 = ddpl.time()
    while ddpl.time() - t0 < 0.2 do end
    store:set('late', 'value')
end
store:close()
]])
        local out, err, code = run('--nproc 4 ' .. q(path))
        os.remove(path)
        assert.are.equal(0, code, err)
        has(out, 'count\t400\n')
        has(out, 'late\tvalue\ttrue\n')
    end)

    it('clients waiting when rank 0 fails get an error at once, not at the timeout', function()
        local path = script_file([[
local rank = tonumber(os.getenv('RANK'))
local store = require('ddplua.core')._store.TCPStore(os.getenv('MASTER_ADDR'),
    tonumber(os.getenv('MASTER_PORT')), {is_master = rank == 0, timeout = 60})
store:add('joined', 1)
if rank == 0 then
    while store:get('joined') ~= '3' do end
    error('rank zero fails')
end
store:get('never')
]])
        local t0 = now()
        local _, err, code = run('--nproc 3 ' .. q(path))
        local dt = now() - t0
        os.remove(path)
        assert.are_not.equal(0, code)
        assert.is_true(dt < 8, 'took ' .. dt .. ' s')
        has(err, 'rank zero fails')
        has(err, "store: get 'never' failed: the server has shut down")
    end)

    -- A rank that stores values over the limit (five of 300 MB, the default limit 256 MiB) gets
    -- an error for each and the job goes on: the store of an elastic job lives in the launcher,
    -- whose death would take every worker and every restart with it.
    it('a rank storing oversized values gets errors and the job goes on', function()
        local path = script_file([[
local ddpl = require 'ddplua'
local dist = ddpl.distributed
dist.init_process_group({backend = 'gloo', timeout = 60})
local store = require('ddplua.core')._store.TCPStore(os.getenv('MASTER_ADDR'),
    tonumber(os.getenv('MASTER_PORT')), {is_master = false, timeout = 60})
if dist.get_rank() == 1 then
    local big = string.rep('x', 300 * 1024 * 1024)
    for i = 1, 5 do
        local ok, err = pcall(store.set, store, 'big' .. i, big)
        print('SET', i, ok, err)
    end
end
dist.barrier()
local t = ddpl.tensor({1.0})
dist.all_reduce(t)
print('SUM', dist.get_rank(), t:item())
dist.destroy_process_group()
]])
        local out, err, code = run('--nproc 2 --max-restarts 1 ' .. q(path))
        os.remove(path)
        assert.are.equal(0, code, err)
        for i = 1, 5 do
            has(out, ("SET\t%d\tfalse\tstore: set 'big%d' failed: a request of "):format(i, i))
        end
        has(out, "over the store's limit of 268435456 bytes per value (DDPLUA_STORE_MAX_VALUE)")
        has(out, 'SUM\t0\t2.0\n')
        has(out, 'SUM\t1\t2.0\n')
        assert.is_nil(err:find('restarting', 1, true), err) -- nothing failed
    end)
end)
