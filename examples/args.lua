-- examples/args.lua: the command-line parser the example scripts share.
-- parse(argv, defaults, numeric, usage) returns the options: defaults overridden by
-- `--key value` or `--key=value` for the keys of defaults only; numeric keys are converted with
-- tonumber; usage(message) is called (and must not return) on bad input, and usage() with no
-- message for --help or -h (print the usage to stdout and exit 0).
-- Loaded with dofile from the scripts' own folder, so it works wherever they are run from.
return function(argv, defaults, numeric, usage)
    local opt = {}
    for k, v in pairs(defaults) do opt[k] = v end
    local i = 1
    while i <= #argv do
        if argv[i] == '--help' or argv[i] == '-h' then usage() end
        local key, value = argv[i]:match('^%-%-([%w-]+)=(.*)$')
        key = key or argv[i]:match('^%-%-([%w-]+)$')
        if not key or defaults[key] == nil then usage('unknown argument ' .. argv[i]) end
        if value == nil then
            value = argv[i + 1]
            i = i + 1
        end
        if value == nil then usage('--' .. key .. ' needs a value') end
        if numeric[key] then
            value = tonumber(value) or usage('--' .. key .. ' needs a number, got ' .. value)
        end
        opt[key] = value
        i = i + 1
    end
    return opt
end
