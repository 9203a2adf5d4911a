-- spec/api/error_positions_spec.lua: an error raised inside the library's Lua code for a bad
-- argument points at the user's line (this file), not at a line of lua/ddplua/: constructors of
-- every kind of class (data, optim, nn, utils: class.reraise), a module's forward called from
-- user code (the outermost call), functions checked in Lua. Each case is one line, and the
-- message must start with this file's name and that line.
local ddpl = require 'ddplua'
local nn, optim, data, F = ddpl.nn, ddpl.optim, ddpl.data, ddpl.F

local function params() return nn.Linear(2, 2):parameters() end
local ds = data.TensorDataset(ddpl.zeros(4))
local Sampler, StepLR = data.DistributedSampler, optim.lr_scheduler.StepLR
local two_layers = nn.Sequential(nn.Linear(2, 3), nn.Linear(4, 1))

-- {what, function raising on its one line}: the line is read from debug info of the function
local cases = {
    {'DataLoader batch_size', function() data.DataLoader(ds, {batch_size = 0}) end},
    {'DataLoader option', function() data.DataLoader(ds, {foo = 1}) end},
    {'TensorDataset sizes', function() data.TensorDataset(ddpl.zeros(4), ddpl.zeros(3)) end},
    {'DistributedSampler rank', function() Sampler(ds, {num_replicas = 2, rank = 5}) end},
    {'SGD lr', function() optim.SGD(params(), {lr = -1}) end},
    {'Adam betas', function() optim.Adam(params(), {betas = {2, 0.9}}) end},
    {'StepLR', function() StepLR(optim.SGD(params(), {lr = 1}), {step_size = 0}) end},
    {'Linear size', function() nn.Linear(-1, 2) end},
    {'Linear forward', function() nn.Linear(2, 2)(ddpl.zeros(3, 3)) end},
    {'Conv2d forward', function() nn.Conv2d(1, 1, 3)(ddpl.zeros(2, 2)) end},
    {'Sequential child', function() two_layers(ddpl.zeros(1, 2)) end},
    {'Sequential argument', function() nn.Sequential(3) end},
    {'GradScaler', function() ddpl.amp.GradScaler({init_scale = -1}) end},
    {'MetricsLogger', function() ddpl.utils.MetricsLogger(3) end},
    {'Normalize', function() data.transforms.Normalize({1}, {0})(ddpl.zeros(1, 2, 2)) end},
    {'cross_entropy', function() F.cross_entropy(ddpl.zeros(2, 3), ddpl.zeros(2)) end},
}

describe('errors for bad arguments', function()
    for _, c in ipairs(cases) do
        it('point at the caller: ' .. c[1], function()
            local line = debug.getinfo(c[2], 'S').linedefined
            local ok, err = pcall(c[2])
            assert.is_false(ok, 'no error')
            err = tostring(err)
            assert.truthy(err:find('^[^\n]*error_positions_spec%.lua:' .. line .. ': '),
                          ('expected this file, line %d, in front of: %s'):format(line, err))
            assert.is_nil(err:find('ddplua/', 1, true), err)
        end)
    end
end)
