-- lua/ddplua/nn/SyncBatchNorm.lua: nn.SyncBatchNorm(num_features [, {eps=1e-5, momentum=0.1,
--          affine=true, track_running_stats=true, process_group, dtype, device}]), batch norm
--          whose training statistics span every rank of a process group.
-- defines: SyncBatchNorm (a BatchNorm: same parameters, buffers, state_dict keys and repr),
--          SyncBatchNorm.convert_sync_batchnorm(module [, process_group]).
--
-- As PyTorch's torch.nn.SyncBatchNorm: inputs are (N, C, ...) of any rank >= 2; in training,
-- with the default group initialised and more than one rank in process_group (default: the
-- world), the batch statistics are those of the union of every rank's batch (N may differ
-- between ranks, and be 0), so N ranks of batch B compute what one process computes on the
-- N x B batch: outputs, input gradients and running statistics (nn/sync_batch_norm.lua says
-- how, with one collective forward and one backward). Otherwise (evaluation, one rank, no
-- process group, a process outside process_group) it is plain batch norm on the local batch.
-- Weight and bias gradients are local sums, reduced by DDP like every other gradient.
-- docs/internals/sync-batch-norm.md records the decisions.
local BatchNorm = require 'ddplua.nn.BatchNorm'
local Module = require 'ddplua.nn.Module'
local dist = require 'ddplua.distributed'
local is_group = require('ddplua.core.dist').is_group
local functional = require 'ddplua.nn.sync_batch_norm'

local SyncBatchNorm = BatchNorm:extend('SyncBatchNorm')

-- BatchNorm's options, and process_group (false: the default group)
SyncBatchNorm.option_defaults = {process_group = false}
for k, v in pairs(BatchNorm.option_defaults) do SyncBatchNorm.option_defaults[k] = v end

local function check_group(fname, g)
    if g ~= nil and g ~= false and not is_group(g) then
        error(('%s: process_group must be a process group (from dist.new_group), got %s')
            :format(fname, type(g)), 3)
    end
    return g or nil
end

function SyncBatchNorm:init(num_features, opts)
    local o = BatchNorm.init(self, num_features, opts)
    self.process_group = check_group('SyncBatchNorm', o.process_group)
end

function SyncBatchNorm:check_input_dim(x)
    if x:dim() < 2 then
        error(('%s: expected at least 2-D input (N, C, ...), got a %d-D input of shape [%s]')
            :format(self.__name, x:dim(), table.concat(x:shape(), ',')), 3)
    end
    if x:size(1) ~= self.num_features then
        error(('%s: expected input with %d channels (num_features) in dim 1, got shape [%s]')
            :format(self.__name, self.num_features, table.concat(x:shape(), ',')), 3)
    end
end

-- PyTorch's need_sync: training, distributed, and more than one rank in the group.
function SyncBatchNorm:needs_sync()
    return self.training and dist.is_initialized()
        and dist.get_world_size(self.process_group) > 1
end

function SyncBatchNorm:forward(x)
    if not self:needs_sync() then return BatchNorm.forward(self, x) end
    self:check_input_dim(x)
    return functional.sync_batch_norm(x, {
        weight = self.weight, bias = self.bias, running_mean = self.running_mean,
        running_var = self.running_var, momentum = self:step_momentum() or 0.0, eps = self.eps,
        group = self.process_group, name = self.__name,
    })
end

-- PyTorch's convert_sync_batchnorm: every BatchNorm (1d, 2d, or a SyncBatchNorm) in module's
-- tree becomes a SyncBatchNorm on process_group that shares its parameters and buffers (so an
-- optimizer built before stays valid and requires_grad is kept) and its training flag. Parents
-- are changed in place (the same child name keeps its place); returns the converted module
-- (a new one when module itself is a batch norm). Unlike PyTorch, a batch norm registered under
-- two names becomes one SyncBatchNorm under both (PyTorch's named_children visits it once and
-- leaves the second name unconverted).
function SyncBatchNorm.convert_sync_batchnorm(module, process_group)
    local fname = 'SyncBatchNorm.convert_sync_batchnorm'
    if not Module.is(module) then
        error(('%s: expected an nn.Module, got %s'):format(fname, type(module)), 2)
    end
    process_group = check_group(fname, process_group)
    local done = {}
    local function convert(m)
        if done[m] then return done[m] end
        local out = m
        if m:is_instance_of(BatchNorm) then
            out = SyncBatchNorm(m.num_features, {eps = m.eps, momentum = m.momentum or false,
                affine = m.affine, track_running_stats = m.track_running_stats,
                process_group = process_group})
            if m.affine then
                out.weight, out.bias = m.weight, m.bias
            end
            if m.track_running_stats then
                out.running_mean, out.running_var = m.running_mean, m.running_var
                out.num_batches_tracked = m.num_batches_tracked
            end
            out.training = m.training
        end
        done[m] = out
        for _, slot in ipairs(m:_child_slots()) do
            local child = slot[2]
            if child then
                local c = convert(child)
                if c ~= child or out ~= m then out:add_module(slot[1], c) end
            end
        end
        return out
    end
    return convert(module)
end

return SyncBatchNorm
