-- lua/ddplua/nn/init_functions.lua: nn.init, PyTorch's parameter initialisers.
-- defines: calculate_gain, calculate_fan_in_and_fan_out, uniform_, normal_, constant_, zeros_,
--          ones_, kaiming_uniform_, kaiming_normal_, xavier_uniform_, xavier_normal_.
--
-- Formulas and defaults are torch.nn.init's (He et al. 2015 for kaiming, Glorot & Bengio 2010
-- for xavier). Each fills the tensor in place without recording autograd (a parameter
-- requires grad, and in-place changes to one are refused while grad mode is on) and returns it.
-- Random values come from the engine's generator, so ddpl.manual_seed makes them reproducible.
-- Optional arguments may be given positionally, as in PyTorch, or in an options table:
--     init.kaiming_uniform_(w, math.sqrt(5))  ==  init.kaiming_uniform_(w, {a = math.sqrt(5)})
local ddpl = require 'ddplua'

local init = {}

local function check_tensor(fname, t)
    if not ddpl.is_tensor(t) then
        error(string.format('nn.init.%s: expected a tensor, got %s', fname, type(t)), 3)
    end
end

-- Positional optional arguments or one options table -> values in the order of names.
local function args(names, ...)
    local first = ...
    if type(first) == 'table' and not ddpl.is_tensor(first) then
        local out = {}
        for i, n in ipairs(names) do out[i] = first[n] end
        return table.unpack(out, 1, #names)
    end
    return ...
end

local function fill(t, fn)
    ddpl.no_grad(fn)
    return t
end

-- Gain for a nonlinearity: the factor that keeps the variance of activations at 1.
function init.calculate_gain(nonlinearity, param)
    local linear = {linear = 1, conv1d = 1, conv2d = 1, conv3d = 1, conv_transpose1d = 1,
                    conv_transpose2d = 1, conv_transpose3d = 1, sigmoid = 1}
    if linear[nonlinearity] then return 1 end
    if nonlinearity == 'tanh' then return 5 / 3 end
    if nonlinearity == 'relu' then return math.sqrt(2) end
    if nonlinearity == 'selu' then return 3 / 4 end
    if nonlinearity == 'leaky_relu' then
        local slope = param == nil and 0.01 or param
        if type(slope) ~= 'number' then
            error('nn.init.calculate_gain: negative_slope ' .. tostring(slope)
                  .. ' is not a number', 2)
        end
        return math.sqrt(2 / (1 + slope * slope))
    end
    error('nn.init.calculate_gain: unsupported nonlinearity ' .. tostring(nonlinearity), 2)
end

-- fan_in = size(1) * receptive field, fan_out = size(0) * receptive field.
function init.calculate_fan_in_and_fan_out(t)
    check_tensor('calculate_fan_in_and_fan_out', t)
    local shape = t:shape()
    if #shape < 2 then
        error('nn.init: fan in and fan out cannot be computed for a tensor with fewer than 2 '
              .. 'dimensions (shape [' .. table.concat(shape, ',') .. '])', 3)
    end
    local receptive = 1
    for i = 3, #shape do receptive = receptive * shape[i] end
    return shape[2] * receptive, shape[1] * receptive
end

function init.uniform_(t, ...)
    check_tensor('uniform_', t)
    local a, b = args({'a', 'b'}, ...)
    return fill(t, function() t:uniform_(a or 0, b or 1) end)
end

function init.normal_(t, ...)
    check_tensor('normal_', t)
    local mean, std = args({'mean', 'std'}, ...)
    return fill(t, function() t:normal_(mean or 0, std or 1) end)
end

function init.constant_(t, val)
    check_tensor('constant_', t)
    if type(val) ~= 'number' then
        error('nn.init.constant_: expected a number value, got ' .. type(val), 2)
    end
    return fill(t, function() t:fill_(val) end)
end

function init.zeros_(t)
    check_tensor('zeros_', t)
    return fill(t, function() t:zero_() end)
end

function init.ones_(t)
    check_tensor('ones_', t)
    return fill(t, function() t:fill_(1) end)
end

local function kaiming_std(fname, t, a, mode, nonlinearity)
    check_tensor(fname, t)
    mode = mode or 'fan_in'
    if mode ~= 'fan_in' and mode ~= 'fan_out' then
        error(string.format("nn.init.%s: mode must be 'fan_in' or 'fan_out', got %s", fname,
                            tostring(mode)), 3)
    end
    local fan_in, fan_out = init.calculate_fan_in_and_fan_out(t)
    local fan = mode == 'fan_in' and fan_in or fan_out
    local gain = init.calculate_gain(nonlinearity or 'leaky_relu', a or 0)
    return fan > 0 and gain / math.sqrt(fan) or 0
end

-- kaiming_uniform_(t [, a=0, mode='fan_in', nonlinearity='leaky_relu']):
-- U(-b, b) with b = gain * sqrt(3 / fan).
function init.kaiming_uniform_(t, ...)
    local a, mode, nonlinearity = args({'a', 'mode', 'nonlinearity'}, ...)
    local bound = math.sqrt(3) * kaiming_std('kaiming_uniform_', t, a, mode, nonlinearity)
    return fill(t, function() t:uniform_(-bound, bound) end)
end

-- kaiming_normal_(t [, a=0, mode='fan_in', nonlinearity='leaky_relu']): N(0, gain^2 / fan).
function init.kaiming_normal_(t, ...)
    local a, mode, nonlinearity = args({'a', 'mode', 'nonlinearity'}, ...)
    local std = kaiming_std('kaiming_normal_', t, a, mode, nonlinearity)
    return fill(t, function() t:normal_(0, std) end)
end

local function xavier_std(fname, t, gain)
    check_tensor(fname, t)
    local fan_in, fan_out = init.calculate_fan_in_and_fan_out(t)
    return (gain or 1) * math.sqrt(2 / (fan_in + fan_out))
end

-- xavier_uniform_(t [, gain=1]): U(-b, b) with b = gain * sqrt(6 / (fan_in + fan_out)).
function init.xavier_uniform_(t, ...)
    local gain = args({'gain'}, ...)
    local bound = math.sqrt(3) * xavier_std('xavier_uniform_', t, gain)
    return fill(t, function() t:uniform_(-bound, bound) end)
end

-- xavier_normal_(t [, gain=1]): N(0, gain^2 * 2 / (fan_in + fan_out)).
function init.xavier_normal_(t, ...)
    local gain = args({'gain'}, ...)
    local std = xavier_std('xavier_normal_', t, gain)
    return fill(t, function() t:normal_(0, std) end)
end

return init
