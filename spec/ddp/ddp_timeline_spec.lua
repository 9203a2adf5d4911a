-- spec/ddp/ddp_timeline_spec.lua: the DDPLUA_DDP_TIMELINE trace (lua/ddplua/nn/parallel/
-- ddp_timeline.lua) of a 2-rank run that never calls model:write_timeline() (spec/ddp/
-- timeline_exit.lua): written at exit when the script ends normally and when it fails, with the
-- fields tools/ddp_predict.lua reads (otherData.world_size, "step" and "forward" spans, each
-- bucket's ready time and size, the allreduce spans), steps under no_sync left out; and the
-- predictor reading the real trace. Every run is under `timeout`.
local S = require 'shell_util'
local json = require 'ddplua.json'
local script = S.src .. '/spec/ddp/workers/timeline_exit.lua'

-- 16*64 + 64 + 64*64 + 64 + 64*4 + 4 float32 parameters
local PARAM_BYTES = (16 * 64 + 64 + 64 * 64 + 64 + 64 * 4 + 4) * 4

local function run(path, args)
    return S.sh(('DDPLUA_DDP_TIMELINE=%s timeout 60 %s %s --nproc 2 -- %s'):format(S.q(path),
        S.q(S.bin), S.q(script), args))
end

-- The trace's events by step: {[step] = {names = {name = count}, bytes = sum of bucket sizes}},
-- and how many steps there are.
local function read(path)
    local text = S.slurp(path)
    assert.are_not.equal('', text, 'no trace was written at ' .. path)
    local doc = json.decode(text, path)
    local steps, n = {}, 0
    for _, ev in ipairs(doc.traceEvents) do
        local s = ev.args.step
        if not steps[s] then n = n + 1 end
        steps[s] = steps[s] or {names = {}, bytes = 0}
        local name = ev.name:gsub('%d+', 'N')
        steps[s].names[name] = (steps[s].names[name] or 0) + 1
        if name == 'bucket N ready' then steps[s].bytes = steps[s].bytes + ev.args.bytes end
        assert.is_number(ev.ts)
    end
    return doc, steps, n
end

describe('DDPLUA_DDP_TIMELINE', function()
    it('is written at exit without write_timeline(), with what the predictor reads', function()
        local path = os.tmpname()
        os.remove(path)
        local out, code = run(path, 'steps=4')
        assert.are.equal(0, code, out)
        local buckets = tonumber(out:match('TIMELINE_RUN 0 buckets=(%d+)'))
        assert.truthy(buckets and buckets >= 2, out)
        local doc, steps, n_steps = read(path)
        assert.are.same({world_size = 2, backend = 'gloo'}, doc.otherData)
        assert.are.equal(4, n_steps)
        for s = 1, 4 do
            local n = steps[s].names
            -- the last step has no "step" span: no forward came after it
            assert.are.equal(s < 4 and 1 or nil, n.step, 'step ' .. s)
            assert.are.equal(1, n.forward, 'step ' .. s)
            assert.are.equal(1, n.backward, 'step ' .. s)
            assert.are.equal(1, n['final wait'], 'step ' .. s)
            assert.are.equal(buckets, n['bucket N ready'], 'step ' .. s)
            assert.are.equal(buckets, n['allreduce bucket N'], 'step ' .. s)
            assert.are.equal(PARAM_BYTES, steps[s].bytes, 'step ' .. s)
        end
        -- and the predictor reads it
        local pred, pcode = S.sh(('timeout 60 %s %s %s --ranks 2,4'):format(S.q(S.bin),
            S.q(S.src .. '/tools/ddp_predict.lua'), S.q(path)))
        os.remove(path)
        assert.are.equal(0, pcode, pred)
        assert.truthy(pred:find('world size 2 %(gloo%), 2 of 4 traced steps used'), pred)
        assert.truthy(pred:find('ranks 4: step [%d.]+ ms'), pred)
    end)

    it('is written at exit when the script fails', function()
        local path = os.tmpname()
        os.remove(path)
        local out, code = run(path, 'steps=3 fail=1')
        assert.are_not.equal(0, code, out)
        assert.truthy(out:find('failing on purpose after the steps', 1, true), out)
        local _, steps, n_steps = read(path)
        os.remove(path)
        assert.are.equal(3, n_steps)
        assert.are.equal(1, steps[2].names.step)
        assert.are.equal(1, steps[3].names.backward)
    end)

    it('leaves out steps under no_sync, and ends the last synchronised step at its forward',
        function()
            local path = os.tmpname()
            os.remove(path)
            local out, code = run(path, 'steps=2 nosync=1')
            assert.are.equal(0, code, out)
            local _, steps, n_steps = read(path)
            os.remove(path)
            assert.are.equal(2, n_steps)
            assert.are.equal(1, steps[2].names.step)
        end)
end)
