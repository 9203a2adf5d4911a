-- lua/ddplua/nn/ConvTranspose2d.lua: nn.ConvTranspose2d(in, out, kernel_size [, {stride=1,
--          padding=0, output_padding=0, groups=1, bias=true, dilation=1, dtype, device}]).
-- defines: ConvTranspose2d: the transposed 2-D convolution (F.conv_transpose2d, the adjoint of
--          conv2d: an upsampling layer) over (N, C, H, W) or (C, H, W) inputs;
--          weight (in, out/groups, kh, kw), bias (out), as PyTorch's state_dict.
--
-- Sizes are an int or an {h, w} pair. Initialisation and printing are Conv2d's
-- (kaiming_uniform_(a=sqrt(5)) with fan_in = weight:size(1) * kh * kw = out/groups * kh * kw, as
-- PyTorch computes it from the transposed weight). forward has no output_size argument (PyTorch's
-- way of choosing output_padding at call time): set output_padding instead.
local ddpl = require 'ddplua'
local Module = require 'ddplua.nn.Module'
local Parameter = require 'ddplua.nn.Parameter'
local Conv2d = require 'ddplua.nn.Conv2d'
local F = require 'ddplua.nn.functional'

local ConvTranspose2d = Module:extend('ConvTranspose2d')

function ConvTranspose2d:init(in_channels, out_channels, kernel_size, opts)
    local name = 'ConvTranspose2d'
    local o = Module.options(name, opts, {stride = 1, padding = 0, output_padding = 0,
                                          groups = 1, bias = true, dilation = 1}, true)
    self.in_channels = Module.check_int(name, in_channels, 'in_channels')
    self.out_channels = Module.check_int(name, out_channels, 'out_channels')
    self.groups = Module.check_int(name, o.groups, 'groups')
    if self.in_channels % self.groups ~= 0 or self.out_channels % self.groups ~= 0 then
        error(string.format('%s: in_channels (%d) and out_channels (%d) must both be '
                            .. 'divisible by groups (%d)', name, self.in_channels,
                            self.out_channels, self.groups), 2)
    end
    self.kernel_size = Conv2d.pair(kernel_size, 'kernel_size', 1, name)
    self.stride = Conv2d.pair(o.stride, 'stride', 1, name)
    self.padding = Conv2d.pair(o.padding, 'padding', 0, name)
    self.dilation = Conv2d.pair(o.dilation, 'dilation', 1, name)
    self.output_padding = Conv2d.pair(o.output_padding, 'output_padding', 0, name)
    for i = 1, 2 do
        if self.output_padding[i] >= self.stride[i] and self.output_padding[i] >= self.dilation[i]
        then
            error(string.format('%s: output_padding %s must be smaller than either stride %s or '
                                .. 'dilation %s', name, Module.repr(self.output_padding),
                                Module.repr(self.stride), Module.repr(self.dilation)), 2)
        end
    end
    local topts = {dtype = o.dtype, device = o.device}
    self.weight = Parameter(ddpl.empty({self.in_channels, self.out_channels // self.groups,
                                        self.kernel_size[1], self.kernel_size[2]}, topts))
    if o.bias then
        self.bias = Parameter(ddpl.empty({self.out_channels}, topts))
    else
        self:register_parameter('bias', nil)
    end
    self:reset_parameters()
end

ConvTranspose2d.reset_parameters = Conv2d.reset_parameters
ConvTranspose2d.extra_repr = Conv2d.extra_repr

-- x (N, in, H, W) -> (N, out, (H-1)*s - 2p + d(k-1) + output_padding + 1, likewise W)
function ConvTranspose2d:forward(x)
    return F.conv_transpose2d(x, self.weight, self.bias, {stride = self.stride,
                                                          padding = self.padding,
                                                          output_padding = self.output_padding,
                                                          groups = self.groups,
                                                          dilation = self.dilation})
end

return ConvTranspose2d
