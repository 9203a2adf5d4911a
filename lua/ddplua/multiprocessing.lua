-- lua/ddplua/multiprocessing.lua: ddpl.multiprocessing, PyTorch's torch.multiprocessing.spawn.
-- defines: spawn(fn, {nprocs=1, args={}, join=true}), ProcessContext (join, pids, terminate).
--
--   ddpl.multiprocessing.spawn(function(rank, a, b)
--       ddpl.dist.init_process_group({backend = 'gloo'})
--       ...
--   end, {nprocs = 4, args = {a, b}})
--
-- Processes are forked, not started afresh (fn is a Lua closure: it and everything it sees are
-- the parent's, copied). Each child gets the torchrun environment (RANK = LOCAL_RANK = its index,
-- WORLD_SIZE = LOCAL_WORLD_SIZE = nprocs, MASTER_ADDR = 127.0.0.1 and a free MASTER_PORT unless
-- the parent has them set), runs fn(rank, table.unpack(args)), flushes its output and exits 0;
-- an error is sent with its traceback to the parent through a pipe and the child exits 1. The
-- parent watches all of them: when one fails (an error, a non-zero exit, a signal), the others
-- get SIGTERM, then SIGKILL after a grace period, every child is reaped, and the parent raises
-- "spawn: process 1 failed: <the child's error>" (or "process 1 failed with exit code 5",
-- "process 0 was killed by signal SIGKILL"). The children are a gang (engine/distributed/gang.c),
-- the supervisor the launcher's workers have too: one set of rules and words for both. With
-- join=false spawn returns the ProcessContext at once: ctx:join([timeout_s]) is true once every
-- process has finished successfully, false when the timeout passed first, and raises as above.
-- Children die with the parent (PR_SET_PDEATHSIG), so no orphans are left behind. spawn must come
-- before init_process_group in the parent: a forked child cannot use the parent's process group
-- (its threads do not exist in the child).
local ddpl = require 'ddplua'
local P = require 'ddplua.core.process'

local M = {}

local POLL_S = 0.01      -- how often the parent looks at its children
local MAX_ERROR = 60000  -- bytes of a child's error: less than a pipe holds, so write never blocks

local ProcessContext = {}
ProcessContext.__index = ProcessContext
M.ProcessContext = ProcessContext

-- The child's side: never returns.
local function run_child(rank, fn, args, nargs, env, wfd, read_ends)
    local ok, err = pcall(function()
        for _, fd in ipairs(read_ends) do P.close(fd) end
        for k, v in pairs(env) do P.setenv(k, v) end
        P.setenv('RANK', tostring(rank))
        P.setenv('LOCAL_RANK', tostring(rank))
        local traced_ok, traced = xpcall(fn, function(e)
            -- the child's stack down to fn, without spawn's own frames below it
            local tb = debug.traceback('', 2):gsub('^\n', '')
            tb = tb:match('^(.-)\n%s*%[C%]: in function \'xpcall\'') or tb
            return tostring(e) .. '\n' .. tb
        end, rank, table.unpack(args, 1, nargs))
        if not traced_ok then error(traced, 0) end
    end)
    pcall(io.stdout.flush, io.stdout)
    pcall(io.stderr.flush, io.stderr)
    if ok then P.exit(0) end
    pcall(P.write, wfd, tostring(err):sub(1, MAX_ERROR))
    P.exit(1)
end

-- "process 1 failed: ..." for the gang's failure: the child's error when it sent one
local function failure_of(proc, code, how)
    local msg = P.read(proc.rfd)
    if code == 1 and msg ~= '' then return ('process %d failed: %s'):format(proc.rank, msg) end
    return ('process %d %s'):format(proc.rank, how)
end

local function close_pipes(self)
    for _, proc in ipairs(self.procs) do
        if proc.rfd then
            P.close(proc.rfd)
            proc.rfd = nil
        end
    end
end

