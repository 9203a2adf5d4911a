-- spec/ddp/ddp_powersgd_spec.lua: DistributedDataParallel's 'powersgd' comm hook on 2 to 4 real
-- processes (the checks run inside the ranks: spec/ddp/workers/powersgd.lua says what each case
-- checks) and its device_ids/output_device checks, the CUDA ones on stand-in parameters (tables
-- with a device field: the check reads nothing else), so they run on a machine without a GPU.
local S = require 'shell_util'
local devices = require 'ddplua.nn.parallel.device_ids'
local src = S.src
local script = src .. '/spec/ddp/workers/powersgd.lua'

-- Runs a case on n ranks and expects exit status 0 and the marker line from each.
local function run_ok(n, case, extra)
    local out, code = S.launch(script, n, case[1] .. ' ' .. (case[2] or ''), extra, 120)
    S.expect_ranks(out, code, 'POWERSGD_OK ' .. case[1]:gsub('%p', '%%%0') .. ' ', n)
    return out
end

describe("DDP register_comm_hook('powersgd')", function()
    -- 25: one bucket holding weights and biases; 1e-6: one bucket per parameter
    for _, cap in ipairs({'25', '0.000001'}) do
        it('before start_powerSGD_iter equals the plain allreduce bit for bit, then compresses '
            .. '(bucket_cap_mb ' .. cap .. ')', function()
            run_ok(2, {'vanilla', cap})
        end)
        it('at full rank equals the exact average (float64, 1e-9; bucket_cap_mb ' .. cap .. ')',
            function()
                run_ok(2, {'fullrank', cap})
            end)
        it('error feedback: applied updates + kept error = own gradients (bucket_cap_mb ' .. cap
            .. ')', function()
            run_ok(2, {'feedback', cap})
        end)
        it('warm start: one power iteration from the kept Q; off: a new Q each step '
            .. '(bucket_cap_mb ' .. cap .. ')', function()
            run_ok(2, {'warmstart', cap})
        end)
    end
    it('on 3 and 4 ranks, and over Gloo TCP', function()
        run_ok(3, {'vanilla'}) -- 1/3 is inexact: the same scaling as the reducer's allreduce
        run_ok(4, {'vanilla', '0.000001'})
        run_ok(4, {'fullrank'})
        run_ok(4, {'feedback'})
        run_ok(3, {'vanilla'}, 'DDPLUA_SHM=0')
        run_ok(2, {'fullrank', '0.000001'}, 'DDPLUA_SHM=0')
    end)
    it('rejects bad options, and device_ids for a CPU module, naming what was wrong', function()
        run_ok(2, {'errors'})
    end)
end)

describe('DDP device_ids', function()
    local function params(...)
        local out = {}
        for i, d in ipairs({...}) do out[i] = {device = d} end
        return out
    end
    local function rejects(ids, out_dev, ps, needle)
        local ok, err = pcall(devices.check, ids, out_dev, ps)
        assert.is_false(ok)
        assert.truthy(tostring(err):find(needle, 1, true), tostring(err))
    end

    it('names the module device for a module on one CUDA device', function()
        local ps = params('cuda:1', 'cuda:1')
        assert.are.equal('cuda:1', devices.check({1}, nil, ps))
        assert.are.equal('cuda:1', devices.check({'cuda:1'}, 1, ps))
        assert.is_nil(devices.check(nil, nil, ps))
        assert.is_nil(devices.check({}, nil, ps))
        assert.is_nil(devices.check(false, false, params('cpu', 'cpu')))
    end)
    it("rejects device_ids that disagree with the parameters' device", function()
        rejects({0}, nil, params('cuda:1'), "device_ids {0} names cuda:0 but the module's "
            .. "parameters are on cuda:1 (move the module there first: module:to('cuda:0'))")
        rejects({1}, 0, params('cuda:1'), "output_device 0 is not the module's device cuda:1")
        rejects({0, 1}, nil, params('cuda:0'),
            'device_ids can only be nil or contain a single element, got {0, 1}')
        rejects({'gpu0'}, nil, params('cuda:0'),
            "device_ids[1] must be a CUDA device index N, 'cuda:N' or 'cuda', got gpu0")
        rejects({-1}, nil, params('cuda:0'), 'got -1')
    end)
    it('rejects device_ids for CPU modules and modules over several devices', function()
        rejects({0}, nil, params('cpu'), 'but got device_ids {0}, output_device nil and module '
            .. 'parameters on cpu')
        rejects({0}, nil, params('cuda:0', 'cuda:1'), 'module parameters on cuda:0, cuda:1')
        rejects(nil, nil, params('cpu', 'cuda:0'),
            "the module's parameters must be on one type of device, but they are on cpu, cuda:0")
    end)
    it('moves the inputs of forward (tensors, also inside tables) to the device', function()
        local ddpl = require 'ddplua'
        local x = ddpl.ones(2)
        -- no device: the arguments themselves, untouched
        local a, b, c = devices.to_device(nil, x, 3, nil)
        assert.are.equal(x, a)
        assert.are.equal(3, b)
        assert.is_nil(c)
        local moved = {devices.to_device('cpu', {x, {y = x}}, 'k')}
        assert.are.equal('cpu', moved[1][1].device)
        assert.are.equal(moved[1][1], moved[1][2].y) -- already there: the same tensor
        assert.are.equal('k', moved[2])
    end)
end)
