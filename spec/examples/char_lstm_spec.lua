-- spec/examples/char_lstm_spec.lua: examples/char_lstm.lua end to end, small and fast: a few dozen
-- steps of a small character LSTM on the shipped text (examples/data/lighthouse.txt) must bring the
-- validation loss well below its start, and the sampler must carry the LSTM state along.
-- Runs the example as a child process of the ddplua executable ($DDPLUA_BIN, set by ctest).
local source = os.getenv('DDPLUA_SOURCE_DIR') or '.'
local bin = os.getenv('DDPLUA_BIN') or ((os.getenv('DDPLUA_BUILD_DIR') or 'build') .. '/ddplua')

local function q(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end

-- `ddplua examples/char_lstm.lua <args>`: ok, stdout and stderr together
local function run(args)
    local p = assert(io.popen(('%s %s %s 2>&1'):format(q(bin), q(source .. '/examples/char_lstm.lua'),
                                                       args)))
    local out = p:read('a')
    local ok = p:close()
    return ok, out
end

describe('examples/char_lstm.lua', function()
    it('the validation loss falls within 40 small steps and it samples text', function()
        local ok, out = run('--steps 40 --print-every 20 --seq-len 32 --batch 16 --hidden 64 ' ..
                            '--sample 20 --threads 1')
        assert.is_true(ok, out)
        local first, last = out:match('loss first ([%d.]+) last ([%d.]+)')
        assert.truthy(first, out)
        first, last = tonumber(first), tonumber(last)
        assert.is_true(first > 3.5, out) -- about ln(42), the uniform guess
        assert.is_true(last < first - 0.8, out)
        assert.truthy(out:find('step    40  train loss', 1, true), out)
        local sample = out:match('sample: (The keeper[^\n]*)')
        assert.truthy(sample, out)
        assert.are.equal(#'The keeper' + 20, #sample)
    end)

    it('refuses an unknown argument', function()
        local ok, out = run('--hiden 3')
        assert.is_falsy(ok, out)
        assert.truthy(out:find('unknown argument --hiden', 1, true), out)
    end)
end)
