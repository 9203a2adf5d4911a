-- lua/ddplua/nn/conv_common.lua: what Conv1d, Conv2d and ConvTranspose2d share.
-- defines: conv_common.sizes(cls, v, what, min, n) (an int or a list of n ints -> a list of n),
--          conv_common.init(self, cls, n, in, out, kernel_size, opts, transposed) (options,
--          checks, weight and bias, PyTorch's initialisation), conv_common.reset_parameters,
--          conv_common.extra_repr (PyTorch's _ConvNd text), conv_common.padded(self, x) (the
--          input padded explicitly for a padding_mode other than 'zeros').
--
-- Weight shapes are PyTorch's: (out, in/groups, k...) for a convolution, (in, out/groups, k...)
-- for a transposed one. Initialisation is PyTorch's for both: kaiming_uniform_(a=sqrt(5)) on the
-- weight, bias U(-1/sqrt(fan_in), 1/sqrt(fan_in)) with fan_in = weight:size(1) * prod(k).
local ddpl = require 'ddplua'
local Module = require 'ddplua.nn.Module'
local Parameter = require 'ddplua.nn.Parameter'
local init = require 'ddplua.nn.init_functions'

local conv_common = {}

function conv_common.sizes(cls, v, what, min, n)
    if type(v) == 'table' then
        if #v ~= n then
            error(string.format('%s: %s must be an integer or a list of %d, got %d values', cls,
                                what, n, #v), 4)
        end
        local out = {}
        for i = 1, n do out[i] = Module.check_int(cls, v[i], what, min) end
        return out
    end
    local k = Module.check_int(cls, v, what, min)
    local out = {}
    for i = 1, n do out[i] = k end
    return out
end

function conv_common.init(self, cls, n, in_channels, out_channels, kernel_size, opts, transposed)
    local defaults = {stride = 1, padding = 0, dilation = 1, groups = 1, bias = true,
                      padding_mode = 'zeros'}
    if transposed then defaults.output_padding = 0 end
    local o = Module.options(cls, opts, defaults, true)
    self.in_channels = Module.check_int(cls, in_channels, 'in_channels')
    self.out_channels = Module.check_int(cls, out_channels, 'out_channels')
    self.groups = Module.check_int(cls, o.groups, 'groups')
    if self.in_channels % self.groups ~= 0 or self.out_channels % self.groups ~= 0 then
        error(string.format('%s: in_channels (%d) and out_channels (%d) must both be '
                            .. 'divisible by groups (%d)', cls, self.in_channels,
                            self.out_channels, self.groups), 3)
    end
    -- PyTorch's padding modes: 'zeros' pads inside the convolution, the others pad explicitly
    -- with F.pad's mode of that name and convolve with padding 0 (conv_common.padded)
    local PADDING_MODES = {zeros = true, reflect = true, replicate = true, circular = true}
    if not PADDING_MODES[o.padding_mode] then
        error(string.format("%s: padding_mode must be one of 'zeros', 'reflect', 'replicate' or "
                            .. "'circular', got %s", cls, tostring(o.padding_mode)), 3)
    end
    if transposed and o.padding_mode ~= 'zeros' then
        error(string.format("%s: only 'zeros' padding_mode is supported, got '%s'", cls,
                            o.padding_mode), 3)
    end
    self.padding_mode = o.padding_mode
    local S = conv_common.sizes
    self.kernel_size = S(cls, kernel_size, 'kernel_size', 1, n)
    self.stride = S(cls, o.stride, 'stride', 1, n)
    self.dilation = S(cls, o.dilation, 'dilation', 1, n)
    if not transposed and (o.padding == 'same' or o.padding == 'valid') then
        self.padding = o.padding
    else
        self.padding = S(cls, o.padding, 'padding', 0, n)
    end
    if transposed then
        self.output_padding = S(cls, o.output_padding, 'output_padding', 0, n)
        for i = 1, n do
            if self.output_padding[i] >= self.stride[i]
                and self.output_padding[i] >= self.dilation[i] then
                error(string.format('%s: output_padding %s must be smaller than either stride %s '
                                    .. 'or dilation %s', cls, Module.repr(self.output_padding),
                                    Module.repr(self.stride), Module.repr(self.dilation)), 3)
            end
        end
    end
    local shape = transposed and {self.in_channels, self.out_channels // self.groups}
                  or {self.out_channels, self.in_channels // self.groups}
    for i = 1, n do shape[2 + i] = self.kernel_size[i] end
    local topts = {dtype = o.dtype, device = o.device}
    self.weight = Parameter(ddpl.empty(shape, topts))
    if o.bias then
        self.bias = Parameter(ddpl.empty({self.out_channels}, topts))
    else
        self:register_parameter('bias', nil)
    end
    self:reset_parameters()
end

-- F.pad's amounts for padding_mode (last dimension first, PyTorch's
-- _reversed_padding_repeated_twice): p on both sides, or for 'same' the total d * (k - 1) split
-- with the smaller half on the left, for 'valid' nothing.
local function pad_amounts(self)
    local n, p, out = #self.kernel_size, self.padding, {}
    for i = n, 1, -1 do
        local l, r
        if p == 'valid' then
            l, r = 0, 0
        elseif p == 'same' then
            local total = self.dilation[i] * (self.kernel_size[i] - 1)
            l = total // 2
            r = total - l
        else
            l, r = p[i], p[i]
        end
        out[#out + 1] = l
        out[#out + 1] = r
    end
    return out
end

-- For padding_mode 'zeros': x and the module's padding, unchanged. Otherwise x padded with
-- F.pad's mode of that name, and padding 0 (a list, or 0 for a 1-D convolution's int form).
function conv_common.padded(self, x)
    if self.padding_mode == 'zeros' then return x, self.padding end
    local F = require 'ddplua.nn.functional'
    local zeros = {}
    for i = 1, #self.kernel_size do zeros[i] = 0 end
    return F.pad(x, pad_amounts(self), {mode = self.padding_mode}), zeros
end

function conv_common.reset_parameters(self)
    init.kaiming_uniform_(self.weight, {a = math.sqrt(5)})
    if self.bias ~= nil then
        local fan_in = init.calculate_fan_in_and_fan_out(self.weight)
        local bound = fan_in > 0 and 1 / math.sqrt(fan_in) or 0
        init.uniform_(self.bias, -bound, bound)
    end
end

-- whether some element of the list t differs from v
local function any_ne(t, v)
    for _, x in ipairs(t) do
        if x ~= v then return true end
    end
    return false
end

-- PyTorch's text: options at their default are left out; padding 'same' is printed with str().
function conv_common.extra_repr(self)
    local R = Module.repr
    local s = string.format('%d, %d, kernel_size=%s, stride=%s', self.in_channels,
                            self.out_channels, R(self.kernel_size), R(self.stride))
    local p = self.padding
    if type(p) == 'string' then
        s = s .. ', padding=' .. p
    elseif any_ne(p, 0) then
        s = s .. ', padding=' .. R(p)
    end
    if any_ne(self.dilation, 1) then s = s .. ', dilation=' .. R(self.dilation) end
    if self.output_padding and any_ne(self.output_padding, 0) then
        s = s .. ', output_padding=' .. R(self.output_padding)
    end
    if self.groups ~= 1 then s = s .. ', groups=' .. self.groups end
    if self.bias == nil then s = s .. ', bias=False' end
    if self.padding_mode ~= 'zeros' then s = s .. ', padding_mode=' .. self.padding_mode end
    return s
end

return conv_common
