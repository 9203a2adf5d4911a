-- spec/dist/sync_batch_norm_spec.lua: nn.SyncBatchNorm and convert_sync_batchnorm. In this process
-- (no process group): plain batch norm behaviour, repr, state_dict keys, the conversion (shared
-- parameters and buffers, flags, nesting, a module shared under two names) and the errors. On
-- real processes (spec/dist/workers/sync_batch_norm.lua, every rank under `timeout`): N ranks on
-- their slices equal plain batch norm in one process on the concatenated batch (outputs, input and
-- parameter gradients, running statistics; even, uneven and empty per-rank batches; float64 to
-- 1e-10, float32 to 1e-5; subgroups), a DDP training step of a converted CNN, on 2 and 4 ranks,
-- through shared memory and through Gloo TCP (DDPLUA_SHM=0); gradcheck on one rank. The same
-- equivalence and DDP checks with the SyncBatchNorm side on CUDA (SBN_DEVICE=cuda: each rank on
-- GPU LOCAL_RANK over nccl, the reference on the cpu, the same tolerances), on 2 and 4 ranks;
-- pending without a GPU per rank (the emulation build gets its devices from DDPL_CUEMU_DEVICES).
local S = require 'shell_util'
local H = require 'helpers'
local ddpl = H.ddpl
local nn = ddpl.nn
local worker = S.src .. '/spec/dist/workers/sync_batch_norm.lua'

