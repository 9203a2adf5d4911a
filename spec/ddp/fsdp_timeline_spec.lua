-- spec/ddp/fsdp_timeline_spec.lua: the DDPLUA_FSDP_TIMELINE trace of nn.FSDP (lua/ddplua/nn/
-- parallel/fsdp_timeline.lua, in the DDP timeline's format) of a 2-rank FULL_SHARD run with
-- forward_prefetch (spec/ddp/workers/fsdp_equiv.lua: a small GPT whose two blocks and the root
-- are the units, trained against one process), written at exit: per step the forward, each
-- unit's forward, its gathers in forward and backward, its reduce-scatter, the backward and the
-- final wait; from the second step the gathers of the units after the first are prefetched and
-- run while the unit before computes, and a unit's reduce-scatter is still in flight when the
-- next unit's is issued (its backward computed meanwhile). Every run is under `timeout`.
local S = require 'shell_util'
local json = require 'ddplua.json'
local script = S.src .. '/spec/ddp/workers/fsdp_equiv.lua'

-- the units of fsdp_equiv's GPT on 2 ranks: padded flat sizes and shard sizes (elements)
local UNITS = {['(root)'] = {full = 576, shard = 288}, ['blocks.0'] = {full = 1104, shard = 552},
               ['blocks.1'] = {full = 1104, shard = 552}}
local ORDER = {'(root)', 'blocks.0', 'blocks.1'} -- the order the units gather in forward

describe('DDPLUA_FSDP_TIMELINE', function()
    it('shows gathers and reduce-scatters beside compute, prefetched from the second step',
        function()
            local path = os.tmpname()
            os.remove(path)
            local out, code = S.launch(script, 2, 'strategy=FULL_SHARD model=gpt wrap=classes '
                .. 'fprefetch=1 twin=0 steps=3', 'DDPLUA_FSDP_TIMELINE=' .. S.q(path), 120)
            S.expect_ranks(out, code, 'FSDP_OK', 2)
            local text = S.slurp(path)
            os.remove(path)
            assert.are_not.equal('', text, 'no trace was written')
            local doc = json.decode(text, path)
            assert.are.same({world_size = 2, backend = 'gloo'}, doc.otherData)
            -- steps[s][name] = list of events
            local steps = {}
            for _, ev in ipairs(doc.traceEvents) do
                assert.are.equal('X', ev.ph)
                assert.is_number(ev.ts)
                local s = ev.args.step
                steps[s] = steps[s] or {}
                local key = ev.name
                if ev.args.phase then key = key .. ' ' .. ev.args.phase end
                steps[s][key] = steps[s][key] or {}
                table.insert(steps[s][key], ev)
            end
            assert.are.equal(3, #steps)
            local function one(s, key)
                local list = steps[s][key]
                assert(list and #list == 1, ('step %d: %d "%s" events'):format(s,
                    list and #list or 0, key))
                return list[1]
            end
            local function ends(ev) return ev.ts + ev.dur end
            for s = 1, 3 do
                assert.are.equal(s < 3 and 1 or nil, steps[s].step and #steps[s].step, s)
                for _, name in ipairs({'forward', 'backward', 'final wait'}) do one(s, name) end
                local bwd = one(s, 'backward')
                for i, u in ipairs(ORDER) do
                    local fwd = one(s, 'forward ' .. u)
                    local g = one(s, 'all_gather ' .. u .. ' forward')
                    local gb = one(s, 'all_gather ' .. u .. ' backward')
                    local rs = one(s, 'reduce_scatter ' .. u)
                    assert.are.equal(UNITS[u].full * 4, g.args.bytes)
                    assert.are.equal(UNITS[u].full * 4, gb.args.bytes)
                    assert.are.equal(UNITS[u].shard * 4, rs.args.bytes)
                    assert.are.equal(1, g.tid)
                    assert.are.equal(2, rs.tid)
                    assert.is_true(ends(g) <= fwd.ts, ('step %d: %s computed before its gather'
                        .. ' ended'):format(s, u))
                    assert.is_true(rs.ts >= bwd.ts and ends(rs) <= ends(bwd) + 1)
                    -- the first forward records the order: nothing prefetched; then every unit
                    -- after the first is gathered while the one before it computes
                    local prefetched = s > 1 and i > 1
                    assert.are.equal(prefetched and 1 or 0, g.args.prefetch,
                        ('step %d: %s'):format(s, u))
                    if prefetched then
                        local before = one(s, 'forward ' .. ORDER[i - 1])
                        assert.is_true(g.ts < ends(before), ('step %d: the gather of %s did not '
                            .. 'start before %s finished its forward'):format(s, u, ORDER[i - 1]))
                    end
                end
                -- backward: blocks.1 reduces first, still in flight when blocks.0 (whose
                -- backward ran meanwhile) issues its reduce-scatter
                local r1 = one(s, 'reduce_scatter blocks.1')
                local r0 = one(s, 'reduce_scatter blocks.0')
                assert.is_true(r1.ts < r0.ts and ends(r1) > r0.ts, 'step ' .. s)
            end
        end)
end)
