-- lua/ddplua/nn/ParameterDict.lua: nn.ParameterDict([entries]).
-- defines: ParameterDict: parameters registered under string keys (state_dict names are the
--          keys); a plain tensor is made an nn.Parameter, as PyTorch 1.13 does. Entries and
--          methods as ModuleDict's (dict_container.lua); map entries are sorted by key, which
--          is also what PyTorch does with a plain dict.
local ddpl = require 'ddplua'
local Module = require 'ddplua.nn.Module'
local Parameter = require 'ddplua.nn.Parameter'
local dict_container = require 'ddplua.nn.dict_container'
local parameter_repr = require 'ddplua.nn.parameter_repr'

local ParameterDict = Module:extend('ParameterDict')

dict_container.install(ParameterDict, 'params', function(v)
    if Parameter.is(v) then return true, v end
    if ddpl.is_tensor(v) then return true, Parameter(v) end
    return false
end, 'a tensor')

function ParameterDict:extra_repr()
    local lines = {}
    for k, p in self:items() do lines[#lines + 1] = parameter_repr(k, p, 'typename') end
    return table.concat(lines, '\n')
end

return ParameterDict
