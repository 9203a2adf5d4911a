-- lua/ddplua/distributed.lua: ddpl.distributed (also ddpl.dist), torch.distributed for ddplua.
-- defines: init_process_group, is_initialized, get_rank, get_world_size, get_backend, barrier,
--          destroy_process_group, all_reduce, broadcast, all_gather, all_gather_into_tensor,
--          reduce_scatter_tensor, send, recv, ReduceOp, TCPStore, print0, default_group.
--
-- One default process group per process, as in PyTorch. The C side (engine/lua/bind_dist_pg.c over
-- engine/dist/pg.h) runs every collective on the group's worker thread and returns a work
-- handle; here a call without async_op waits for it, so a plain call returns once the tensor
-- holds the result. Work handles have wait([timeout_s]), is_completed() and exception().
-- backend='gloo' takes CPU tensors; backend='nccl' takes CUDA tensors on the device that was
-- current at init: call ddpl.cuda.set_device(LOCAL_RANK) first (one GPU per rank), as with
-- torchrun and PyTorch. With nccl, "waits" means the later CUDA work is ordered after the
-- collective (the host goes on; reading values, e.g. :item(), synchronises); barrier() blocks.
-- Beyond API.md: dist.print0(...) prints on rank 0 only (or everywhere before init), and
-- dist.default_group() gives the C group box for engine code such as the DDP wrapper.
require 'ddplua'
local C = require 'ddplua.core.dist'

local dist = {}

local group = nil -- the default process group box, or nil
local backend_name = nil

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

local known_opts = {backend = true, init_method = true, rank = true, world_size = true,
    timeout = true}

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
    local ok, g = pcall(C.init, {backend = backend, master_addr = addr, master_port = port,
        rank = math.tointeger(rank), world_size = math.tointeger(world), timeout = timeout,
        token = os.getenv('DDPLUA_STORE_TOKEN')})
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

function dist.default_group() return need('default_group') end
function dist.get_rank() return C.rank(need('get_rank')) end
function dist.get_world_size() return C.size(need('get_world_size')) end
function dist.get_backend() need('get_backend'); return backend_name end

function dist.destroy_process_group()
    local g = need('destroy_process_group')
    group, backend_name = nil, nil
    C.destroy(g)
end

-- The trailing options table, checked for unknown keys.
local function options(fname, opts, allowed)
    if opts == nil then return {} end
    if type(opts) ~= 'table' then
        error(('%s: expected an options table, got %s'):format(fname, type(opts)), 3)
    end
    for k in pairs(opts) do
        if not allowed[k] then error(("%s: unknown option '%s'"):format(fname, tostring(k)), 3) end
    end
    return opts
end

-- an error message without the "file.lua:12: " position that luaL_error put in front
local function bare(err) return (tostring(err):gsub('^[^\n]-%.lua:%d+: ', '')) end

-- Calls a C function of the group; its error is raised again at the user's call site.
local function c_call(f, ...)
    local ok, r = pcall(f, ...)
    if not ok then error(bare(r), 3) end
    return r
end

-- Returns the work handle when async, else waits (raising the operation's error) and returns nil.
local function finish(work, opts)
    if opts.async_op then return work end
    local ok, err = pcall(work.wait, work)
    if not ok then error(bare(err), 3) end
    return nil
end

local async_only = {async_op = true, group = true}
local with_op = {async_op = true, group = true, op = true}

local function check_group(fname, opts)
    if opts.group ~= nil and opts.group ~= group then
        error(fname .. ': only the default process group exists (new_group is not built yet)', 3)
    end
end

function dist.all_reduce(t, opts)
    local g = need('all_reduce')
    opts = options('all_reduce', opts, with_op)
    check_group('all_reduce', opts)
    return finish(c_call(C.all_reduce, g, t, opts.op), opts)
end

function dist.broadcast(t, src, opts)
    local g = need('broadcast')
    opts = options('broadcast', opts, async_only)
    check_group('broadcast', opts)
    return finish(c_call(C.broadcast, g, t, src), opts)
end

function dist.all_gather(list, t, opts)
    local g = need('all_gather')
    opts = options('all_gather', opts, async_only)
    check_group('all_gather', opts)
    return finish(c_call(C.all_gather, g, list, t), opts)
end

function dist.all_gather_into_tensor(out, t, opts)
    local g = need('all_gather_into_tensor')
    opts = options('all_gather_into_tensor', opts, async_only)
    check_group('all_gather_into_tensor', opts)
    return finish(c_call(C.all_gather_into_tensor, g, out, t), opts)
end

function dist.reduce_scatter_tensor(out, inp, opts)
    local g = need('reduce_scatter_tensor')
    opts = options('reduce_scatter_tensor', opts, with_op)
    check_group('reduce_scatter_tensor', opts)
    return finish(c_call(C.reduce_scatter_tensor, g, out, inp, opts.op), opts)
end

-- send/recv are synchronous as in PyTorch; isend/irecv return the handle.
function dist.send(t, dst) return finish(c_call(C.send, need('send'), t, dst), {}) end
function dist.recv(t, src) finish(c_call(C.recv, need('recv'), t, src), {}); return src end
function dist.isend(t, dst) return c_call(C.send, need('isend'), t, dst) end
function dist.irecv(t, src) return c_call(C.recv, need('irecv'), t, src) end

function dist.barrier(opts)
    local g = need('barrier')
    opts = options('barrier', opts, async_only)
    return finish(c_call(C.barrier, g), opts)
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
require('ddplua.distributed.objects').install(dist)

return dist
