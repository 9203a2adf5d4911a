-- spec/ddp/ddp_spec.lua: nn.parallel.DistributedDataParallel on real processes (`ddplua script
-- --nproc N`, every run under `timeout`): equivalence with one process on the global batch for an
-- MLP, a CNN and a BatchNorm model on 2 and 4 ranks at several bucket sizes (one bucket per
-- parameter included), with and without gradient_as_bucket_view; no_sync gradient
-- accumulation; find_unused_parameters on a branch unused every other step, and PyTorch's error
-- without it; fp16/bf16 compression within their precision; a Lua comm hook; no second copy of
-- the gradients with gradient_as_bucket_view; bucket rebuild in ready order; the model-mismatch
-- error; the DDPLUA_DDP_TIMELINE trace showing an allreduce overlapping backward;
-- examples/ddp_train.lua with checkpoint and --resume. The checks
-- themselves run inside the ranks (spec/ddp/workers/train_equiv.lua,
-- spec/ddp/workers/features.lua); here we start them and read what they print.
local S = require 'shell_util'
local bin, src = S.bin, S.src
local q, sh = S.q, S.sh
local equiv = src .. '/spec/ddp/workers/train_equiv.lua'
local features = src .. '/spec/ddp/workers/features.lua'

-- Runs script on n ranks with `-- args`; returns the combined output and exit status.
local launch, expect_ok = S.launch, S.expect_ranks

-- Runs and expects exit status 0 and the marker line from each of the n ranks.
local function run_ok(script, n, args, marker)
    local out, code = launch(script, n, args)
    expect_ok(out, code, marker, n)
    return out
end

describe('DistributedDataParallel', function()
    describe('matches one process on the global batch after 10 SGD steps (rel 1e-5)', function()
        -- cap 1e-6 MB forces one bucket per parameter; 0.002 MB splits the CNN in a few. Ranks
        -- on one machine keep their buckets in shared memory (the 2-rank fused sum, the blocked
        -- sum for 3 and 4 ranks); DDPLUA_SHM=0 takes Gloo's TCP path with ordinary buckets.
        local cases = {
            {2, 'model=mlp'}, {2, 'model=mlp cap=0.000001'}, {2, 'model=mlp view=1'},
            {2, 'model=cnn'}, {2, 'model=cnn cap=0.002'}, {2, 'model=cnn cap=0.000001 view=1'},
            {2, 'model=bn'}, {2, 'model=bn cap=0.000001'}, {2, 'model=bn view=1'},
            {3, 'model=mlp'}, {3, 'model=cnn cap=0.002 view=1'},
            {4, 'model=mlp cap=0.000001'}, {4, 'model=cnn'}, {4, 'model=bn cap=0.000001 view=1'},
            {2, 'model=mlp', 'DDPLUA_SHM=0'}, {2, 'model=cnn cap=0.002 view=1', 'DDPLUA_SHM=0'},
            {3, 'model=bn cap=0.000001', 'DDPLUA_SHM=0'},
        }
        for _, c in ipairs(cases) do
            it(('%d ranks, %s%s'):format(c[1], c[2], c[3] and ', ' .. c[3] or ''), function()
                local out, code = launch(equiv, c[1], c[2], c[3])
                expect_ok(out, code, 'DDP_OK', c[1])
                if c[2]:find('cap=0.000001', 1, true) then
                    -- one bucket per parameter (6 in each of these models)
                    assert.truthy(out:find('buckets=6', 1, true), out)
                end
            end)
        end
    end)

    it('no_sync: 3 of 4 micro-batches under no_sync equal one synchronised step', function()
        run_ok(equiv, 2, 'model=mlp accum=4', 'DDP_OK')
        run_ok(equiv, 2, 'model=mlp accum=4 view=1 cap=0.000001', 'DDP_OK')
    end)

    it('find_unused_parameters: a branch unused on odd steps trains like one process', function()
        run_ok(equiv, 2, 'model=branch unused=1', 'DDP_OK')
        run_ok(equiv, 2, 'model=branch unused=1 cap=0.000001 view=1', 'DDP_OK')
    end)

    it("without find_unused_parameters the unused branch is PyTorch's error, naming it",
        function()
            local out, code = launch(equiv, 2, 'model=branch')
            assert.are_not.equal(0, code)
            assert.truthy(out:find('Expected to have finished reduction in the prior iteration',
                1, true), out)
            assert.truthy(out:find('find_unused_parameters', 1, true), out)
            assert.truthy(out:find('did not receive grad for rank %d: extra%.weight, extra%.bias'),
                out)
        end)

    it('fp16/bf16 compression: trained parameters close to the exact run', function()
        run_ok(equiv, 2, 'model=mlp hook=fp16_compress tol=2e-3', 'DDP_OK')
        run_ok(equiv, 2, 'model=mlp hook=bf16_compress tol=2e-2', 'DDP_OK')
        run_ok(equiv, 2, 'model=mlp hook=lua', 'DDP_OK')
        run_ok(equiv, 2, 'model=mlp hook=default', 'DDP_OK')
        run_ok(equiv, 2, 'model=mlp hook=default_fp16 tol=2e-3', 'DDP_OK')
    end)

    for _, case in ipairs({'compress', 'luahook', 'view', 'homes', 'rebuild', 'mismatch'}) do
        it('feature: ' .. case, function()
            run_ok(features, 2, case, 'FEATURE_OK ' .. case)
        end)
    end

    it('DDPLUA_DDP_TIMELINE writes a Chrome trace where allreduce overlaps backward', function()
        local path = os.tmpname()
        local out, code = launch(features, 2, 'timeline', 'DDPLUA_DDP_TIMELINE=' .. q(path))
        os.remove(path)
        expect_ok(out, code, 'FEATURE_OK timeline', 2)
    end)

    it('examples/ddp_train.lua trains, checkpoints on rank 0 and resumes', function()
        local ck = os.tmpname()
        local script = src .. '/examples/ddp_train.lua'
        local common = '--train-size 2000 --test-size 1000 --progress off --checkpoint ' .. q(ck)
        local out, code = launch(script, 2, '--epochs 1 ' .. common)
        assert.are.equal(0, code, out)
        local acc = tonumber(out:match('epoch 1/1 .- test accuracy ([%d.]+)'))
        assert.truthy(acc and acc > 0.5, out)
        assert.truthy(out:find('samples/s (global)', 1, true), out)
        -- the resumed run loads through 2 worker processes per rank (the default is 0)
        out, code = launch(script, 2, '--epochs 2 --num-workers 2 --resume ' .. q(ck) .. ' '
            .. common)
        os.remove(ck)
        assert.are.equal(0, code, out)
        assert.truthy(out:find('resumed from .- after epoch 1'), out)
        assert.truthy(out:find('epoch 2/2', 1, true) and not out:find('epoch 1/2', 1, true), out)
    end)

    it('is reachable as nn.DDP and nn.parallel.DistributedDataParallel', function()
        local out, code = sh(('%s -e %s'):format(q(bin), q("local nn = require('ddplua').nn; "
            .. "assert(nn.DDP == nn.parallel.DistributedDataParallel); "
            .. "local ok, e = pcall(nn.DDP, nn.Linear(2, 2)); assert(not ok); print(e)")))
        assert.are.equal(0, code, out)
        assert.truthy(out:find('process group is not initialized', 1, true), out)
    end)
end)
