-- lua/ddplua/data/worker_pool.lua: the forked worker processes of a DataLoader.
-- defines: WorkerPool.start(loader, opts) -> pool, pool:submit(task), pool:result(seq) -> values,
--          pool:drain(), pool:close(), pool:pids(), WorkerPool.worker_info() (what
--          data.get_worker_info() returns: nil outside a worker).
--
-- Workers are forked from the main process (ddplua.core.process, as multiprocessing.spawn):
-- each inherits the Lua state with the data set, so nothing is pickled. Per worker, one socket
-- (bind_worker_ipc.c) carries tasks in ({seq, idx, seed}: fetch these indices) and answers out
-- ({seq, note}: the batch is in a shared-memory slot, data/batch_transport.lua; or {seq, err}
-- with the worker's traceback). Task seq goes to worker seq % num_workers and a worker answers
-- its tasks in order, so the result of task seq is the next answer of that worker: the main
-- process waits on exactly one socket, and batches come back in sampler order whatever their loading times.
--
-- Fork safety: a worker runs on one thread (the CPU pool is not used: ddpl.set_num_threads(1))
-- and cannot start CUDA (ipc.forbid_cuda; ddpl.cuda.is_available() answers false there). It
-- closes the sockets of every other pool of this process, so a pool's sockets reach EOF exactly
-- when its own processes end. Workers die with the main process (PR_SET_PDEATHSIG in fork), so
-- Ctrl-C leaves no orphans. A worker that dies (a signal, an exit) closes its socket: the main
-- process sees EOF and raises naming the worker, its pid and the signal, never hangs.
--
-- A plain metatable rather than class.lua: the pool needs __gc (workers end when the pool is
-- collected) and __close, which class.lua does not forward. __gc acts only in the process that
-- made the pool: a worker that inherited a copy of it never stops its siblings.
local ddpl = require 'ddplua'
local P = require 'ddplua.core.process'
local ipc = require 'ddplua.core.worker_ipc'
local serialize = require 'ddplua.core.serialize'
local transport = require 'ddplua.data.batch_transport'
local transform_rng = require 'ddplua.data.transform_rng'
local mp = require 'ddplua.multiprocessing'

local WorkerPool = {}
WorkerPool.__index = WorkerPool

local SLICE_S = 0.25 -- longest wait in C: Ctrl-C and the timeout are looked at this often
local DEATH_WAIT_S = 2 -- how long a worker whose socket closed may take to become reapable

-- main-process ends of the sockets of every open pool of this process, closed in each new worker
local open_ends = {}
-- set in a worker: what data.get_worker_info() returns
local current_info = nil

function WorkerPool.worker_info()
    return current_info
end

-- ---- the worker's side: never returns ----

-- The worker's stack down to the failing call, without the frames it inherited from the main
-- process's stack at fork time (below the xpcall).
local function traceback(e)
    local tb = debug.traceback(tostring(e), 2)
    return tb:match('^(.-)\n%s*%[C%]: in function \'xpcall\'') or tb
end

local function serve(sock, loader)
    local sender = transport.Sender()
    while true do
        local msg, why
        repeat msg, why = ipc.recv(sock, -1) until msg ~= nil or why == 'eof' -- or a signal
        if msg == nil then return end -- the main process is gone
        local task = serialize.loads(msg, 'DataLoader worker')
        local note, fd
        local ok, err = xpcall(function()
            transform_rng.seed(task.seed)
            note, fd = sender:pack(table.pack(loader:fetch(task.idx)))
        end, traceback)
        if ok then
            ipc.send(sock, serialize.dumps({ seq = task.seq, note = note }), fd)
        else
            ipc.send(sock, serialize.dumps({ seq = task.seq, err = tostring(err) }))
        end
    end
end

local function run_worker(id, sock, loader, opts)
    local ok, err = xpcall(function()
        for fd in pairs(open_ends) do P.close(fd) end
        ipc.forbid_cuda()
        ddpl.cuda.is_available = function() return false end
        ddpl.set_num_threads(1)
        local seed = opts.base_seed + id
        ddpl.manual_seed(seed)
        current_info = { id = id, num_workers = opts.num_workers, seed = seed,
            dataset = loader.dataset }
        if opts.worker_init_fn then opts.worker_init_fn(id) end
    end, traceback)
    if not ok then
        -- answers the first task with the error, so it is raised where a batch is awaited
        pcall(function()
            local msg = ipc.recv(sock, -1)
            local task = msg and serialize.loads(msg, 'DataLoader worker')
            if task then
                ipc.send(sock, serialize.dumps({ seq = task.seq,
                    err = 'in worker_init_fn: ' .. tostring(err) }))
            end
        end)
        pcall(io.stdout.flush, io.stdout)
        P.exit(1)
    end
    local served, serr = pcall(serve, sock, loader)
    pcall(io.stdout.flush, io.stdout)
    pcall(io.stderr.flush, io.stderr)
    if not served then
        pcall(io.stderr.write, io.stderr,
            'DataLoader worker ' .. id .. ': ' .. tostring(serr) .. '\n')
        P.exit(1)
    end
    P.exit(0)
end

-- ---- the main process's side ----

-- opts: num_workers, base_seed, worker_init_fn, timeout (seconds, 0 = none), pin_memory (the
-- main process page-locks each slot it maps when CUDA is available)
function WorkerPool.start(loader, opts)
    local pool = setmetatable({ workers = {}, owner = P.getpid(), pending = {}, next_seq = 0,
        num_workers = opts.num_workers, timeout = opts.timeout or 0,
        pin_memory = opts.pin_memory and ddpl.cuda.is_available() }, WorkerPool)
    for id = 0, opts.num_workers - 1 do
        local ok, err = pcall(function()
            local mine, theirs = ipc.socketpair()
            open_ends[mine] = true
            pool.workers[id + 1] = { id = id, sock = mine, alive = true,
                receiver = transport.Receiver(pool.pin_memory) }
            local pid = P.fork()
            if pid == 0 then run_worker(id, theirs, loader, opts) end
            P.close(theirs)
            pool.workers[id + 1].pid = pid
        end)
        if not ok then
            pool:close()
            error('DataLoader: starting worker ' .. id .. ': ' .. tostring(err), 0)
        end
    end
    return pool
end

function WorkerPool:pids()
    local t = {}
    for i, w in ipairs(self.workers) do t[i] = w.pid end
    return t
end

-- Sends a task {idx = int64 tensor, seed = integer, batch = its number in the pass}; returns
-- the task's seq, to be passed to result().
function WorkerPool:submit(task)
    local seq = self.next_seq
    self.next_seq = seq + 1
    local w = self.workers[seq % self.num_workers + 1]
    self.pending[seq] = task.batch
    ipc.send(w.sock, serialize.dumps({ seq = seq, idx = task.idx, seed = task.seed }))
    return seq
end

-- Why worker w stopped, once its socket has closed.
local function death_of(w)
    local deadline = ddpl.time() + DEATH_WAIT_S
    local kind, code, signame = P.waitpid(w.pid)
    while not kind and ddpl.time() < deadline do
        P.sleep(0.01)
        kind, code, signame = P.waitpid(w.pid)
    end
    w.reaped = kind ~= nil
    local who = ('DataLoader worker %d (pid %d)'):format(w.id, w.pid)
    if kind == 'signal' then
        return ('%s was killed by signal %d (%s)'):format(who, code, signame)
    elseif kind == 'exit' then
        return ('%s exited unexpectedly with code %d'):format(who, code)
    end
    return who .. ' closed its connection unexpectedly'
end

-- The values of task seq (in submission order), or an error that closes the pool.
function WorkerPool:result(seq)
    local w = self.workers[seq % self.num_workers + 1]
    local batch = self.pending[seq]
    self.pending[seq] = nil
    local deadline = self.timeout > 0 and ddpl.time() + self.timeout or nil
    while true do
        local wait = SLICE_S
        if deadline then wait = math.max(0, math.min(wait, deadline - ddpl.time())) end
        local msg, fd = ipc.recv(w.sock, wait)
        if msg ~= nil then
            local r = serialize.loads(msg, 'DataLoader')
            if r.seq ~= seq then
                if fd then P.close(fd) end
                self:close()
                error(('DataLoader: worker %d answered task %s while batch %d was awaited')
                    :format(w.id, tostring(r.seq), batch), 0)
            end
            if r.err then
                self:close()
                error(('DataLoader worker %d (pid %d) failed on batch %d:\n%s'):format(w.id,
                    w.pid, batch, r.err), 0)
            end
            local ok, values = pcall(w.receiver.unpack, w.receiver, r.note, fd)
            if fd then P.close(fd) end
            if not ok then
                self:close()
                error(values, 0)
            end
            return values
        elseif fd == 'eof' then
            w.alive = false
            local why = death_of(w)
            self:close()
            error(why .. ' while loading batch ' .. batch, 0)
        elseif deadline and ddpl.time() >= deadline then
            self:close()
            error(('DataLoader timed out after %g s waiting for batch %d from worker %d (pid %d)')
                :format(self.timeout, batch, w.id, w.pid), 0)
        end
    end
end

-- Receives and drops every answer still owed (a pass left early, before a persistent pool's
-- next pass). An error among them closes the pool (the next pass then starts a new one).
function WorkerPool:drain()
    local seqs = {}
    for seq in pairs(self.pending) do seqs[#seqs + 1] = seq end
    table.sort(seqs)
    for _, seq in ipairs(seqs) do
        if self.closed then return end
        pcall(self.result, self, seq)
    end
end

-- Stops the workers and reaps them (as multiprocessing's terminate: SIGTERM, SIGKILL after the
-- gang's grace period). Idempotent; does nothing in a process that did not start the pool.
function WorkerPool:close()
    if self.closed or P.getpid() ~= self.owner then return end
    self.closed = true
    local gang = P.gang(math.max(1, #self.workers))
    for _, w in ipairs(self.workers) do
        if w.pid and not w.reaped then gang:add(w.pid, w.id) end
    end
    mp._stop(gang)
    for _, w in ipairs(self.workers) do
        w.reaped = true
        P.close(w.sock)
        open_ends[w.sock] = nil
        w.alive = false
        w.receiver:close() -- batches still referenced keep their slot's mapping
    end
end

WorkerPool.__gc = WorkerPool.close
WorkerPool.__close = WorkerPool.close

return WorkerPool
