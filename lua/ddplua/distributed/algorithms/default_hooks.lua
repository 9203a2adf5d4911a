-- lua/ddplua/distributed/algorithms/default_hooks.lua: PyTorch's default DDP comm hooks
-- (torch.distributed.algorithms.ddp_comm_hooks.default_hooks) on the comm-hook interface:
-- model:register_comm_hook(process_group_or_nil, default_hooks.allreduce_hook).
-- defines: allreduce_hook(process_group, bucket), fp16_compress_hook(process_group, bucket),
--          bf16_compress_hook(process_group, bucket).
--
-- Each returns a future of the bucket's averaged gradient; the state is the process group (nil:
-- the default group). register_comm_hook('allreduce' | 'fp16_compress' | 'bf16_compress') runs
-- the same reductions in the reducer's C code without a Lua call per bucket; these are the
-- reference the specs compare it with, and a starting point for hooks of one's own.
local ddpl = require 'ddplua'
local args = require 'ddplua.distributed.algorithms.hook_args'
local dist = ddpl.distributed

local M = {}

local function group_opts(process_group)
    return {async_op = true, group = process_group}
end

-- The buffer divided by the world size, then summed across ranks.
function M.allreduce_hook(process_group, bucket)
    args.check_bucket('allreduce_hook', bucket)
    local t = bucket:buffer():div_(args.world_size('allreduce_hook', process_group))
    return dist.all_reduce(t, group_opts(process_group)):get_future()
end

-- Compressed to a 16-bit dtype (divided first, so the sum cannot overflow) and summed as the
-- reducer's C path sums it: the ranks' compressed contributions are all-gathered (half the bytes
-- of each), added in the buffer's dtype and the sum rounded to the compressed one, which is what
-- PyTorch's all_reduce in that dtype gives; the Gloo transport here has no 16-bit sum.
local function compress_hook(fname, dtype)
    return function(process_group, bucket)
        args.check_bucket(fname, bucket)
        local buffer = bucket:buffer()
        local world, n = args.world_size(fname, process_group), buffer:numel()
        local c = buffer:to(dtype):div_(world)
        local gathered = ddpl.empty({n * world}, {dtype = dtype, device = buffer.device})
        local work = dist.all_gather_into_tensor(gathered, c, group_opts(process_group))
        return work:then_(function()
            local sum = gathered:view(world, n):to(buffer.dtype):sum(0)
            return buffer:copy_(sum:to(dtype))
        end)
    end
end

M.fp16_compress_hook = compress_hook('fp16_compress_hook', 'float16')
M.bf16_compress_hook = compress_hook('bf16_compress_hook', 'bfloat16')

return M
