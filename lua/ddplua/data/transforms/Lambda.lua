-- lua/ddplua/data/transforms/Lambda.lua: a user's function as a transform.
-- defines: Lambda(fn): Lambda(fn)(x) = fn(x).
--
-- A random Lambda should draw from data.transform_rng (see transform_rng.lua) so that its
-- draws, like RandomCrop's, do not depend on num_workers.
local Transform = require 'ddplua.data.transforms.Transform'

local Lambda = Transform:extend('Lambda')

function Lambda:init(fn)
    Transform.check_callable('Lambda', 'the argument', fn, 3)
    self.fn = fn
end

function Lambda:forward(x)
    return self.fn(x)
end

function Lambda:__tostring() return 'Lambda()' end

return Lambda
