-- examples/lm_options.lua: the command line and seeding the language-model examples share
-- (char_lstm.lua, gpt_tiny.lua); loaded with dofile from their folder.
-- defines: lm_options(prog, argv, defaults) -> opt: defaults overridden by `--key value`
--          (examples/args.lua; every key but text is a number), after which the thread count
--          is set to opt.threads and ddpl's and Lua's generators are seeded with opt.seed (the
--          samplers at the end of the scripts draw with math.random).
-- Bad input prints "<prog>: <what was wrong> (see the top of the file)" and exits with status 2.
local ddpl = require 'ddplua'

local here = debug.getinfo(1, 'S').source:match('^@(.*)/[^/]*$') or '.'

return function(prog, argv, defaults)
    local numeric = {}
    for k in pairs(defaults) do numeric[k] = k ~= 'text' end
    local opt = dofile(here .. '/args.lua')(argv, defaults, numeric, function(msg)
        if not msg then -- --help
            local keys = {}
            for k in pairs(defaults) do keys[#keys + 1] = k end
            table.sort(keys)
            io.stdout:write('usage: ddplua examples/', prog, ' [--', table.concat(keys, ' X] [--'),
                ' X] (see the top of the file)\n')
            os.exit(0)
        end
        io.stderr:write(prog, ': ', msg, ' (see the top of the file)\n')
        os.exit(2)
    end)
    ddpl.set_num_threads(math.tointeger(opt.threads))
    ddpl.manual_seed(opt.seed)
    math.randomseed(opt.seed)
    return opt
end
