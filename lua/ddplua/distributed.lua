-- lua/ddplua/distributed.lua: ddpl.distributed (also ddpl.dist), torch.distributed for ddplua.
-- defines: init_process_group, is_initialized, get_rank, get_world_size, get_backend, barrier,
--          destroy_process_group, new_group, new_subgroups, get_process_group_ranks,
--          get_global_rank, get_group_rank, all_reduce, broadcast, all_gather,
--          all_gather_into_tensor, reduce_scatter_tensor, send, recv, isend, irecv, reduce,
--          gather, scatter, all_to_all, all_to_all_single, ReduceOp, TCPStore, print0,
--          default_group, Future.
--
-- One default process group per process, as in PyTorch. The C side (engine/lua/bind_dist_pg.c over
-- engine/distributed/pg.h) runs every collective on the group's worker thread and returns a work
-- handle; here a call without async_op waits for it, so a plain call returns once the tensor
-- holds the result. Work handles have wait([timeout_s]), is_completed() and exception(); an async
-- collective's handle also gives its tensor: wait() and value() return it, get_future() and
-- then_(fn) chain on it (lua/ddplua/distributed/future.lua, for DDP comm hooks).
-- backend='gloo' takes CPU tensors; backend='nccl' takes CUDA tensors on the device that was
-- current at init: call ddpl.cuda.set_device(LOCAL_RANK) first (one GPU per rank), as with
-- torchrun and PyTorch. With nccl, "waits" means the later CUDA work is ordered after the
-- collective (the host goes on; reading values, e.g. :item(), synchronises); barrier() blocks.
-- Beyond API.md: dist.print0(...) prints on rank 0 only (or everywhere before init), and
-- dist.default_group() gives the C group box for engine code such as the DDP wrapper.
--
-- Groups (PyTorch's): new_group(ranks) and new_subgroups(size) are collective over the whole
-- world, called by every rank in the same order, members or not; a group is the C box of its own
-- process group (own Gloo mesh / shared memory, threads and sequence numbers, on the default
-- group's store). {group = g} selects it in every collective and in get_rank / get_world_size
-- (-1 on a non-member, which gets an error from any collective on g). src/dst are global ranks.
-- destroy_process_group() frees every group; destroy_process_group(g) only g.
require 'ddplua'
local C = require 'ddplua.core.dist'
local Future = require 'ddplua.distributed.future'

local dist = {}

local group = nil -- the default process group box, or nil
local backend_name = nil
local subgroups = {} -- every group made by new_group, in creation order (freed with the world)

dist.ReduceOp = {SUM = 'sum', AVG = 'avg', MAX = 'max', MIN = 'min', PRODUCT = 'product'}

local function env_int(name)
    local v = os.getenv(name)
    if v == nil or v == '' then return nil end
    local n = math.tointeger(tonumber(v))
    if not n then
        error(('init_process_group: environment variable %s=%q is not an integer'):format(name, v),
            3)
    end
    return n
end

-- 'tcp://host:port' -> host, port; 'env://' -> MASTER_ADDR, MASTER_PORT
local function rendezvous_address(init_method)
    if init_method == 'env://' then
        local addr = os.getenv('MASTER_ADDR')
        local port = env_int('MASTER_PORT')
        if not addr or addr == '' or not port then
            error("init_process_group: init_method 'env://' needs MASTER_ADDR and MASTER_PORT "
                .. '(set by `ddplua script.lua --nproc N`)', 3)
        end
        return addr, port
    end
    local host, port = init_method:match('^tcp://%[?([^%]]+)%]?:(%d+)/?$')
    if not host then
        error(("init_process_group: unsupported init_method '%s' (expected 'env://' or "
            .. "'tcp://host:port')"):format(init_method), 3)
    end
    return host, math.tointeger(tonumber(port))
end

-- Under the launcher's --max-restarts the launcher hosts the store and keeps it across restarts
-- (TORCHELASTIC_USE_AGENT_STORE=True, as torchrun's agent): rank 0 connects as a client, and the
-- group's keys go under /worker/attempt_<TORCHELASTIC_RESTART_COUNT>/ (PyTorch's prefix), so a
-- restarted gang rendezvous afresh. Only for env://, whose MASTER_PORT is the launcher's store.
local function elastic_store(init_method)
    if init_method ~= 'env://' or os.getenv('TORCHELASTIC_USE_AGENT_STORE') ~= 'True' then
        return false, nil
    end
    return true, ('/worker/attempt_%d/'):format(env_int('TORCHELASTIC_RESTART_COUNT') or 0)
end

local known_opts = {backend = true, init_method = true, rank = true, world_size = true,
    timeout = true, heartbeat_timeout = true}

-- heartbeat_timeout (CPU groups, docs/internals/fault-detection.md): seconds a peer's heartbeat may
-- be silent while a collective waits for it; false or 0 turns the heartbeat off; nil leaves the
-- default to the engine (DDPLUA_HEARTBEAT_TIMEOUT, else 30 s). The engine's value: -1 for off.
local function heartbeat_option(v)
    if v == nil then return nil end
    if v == false or v == 0 then return -1 end
    if type(v) ~= 'number' or v < 0 or v ~= v then
        error(('init_process_group: heartbeat_timeout must be a positive number of seconds, '
            .. 'or false/0 for none (got %s)'):format(tostring(v)), 3)
    end
    return v
end

function dist.init_process_group(opts)
    opts = opts or {}
    if type(opts) == 'string' then opts = {backend = opts} end
    for k in pairs(opts) do
        if not known_opts[k] then
            error(("init_process_group: unknown option '%s'"):format(tostring(k)), 2)
        end
    end
    if group then
        error('init_process_group: the default process group is already initialized '
            .. '(call destroy_process_group first)', 2)
    end
    local backend = opts.backend or 'gloo'
    if type(backend) ~= 'string' then
        error(("init_process_group: unknown backend '%s' (expected 'gloo' or 'nccl')")
            :format(tostring(backend)), 2)
    end
    -- unknown, or not runnable here (nccl without NCCL in the build or without a GPU)
    local ok_backend, why = pcall(C.check_backend, backend)
    if not ok_backend then error((tostring(why):gsub('^[^\n]-%.lua:%d+: ', '')), 2) end
    local rank = opts.rank or env_int('RANK')
    local world = opts.world_size or env_int('WORLD_SIZE')
    if rank == nil or world == nil then
        error('init_process_group: rank and world_size are needed (options, or RANK and '
            .. 'WORLD_SIZE from the launcher: `ddplua script.lua --nproc N`)', 2)
    end
    local addr, port = rendezvous_address(opts.init_method or 'env://')
    local timeout = opts.timeout or 1800
    if type(timeout) ~= 'number' or timeout <= 0 then
        error('init_process_group: timeout must be a positive number of seconds', 2)
    end
    local heartbeat = heartbeat_option(opts.heartbeat_timeout)
    local agent_store, key_prefix = elastic_store(opts.init_method or 'env://')
    local ok, g = pcall(C.init, {backend = backend, master_addr = addr, master_port = port,
        rank = math.tointeger(rank), world_size = math.tointeger(world), timeout = timeout,
        token = os.getenv('DDPLUA_STORE_TOKEN'), agent_store = agent_store,
        key_prefix = key_prefix, heartbeat = heartbeat})
    if not ok then error((tostring(g):gsub('^[^\n]-%.lua:%d+: ', '')), 2) end
    group = g
    backend_name = backend
end

function dist.is_initialized() return group ~= nil end

local function need(fname)
    if not group then
        error(fname .. ': the default process group is not initialized (call '
            .. 'dist.init_process_group first)', 3)
    end
    return group
end

-- an error message without the "file.lua:12: " position that luaL_error put in front
local function bare(err) return (tostring(err):gsub('^[^\n]-%.lua:%d+: ', '')) end

-- Calls a C function of the group; its error is raised again at the user's call site.
local function c_call(f, ...)
    local ok, r = pcall(f, ...)
    if not ok then error(bare(r), 3) end
    return r
end

-- The group box g selects (nil: the default group), checked to be one.
local function group_of(fname, g)
    local d = need(fname)
    if g == nil then return d end
    -- API.md's form, get_rank({group = g}); a table that is not a group box
    if type(g) == 'table' then
        for k in pairs(g) do
            if k ~= 'group' then
                error(("%s: unknown option '%s' (expected {group = g})"):format(fname,
                    tostring(k)), 3)
            end
        end
        g = g.group
        if g == nil then return d end
    end
    if not C.is_group(g) then
        error(('%s: group must be a process group (from new_group), got %s'):format(fname,
            type(g)), 3)
    end
    return g
end

function dist.default_group() return need('default_group') end
-- PyTorch: the rank within the group, -1 on a process that is not a member
function dist.get_rank(g) return c_call(C.rank, group_of('get_rank', g)) end
function dist.get_world_size(g)
    local pg = group_of('get_world_size', g)
    return c_call(C.rank, pg) < 0 and -1 or C.size(pg)
end
function dist.get_backend(g) group_of('get_backend', g); return backend_name end

-- the global ranks of the group's members, in group-rank order
function dist.get_process_group_ranks(g)
    return c_call(C.group_ranks, group_of('get_process_group_ranks', g))
end

function dist.get_global_rank(g, group_rank)
    local ranks = dist.get_process_group_ranks(g)
    local r = math.type(group_rank) == 'integer' and ranks[group_rank + 1]
    if not r then
        error(('get_global_rank: group rank %s is out of range for a group of %d ranks')
            :format(tostring(group_rank), #ranks), 2)
    end
    return r
end

function dist.get_group_rank(g, global_rank)
    for i, r in ipairs(dist.get_process_group_ranks(g)) do
        if r == global_rank then return i - 1 end
    end
    error(('get_group_rank: rank %s is not in the group'):format(tostring(global_rank)), 2)
end

local group_opts = {timeout = true, backend = true}

-- new_group([ranks] [, {timeout, backend}]): ranks (global, distinct) default to the whole world.
function dist.new_group(ranks, opts)
    local world = need('new_group')
    if type(ranks) == 'table' and getmetatable(ranks) == nil and opts == nil
        and (ranks.timeout ~= nil or ranks.backend ~= nil) then
        ranks, opts = nil, ranks
    end
    opts = opts or {}
    if type(opts) ~= 'table' then
        error(('new_group: expected an options table, got %s'):format(type(opts)), 2)
    end
    for k in pairs(opts) do
        if not group_opts[k] then error(("new_group: unknown option '%s'"):format(tostring(k)), 2) end
    end
    if opts.backend ~= nil and opts.backend ~= backend_name then
        error(("new_group: backend '%s' differs from the default group's '%s' (one backend per "
            .. 'job)'):format(tostring(opts.backend), backend_name), 2)
    end
    if opts.timeout ~= nil and (type(opts.timeout) ~= 'number' or opts.timeout <= 0) then
        error('new_group: timeout must be a positive number of seconds', 2)
    end
    if ranks == nil then
        ranks = {}
        for r = 0, C.size(world) - 1 do ranks[#ranks + 1] = r end
    elseif type(ranks) ~= 'table' then
        error(('new_group: ranks must be a list of global ranks, got %s'):format(type(ranks)), 2)
    end
    local ok, g = pcall(C.new_group, world, ranks, opts.timeout)
    if not ok then error(bare(g), 2) end
    subgroups[#subgroups + 1] = g
    return g
end

-- new_subgroups([size]): the world split into consecutive groups of `size` ranks (default: one
-- per machine, LOCAL_WORLD_SIZE); returns the caller's group and the list of all, as PyTorch.
function dist.new_subgroups(size, opts)
    local world = need('new_subgroups')
    local n = C.size(world)
    if size == nil then
        size = env_int('LOCAL_WORLD_SIZE') or n
    end
    if math.type(size) ~= 'integer' or size < 1 or size > n or n % size ~= 0 then
        error(('new_subgroups: the group size must be a positive integer dividing world_size %d, '
            .. 'got %s'):format(n, tostring(size)), 2)
    end
    local mine, all = nil, {}
    local me = C.rank(world)
    for first = 0, n - 1, size do
        local ranks = {}
        for r = first, first + size - 1 do ranks[#ranks + 1] = r end
        local ok, g = pcall(dist.new_group, ranks, opts)
        if not ok then error(bare(g), 2) end
        all[#all + 1] = g
        if me >= first and me < first + size then mine = g end
    end
    return mine, all
end

-- destroy_process_group(): every group, the default last (the others use its store);
-- destroy_process_group(g): only g.
function dist.destroy_process_group(g)
    local d = need('destroy_process_group')
    if g ~= nil and g ~= d then
        group_of('destroy_process_group', g)
        for i, s in ipairs(subgroups) do
            if s == g then table.remove(subgroups, i) break end
        end
        C.destroy(g)
        return
    end
    for i = #subgroups, 1, -1 do C.destroy(subgroups[i]) end
    subgroups = {}
    group, backend_name = nil, nil
    C.destroy(d)
end

-- The trailing options table, checked for unknown keys; errors are raised at `level` (default 3:
-- the caller of the public function that called this).
local function options(fname, opts, allowed, level)
    level = level or 3
    if opts == nil then return {} end
    if type(opts) ~= 'table' then
        error(('%s: expected an options table, got %s'):format(fname, type(opts)), level)
    end
    for k in pairs(opts) do
        if not allowed[k] then
            error(("%s: unknown option '%s'"):format(fname, tostring(k)), level)
        end
    end
    return opts
end


-- torch.futures.Future: a completed one from Future.completed(v), or chained with then_.
dist.Future = Future

-- The tensor each async collective's work fills (weak: it lives as long as the work), which
-- work:value() returns (future.lua).
local work_results = setmetatable({}, {__mode = 'k'})

-- Returns the work handle when async, else waits (raising the operation's error) and returns nil.
-- result: the tensor the work fills, given back by its wait/value/then_.
local function finish(work, opts, result)
    if opts.async_op then
        Future.install_work_methods(getmetatable(work).__index, work_results)
        work_results[work] = result
        return work
    end
    local ok, err = pcall(work.wait, work)
    if not ok then error(bare(err), 3) end
    return nil
end

local async_only = {async_op = true, group = true}
local with_op = {async_op = true, group = true, op = true}
local group_only = {group = true}

-- The options table of fname checked against allowed, and the group box it selects.
-- A group in place of the table stands for {group = g} (PyTorch's positional group argument).
local function call_opts(fname, opts, allowed)
    need(fname)
    if C.is_group(opts) then opts = {group = opts} end
    opts = options(fname, opts, allowed)
    local ok, g = pcall(group_of, fname, opts.group)
    if not ok then error(bare(g), 3) end
    return opts, g
end

function dist.all_reduce(t, opts)
    local o, g = call_opts('all_reduce', opts, with_op)
    return finish(c_call(C.all_reduce, g, t, o.op), o, t)
end

-- src is a global rank, also with {group = g}
function dist.broadcast(t, src, opts)
    local o, g = call_opts('broadcast', opts, async_only)
    return finish(c_call(C.broadcast, g, t, src), o, t)
end

function dist.all_gather(list, t, opts)
    local o, g = call_opts('all_gather', opts, async_only)
    return finish(c_call(C.all_gather, g, list, t), o, list)
end

function dist.all_gather_into_tensor(out, t, opts)
    local o, g = call_opts('all_gather_into_tensor', opts, async_only)
    return finish(c_call(C.all_gather_into_tensor, g, out, t), o, out)
end

function dist.reduce_scatter_tensor(out, inp, opts)
    local o, g = call_opts('reduce_scatter_tensor', opts, with_op)
    return finish(c_call(C.reduce_scatter_tensor, g, out, inp, o.op), o, out)
end

-- send/recv are synchronous as in PyTorch; isend/irecv return the handle. dst/src are global
-- ranks; {group = g} sends within g.
function dist.send(t, dst, opts)
    local _, g = call_opts('send', opts, group_only)
    return finish(c_call(C.send, g, t, dst), {})
end
function dist.recv(t, src, opts)
    local _, g = call_opts('recv', opts, group_only)
    finish(c_call(C.recv, g, t, src), {})
    return src
end
function dist.isend(t, dst, opts)
    local _, g = call_opts('isend', opts, group_only)
    return c_call(C.send, g, t, dst)
end
function dist.irecv(t, src, opts)
    local _, g = call_opts('irecv', opts, group_only)
    return c_call(C.recv, g, t, src)
end

-- reduce: the result lands in t on rank dst (a global rank); t of every other rank is left
-- unchanged.
function dist.reduce(t, dst, opts)
    local o, g = call_opts('reduce', opts, with_op)
    return finish(c_call(C.reduce, g, t, dst, o.op), o, t)
end

-- gather(t, gather_list, dst=0): gather_list (group-size tensors like t) on dst only, nil
-- elsewhere, as PyTorch checks; scatter(t, scatter_list, src=0) the other way round.
function dist.gather(t, list, dst, opts)
    local o, g = call_opts('gather', opts, async_only)
    if dst == nil then dst = 0 end
    return finish(c_call(C.gather, g, t, list, dst), o)
end

function dist.scatter(t, list, src, opts)
    local o, g = call_opts('scatter', opts, async_only)
    if src == nil then src = 0 end
    return finish(c_call(C.scatter, g, t, list, src), o)
end

-- all_to_all(out_list, in_list): in_list[i] goes to group rank i - 1, out_list[i] receives group
-- rank i - 1's (Lua lists count from 1, ranks from 0).
function dist.all_to_all(out_list, in_list, opts)
    local o, g = call_opts('all_to_all', opts, async_only)
    return finish(c_call(C.all_to_all, g, out_list, in_list), o)
end

local a2a_single_opts = {async_op = true, group = true, output_split_sizes = true,
    input_split_sizes = true}

-- all_to_all_single(out, inp [, {output_split_sizes, input_split_sizes}]): slices along dim 0,
-- equal unless split sizes (group-size row counts) are given.
function dist.all_to_all_single(out, inp, opts)
    local o, g = call_opts('all_to_all_single', opts, a2a_single_opts)
    return finish(c_call(C.all_to_all_single, g, out, inp, o.output_split_sizes,
        o.input_split_sizes), o, out)
end

function dist.barrier(opts)
    local o, g = call_opts('barrier', opts, async_only)
    return finish(c_call(C.barrier, g), o)
end

-- dist.TCPStore(host, port, {world_size, is_master, timeout, wait_for_workers}): PyTorch's
-- TCPStore (set, get, add, wait, check, delete_key, num_keys; the engine's store). With
-- world_size every store counts itself in on creation and, unless wait_for_workers is false,
-- the constructor returns once world_size stores (the master's included) have joined, as
-- PyTorch's does; the count lives under two keys of the store's own, which num_keys() counts
-- as PyTorch counts its own.
local JOINED, ALL_JOINED = 'ddplua/tcpstore/joined', 'ddplua/tcpstore/all_joined'
local store_opts = {world_size = true, is_master = true, timeout = true, wait_for_workers = true}

function dist.TCPStore(host, port, opts)
    opts = options('TCPStore', opts, store_opts)
    local ws = opts.world_size
    if ws ~= nil and (math.type(ws) ~= 'integer' or ws < 1) then
        error(('TCPStore: world_size must be a positive integer, got %s'):format(tostring(ws)), 2)
    end
    local ok, store = pcall(require('ddplua.core')._store.TCPStore, host, port,
                            {is_master = opts.is_master, timeout = opts.timeout})
    if not ok then error(bare(store), 2) end
    if ws == nil then return store end
    if store:add(JOINED, 1) == ws then store:set(ALL_JOINED, '1') end
    if opts.wait_for_workers ~= false then
        local joined = pcall(store.wait, store, ALL_JOINED)
        if not joined then
            local n, timeout = store:add(JOINED, 0), store.timeout
            store:close()
            error(('TCPStore: %d of world_size %d stores joined within the timeout (%g s)')
                  :format(n, ws, timeout), 2)
        end
    end
    return store
end

-- print on rank 0 only: logging in a script that every rank runs
function dist.print0(...)
    if group == nil or C.rank(group) == 0 then print(...) end
end

-- all_gather_object, broadcast_object_list, gather_object and monitored_barrier
require('ddplua.distributed.objects').install(dist, options)

return dist
