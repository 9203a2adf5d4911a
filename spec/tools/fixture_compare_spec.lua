-- spec/tools/fixture_compare_spec.lua: tools/fixture_compare.py, which the fixture generators'
-- --check uses: two fixture texts agree when they hold the same data, tensor values and digests within
-- a tenth of the tolerance the specs apply, everything else exactly. Needs python3 only (the
-- module imports no PyTorch).
local S = require 'shell_util'

local source = os.getenv('DDPLUA_SOURCE_DIR') or '.'

-- fixture_difference(old, new) as Python gives it: nil when they agree, else its message
local function difference(old, new)
    local dir = S.new_tmpdir()
    S.write(dir .. '/old.lua', old)
    S.write(dir .. '/new.lua', new)
    local out, code = S.sh(('/usr/bin/python3 -c %s %s %s %s'):format(S.q(
        'import sys; sys.path.insert(0, sys.argv[1] + "/tools"); '
            .. 'from fixture_compare import fixture_difference as d; '
            .. 'print(d(open(sys.argv[2]).read(), open(sys.argv[3]).read()))'),
        S.q(source), S.q(dir .. '/old.lua'), S.q(dir .. '/new.lua')))
    os.execute('rm -rf ' .. S.q(dir))
    assert(code == 0, out)
    out = out:gsub('%s+$', '')
    if out == 'None' then return nil end
    return out
end

-- a fixture of one case whose output is a float32 tensor with values v1, v2 (strings as written)
local function case(v1, v2, extra)
    return ([[
-- spec/fixtures/x.lua: a test fixture.
return {
  {
    name = 'matmul/f32/x',
    op = 'matmul',%s
    outputs = {{shape = {2}, dtype = 'float32', values = {%s, %s}}},
    grads = {[1] = {shape = {3}, dtype = 'float64', digest = {-177.83256630465957, 28089.74617985673, 1/0}}},
  },
}
]]):format(extra or '', v1, v2)
end

describe('tools/fixture_compare.py', function()
    it('agrees on the same text', function()
        assert.is_nil(difference(case('0.38942242', '-1.0'), case('0.38942242', '-1.0')))
    end)

    it('lets float32 rounding noise pass (a tenth of rtol = atol = 1e-5)', function()
        -- 2e-7 apart: the last-bit differences of another machine's BLAS
        assert.is_nil(difference(case('2.3975842', '-1.0'), case('2.3975844', '-1.0')))
    end)

    it('reports a value that moved by more than a tenth of the tolerance', function()
        local d = difference(case('0.38942242', '-1.0'), case('0.38942642', '-1.0'))
        assert.is_truthy(d and d:find('outputs.1.values.1', 1, true), d)
    end)

    it('scales the allowance with the case`s own rtol and atol', function()
        local wide = '\n    rtol = 0.0001,\n    atol = 0.0001,'
        assert.is_nil(difference(case('0.297299', '-1.0', wide), case('0.29730034', '-1.0', wide)))
        assert.is_truthy(difference(case('0.297299', '-1.0'), case('0.29730034', '-1.0')))
    end)

    it('judges a digest on its abs_sum, and wants infinities identical', function()
        local a = case('1.0', '2.0')
        local b = a:gsub('%-177%.83256630465957', '-177.83256630465945')
        assert.is_nil(difference(a, b))
        local c = a:gsub('28089%.74617985673, 1/0', '28089.74617985673, -1/0')
        assert.is_truthy(difference(a, c))
    end)

    it('wants names, shapes, dtypes and the integer or float subtype identical', function()
        local a = case('1.0', '2.0')
        assert.is_truthy(difference(a, (a:gsub("'matmul/f32/x'", "'matmul/f32/y'"))))
        assert.is_truthy(difference(a, (a:gsub('shape = {2}', 'shape = {1, 2}'))))
        assert.is_truthy(difference(a, (a:gsub("dtype = 'float32'", "dtype = 'float64'"))))
        assert.is_truthy(difference(case('1.0', '2.0'), case('1', '2.0')))
    end)
end)
