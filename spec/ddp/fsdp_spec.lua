-- spec/ddp/fsdp_spec.lua: nn.FSDP (lua/ddplua/nn/parallel/FullyShardedDataParallel.lua) on real
-- processes (`ddplua script --nproc N`, every run under `timeout`): each strategy, auto_wrap form
-- and model trains to the parameters of one process on the global batch (1e-5, float32), also
-- with gradient accumulation under no_sync, clip_grad_norm_ against nn.utils', activation
-- checkpointing of whole units, forward_prefetch (bit-identical to the same run without it), and
-- on 2, 3 and 4 ranks; each rank holds only its shards.
-- Sharded state dicts saved on 4 (and 3) ranks load on 2 by resharding, and full ones into
-- FSDP and plain modules; under a per-rank allocator cap (DDPLUA_MEMORY_LIMIT_MB) that refuses
-- DDP, FULL_SHARD on 4 ranks trains; mixed_precision equals DDP under the same casts; a module
-- built under nn.utils.meta_init is materialised one unit at a time; every error names what was
-- wrong. The checks run inside the ranks
-- (spec/ddp/workers/fsdp_*.lua); here we start them and count the ranks that passed.
local S = require 'shell_util'
local src = S.src
local equiv = src .. '/spec/ddp/workers/fsdp_equiv.lua'
local ckpt = src .. '/spec/ddp/workers/fsdp_ckpt.lua'
local errors = src .. '/spec/ddp/workers/fsdp_errors.lua'

local function run_ok(script, n, args, marker)
    local out, code = S.launch(script, n, args, nil, 120)
    S.expect_ranks(out, code, marker, n)
    return out
end

