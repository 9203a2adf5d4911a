-- lua/ddplua/nn/ParameterList.lua: nn.ParameterList([{p1, p2, ...}]).
-- defines: ParameterList: parameters named '0', '1', ... (state_dict names as PyTorch's); a
--          plain tensor is made an nn.Parameter (PyTorch 1.13 does too). list[i] (0-based,
--          negative from the end), #list, list:append(p), list:extend({...}), list:iter()
--          (`for i, p in list:iter() do`, i 0-based). No forward.
local ddpl = require 'ddplua'
local Module = require 'ddplua.nn.Module'
local Parameter = require 'ddplua.nn.Parameter'
local State = require 'ddplua.nn.module_state'
local parameter_repr = require 'ddplua.nn.parameter_repr'

local ParameterList = Module:extend('ParameterList')

function ParameterList:init(params)
    if params ~= nil and (type(params) ~= 'table' or ddpl.is_tensor(params)) then
        error('ParameterList: expected a list of tensors, got '
              .. (ddpl.is_tensor(params) and 'a tensor' or type(params)), 2)
    end
    self:extend(params or {})
end

local function all(self)
    local out = {}
    for _, e in ipairs(State.entries(self, 'params')) do
        if e[2] ~= nil then out[#out + 1] = e[2] end
    end
    return out
end

function ParameterList:len() return #all(self) end

function ParameterList:getitem(i)
    local ps = all(self)
    local j = i < 0 and #ps + i or i
    if not ps[j + 1] then
        error(string.format('ParameterList: index %d is out of range for %d parameters', i, #ps),
              3)
    end
    return ps[j + 1]
end

function ParameterList:append(p)
    if not ddpl.is_tensor(p) then
        error('ParameterList:append: expected a tensor, got ' .. type(p), 2)
    end
    self:register_parameter(tostring(self:len()), Parameter.is(p) and p or Parameter(p))
    return self
end

function ParameterList:extend(params)
    for i, p in ipairs(params) do
        if not ddpl.is_tensor(p) then
            error(string.format('ParameterList: element %d is a %s, not a tensor', i, type(p)), 3)
        end
        self:append(p)
    end
    return self
end

function ParameterList:iter()
    local ps, k = all(self), 0
    return function()
        k = k + 1
        if ps[k] then return k - 1, ps[k] end
    end
end

function ParameterList:extra_repr()
    local lines = {}
    for i, p in self:iter() do lines[#lines + 1] = parameter_repr(i, p, 'dtype') end
    return table.concat(lines, '\n')
end

function ParameterList:forward()
    error('ParameterList: a ParameterList has no forward; use its parameters', 2)
end

return ParameterList
