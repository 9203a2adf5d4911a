-- spec/data/data_resume_spec.lua: a run with dropout and random transforms, stopped in the middle
-- of an epoch and resumed from a checkpoint (model, optimizer, the engine RNG's state and the
-- DataLoader's state_dict), ends bit for bit where the run that never stopped ends: the same
-- parameters and the same RNG state. Without the loader's state the resumed pass draws its
-- shuffle and base seed a second time, and everything after is one draw behind (checked too).
-- Shuffled by the engine RNG (RandomSampler without a seed), with 0 and 2 workers.
local H = require 'helpers'
local ddpl = H.ddpl
local nn, F, optim, data = ddpl.nn, ddpl.F, ddpl.optim, ddpl.data
local T = data.transforms

local Augmented = data.Dataset:extend('Augmented')
function Augmented:init(x, y)
    self.x, self.y = x, y
    self.t = T.Compose({T.RandomCrop(8, {padding = 2}), T.RandomHorizontalFlip()})
end
function Augmented:len() return self.x:size(0) end
function Augmented:get(i) return self.t(self.x[i]), self.y[i] end

local function setup(workers)
    ddpl.manual_seed(1)
    local x = ddpl.randn(48, 1, 8, 8)
    local y = ddpl.randint(0, 4, {48})
    local net = nn.Sequential(nn.Flatten(), nn.Linear(64, 32), nn.ReLU(), nn.Dropout(0.3),
                              nn.Linear(32, 4))
    local opt = optim.SGD(net:parameters(), {lr = 0.1, momentum = 0.9})
    local loader = data.DataLoader(Augmented(x, y), {batch_size = 8, shuffle = true,
                                                     num_workers = workers})
    return net, opt, loader
end

local function step(net, opt, x, y)
    opt:zero_grad()
    F.cross_entropy(net(x), y):backward()
    opt:step()
end

-- Trains `epochs` passes; with stop_at = {epoch, step} returns the checkpoint taken after that
-- step instead of going on.
local function train(net, opt, loader, first_epoch, epochs, skip, stop_at)
    for epoch = first_epoch, epochs do
        local s = 0
        for x, y in loader:iter() do
            s = s + 1
            if epoch == first_epoch and s <= skip then goto continue end
            step(net, opt, x, y)
            if stop_at and epoch == stop_at[1] and s == stop_at[2] then
                return {model = net:state_dict(), opt = opt:state_dict(),
                        rng = ddpl.get_rng_state(), loader = loader:state_dict(), epoch = epoch,
                        step = s}
            end
            ::continue::
        end
    end
end

-- bit for bit: every element equal (the RNG state's bytes as numbers, exactly)
local function equal(a, b)
    return a:numel() == b:numel() and (a:double() - b:double()):abs():sum():item() == 0
end

local function same_run(a_net, b_net, rng_a, rng_b)
    local sa, sb = a_net:state_dict(), b_net:state_dict()
    for k, v in pairs(sa) do
        if not equal(v, sb[k]) then return false, 'parameter ' .. k end
    end
    if not equal(rng_a, rng_b) then return false, 'the RNG state' end
    return true
end

describe('DataLoader state_dict', function()
    for _, workers in ipairs({0, 2}) do
        it(('resumes mid-epoch bit for bit with dropout and random transforms (%d workers)')
            :format(workers), function()
            -- the run that never stops
            local want, opt, loader = setup(workers)
            train(want, opt, loader, 1, 3, 0)
            local want_rng = ddpl.get_rng_state()
            loader:close()

            -- stopped at epoch 2, step 3; saved through a file, as a checkpoint is
            local net
            net, opt, loader = setup(workers)
            local ck = train(net, opt, loader, 1, 3, 0, {2, 3})
            local path = os.tmpname()
            ddpl.save(ck, path)
            loader:close()

            for _, with_loader_state in ipairs({true, false}) do
                local back = ddpl.load(path)
                local net2, opt2, loader2 = setup(workers)
                net2:load_state_dict(back.model)
                opt2:load_state_dict(back.opt)
                ddpl.set_rng_state(back.rng)
                if with_loader_state then loader2:load_state_dict(back.loader) end
                train(net2, opt2, loader2, back.epoch, 3, back.step)
                local ok, what = same_run(want, net2, want_rng, ddpl.get_rng_state())
                if with_loader_state then
                    assert.is_true(ok, 'differs from the uninterrupted run: ' .. tostring(what))
                else -- what the loader's state is for
                    assert.is_false(ok, 'resumed exactly without the loader state: no test')
                end
                loader2:close()
            end
            os.remove(path)
        end)
    end

    it('checks what it is given', function()
        local loader = data.DataLoader(data.TensorDataset(ddpl.arange(0, 4)), {batch_size = 2})
        assert.are.same({passes = 0}, loader:state_dict())
        H.assert_error(function() loader:load_state_dict(3) end,
                       'DataLoader:load_state_dict: expected a table from state_dict()', 'number')
        H.assert_error(function() loader:load_state_dict({passes = 1, rng = 'x'}) end,
                       '`rng` must be the tensor state_dict() gave, got string')
        H.assert_error(function() loader:load_state_dict({passes = 0, sampler_epoch = 2}) end,
                       '`sampler_epoch` does not fit')
        for _ in loader:iter() do end
        local st = loader:state_dict()
        assert.are.equal(0, st.passes) -- the pass in progress (or last) started as pass 0
        assert.is_true(ddpl.is_tensor(st.rng))
    end)
end)
