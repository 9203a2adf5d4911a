-- lua/ddplua/nn/Conv2d.lua: nn.Conv2d(in, out, kernel_size [, {stride=1, padding=0,
--          dilation=1, groups=1, bias=true, dtype, device}]).
-- defines: Conv2d: 2-D cross-correlation over (N, C, H, W) or (C, H, W) inputs;
--          weight (out, in/groups, kh, kw), bias (out).
--
-- Sizes are an int or an {h, w} pair; padding may also be 'same' or 'valid' (F.conv2d checks
-- what it supports). Initialisation is PyTorch's: kaiming_uniform_(a=sqrt(5)) for the weight,
-- U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for the bias, fan_in = in/groups * kh * kw.
local ddpl = require 'ddplua'
local Module = require 'ddplua.nn.Module'
local Parameter = require 'ddplua.nn.Parameter'
local init = require 'ddplua.nn.init_functions'
local F = require 'ddplua.nn.functional'

local Conv2d = Module:extend('Conv2d')

-- an int or an {h, w} pair -> {h, w} (cls: the class name errors give)
local function pair(v, what, min, cls)
    cls = cls or 'Conv2d'
    if type(v) == 'table' and #v == 2 then
        return {Module.check_int(cls, v[1], what, min), Module.check_int(cls, v[2], what, min)}
    end
    local n = Module.check_int(cls, v, what, min)
    return {n, n}
end
Conv2d.pair = pair

function Conv2d:init(in_channels, out_channels, kernel_size, opts)
    local o = Module.options('Conv2d', opts, {stride = 1, padding = 0, dilation = 1, groups = 1,
                                              bias = true}, true)
    self.in_channels = Module.check_int('Conv2d', in_channels, 'in_channels')
    self.out_channels = Module.check_int('Conv2d', out_channels, 'out_channels')
    self.groups = Module.check_int('Conv2d', o.groups, 'groups')
    if self.in_channels % self.groups ~= 0 or self.out_channels % self.groups ~= 0 then
        error(string.format('Conv2d: in_channels (%d) and out_channels (%d) must both be '
                            .. 'divisible by groups (%d)', self.in_channels, self.out_channels,
                            self.groups), 2)
    end
    self.kernel_size = pair(kernel_size, 'kernel_size', 1)
    self.stride = pair(o.stride, 'stride', 1)
    self.dilation = pair(o.dilation, 'dilation', 1)
    if o.padding == 'same' or o.padding == 'valid' then
        self.padding = o.padding
    else
        self.padding = pair(o.padding, 'padding', 0)
    end
    local topts = {dtype = o.dtype, device = o.device}
    self.weight = Parameter(ddpl.empty({self.out_channels, self.in_channels // self.groups,
                                        self.kernel_size[1], self.kernel_size[2]}, topts))
    if o.bias then
        self.bias = Parameter(ddpl.empty({self.out_channels}, topts))
    else
        self:register_parameter('bias', nil)
    end
    self:reset_parameters()
end

function Conv2d:reset_parameters()
    init.kaiming_uniform_(self.weight, {a = math.sqrt(5)})
    if self.bias ~= nil then
        local fan_in = init.calculate_fan_in_and_fan_out(self.weight)
        local bound = fan_in > 0 and 1 / math.sqrt(fan_in) or 0
        init.uniform_(self.bias, -bound, bound)
    end
end

-- x (N, in, H, W) -> (N, out, H', W')
function Conv2d:forward(x)
    return F.conv2d(x, self.weight, self.bias, {stride = self.stride, padding = self.padding,
                                                dilation = self.dilation, groups = self.groups})
end

-- whether some element of the list t differs from v
local function any_ne(t, v)
    for _, x in ipairs(t) do
        if x ~= v then return true end
    end
    return false
end

-- PyTorch's text: options at their default are left out. Conv1d (one-element lists) and
-- ConvTranspose2d (with output_padding) share it.
function Conv2d:extra_repr()
    local R = Module.repr
    local s = string.format('%d, %d, kernel_size=%s, stride=%s', self.in_channels,
                            self.out_channels, R(self.kernel_size), R(self.stride))
    local p = self.padding
    if type(p) == 'string' then
        s = s .. ', padding=' .. p -- PyTorch formats it with str(): padding=same
    elseif any_ne(p, 0) then
        s = s .. ', padding=' .. R(p)
    end
    if any_ne(self.dilation, 1) then
        s = s .. ', dilation=' .. R(self.dilation)
    end
    if self.output_padding and any_ne(self.output_padding, 0) then -- ConvTranspose2d's
        s = s .. ', output_padding=' .. R(self.output_padding)
    end
    if self.groups ~= 1 then s = s .. ', groups=' .. self.groups end
    if self.bias == nil then s = s .. ', bias=False' end
    return s
end

return Conv2d
