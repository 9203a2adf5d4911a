-- lua/ddplua/nn/BatchNorm.lua: nn.BatchNorm1d and nn.BatchNorm2d(num_features [, {eps=1e-5,
--          momentum=0.1, affine=true, track_running_stats=true, dtype, device}]).
-- defines: BatchNorm (the shared base class: _BatchNorm in PyTorch; for subclasses also
--          BatchNorm.option_defaults and step_momentum), BatchNorm1d ((N, C) or (N, C, L)
--          inputs), BatchNorm2d ((N, C, H, W) inputs). nn.SyncBatchNorm is a subclass too.
--
-- Parameters weight (ones) and bias (zeros) when affine; buffers running_mean (zeros),
-- running_var (ones) and num_batches_tracked (int64 scalar) when tracking, registered in
-- PyTorch's order so state dicts match key for key. In training mode (or without running
-- statistics) the batch's statistics normalise and F.batch_norm updates the running ones in
-- place; in eval mode the running statistics are used. momentum=nil means a cumulative moving
-- average (momentum 1/num_batches_tracked), as in PyTorch.
local ddpl = require 'ddplua'
local Module = require 'ddplua.nn.Module'
local Parameter = require 'ddplua.nn.Parameter'
local init = require 'ddplua.nn.init_functions'
local F = require 'ddplua.nn.functional'

local BatchNorm = Module:extend('BatchNorm')

-- The constructor's options and their defaults; a subclass may add its own (SyncBatchNorm's
-- process_group). momentum = false stands for PyTorch's None (a Lua nil cannot be told from
-- "absent").
BatchNorm.option_defaults = {eps = 1e-5, momentum = 0.1, affine = true, track_running_stats = true}

-- Returns the checked options, for subclasses that read their own.
function BatchNorm:init(num_features, opts)
    local name = self.__name
    self.num_features = Module.check_int(name, num_features, 'num_features')
    local o = Module.options(name, opts, self.option_defaults, true)
    self.eps, self.affine, self.track_running_stats = o.eps, o.affine, o.track_running_stats
    self.momentum = o.momentum or nil
    local topts = {dtype = o.dtype, device = o.device}
    local n = self.num_features
    if self.affine then
        self.weight = Parameter(ddpl.ones({n}, topts))
        self.bias = Parameter(ddpl.zeros({n}, topts))
    else
        self:register_parameter('weight', nil)
        self:register_parameter('bias', nil)
    end
    if self.track_running_stats then
        self:register_buffer('running_mean', ddpl.zeros({n}, topts))
        self:register_buffer('running_var', ddpl.ones({n}, topts))
        self:register_buffer('num_batches_tracked', ddpl.tensor(0, {dtype = 'int64',
                                                                    device = o.device}))
    else
        self:register_buffer('running_mean', nil)
        self:register_buffer('running_var', nil)
        self:register_buffer('num_batches_tracked', nil)
    end
    return o
end

function BatchNorm:reset_running_stats()
    if self.track_running_stats then
        init.zeros_(self.running_mean)
        init.ones_(self.running_var)
        init.zeros_(self.num_batches_tracked)
    end
end

function BatchNorm:reset_parameters()
    self:reset_running_stats()
    if self.affine then
        init.ones_(self.weight)
        init.zeros_(self.bias)
    end
end

-- Subclasses say which input ranks they take.
function BatchNorm:check_input_dim(x)
    local d = x:dim()
    if self.input_dims and not self.input_dims[d] then
        error(string.format('%s: expected %s input, got a %d-D input of shape [%s]', self.__name,
                            self.input_dims.text, d, table.concat(x:shape(), ',')), 3)
    end
end

-- The momentum of this forward's running-statistics update; in training with running statistics
-- it counts the batch in num_batches_tracked (momentum nil: the cumulative average 1/count).
function BatchNorm:step_momentum()
    local momentum = self.momentum
    if self.training and self.track_running_stats then
        ddpl.no_grad(function() self.num_batches_tracked:add_(1) end)
        if momentum == nil then momentum = 1 / self.num_batches_tracked:item() end
    end
    return momentum
end

function BatchNorm:forward(x)
    self:check_input_dim(x)
    local momentum = self:step_momentum()
    -- batch statistics in training, and always when there are no running ones
    local use_batch = self.training or self.running_mean == nil
    return F.batch_norm(x, self.running_mean, self.running_var, self.weight, self.bias, use_batch,
                        momentum or 0.0, self.eps)
end

function BatchNorm:extra_repr()
    local R = Module.repr
    return string.format('%d, eps=%s, momentum=%s, affine=%s, track_running_stats=%s',
                         self.num_features, R(self.eps), R(self.momentum), R(self.affine),
                         R(self.track_running_stats))
end

local BatchNorm1d = BatchNorm:extend('BatchNorm1d')
BatchNorm1d.input_dims = {[2] = true, [3] = true, text = '2-D or 3-D'}

local BatchNorm2d = BatchNorm:extend('BatchNorm2d')
BatchNorm2d.input_dims = {[4] = true, text = '4-D'}

BatchNorm.BatchNorm1d, BatchNorm.BatchNorm2d = BatchNorm1d, BatchNorm2d
return BatchNorm
