-- spec/ddp/fsdp_cuda_spec.lua: nn.FSDP with the model on CUDA (backend nccl), on a GPU or on the
-- emulation build (-DDDPL_CUDA_EMU=ON, ctest label cuda-emu, where NCCL is the stand-in of
-- tools/cuemu/nccl): each strategy trains to the parameters of one process on the global batch
-- (1e-5 relative, float32, spec/ddp/workers/fsdp_equiv.lua with device=cuda), and the same with
-- cpu_offload=true, where every shard and its gradient must be in host memory and the optimizer
-- steps there; mixed_precision against DDP under the same casts (spec/ddp/workers/
-- fsdp_mixed.lua), also offloaded. Pending without CUDA (spec/ddp/fsdp_spec.lua runs the same
-- workers on the CPU).
local ddpl = require 'ddplua'
local S = require 'shell_util'
local equiv = S.src .. '/spec/ddp/workers/fsdp_equiv.lua'

local function gpus() return ddpl.cuda.is_available() and ddpl.cuda.device_count() or 0 end
-- an emulated device is a process's own: any number of them (DDPL_CUEMU_DEVICES)
local emulated = ddpl.config().cuda_emulated

local cases = {
    {2, 'strategy=FULL_SHARD model=gpt wrap=classes clip=1'},
    {2, 'strategy=SHARD_GRAD_OP model=mlp wrap=size accum=1 opt=sgd'},
    {2, 'strategy=NO_SHARD model=cnn clip=1'},
    {2, 'strategy=FULL_SHARD model=gpt wrap=classes clip=1 offload=1'},
    {2, 'strategy=SHARD_GRAD_OP model=mlp wrap=size accum=1 offload=1'},
    {2, 'strategy=NO_SHARD model=mlp clip=1 offload=1'},
    {4, 'strategy=FULL_SHARD model=mlp wrap=classes accum=1 offload=1'},
    {2, 'strategy=FULL_SHARD model=gpt wrap=classes fprefetch=1 offload=1'},
    -- the backward prefetch gathering into the memory of the reduce-scatter in flight (ordered
    -- after it on the group's stream)
    {2, 'strategy=FULL_SHARD model=gpt wrap=classes blocks=4'},
}

-- mixed_precision on nccl against DDP under the same casts (spec/ddp/fsdp_spec.lua says why
-- 1e-5); on 2 ranks only: nccl sums more ranks in the 16-bit type with a rounding per partial
-- sum, where DDP's 16-bit hooks sum in float32 and round once
local mixed = {
    'pd=bfloat16 bd=bfloat16',
    'pd=float16 rd=float32 strategy=SHARD_GRAD_OP',
    'pd=bfloat16 offload=1',
}

describe('FSDP on CUDA', function()
    for _, c in ipairs(mixed) do
        it('2 ranks, mixed_precision ' .. c, function()
            if gpus() == 0 then pending('no CUDA device') return end
            if not emulated and gpus() < 2 then pending('needs 2 GPUs') return end
            local out, code = S.launch(S.src .. '/spec/ddp/workers/fsdp_mixed.lua', 2,
                                       'device=cuda tol=1e-5 ' .. c, '', 300)
            S.expect_ranks(out, code, 'MIXED_OK', 2)
        end)
    end

    for _, c in ipairs(cases) do
        it(('%d ranks, %s'):format(c[1], c[2]), function()
            if gpus() == 0 then pending('no CUDA device') return end
            if not emulated and gpus() < c[1] then pending('needs ' .. c[1] .. ' GPUs') return end
            local env = emulated and ('DDPL_CUEMU_DEVICES=%d'):format(math.max(2, c[1])) or ''
            local out, code = S.launch(equiv, c[1], 'device=cuda steps=3 ' .. c[2], env, 300)
            S.expect_ranks(out, code, 'FSDP_OK', c[1])
        end)
    end
end)
