-- lua/ddplua/nn/Parameter.lua: nn.Parameter, the mark that makes a tensor a module parameter.
-- defines: nn.Parameter(t [, requires_grad=true]) -> a leaf tensor sharing t's storage,
--          nn.Parameter.is(v) -> whether v was made by nn.Parameter.
--
-- A tensor is a userdata whose fields are fixed by the binding, so the mark lives in a
-- weak-keyed set instead of on the tensor: a parameter that is no longer referenced anywhere
-- leaves the set with it. Assigning a marked tensor to a module field registers it
-- (nn.Module's __newindex asks Parameter.is). Like torch.nn.Parameter, the result is a new
-- leaf (t detached) so it never carries t's history.
local ddpl = require 'ddplua'

local marked = setmetatable({}, {__mode = 'k'})

local Parameter = {}

function Parameter.is(v)
    return marked[v] == true
end

local function new(_, t, requires_grad)
    if not ddpl.is_tensor(t) then
        error('nn.Parameter: expected a tensor, got ' .. type(t), 2)
    end
    if type(requires_grad) == 'table' then requires_grad = requires_grad.requires_grad end
    if requires_grad == nil then requires_grad = true end
    local p = t:detach()
    if requires_grad then
        local ok, err = pcall(function() p.requires_grad = true end)
        if not ok then
            error('nn.Parameter: a ' .. p.dtype .. ' tensor cannot require grad (' .. tostring(err)
                  .. '); pass requires_grad=false for integer parameters', 2)
        end
    end
    marked[p] = true
    return p
end

return setmetatable(Parameter, {
    __call = new,
    __tostring = function() return 'nn.Parameter' end,
})
