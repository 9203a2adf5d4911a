-- lua/ddplua/nn/ModuleList.lua: nn.ModuleList([{m1, m2, ...}]).
-- defines: ModuleList: holds modules so that they are registered (parameters, state_dict,
--          to, train); children named '0', '1', ...; list[i] (0-based, negative from the
--          end), #list, list:append(m), list:extend({...}), list:iter(). It has no forward:
--          the owner calls its elements, e.g. `for _, layer in self.layers:iter() do`.
local Module = require 'ddplua.nn.Module'
local Sequential = require 'ddplua.nn.Sequential'

local ModuleList = Module:extend('ModuleList')

function ModuleList:init(mods)
    if mods ~= nil and (type(mods) ~= 'table' or Module.is(mods)) then
        error('ModuleList: expected a list of modules, got ' .. (Module.is(mods) and 'a Module'
              or type(mods)), 2)
    end
    self:extend(mods or {})
end

-- The indexing and iteration helpers are Sequential's (same naming scheme).
ModuleList.len = Sequential.len
ModuleList.named_children_all = Sequential.named_children_all
ModuleList.getitem = Sequential.getitem
ModuleList.append = Sequential.append
ModuleList.iter = Sequential.iter

function ModuleList:extend(mods)
    for i, m in ipairs(mods) do
        if not Module.is(m) then
            error(string.format('ModuleList: element %d is a %s, not a Module', i, type(m)), 3)
        end
        self:append(m)
    end
    return self
end

function ModuleList:forward()
    error('ModuleList: a ModuleList has no forward; call its modules (list:iter(), list[i])', 2)
end

return ModuleList
