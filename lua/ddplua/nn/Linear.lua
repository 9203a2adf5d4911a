-- lua/ddplua/nn/Linear.lua: nn.Linear(in_features, out_features [, {bias=true, dtype, device}]).
-- defines: Linear: y = x W^T + b over the last dimension; weight (out, in), bias (out).
--
-- Initialisation is PyTorch's: kaiming_uniform_(a=sqrt(5)) for the weight, which works out to
-- U(-1/sqrt(in), 1/sqrt(in)), and the same bound for the bias.
local ddpl = require 'ddplua'
local Module = require 'ddplua.nn.Module'
local Parameter = require 'ddplua.nn.Parameter'
local init = require 'ddplua.nn.init_functions'
local F = require 'ddplua.nn.functional'

local Linear = Module:extend('Linear')

function Linear:init(in_features, out_features, opts)
    self.in_features = Module.check_int('Linear', in_features, 'in_features', 0)
    self.out_features = Module.check_int('Linear', out_features, 'out_features', 0)
    local o = Module.options('Linear', opts, {bias = true}, true)
    local topts = {dtype = o.dtype, device = o.device}
    self.weight = Parameter(ddpl.empty({self.out_features, self.in_features}, topts))
    if o.bias then
        self.bias = Parameter(ddpl.empty({self.out_features}, topts))
    else
        self:register_parameter('bias', nil)
    end
    self:reset_parameters()
end

function Linear:reset_parameters()
    init.kaiming_uniform_(self.weight, {a = math.sqrt(5)})
    if self.bias ~= nil then
        local bound = self.in_features > 0 and 1 / math.sqrt(self.in_features) or 0
        init.uniform_(self.bias, -bound, bound)
    end
end

-- x (*, in) -> (*, out)
function Linear:forward(x)
    return F.linear(x, self.weight, self.bias)
end

function Linear:extra_repr()
    return string.format('in_features=%d, out_features=%d, bias=%s', self.in_features,
                         self.out_features, Module.repr(self.bias ~= nil))
end

return Linear
