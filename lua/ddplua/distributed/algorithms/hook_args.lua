-- lua/ddplua/distributed/algorithms/hook_args.lua: the argument checks the comm hooks share, so
-- their errors name the hook the user registered (allreduce_hook, powerSGD_hook, ...) rather than
-- the library function that happened to fail (get_world_size, a method of nil): a hook runs
-- inside backward, far from the line that registered it.
-- defines: check_bucket(fname, bucket), world_size(fname, process_group).
local ddpl = require 'ddplua'
local GradBucket = require 'ddplua.distributed.grad_bucket'

local M = {}

-- bucket must be the GradBucket DDP passes (hook(state, bucket)); the error blames the hook's
-- caller
function M.check_bucket(fname, bucket)
    if not GradBucket.is_bucket(bucket) then
        error(('%s: expected a GradBucket as argument 2 (hook(state, bucket)), got %s'):format(
            fname, ddpl.is_tensor(bucket) and 'a tensor' or type(bucket)), 3)
    end
end

-- The world size of process_group (nil: the default group), or an error naming the hook.
function M.world_size(fname, process_group)
    local ok, n = pcall(ddpl.distributed.get_world_size, process_group)
    if ok then return n end
    -- "<file>.lua:<line>: get_world_size: what" -> "<fname>: what"
    local what = tostring(n):gsub('^[^\n]-%.lua:%d+: ', ''):gsub('^get_world_size: ', '')
    error(fname .. ': ' .. what, 3)
end

return M
