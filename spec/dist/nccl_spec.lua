-- spec/dist/nccl_spec.lua: ddpl.distributed with backend='nccl'. Without a GPU (or without NCCL in
-- the build) only the refusal is checked: init names the backend and says why, before any
-- rendezvous. With GPUs: every collective on CUDA tensors (spec/dist/workers/nccl_collectives.lua
-- and, for reduce, gather, scatter and all-to-all, spec/dist/workers/nccl_collectives_more.lua) and
-- DDP with CUDA parameters against a one-process reference (spec/dist/workers/nccl_ddp_equiv.lua),
-- on one rank, and on two ranks (started by this spec and by the launcher) when there are two GPUs.
-- Every process runs under `timeout`, so no case can hang.
local ddpl = require 'ddplua'
local dist = ddpl.dist

local S = require 'shell_util'
local bin, src = S.bin, S.src
local q, slurp, sh, free_port = S.q, S.slurp, S.sh, S.free_port
local collectives = src .. '/spec/dist/workers/nccl_collectives.lua'
local ddp_equiv = src .. '/spec/dist/workers/nccl_ddp_equiv.lua'
local collectives_more = src .. '/spec/dist/workers/nccl_collectives_more.lua'

local tmpdir = S.new_tmpdir()

-- Starts ranks 0..world-1 of `script` (args appended) with the torchrun environment (LOCAL_RANK
-- = RANK: one machine), waits for all; returns outputs[rank] and codes[rank].
local function run_ranks(world, script, args)
    local port = free_port()
    local parts = {}
    for r = 0, world - 1 do
        local out = ('%s/out%d'):format(tmpdir, r)
        os.remove(out)
        parts[#parts + 1] = ('( env RANK=%d LOCAL_RANK=%d WORLD_SIZE=%d MASTER_ADDR=127.0.0.1 '
            .. 'MASTER_PORT=%d timeout 180 %s %s %s > %s 2>&1; echo "EXIT $?" >> %s ) &'):format(
            r, r, world, port, q(bin), q(script), args or '', q(out), q(out))
    end
    sh(table.concat(parts, ' ') .. ' wait')
    local outs, codes = {}, {}
    for r = 0, world - 1 do
        outs[r] = slurp(('%s/out%d'):format(tmpdir, r))
        codes[r] = tonumber(outs[r]:match('EXIT (%d+)%s*$'))
    end
    return outs, codes
end

local function assert_all_ok(outs, codes, world, mark)
    for r = 0, world - 1 do
        assert(codes[r] == 0 and outs[r]:find(mark .. r, 1, true),
            ('rank %d failed (exit %s):\n%s'):format(r, tostring(codes[r]), outs[r]))
    end
end

local function gpus() return ddpl.cuda.is_available() and ddpl.cuda.device_count() or 0 end

describe('nccl without a usable GPU', function()
    it('init_process_group names the backend and says why, before any rendezvous', function()
        if ddpl.cuda.is_available() then pending('a CUDA device is present') return end
        -- no RANK/MASTER_ADDR needed: the backend is checked first
        local ok, err = pcall(dist.init_process_group, {backend = 'nccl'})
        assert.is_false(ok)
        local s = tostring(err)
        assert.truthy(s:find("init_process_group: backend 'nccl'", 1, true), s)
        assert.truthy(s:find('this build of ddplua has no NCCL', 1, true)
            or s:find('CUDA is not available', 1, true), s)
        assert.truthy(s:find("use backend='gloo'", 1, true), s)
        assert.is_false(dist.is_initialized())
        -- nothing was initialised: other backends are still checked by name
        ok, err = pcall(dist.init_process_group, {backend = 'bogus'})
        assert.truthy(tostring(err):find("unknown backend 'bogus'", 1, true), err)
    end)
end)

describe('nccl collectives on GPUs', function()
    for _, world in ipairs({1, 2}) do
        it(('pass every check on %d rank%s'):format(world, world > 1 and 's' or ''), function()
            if gpus() == 0 then pending('no CUDA device') return end
            if gpus() < world then pending('needs ' .. world .. ' GPUs') return end
            local outs, codes = run_ranks(world, collectives)
            assert_all_ok(outs, codes, world, 'NCCL_OK ')
        end)
    end

    it('pass every check under the launcher with --nproc 2', function()
        if gpus() < 2 then pending('needs 2 GPUs') return end
        local out, code = sh(('MASTER_PORT=%d timeout 180 %s %s --nproc 2'):format(free_port(),
            q(bin), q(collectives)))
        assert(code == 0 and out:find('NCCL_OK 0', 1, true) and out:find('NCCL_OK 1', 1, true),
            out)
    end)
end)

describe('nccl rooted collectives and all-to-all on GPUs', function()
    for _, world in ipairs({1, 2}) do
        it(('pass every check on %d rank%s'):format(world, world > 1 and 's' or ''), function()
            if gpus() == 0 then pending('no CUDA device') return end
            if gpus() < world then pending('needs ' .. world .. ' GPUs') return end
            local outs, codes = run_ranks(world, collectives_more)
            assert_all_ok(outs, codes, world, 'NCCL_MORE_OK ')
        end)
    end
end)

describe('DDP over nccl with CUDA parameters', function()
    local cases = {
        {1, ''}, {2, ''}, {2, 'view=1'}, {2, 'cap=0.001'}, {2, 'unused=1'},
        {2, 'hook=bf16_compress tol=2e-2'},
    }
    for _, c in ipairs(cases) do
        local world, args = c[1], c[2]
        it(('matches one process on the global batch: %d rank%s %s'):format(world,
            world > 1 and 's' or '', args), function()
            if gpus() == 0 then pending('no CUDA device') return end
            if gpus() < world then pending('needs ' .. world .. ' GPUs') return end
            local outs, codes = run_ranks(world, ddp_equiv, args)
            assert_all_ok(outs, codes, world, 'NCCL_DDP_OK rank=')
        end)
    end
end)
