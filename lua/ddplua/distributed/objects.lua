-- lua/ddplua/distributed/objects.lua: the object collectives of ddpl.distributed, PyTorch's
-- all_gather_object, broadcast_object_list and gather_object, and monitored_barrier.
-- defines: install(dist, options), which adds dist.all_gather_object, dist.broadcast_object_list,
--          dist.gather_object and dist.monitored_barrier (options: distributed.lua's check of an
--          options table).
--
-- Values are nil, booleans, numbers (integers and floats kept apart), strings, tensors and
-- tables of them (shared subtables and cycles included), serialised natively by
-- engine/lua/bind_serialize.c (package.loaded['ddplua.core.serialize']; the format is in
-- docs/internals/object-collectives.md). Transport: the byte counts are all-gathered (one int64 per
-- rank), every rank's bytes are padded to the largest and all-gathered (gathered to dst, or
-- broadcast), and each rank decodes what it received. A rank whose value cannot be serialised sends the count -1
-- instead of leaving the collective: every rank then fails (the failing one with the reason,
-- the others naming it) rather than the others waiting for it until the timeout. With backend
-- 'nccl' the byte tensors travel on the current CUDA device, as in PyTorch.
local ddpl = require 'ddplua'
local S = require 'ddplua.core.serialize'
local C = require 'ddplua.core.dist'

-- an error message without the "file.lua:12: " position in front
local function bare(err) return (tostring(err):gsub('^[^\n]-%.lua:%d+: ', '')) end

local M = {}

