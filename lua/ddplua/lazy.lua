-- lua/ddplua/lazy.lua: tables whose entries are modules required on first use.
-- defines: lazy(names [, t]) -> t (a new table by default) whose t[key] requires names[key] the
--          first time it is read and keeps the module (keys not in names read as nil).
--
-- Loading a library's every class up front would cost start-up time for what a script never
-- uses (a training script does not need the CIFAR-10 reader), so the folders' init.lua files
-- list their modules and hand the list to this.
return function(names, t)
    return setmetatable(t or {}, {
        __index = function(tbl, key)
            local name = names[key]
            if not name then return nil end
            local mod = require(name)
            rawset(tbl, key, mod)
            return mod
        end,
    })
end
