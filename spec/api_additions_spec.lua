-- spec/api_additions_spec.lua: every public name the library exports is either the contract's
-- (API.md, through the committed list spec/fixtures/api_contract_names.txt that
-- tools/gen_api_names.lua writes) or documented in docs/api-additions.md; and every name that
-- page lists is really exported (no stale entries). How names are found: spec/api_surface.lua.
local S = require 'api_surface'
local slurp = require('shell_util').slurp

local source_dir = os.getenv('DDPLUA_SOURCE_DIR') or '.'

-- section -> set of identifiers
local function contract_words()
    local words = {}
    for line in io.lines(source_dir .. '/spec/fixtures/api_contract_names.txt') do
        local section, word = line:match('^([^#\t][^\t]*)\t(.+)$')
        if section then
            words[section] = words[section] or {}
            words[section][word] = true
        end
    end
    return words
end

-- the doc mentions prefix .. name as the start of a code span, followed by a non-identifier
local function documented(doc, prefixes, name)
    for _, p in ipairs(prefixes) do
        local init = 1
        while true do
            local at, stop = doc:find('`' .. p .. name, init, true)
            if not at then break end
            if not doc:sub(stop + 1, stop + 1):match('[%w_]') then return true end
            init = stop + 1
        end
    end
    return false
end

describe('the public API', function()
    local surface = S.surface()
    local words = contract_words()
    local doc = slurp(source_dir .. '/docs/api-additions.md')

    it('finds the tables and names it walks (the walk itself works)', function()
        local seen = {}
        for _, e in ipairs(surface) do seen[e.table .. ' ' .. e.name] = true end
        -- one known name of each kind: a C function, a lazy entry, a tensor method, an nn class
        -- file, a class method, a utils field
        for _, key in ipairs({'ddpl tensor', 'ddpl.data transform_rng', 'tensor char',
                              'ddpl.nn LSTM', 'ddpl.nn.functional rms_norm',
                              'data.DataLoader close', 'ddpl.utils Progress',
                              'nn.Module state_dict', 'ddpl.data.datasets CIFAR10'}) do
            assert.is_true(seen[key] == true, 'the walk did not find ' .. key)
        end
        assert.is_true(#surface > 300, 'the walk found only ' .. #surface .. ' names')
    end)

    it('has every public name in API.md or in docs/api-additions.md', function()
        local missing = {}
        for _, e in ipairs(surface) do
            local in_contract = false
            for _, s in ipairs(e.sections) do
                if words[s] and words[s][e.name] then in_contract = true end
            end
            if not in_contract and not documented(doc, e.doc, e.name) then
                missing[#missing + 1] = e.doc[1] .. e.name
            end
        end
        assert.are.same({}, missing,
                        'public names in neither API.md nor docs/api-additions.md (document them '
                            .. 'there, as `prefix.name(args)`: meaning): ' ..
                            table.concat(missing, ', '))
    end)

    it('lists in docs/api-additions.md only names the library exports', function()
        -- prefix -> set of exported names; longest prefix first when matching
        local by_prefix, prefixes = {}, {}
        for _, e in ipairs(surface) do
            for _, p in ipairs(e.doc) do
                if not by_prefix[p] then
                    by_prefix[p] = {}
                    prefixes[#prefixes + 1] = p
                end
                by_prefix[p][e.name] = true
            end
        end
        table.sort(prefixes, function(a, b) return #a > #b end)
        local stale = {}
        for span in doc:gmatch('`([^`]+)`') do
            for _, p in ipairs(prefixes) do
                if span:sub(1, #p) == p then
                    local name = span:sub(#p + 1):match('^[%a][%w_]*')
                    if name and not by_prefix[p][name] then stale[#stale + 1] = p .. name end
                    break
                end
            end
        end
        assert.are.same({}, stale, 'docs/api-additions.md lists names the library does not '
                            .. 'export: ' .. table.concat(stale, ', '))
    end)

    it('reads the contract list as tools/gen_api_names.lua writes it', function()
        assert.is_true(words.tensors and words.tensors.tensor, 'tensors section lacks tensor')
        assert.is_true(words.data and words.data.DataLoader, 'data section lacks DataLoader')
        assert.is_true(words.nn and words.nn.BatchNorm2d, 'BatchNorm1d/2d gives BatchNorm2d')
        assert.is_nil(words.data.close, 'close is SummaryWriter`s (utilities), not data`s')
    end)
end)