function M.install(dist, options)
    local function need(fname)
        if not dist.is_initialized() then
            error(fname .. ': the default process group is not initialized (call '
                .. 'dist.init_process_group first)', 0)
        end
    end

    -- the options table checked as every function of ddpl.distributed checks it (raised at level
    -- 0: guarded() below raises it again at the caller's line)
    local function check_opts(fname, opts, allowed) return options(fname, opts, allowed, 0) end

    local function check_list(fname, list, what)
        if type(list) ~= 'table' then
            error(('%s: expected a table as %s, got %s'):format(fname, what, type(list)), 0)
        end
    end

    -- src/dst: an integer global rank (as in PyTorch) of the world
    local function check_root(fname, root, name, argn)
        if math.type(root) ~= 'integer' then
            error(('%s: expected an integer rank as %s (argument %d), got %s'):format(fname, name,
                argn, type(root) == 'number' and tostring(root) or type(root)), 0)
        end
        local world = dist.get_world_size()
        if root < 0 or root >= world then
            error(('%s: %s %d is out of range for world_size %d'):format(fname, name, root, world),
                0)
        end
    end

    -- the group options passed on to the tensor collectives
    local function group_opts(opts) return opts.group ~= nil and {group = opts.group} or nil end

    -- the device the backend moves tensors on
    local function comm_device(opts)
        return dist.get_backend(opts.group) == 'nccl' and 'cuda' or 'cpu'
    end

    -- Runs a tensor collective; its error is raised again as fname's.
    local function run(fname, f, ...)
        local ok, err = pcall(f, ...)
        if not ok then error(fname .. ': ' .. bare(err), 0) end
    end

    -- Serialises value (nil and the error when it cannot be) and all-gathers the byte counts.
    -- Returns bytes, counts (a Lua list, one per rank of the group), the largest count; raises
    -- on every rank when any rank could not serialise its value.
    local function exchange_sizes(fname, value, root, opts)
        local ok, bytes = pcall(S.dumps, value, fname, root)
        local n = ok and bytes:numel() or -1
        local dev = comm_device(opts)
        local world = dist.get_world_size(opts.group)
        local sizes = {}
        for i = 1, world do sizes[i] = ddpl.zeros(1, {dtype = 'int64', device = dev}) end
        run(fname, dist.all_gather, sizes, ddpl.tensor({n}, {dtype = 'int64', device = dev}),
            group_opts(opts))
        local counts, largest, failed = {}, 0, {}
        for i = 1, world do
            counts[i] = math.tointeger(sizes[i]:item())
            if counts[i] < 0 then failed[#failed + 1] = i - 1 end
            largest = math.max(largest, counts[i])
        end
        if not ok then error(bare(bytes), 0) end
        if #failed > 0 then
            error(('%s: %s %s could not serialise %s value (its error says why)'):format(fname,
                #failed == 1 and 'rank' or 'ranks', table.concat(failed, ', '),
                #failed == 1 and 'its' or 'their'), 0)
        end
        return bytes, counts, largest
    end

    -- bytes zero-padded to n elements, on the backend's device
    local function padded(bytes, n, dev)
        local out = ddpl.zeros(math.max(n, 1), {dtype = 'uint8'})
        if bytes:numel() > 0 then out:narrow(0, 0, bytes:numel()):copy_(bytes) end
        if dev ~= 'cpu' then out = out:to(dev) end
        return out
    end

    local function decode(fname, t, n)
        if t.device ~= 'cpu' then t = t:cpu() end
        local ok, v = pcall(S.loads, t:narrow(0, 0, n), fname)
        if not ok then error(bare(v), 0) end
        return v
    end

    -- every rank's value, as a Lua list of world entries (nil entries kept by index)
    local function gather_all(fname, value, opts)
        local bytes, counts, largest = exchange_sizes(fname, value, 'value', opts)
        local dev = comm_device(opts)
        local outs = {}
        for i = 1, #counts do
            outs[i] = ddpl.empty(math.max(largest, 1), {dtype = 'uint8', device = dev})
        end
        run(fname, dist.all_gather, outs, padded(bytes, largest, dev), group_opts(opts))
        local values = {}
        for i = 1, #counts do values[i] = decode(fname, outs[i], counts[i]) end
        return values, #counts
    end

    local group_only = {group = true}

    -- all_gather_object(list, value [, {group}]): list[r + 1] = rank r's value, on every rank
    local function all_gather_object_impl(list, value, opts)
        local f = 'all_gather_object'
        need(f)
        check_list(f, list, 'the output list (argument 1)')
        opts = check_opts(f, opts, group_only)
        local values, n = gather_all(f, value, opts)
        for i = 1, n do list[i] = values[i] end
    end

    -- gather_object(value, list_or_nil, dst [, {group}]): on rank dst (a global rank, as in
    -- PyTorch) list[r + 1] = rank r's value; list is nil on the other ranks (ignored there).
    -- The sizes go to every rank (so every rank fails when one cannot serialise its value), the
    -- bytes only to dst (dist.gather).
    local function gather_object_impl(value, list, dst, opts)
        local f = 'gather_object'
        need(f)
        check_root(f, dst, 'dst', 3)
        opts = check_opts(f, opts, group_only)
        local is_dst = dist.get_rank() == dst
        if is_dst then check_list(f, list, 'the output list on rank dst (argument 2)') end
        local bytes, counts, largest = exchange_sizes(f, value, 'value', opts)
        local dev = comm_device(opts)
        local outs = nil
        if is_dst then
            outs = {}
            for i = 1, #counts do
                outs[i] = ddpl.empty(math.max(largest, 1), {dtype = 'uint8', device = dev})
            end
        end
        run(f, dist.gather, padded(bytes, largest, dev), outs, dst, group_opts(opts))
        if is_dst then
            for i = 1, #counts do list[i] = decode(f, outs[i], counts[i]) end
        end
    end

    -- the largest positive integer key of t (0 when none): src's list length, holes included
    local function max_index(t)
        local n = 0
        for k in pairs(t) do
            if math.type(k) == 'integer' and k > n then n = k end
        end
        return n
    end

    -- broadcast_object_list(list, src [, {group}]): the entries 1..n of rank src's list (n its
    -- largest positive integer key, so nil entries in the middle survive) replace list's entries
    -- on every other rank; their entries beyond n are removed. src's list is left unchanged.
    local function broadcast_object_list_impl(list, src, opts)
        local f = 'broadcast_object_list'
        need(f)
        check_list(f, list, 'the object list (argument 1)')
        check_root(f, src, 'src', 2)
        opts = check_opts(f, opts, group_only)
        local dev = comm_device(opts)
        local is_src = dist.get_rank() == src
        -- header: byte count (-1: src could not serialise) and list length
        local ok, bytes, n = true, nil, 0
        if is_src then
            n = max_index(list)
            local copy = {}
            for i = 1, n do copy[i] = list[i] end
            ok, bytes = pcall(S.dumps, copy, f, 'object_list')
        end
        local header = ddpl.tensor({ok and bytes and bytes:numel() or -1, n},
            {dtype = 'int64', device = dev})
        run(f, dist.broadcast, header, src, group_opts(opts))
        local count = math.tointeger(header[0]:item())
        n = math.tointeger(header[1]:item())
        if not ok then error(bare(bytes), 0) end
        if count < 0 then
            error(('%s: rank %d (src) could not serialise its list (its error says why)')
                :format(f, src), 0)
        end
        local buf = is_src and padded(bytes, count, dev)
            or ddpl.empty(math.max(count, 1), {dtype = 'uint8', device = dev})
        run(f, dist.broadcast, buf, src, group_opts(opts))
        if is_src then return end
        local copy = decode(f, buf, count)
        for i = 1, math.max(n, max_index(list)) do list[i] = copy[i] end
    end

    -- monitored_barrier([{timeout, wait_all_ranks, group}]): engine/distributed/pg_monitored.c
    local function monitored_barrier_impl(opts)
        local f = 'monitored_barrier'
        need(f)
        opts = check_opts(f, opts, {timeout = true, wait_all_ranks = true, group = true})
        local timeout = opts.timeout
        if timeout ~= nil and (type(timeout) ~= 'number' or timeout <= 0) then
            error(('%s: timeout must be a positive number of seconds, got %s'):format(f,
                tostring(timeout)), 0)
        end
        local g = opts.group
        if g ~= nil and not C.is_group(g) then
            error(('%s: group must be a process group (from new_group), got %s'):format(f,
                type(g)), 0)
        end
        local ok, err = pcall(C.monitored_barrier, g or dist.default_group(), timeout,
            opts.wait_all_ranks and true or false)
        if not ok then error(bare(err), 0) end
    end

    -- The public functions: every error (raised at level 0 inside) is raised again at the
    -- caller's line, as the other functions of ddpl.distributed do.
    local function guarded(impl, ...)
        local ok, err = pcall(impl, ...)
        if not ok then error(bare(err), 3) end
    end
    function dist.all_gather_object(...) guarded(all_gather_object_impl, ...) end
    function dist.gather_object(...) guarded(gather_object_impl, ...) end
    function dist.broadcast_object_list(...) guarded(broadcast_object_list_impl, ...) end
    function dist.monitored_barrier(...) guarded(monitored_barrier_impl, ...) end
end

return M