describe('FSDP', function()
    describe('trains as one process on the global batch', function()
        local cases = {
            {2, 'strategy=FULL_SHARD model=mlp wrap=classes'},
            {2, 'strategy=FULL_SHARD model=gpt wrap=classes accum=1 clip=1'},
            {2, 'strategy=FULL_SHARD model=cnn'},
            {2, 'strategy=SHARD_GRAD_OP model=gpt wrap=size'},
            {2, 'strategy=SHARD_GRAD_OP model=mlp wrap=size accum=1 opt=sgd'},
            {2, 'strategy=NO_SHARD model=cnn clip=1'},
            {2, 'strategy=FULL_SHARD model=gpt wrap=classes ckpt=1'},
            {3, 'strategy=FULL_SHARD model=gpt wrap=size'},
            {4, 'strategy=FULL_SHARD model=gpt wrap=classes'},
            -- the backward prefetch gathering into the memory of the reduction in flight
            {2, 'strategy=FULL_SHARD model=gpt wrap=classes blocks=4 accum=1'},
            {4, 'strategy=FULL_SHARD model=gpt wrap=classes blocks=5 clip=1'},
            {4, 'strategy=SHARD_GRAD_OP model=cnn clip=1'},
            -- forward_prefetch: also bit-identical to a twin without it
            {2, 'strategy=FULL_SHARD model=gpt wrap=classes fprefetch=1'},
            {2, 'strategy=SHARD_GRAD_OP model=mlp wrap=classes fprefetch=1 accum=1 clip=1'},
            {3, 'strategy=FULL_SHARD model=gpt wrap=classes fprefetch=1 ckpt=1'},
        }
        for _, c in ipairs(cases) do
            it(('%d ranks, %s'):format(c[1], c[2]), function()
                local out = run_ok(equiv, c[1], c[2], 'FSDP_OK')
                -- the shards: a 1/N slice of the padded flat buffers per rank
                local shard, total = out:match('shard_elems=(%d+) total_elems=(%d+)')
                shard, total = tonumber(shard), tonumber(total)
                if c[2]:find('NO_SHARD', 1, true) then
                    assert.are.equal(total, shard)
                else
                    assert.is_true(shard * c[1] >= total and shard * c[1] < total + 8 * c[1], out)
                end
            end)
        end
    end)

    -- mixed_precision against DDP under the same casts (spec/ddp/workers/fsdp_mixed.lua). Where
    -- both reduce in the same dtype they differ only in where the division by the world size
    -- falls against the rounding to 16 bits (exact but in float16's subnormal range: 1.5e-6
    -- measured on 4 ranks, 0 for bfloat16); one rounding of the gradients to another dtype, which
    -- a reduction in the wrong dtype makes, moves the parameters by 3e-5 to 3e-4 (lr 0.1). 1e-5
    -- lies between.
    describe('mixed_precision matches DDP under the same casts', function()
        local cases = {
            {2, 'pd=bfloat16'},
            {2, 'pd=bfloat16 rd=float32 bd=bfloat16'},
            {2, 'pd=float16 rd=float16 bd=float16 strategy=SHARD_GRAD_OP'},
            {2, 'pd=bfloat16 strategy=NO_SHARD'},
            {2, 'pd=float16 rd=bfloat16'},
            {4, 'pd=bfloat16 bd=bfloat16'},
            {4, 'pd=float16 bd=float16'},
        }
        for _, c in ipairs(cases) do
            it(('%d ranks, %s'):format(c[1], c[2]), function()
                run_ok(src .. '/spec/ddp/workers/fsdp_mixed.lua', c[1], 'tol=1e-5 ' .. c[2],
                       'MIXED_OK')
            end)
        end
    end)

    it('saves sharded checkpoints on 4 ranks and loads them on 2, and 3 on 2', function()
        for _, c in ipairs({{4, 'FULL_SHARD'}, {3, 'SHARD_GRAD_OP'}}) do
            local dir = S.new_tmpdir()
            run_ok(ckpt, c[1], ('phase=save dir=%s strategy=%s'):format(dir, c[2]), 'CKPT_OK')
            run_ok(ckpt, 2, ('phase=load dir=%s saved_world=%d'):format(dir, c[1]), 'CKPT_OK')
            S.sh('rm -rf ' .. S.q(dir))
        end
    end)

    -- DDPLUA_MEMORY_LIMIT_MB caps each rank's host tensor memory (engine/core/alloc.c): a GPT
    -- whose DDP step needs ~37 MiB per rank (Adam: 16 bytes per parameter) is refused at 22;
    -- FULL_SHARD on 4 ranks needs ~17 and trains (bench/fsdp.lua)
    it('trains under FULL_SHARD a model whose DDP run a per-rank memory cap refuses', function()
        local bench = src .. '/bench/fsdp.lua'
        local args = 'steps=2 layers=4 width=192 seq=32'
        local env = 'DDPLUA_MEMORY_LIMIT_MB=22 DDPLUA_SOURCE_DIR=' .. S.q(src)
        local out, code = S.launch(bench, 4, 'mode=ddp ' .. args, env, 300)
        assert.are_not.equal(0, code, out)
        assert.truthy(out:find('would pass the host memory limit of 22 MiB', 1, true), out)
        out, code = S.launch(bench, 4, 'mode=full ' .. args, env, 300)
        assert.are.equal(0, code, out)
        local peak = tonumber(out:match('peak_mb=([%d.]+)'))
        assert.is_true(peak ~= nil and peak <= 22, out)
        -- and the cap itself: a clear error, not a crash, for one allocation too many
        out, code = S.sh(('DDPLUA_MEMORY_LIMIT_MB=4 %s -e %s'):format(S.q(S.bin),
            S.q("local d = require 'ddplua'; local a = d.zeros(512, 1024); local b = d.zeros(512, 1024); local c = d.zeros(512, 1024)")))
        assert.are_not.equal(0, code, out)
        assert.truthy(out:find('zeros: out of memory: 2097152 bytes more would pass the host '
            .. 'memory limit of 4 MiB', 1, true), out)
    end)

    -- a module built under nn.utils.meta_init, materialised and sharded one unit at a time
    -- (spec/ddp/workers/fsdp_meta.lua): the twin's values and training bit for bit, rank 0's
    -- values under the default reset_parameters, never the whole model at once
    it('builds from nn.utils.meta_init one unit at a time', function()
        for _, c in ipairs({{2, 'strategy=FULL_SHARD'}, {3, 'strategy=SHARD_GRAD_OP'},
                            {4, 'strategy=FULL_SHARD'}}) do
            run_ok(src .. '/spec/ddp/workers/fsdp_meta.lua', c[1], c[2], 'META_OK')
        end
    end)

    -- the Lua heap of a training loop stays flat without the script collecting
    -- (spec/ddp/workers/fsdp_gc.lua)
    it('keeps the Lua heap flat over many steps', function()
        run_ok(src .. '/spec/ddp/workers/fsdp_gc.lua', 2, '', 'GC_OK')
    end)

    it('names what is wrong in every error', function()
        local out = run_ok(errors, 2, '', 'ERRORS_OK')
        assert.truthy(out:find('checked=', 1, true))
    end)
end)
