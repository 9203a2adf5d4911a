-- spec/ddp/zero_redundancy_spec.lua: optim.ZeroRedundancyOptimizer (ZeRO stage 1) on real processes
-- (`ddplua script --nproc N`, every run under `timeout`), on shared memory and on Gloo TCP
-- (DDPLUA_SHM=0): wrapping Adam and AdamW, with gradients averaged by DDP or by all_reduce, with
-- one and two parameter groups, buckets of one parameter or of a whole shard, a subgroup as
-- process_group, add_param_group mid-training and an lr scheduler, its parameters equal the
-- plain optimizer's after every step (to 1e-6; they come out bitwise equal) and one process's on
-- the global batch; each rank's state is its shard's only, the shards cover every parameter
-- once as PyTorch's greedy partition assigns them; consolidate_state_dict(to) + state_dict()
-- equals the plain optimizer's state dict; load_state_dict resumes exactly. Then every error
-- case. The checks run inside the ranks (spec/ddp/workers/zero_equiv.lua,
-- spec/ddp/workers/zero_errors.lua); here we start them and count the ranks that passed.
local S = require 'shell_util'
local bin, src = S.bin, S.src
local q, sh = S.q, S.sh
local equiv = src .. '/spec/ddp/workers/zero_equiv.lua'
local errors = src .. '/spec/ddp/workers/zero_errors.lua'

local function launch(script, n, args, env) return S.launch(script, n, args, env, 90) end

-- exit status 0 and the marker line from each of the n ranks
local function run_ok(script, n, args, marker, env)
    local out, code = launch(script, n, args, env)
    S.expect_ranks(out, code, marker, n)
    return out
end

describe('ZeroRedundancyOptimizer', function()
    describe('equals the plain optimizer, with 1/N of its state per rank', function()
        local cases = {
            {2, 'opt=adam'},
            {2, 'opt=adamw ddp=1'},
            {2, 'opt=adam groups=1 cap=0.000001'},
            {2, 'opt=adamw model=cnn ddp=1 cap=0.001'},
            {2, 'opt=adam addgroup=1'},
            {2, 'opt=adamw groups=1 sched=1'},
            {3, 'opt=adam groups=1 addgroup=1 to=2'},
            {4, 'opt=adamw'},
            {4, 'opt=adam ddp=1 groups=1 to=3'},
            {4, 'opt=adamw sub=2 to=1'},
            {2, 'opt=adamw ddp=1', 'DDPLUA_SHM=0'},
            {2, 'opt=adam groups=1 to=1', 'DDPLUA_SHM=0'},
            {4, 'opt=adam groups=1 cap=0.000001 to=2', 'DDPLUA_SHM=0'},
            {4, 'opt=adamw ddp=1 model=cnn', 'DDPLUA_SHM=0'},
        }
        for _, c in ipairs(cases) do
            it(('%d ranks, %s%s'):format(c[1], c[2], c[3] and ', ' .. c[3] or ''), function()
                local out = run_ok(equiv, c[1], c[2], 'ZERO_OK', c[3])
                -- the shards together hold exactly the plain optimizer's state, none twice
                local sum, plain = 0, nil
                for shard, p in out:gmatch('shard_state=(%d+) plain_state=(%d+)') do
                    sum = sum + tonumber(shard)
                    plain = tonumber(p)
                end
                local groups = c[2]:match('sub=(%d+)') and c[1] // tonumber(c[2]:match('sub=(%d+)'))
                    or 1
                assert.are.equal(plain * groups, sum, out)
                if c[2]:find('cap=0.000001', 1, true) then
                    assert.truthy(out:find('buckets=6', 1, true), out) -- one per parameter
                end
            end)
        end
    end)

    it('errors: options, optimizer_class, groups, state dicts, mismatched ranks', function()
        run_ok(errors, 2, '', 'ZERO_ERRORS_OK')
        run_ok(errors, 2, '', 'ZERO_ERRORS_OK', 'DDPLUA_SHM=0')
    end)

    it('is optim.ZeroRedundancyOptimizer and needs the process group', function()
        local out, code = sh(('%s -e %s'):format(q(bin), q("local ddpl = require('ddplua'); "
            .. 'local ZeRO = ddpl.optim.ZeroRedundancyOptimizer; '
            .. 'local ok, e = pcall(ZeRO, ddpl.nn.Linear(2, 2):parameters(), '
            .. '{optimizer_class = ddpl.optim.Adam}); assert(not ok); print(e)')))
        assert.are.equal(0, code, out)
        assert.truthy(out:find('process group is not initialized', 1, true), out)
    end)
end)
