-- lua/ddplua/utils/rank.lua: which process of a distributed job this is, for the utilities that
-- write only once per job (SummaryWriter, progress, MetricsLogger).
-- defines: rank.current() -> the rank; rank.writes(all_ranks) -> whether this process writes.
--
-- The rank is the default process group's when one is initialized, else $RANK (set by the
-- launcher, so that a writer made before init_process_group already knows), else 0. The
-- distributed module is only asked when it was loaded: no group can exist otherwise.
local rank = {}

function rank.current()
    local dist = package.loaded['ddplua.distributed']
    if dist and dist.is_initialized() then return dist.get_rank() end
    return math.tointeger(tonumber(os.getenv('RANK') or '')) or 0
end

-- Rank 0 writes; every rank does when all_ranks is true.
function rank.writes(all_ranks)
    return all_ranks == true or rank.current() == 0
end

return rank
