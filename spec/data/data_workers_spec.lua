-- spec/data/data_workers_spec.lua: DataLoader worker processes (num_workers > 0), pin_memory, and
-- the loader inside a 2-rank DDP run (spec/data/workers/ddp_loader.lua).
-- Nothing here depends on timing except the timeout case, whose worker sleeps 60 times longer
-- than the loader waits.
local H = require 'helpers'
local S = require 'shell_util'
local ddpl = H.ddpl
local data = ddpl.data
local P = require 'ddplua.core.process'
local transform_rng = require 'ddplua.data.transform_rng'

-- every batch of one pass, each as the list of its values
local function pass(loader)
    local out = {}
    for a, b, c in loader:iter() do out[#out + 1] = { a, b, c } end
    return out
end

local function same_value(a, b, where)
    if ddpl.is_tensor(a) then
        assert(ddpl.is_tensor(b), where .. ': expected a tensor')
        assert.same(H.shape(a), H.shape(b), where .. ': shape')
        assert.equals(H.dtype_name(a.dtype), H.dtype_name(b.dtype), where .. ': dtype')
        assert.same(H.values(a), H.values(b), where .. ': values')
    elseif type(a) == 'table' then
        assert.equals('table', type(b), where)
        for k, v in pairs(a) do same_value(v, b[k], where .. '.' .. tostring(k)) end
        for k in pairs(b) do assert(a[k] ~= nil, where .. ': extra key ' .. tostring(k)) end
    else
        assert.equals(a, b, where)
    end
end

local function same_batches(want, got)
    assert.equals(#want, #got, 'number of batches')
    for i = 1, #want do same_value(want[i], got[i], 'batch ' .. i) end
end

local function alive(pid) return os.execute('kill -0 ' .. pid .. ' 2>/dev/null') == true end

-- A Lua data set with per-item work in Lua: (x, label, name), x drawn from transform_rng so
-- augmentation must not depend on where a batch is loaded.
local Items = data.Dataset:extend('Items')
function Items:init(n, hook) self.n, self.hook = n, hook end
function Items:len() return self.n end
function Items:get(i)
    if self.hook then self.hook(i) end
    local jitter = transform_rng.random()
    return ddpl.full({ 3 }, i + jitter), i * 2, 'item' .. i
end

describe('DataLoader workers', function()
    it('give the same batches as no workers (TensorDataset and a Lua data set)', function()
        local x = ddpl.arange(0, 46):view(23, 2):float()
        local y = ddpl.arange(0, 23, { dtype = 'int64' })
        local tds = data.TensorDataset(x, y)
        local lds = Items(23)
        for _, ds in ipairs({ tds, lds }) do
            for _, opts in ipairs({ { shuffle = true, seed = 5 }, { shuffle = true },
                { drop_last = true } }) do
                local function run(n)
                    ddpl.manual_seed(11)
                    local o = { batch_size = 4, num_workers = n }
                    for k, v in pairs(opts) do o[k] = v end
                    local loader = data.DataLoader(ds, o)
                    return { pass(loader), pass(loader) } -- two passes: new orders, new seeds
                end
                local want = run(0)
                assert.is_true(#want[1] > 0)
                same_batches(want[1], run(1)[1])
                local three = run(3)
                same_batches(want[1], three[1])
                same_batches(want[2], three[2])
            end
        end
    end)

    it('carry any batch structure: tables, numbers, strings, several dtypes', function()
        local ds = Items(10)
        local function collate(items)
            local xs, names = {}, {}
            for j, it in ipairs(items) do xs[j], names[j] = it[1], it[3] end
            return { x = ddpl.stack(xs, 0), names = names, n = #items,
                nested = { mask = ddpl.ones({ #items }, { dtype = 'bool' }),
                    empty = ddpl.empty(0) } }
        end
        local function run(n)
            return pass(data.DataLoader(ds, { batch_size = 3, collate_fn = collate, num_workers = n,
                seed = 1 }))
        end
        local want, got = run(0), run(2)
        same_batches(want, got)
        assert.same({ 'item9' }, got[4][1].names)
    end)

    it('give each worker its info, seed and worker_init_fn', function()
        assert.is_nil(data.get_worker_info())
        local Info = data.Dataset:extend('Info')
        function Info:len() return 6 end
        function Info:get(i)
            local w = data.get_worker_info()
            -- fork safety: one thread, no CUDA
            assert(ddpl.get_num_threads() == 1 and not ddpl.cuda.is_available())
            return w.id, w.num_workers, w.seed, w.dataset == self and 1 or 0, INIT_ID or -1
        end
        local ds = Info()
        local loader = data.DataLoader(ds, { batch_size = 1, num_workers = 2, seed = 3,
            worker_init_fn = function(id) INIT_ID = id end })
        local seeds = {}
        local k = 0
        for id, nw, seed, same, init in loader:iter() do
            assert.same({ k % 2 }, H.values(id)) -- batch k goes to worker k % 2
            assert.same({ 2 }, H.values(nw))
            assert.same({ 1 }, H.values(same))
            assert.same({ k % 2 }, H.values(init))
            seeds[k % 2] = seed:item()
            k = k + 1
        end
        assert.equals(6, k)
        assert.equals(seeds[0] + 1, seeds[1]) -- base_seed + id
        assert.is_nil(INIT_ID) -- worker_init_fn ran in the workers only
    end)

    it('raise a worker error in the main process with the worker traceback', function()
        local function failing_hook(i)
            if i == 5 then error('item five is broken') end
        end
        local loader = data.DataLoader(Items(8, failing_hook), { batch_size = 2, num_workers = 2 })
        local ok, err = pcall(pass, loader)
        assert.is_false(ok)
        err = tostring(err)
        assert.matches('DataLoader worker 0 %(pid %d+%) failed on batch 2', err)
        assert.matches('item five is broken', err, 1, true)
        assert.matches('stack traceback', err, 1, true)
        assert.matches("data_workers_spec.lua:%d+: in method 'get'", err)
        -- a broken worker_init_fn is raised the same way
        local bad = data.DataLoader(Items(4), { batch_size = 2, num_workers = 1,
            worker_init_fn = function() error('no init today') end })
        H.assert_error(function() pass(bad) end, 'DataLoader worker 0', 'worker_init_fn',
            'no init today')
    end)

    it('report a worker killed by a signal, never hang', function()
        local function suicide(i)
            if i == 4 then P.kill(P.getpid(), 'KILL') end
        end
        local loader = data.DataLoader(Items(8, suicide), { batch_size = 2, num_workers = 2 })
        H.assert_error(function() pass(loader) end, 'DataLoader worker 0 (pid ',
            'was killed by signal 9 (SIGKILL) while loading batch 2')
    end)

    it('time out naming the batch and the worker', function()
        local function slow(i)
            if i == 2 then P.sleep(30) end
        end
        local loader = data.DataLoader(Items(6, slow), { batch_size = 2, num_workers = 2,
            timeout = 0.5 })
        H.assert_error(function() pass(loader) end,
            'DataLoader timed out after 0.5 s waiting for batch 1 from worker 1 (pid ')
    end)

    it('keep persistent workers across passes, with new orders and seeds', function()
        local ds = Items(12)
        local sampler = data.RandomSampler(ds, { seed = 9 })
        local function make(n, persistent)
            return data.DataLoader(ds, { batch_size = 5, sampler = sampler, num_workers = n,
                persistent_workers = persistent, prefetch_factor = n > 0 and 1 or nil })
        end
        sampler:set_epoch(0)
        ddpl.manual_seed(4)
        local plain = make(0, false)
        local want = { pass(plain), pass(plain), pass(plain) }
        sampler:set_epoch(0)
        ddpl.manual_seed(4)
        local loader = make(2, true)
        same_batches(want[1], pass(loader))
        local pids = loader._pool:pids()
        -- a pass left early: its answers in flight are dropped before the next pass
        for _ in loader:iter() do break end
        same_batches(want[3], pass(loader))
        assert.same(pids, loader._pool:pids())
        -- one pass at a time: a newer pass ends the older one, which then says so
        local older = loader:iter()
        older()
        local newer = loader:iter()
        H.assert_error(older, 'ended by a newer pass of the same loader')
        assert.is_not_nil(newer())
        for _, pid in ipairs(pids) do assert.is_true(alive(pid)) end
        loader:close()
        for _, pid in ipairs(pids) do assert.is_false(alive(pid)) end
        -- a loader that is collected takes its workers with it
        local dropped = make(2, true)
        for _ in dropped:iter() do break end
        pids = dropped._pool:pids()
        dropped = nil -- luacheck: ignore
        collectgarbage()
        collectgarbage()
        for _, pid in ipairs(pids) do assert.is_false(alive(pid)) end
    end)

    it('reuse shared-memory slots once the batches in them are freed', function()
        local ds = data.TensorDataset(ddpl.arange(0, 64):float())
        local loader = data.DataLoader(ds, { batch_size = 4, num_workers = 1,
            persistent_workers = true, prefetch_factor = 2 })
        for _ = 1, 3 do
            for x in loader:iter() do
                assert.equals(4, x:numel())
                x = nil -- luacheck: ignore
                collectgarbage() -- frees the batch: its slot goes back to the worker
            end
        end
        -- 48 batches in flight at most prefetch_factor + 1 at a time
        local slots = loader._pool.workers[1].receiver:count()
        assert.is_true(slots >= 1 and slots <= 4, 'slots: ' .. slots)
        loader:close()
    end)

    it('end a pass workers when the pass ends or is left', function()
        local loader = data.DataLoader(Items(8), { batch_size = 2, num_workers = 2 })
        local step, _, _, closer = loader:iter()
        local pids = closer.pool:pids()
        for _, pid in ipairs(pids) do assert.is_true(alive(pid)) end
        while step() do end
        for _, pid in ipairs(pids) do assert.is_false(alive(pid)) end
        -- break out of a generic for: the to-be-closed value stops them
        local seen
        for x, _, _ in loader:iter() do
            seen = x
            break
        end
        assert.is_not_nil(seen)
    end)

    it('die with the main process (no orphans)', function()
        local dir = S.new_tmpdir()
        local script = dir .. '/orphan.lua'
        S.write(script, [[
local ddpl = require 'ddplua'
local P = require 'ddplua.core.process'
local ds = ddpl.data.TensorDataset(ddpl.arange(0, 20))
local loader = ddpl.data.DataLoader(ds, {batch_size = 2, num_workers = 2,
    persistent_workers = true})
for _ in loader:iter() do break end
print('PIDS ' .. table.concat(loader._pool:pids(), ' '))
io.stdout:flush()
P.kill(P.getpid(), 'KILL')
]])
        local out = S.sh(('timeout 60 %s %s'):format(S.q(S.bin), S.q(script)))
        os.execute('rm -rf ' .. S.q(dir))
        local pids = {}
        for pid in (out:match('PIDS ([%d ]+)') or ''):gmatch('%d+') do pids[#pids + 1] = pid end
        assert.equals(2, #pids, out)
        for _, pid in ipairs(pids) do
            local t0 = ddpl.time()
            while alive(pid) and ddpl.time() - t0 < 20 do P.sleep(0.05) end
            assert.is_false(alive(pid), 'worker ' .. pid .. ' outlived its parent')
        end
    end)

    it('accept pin_memory and check their options as PyTorch', function()
        local ds = data.TensorDataset(ddpl.arange(0, 10):float())
        local got = pass(data.DataLoader(ds, { batch_size = 3, num_workers = 1,
            pin_memory = true }))
        same_batches(pass(data.DataLoader(ds, { batch_size = 3 })), got)
        pass(data.DataLoader(ds, { batch_size = 3, pin_memory = true }))
        H.assert_error(function() data.DataLoader(ds, { num_workers = -1 }) end,
            'num_workers option should be a non-negative integer')
        H.assert_error(function() data.DataLoader(ds, { prefetch_factor = 2 }) end,
            'prefetch_factor option could only be specified in multiprocessing')
        H.assert_error(function() data.DataLoader(ds, { num_workers = 1, prefetch_factor = 0 }) end,
            'prefetch_factor must be a positive integer')
        H.assert_error(function() data.DataLoader(ds, { persistent_workers = true }) end,
            'persistent_workers option needs num_workers > 0')
        H.assert_error(function() data.DataLoader(ds, { timeout = -1 }) end,
            'timeout option should be non-negative')
        H.assert_error(function() data.DataLoader(ds, { worker_init_fn = 3 }) end,
            'worker_init_fn must be a function')
        H.assert_error(function() data.DataLoader(ds, { pin_memory = 'yes' }) end,
            'pin_memory must be a boolean')
    end)

    it('say once that pin_memory does nothing without a CUDA device, as PyTorch warns', function()
        local code = [[
local ddpl = require 'ddplua'
local ds = ddpl.data.TensorDataset(ddpl.arange(0, 4):float())
for _ = 1, 3 do ddpl.data.DataLoader(ds, { batch_size = 2, pin_memory = true }) end
ddpl.data.DataLoader(ds, { batch_size = 2 })
print('cuda', ddpl.cuda.is_available())
]]
        local out, status = S.sh(S.q(S.bin) .. ' -e ' .. S.q(code))
        assert.are.equal(0, status, out)
        local msg = 'ddplua: DataLoader: pin_memory=true, but no CUDA device is available, so '
            .. 'pinned memory will not be used'
        local n = select(2, out:gsub(msg:gsub('%p', '%%%0'), ''))
        if out:find('cuda\ttrue', 1, true) then
            assert.are.equal(0, n, out) -- pinning works there: nothing to say
        else
            assert.are.equal(1, n, out)
        end
    end)

    it('pin batches on CUDA and copy them to the GPU intact', function()
        if not ddpl.cuda.is_available() then return pending('no CUDA device') end
        local x = ddpl.arange(0, 60):view(20, 3):float()
        local ds = data.TensorDataset(x, ddpl.arange(0, 20, { dtype = 'int64' }))
        local want = pass(data.DataLoader(ds, { batch_size = 6 }))
        for _, n in ipairs({ 0, 2 }) do
            local got = pass(data.DataLoader(ds, { batch_size = 6, num_workers = n,
                pin_memory = true }))
            same_batches(want, got)
            for i, b in ipairs(got) do
                same_value(want[i][1], b[1]:cuda():cpu(), 'batch ' .. i .. ' through cuda')
            end
        end
    end)

    it('refuse to send what cannot travel, naming where it is', function()
        local Bad = data.Dataset:extend('Bad')
        function Bad:len() return 2 end
        function Bad:get(i) return i end
        local loader = data.DataLoader(Bad(), { batch_size = 2, num_workers = 1,
            collate_fn = function(items) return { fn = print } end })
        H.assert_error(function() pass(loader) end, 'failed on batch 0', 'cannot send a function',
            'batch[1].fn')
    end)
end)

describe('DataLoader in DDP', function()
    it('loads with workers and a DistributedSampler on 2 ranks', function()
        local out, code = S.launch(S.src .. '/spec/data/workers/ddp_loader.lua', 2, '', '', 120)
        S.expect_ranks(out, code, 'DDP_LOADER_OK %d 8', 2)
    end)
end)
