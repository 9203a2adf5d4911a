-- tools/gen_api_names.lua: the names the API contract (../shared/API.md) mentions, by section,
-- committed as spec/fixtures/api_contract_names.txt so that spec/api_additions_spec.lua can
-- tell, on a fresh clone without the shared folder, which public names are the contract's and
-- which must be listed in docs/api-additions.md.
-- defines: the command line
--     lua5.4 tools/gen_api_names.lua [--check] [API.md]    (run from the repository root)
-- API.md defaults to ../shared/API.md. Without --check it writes the fixture; with --check it
-- exits 1 when the committed fixture differs from what API.md gives now (the contract changed:
-- regenerate and commit).
--
-- A name is every identifier inside a `code span` of the page, recorded with the section
-- (## heading) it appears in, as "section<TAB>identifier" lines, sorted: the spec looks a
-- table's names up in the sections that describe that table (optim's names in "optim"), so a
-- DataLoader method `close` is not taken as documented because SummaryWriter has a `close()`.
-- Sections are named by their heading in lower case with non-alphanumerics as '-'.
local FIXTURE = 'spec/fixtures/api_contract_names.txt'

local function read_all(path)
    local f, err = io.open(path, 'rb')
    if not f then
        io.stderr:write(('gen_api_names: cannot read %s (%s)\n'):format(path, err))
        os.exit(2)
    end
    local s = f:read('a')
    f:close()
    return s
end

-- text of API.md -> sorted list of "section\tname" lines
local function contract_names(text)
    local seen, lines = {}, {}
    local function add(section, body)
        -- code spans may wrap onto the next line, so spans are found in the whole section
        for span in body:gmatch('`([^`]+)`') do
            -- `BatchNorm1d/2d` names BatchNorm2d too: a digit-led part after '/' replaces the
            -- digit-led tail of the word before it
            span = span:gsub('([%a_][%a_]*)(%d[%w_]*)/(%d[%w_]*)', '%1%2 %1%3')
            for word in span:gmatch('[%a_][%w_]*') do
                local key = section .. '\t' .. word
                if not seen[key] then
                    seen[key] = true
                    lines[#lines + 1] = key
                end
            end
        end
    end
    local section, body = 'preamble', {}
    for line in (text .. '\n'):gmatch('([^\n]*)\n') do
        local heading = line:match('^##%s+(.-)%s*$')
        if heading then
            add(section, table.concat(body, '\n'))
            section = heading:gsub('`', ''):lower():gsub('[^%w]+', '-'):gsub('^%-+', '')
                :gsub('%-+$', '')
            body = {}
        else
            body[#body + 1] = line
        end
    end
    add(section, table.concat(body, '\n'))
    table.sort(lines)
    return lines
end

local check, api_path = false, '../shared/API.md'
for _, a in ipairs(arg) do
    if a == '--check' then
        check = true
    elseif a:sub(1, 1) == '-' then
        io.stderr:write('usage: lua5.4 tools/gen_api_names.lua [--check] [API.md]\n')
        os.exit(2)
    else
        api_path = a
    end
end

local body = table.concat(contract_names(read_all(api_path)), '\n') .. '\n'
local header = '# spec/fixtures/api_contract_names.txt: written by tools/gen_api_names.lua from ' ..
                   'API.md; do not edit.\n# section<TAB>identifier, one per code-span word.\n'
local want = header .. body
if check then
    local f = io.open(FIXTURE, 'rb')
    local have = f and f:read('a')
    if f then f:close() end
    if have ~= want then
        io.stderr:write(('gen_api_names: %s is stale against %s; rerun without --check\n'):format(
            FIXTURE, api_path))
        os.exit(1)
    end
    print('gen_api_names: ' .. FIXTURE .. ' is up to date')
else
    local f = assert(io.open(FIXTURE, 'wb'))
    f:write(want)
    f:close()
    print(('gen_api_names: wrote %s (%d names)'):format(FIXTURE, select(2, body:gsub('\n', ''))))
end