describe('nn.SyncBatchNorm in one process', function()
    it('is batch norm: outputs, gradients and running statistics of BatchNorm2d', function()
        ddpl.manual_seed(4)
        local x = ddpl.randn({5, 3, 2, 2}, {dtype = 'float64'}) + 2
        local sbn = nn.SyncBatchNorm(3, {dtype = 'float64', momentum = false})
        local bn = nn.BatchNorm2d(3, {dtype = 'float64', momentum = false})
        local xa, xb = x:clone(), x:clone()
        xa.requires_grad, xb.requires_grad = true, true
        for _ = 1, 2 do
            local ya, yb = sbn(xa), bn(xb)
            assert.are.equal(0, (ya - yb):abs():max():item())
            ya:pow(2):sum():backward()
            yb:pow(2):sum():backward()
        end
        assert.are.equal(0, (xa.grad - xb.grad):abs():max():item())
        assert.are.equal(0, (sbn.weight.grad - bn.weight.grad):abs():max():item())
        assert.are.equal(0, (sbn.running_var - bn.running_var):abs():max():item())
        assert.are.equal(2, sbn.num_batches_tracked:item())
        sbn:eval(); bn:eval()
        assert.are.equal(0, (sbn(x) - bn(x)):abs():max():item())
    end)

    it("prints and saves like PyTorch's (BatchNorm's keys)", function()
        local sbn = nn.SyncBatchNorm(4, {eps = 1e-3, momentum = false})
        assert.are.equal('SyncBatchNorm(4, eps=0.001, momentum=None, affine=True, '
            .. 'track_running_stats=True)', tostring(sbn))
        local keys = {}
        for k in pairs(sbn:state_dict()) do keys[#keys + 1] = k end
        table.sort(keys)
        assert.are.same({'bias', 'num_batches_tracked', 'running_mean', 'running_var', 'weight'},
            keys)
        sbn:load_state_dict(nn.BatchNorm1d(4):state_dict())
    end)

    it('takes inputs of any rank >= 2; names a wrong rank or channel count', function()
        local sbn = nn.SyncBatchNorm(2)
        assert.are.same({3, 2, 2, 2, 2}, sbn(ddpl.randn({3, 2, 2, 2, 2})):shape())
        H.assert_error(function() sbn(ddpl.randn({4})) end,
            'SyncBatchNorm: expected at least 2-D input (N, C, ...), got a 1-D input of shape [4]')
        H.assert_error(function() sbn(ddpl.randn({4, 3})) end,
            'SyncBatchNorm: expected input with 2 channels (num_features) in dim 1, got shape '
            .. '[4,3]')
        H.assert_error(function() nn.SyncBatchNorm(2, {process_group = {}}) end,
            'SyncBatchNorm: process_group must be a process group (from dist.new_group), got '
            .. 'table')
        H.assert_error(function() nn.SyncBatchNorm(2, {momemtum = 0.1}) end,
            "SyncBatchNorm: unknown option 'momemtum' (known: affine, eps, momentum, "
            .. 'process_group, track_running_stats)')
    end)
end)

describe('SyncBatchNorm.convert_sync_batchnorm', function()
    local convert = nn.SyncBatchNorm.convert_sync_batchnorm

    it('replaces every batch norm in place, sharing parameters and buffers', function()
        local inner = nn.Sequential(nn.Conv2d(1, 2, 3), nn.BatchNorm2d(2, {momentum = false}))
        local net = nn.Sequential(inner, nn.Flatten(), nn.Linear(2, 3),
            nn.BatchNorm1d(3, {eps = 1e-3, affine = false}), nn.ReLU())
        net[0][1].weight.requires_grad = false
        local before = {}
        for _, pair in ipairs(net:named_parameters()) do before[pair[1]] = pair[2] end
        for _, pair in ipairs(net:named_buffers()) do before[pair[1]] = pair[2] end
        net:eval()
        net[3]:train()
        local out = convert(net)
        assert.are.equal(net, out)
        local bn2, bn1 = net[0][1], net[3]
        assert.are.equal('SyncBatchNorm', bn2.__name)
        assert.are.equal('SyncBatchNorm', bn1.__name)
        assert.is_nil(bn2.momentum)
        assert.are.equal(1e-3, bn1.eps)
        assert.is_false(bn1.affine)
        assert.is_false(bn2.training)
        assert.is_true(bn1.training)
        assert.is_false(bn2.weight.requires_grad)
        for _, pair in ipairs(net:named_parameters()) do
            assert.are.equal(before[pair[1]], pair[2])
        end
        for _, pair in ipairs(net:named_buffers()) do
            assert.are.equal(before[pair[1]], pair[2])
        end
        assert.are.equal('Conv2d', net[0][0].__name)
    end)

    it('returns a new module for a batch norm itself; one module shared under two names stays '
        .. 'shared', function()
            local bn = nn.BatchNorm1d(3)
            local s = convert(bn)
            assert.are.equal('SyncBatchNorm', s.__name)
            assert.are.equal(bn.weight, s.weight)
            assert.are.equal(bn.running_mean, s.running_mean)
            local net = nn.Sequential(bn, nn.ReLU(), bn)
            convert(net)
            assert.are.equal('SyncBatchNorm', net[0].__name)
            assert.are.equal(net[0], net[2])
            -- already synchronised layers are converted again (PyTorch's isinstance check)
            assert.are.equal('SyncBatchNorm', convert(nn.SyncBatchNorm(2)).__name)
        end)

    it('names bad arguments', function()
        H.assert_error(function() convert(42) end,
            'SyncBatchNorm.convert_sync_batchnorm: expected an nn.Module, got number')
        H.assert_error(function() convert(nn.ReLU(), 'g') end,
            'SyncBatchNorm.convert_sync_batchnorm: process_group must be a process group (from '
            .. 'dist.new_group), got string')
    end)
end)

-- Runs the worker on n ranks with the environment words env; every rank must report.
local function run(n, env)
    local outs, codes = S.run_world(n, worker, {env = env, kill_after = 120})
    S.assert_ranks_ok(outs, codes, n, 'SYNCBN_OK')
end

for _, path in ipairs({{'shared memory', ''}, {'Gloo TCP', 'DDPLUA_SHM=0'}}) do
    for _, n in ipairs({2, 4}) do
        describe(('nn.SyncBatchNorm on %d ranks through %s'):format(n, path[1]), function()
            it('equals batch norm in one process on the global batch', function()
                run(n, path[2])
            end)
            it('a converted CNN in DDP trains like one process on the global batch', function()
                run(n, path[2] .. ' SBN_MODE=ddp')
            end)
        end)
    end
end

it('the synchronised computation passes gradcheck on a one-rank group', function()
    run(1, 'SBN_MODE=gradcheck')
end)

-- The CUDA branch: one GPU per rank. The emulation build (-DDDPL_CUDA_EMU=ON) makes as many
-- devices as DDPL_CUEMU_DEVICES says (2 by default), so there the workers are given n; a real
-- machine needs n GPUs.
for _, n in ipairs({2, 4}) do
    describe(('nn.SyncBatchNorm on %d ranks on CUDA through nccl'):format(n), function()
        -- the workers' environment words; without a GPU per rank the case is pending (busted's
        -- pending raises, which ends the case there)
        local function cuda_env()
            if not ddpl.cuda.is_available() then pending('no CUDA device') end
            if ddpl.config().cuda_emulated then
                return 'SBN_DEVICE=cuda DDPL_CUEMU_DEVICES=' .. n
            end
            local have = ddpl.cuda.device_count()
            if have < n then
                pending(('needs %d CUDA devices (one per rank), %d here'):format(n, have))
            end
            return 'SBN_DEVICE=cuda'
        end
        it('equals batch norm in one process on the global batch', function()
            run(n, cuda_env())
        end)
        it('a converted CNN in DDP (device_ids) trains like one process on the global batch',
            function() run(n, cuda_env() .. ' SBN_MODE=ddp') end)
    end)
end