-- Stops every process of gang still running (SIGTERM, SIGKILL once the grace period is over)
-- and reaps them all. Also for the DataLoader's workers (data/worker_pool.lua).
function M._stop(gang)
    gang:stop()
    while gang:alive() > 0 do
        gang:reap()
        if gang:overdue() then gang:kill() end
        if gang:alive() > 0 then P.sleep(POLL_S) end
    end
end

function ProcessContext:terminate()
    M._stop(self.gang)
    close_pipes(self)
end

local function join(self, deadline)
    while true do
        local rank, code, how = self.gang:reap()
        if rank then error('spawn: ' .. failure_of(self.procs[rank + 1], code, how), 0) end
        if self.gang:alive() == 0 then
            close_pipes(self)
            return true
        end
        if deadline and ddpl.time() >= deadline then return false end
        P.sleep(POLL_S)
    end
end

-- join([timeout_s]) -> true when every process has finished successfully, false when the
-- timeout passed first. When one failed, or join itself is interrupted (Ctrl-C), the others are
-- stopped before the error is raised.
function ProcessContext:join(timeout)
    if timeout ~= nil and (type(timeout) ~= 'number' or timeout < 0) then
        error('join: timeout must be a non-negative number of seconds', 2)
    end
    local ok, r = pcall(join, self, timeout and ddpl.time() + timeout)
    if not ok then
        self:terminate()
        error(r, 2)
    end
    return r
end

-- the children's process ids, in rank order
function ProcessContext:pids()
    local t = {}
    for i, proc in ipairs(self.procs) do t[i] = proc.pid end
    return t
end

local known = {nprocs = true, args = true, join = true}

function M.spawn(fn, opts)
    if type(fn) ~= 'function' then
        error(('spawn: expected a function as fn (argument 1), got %s'):format(type(fn)), 2)
    end
    if opts ~= nil and type(opts) ~= 'table' then
        error(('spawn: expected an options table as argument 2, got %s'):format(type(opts)), 2)
    end
    opts = opts or {}
    for k in pairs(opts) do
        if not known[k] then error(("spawn: unknown option '%s'"):format(tostring(k)), 2) end
    end
    local nprocs = opts.nprocs == nil and 1 or opts.nprocs
    if math.type(nprocs) ~= 'integer' or nprocs < 1 then
        error(('spawn: nprocs must be a positive integer, got %s'):format(tostring(nprocs)), 2)
    end
    local args = opts.args == nil and {} or opts.args
    if type(args) ~= 'table' then
        error(('spawn: args must be a table (a list of arguments), got %s'):format(type(args)), 2)
    end
    local nargs = args.n or #args
    local dist = package.loaded['ddplua.distributed']
    if dist and dist.is_initialized() then
        error('spawn: the default process group is initialized in this process; call spawn '
            .. 'before init_process_group (a forked child cannot use the parent\'s group)', 2)
    end
    local env = {
        MASTER_ADDR = os.getenv('MASTER_ADDR') or '127.0.0.1',
        MASTER_PORT = os.getenv('MASTER_PORT') or tostring(P.free_port()),
        WORLD_SIZE = tostring(nprocs),
        LOCAL_WORLD_SIZE = tostring(nprocs),
    }
    local ctx = setmetatable({procs = {}, gang = P.gang(nprocs)}, ProcessContext)
    local read_ends = {}
    for rank = 0, nprocs - 1 do
        local ok, err = pcall(function()
            local rfd, wfd = P.pipe()
            read_ends[#read_ends + 1] = rfd
            local pid = P.fork()
            if pid == 0 then run_child(rank, fn, args, nargs, env, wfd, read_ends) end
            P.close(wfd)
            ctx.gang:add(pid, rank)
            ctx.procs[#ctx.procs + 1] = {rank = rank, pid = pid, rfd = rfd}
        end)
        if not ok then
            ctx:terminate()
            error(err, 2)
        end
    end
    if opts.join == false then return ctx end
    local ok, err = pcall(ctx.join, ctx)
    if not ok then error(err, 2) end
end

return M
