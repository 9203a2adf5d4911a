-- spec/dist/workers/steady.lua: one rank that all_reduces every 20 ms until something fails (run by
-- spec/tools/netns_cluster_spec.lua's node-loss cases, where a whole node is killed or cut off from
-- the outside). Joins with the group timeout 60 s and the heartbeat limit HB seconds; prints
-- "STEADY <rank>" once the first all_reduce went through, and when an all_reduce fails,
-- "FAULT after=<seconds since the last success> <message>" and exits 3. Gives up (exit 4)
-- after LIMIT seconds (default 60) without a failure.
local ddpl = require 'ddplua'
local dist = ddpl.dist
local P = require 'ddplua.core.process'

dist.init_process_group({timeout = 60, heartbeat_timeout = tonumber(os.getenv('HB'))})
local rank = dist.get_rank()
local t = ddpl.ones(1000)
local started, last_ok = ddpl.time(), ddpl.time()
local limit = tonumber(os.getenv('LIMIT') or 60)
local first = true
while ddpl.time() - started < limit do
    local ok, err = pcall(dist.all_reduce, t)
    if not ok then
        print(('FAULT after=%.2f %s'):format(ddpl.time() - last_ok, tostring(err)))
        io.stdout:flush()
        os.exit(3)
    end
    if first then
        print(('STEADY %d'):format(rank))
        io.stdout:flush()
        first = false
    end
    t:fill_(1)
    last_ok = ddpl.time()
    P.sleep(0.02)
end
os.exit(4)
