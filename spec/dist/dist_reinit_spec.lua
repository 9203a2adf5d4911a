-- spec/dist/dist_reinit_spec.lua: destroy_process_group() then init_process_group() in the same
-- processes works every time (issue 30): spec/dist/workers/reinit.lua makes 20 groups in a row on 2
-- and 4 ranks, through shared memory and through Gloo (DDPLUA_SHM=0), each round checked by values
-- only that round can give; then under the launcher (which hosts the store across the rounds:
-- --max-restarts). Every process runs under `timeout`, so a hang fails rather than blocks.
local S = require 'shell_util'
local worker = S.src .. '/spec/dist/workers/reinit.lua'

describe('destroy_process_group then init_process_group', function()
    for _, path in ipairs({{'shared memory', 'DDPLUA_SHM=1'}, {'gloo', 'DDPLUA_SHM=0'}}) do
        for _, world in ipairs({2, 4}) do
            it(('works 20 times in a row on %d ranks through %s'):format(world, path[1]),
                function()
                    local outs, codes = S.run_world(world, worker,
                        {kill_after = 240, env = path[2] .. ' ROUNDS=20'})
                    S.assert_ranks_ok(outs, codes, world, 'REINIT_OK')
                end)
        end
    end

    it('works under the launcher, whose store outlives the rounds', function()
        local out, code = S.sh(('timeout 240 %s %s --nproc 2 --max-restarts 1 '
            .. '-- 2>&1'):format(S.q(S.bin), S.q(worker)))
        assert(code == 0, out)
        S.expect_ranks(out, code, 'REINIT_OK %d 20', 2)
    end)
end)
