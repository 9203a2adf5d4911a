-- lua/ddplua/nn/ModuleDict.lua: nn.ModuleDict([entries]).
-- defines: ModuleDict: modules registered under string keys (state_dict names 'key.weight',
--          ...); entries a list of {key, module} pairs (kept in order) or {key = module}
--          (sorted by key: Lua tables have no insertion order). d[key], d[key] = m, #d,
--          d:keys(), d:values(), d:items(), d:contains(k), d:pop(k), d:clear(), d:update(e),
--          `for k, m in d:items() do` (dict_container.lua). No forward.
local Module = require 'ddplua.nn.Module'
local dict_container = require 'ddplua.nn.dict_container'

local ModuleDict = Module:extend('ModuleDict')

dict_container.install(ModuleDict, 'modules', function(v) return Module.is(v), v end,
                       'a Module')

return ModuleDict
