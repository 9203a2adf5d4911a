-- spec/nn/meta_init_spec.lua: nn.utils.meta_init (lua/ddplua/nn/meta_init.lua), PyTorch's
-- `with torch.device('meta')`: modules built inside it have parameters of the right shapes and
-- dtypes without memory, initialisers do nothing to them and draw no random numbers, the
-- factories are real again afterwards (also after an error), and materialize_module_ gives a
-- module's own parameters memory and values (reset_parameters, or an init function).
local H = require 'helpers'
local ddpl = H.ddpl
local nn = ddpl.nn

local function allocated() return ddpl.memory_stats()['allocated_bytes.current'] end

describe('nn.utils.meta_init', function()
    it('builds modules whose parameters have shapes and no memory', function()
        local before = allocated()
        local net = nn.utils.meta_init(function()
            return nn.Sequential(nn.Linear(512, 1024), nn.LayerNorm(1024),
                                 nn.Embedding(1000, 64), nn.Linear(1024, 8, {dtype = 'float64'}))
        end)
        -- 0.6 M parameters would be 2.4 MB: each meta tensor holds one element
        assert.is_true(allocated() - before < 4096)
        local p = net:named_parameters()
        assert.are.equal('0.weight', p[1][1])
        assert.are.same({1024, 512}, net[0].weight:shape())
        assert.are.same({1000, 64}, net[2].weight:shape())
        assert.are.equal('float64', net[3].weight.dtype)
        for _, np in ipairs(p) do
            assert.is_true(nn.utils.is_meta(np[2]), np[1])
            assert.is_true(np[2].requires_grad, np[1])
        end
        -- real again outside
        assert.is_false(nn.utils.is_meta(ddpl.zeros(3)))
        H.assert_close(ddpl.ones(2), ddpl.tensor({1.0, 1.0}), 0, 0)
    end)

    it('runs initialisers as no-ops and draws no random numbers', function()
        ddpl.manual_seed(5)
        local want = ddpl.rand(4)
        ddpl.manual_seed(5)
        local t = nn.utils.meta_init(function()
            local w = nn.Parameter(ddpl.empty(300, 400))
            nn.init.kaiming_uniform_(w, {a = math.sqrt(5)})
            w:normal_(0, 1):fill_(2):zero_()
            return w
        end)
        assert.is_true(nn.utils.is_meta(t))
        H.assert_close(ddpl.rand(4), want, 0, 0) -- the generator did not move
        -- a real tensor made inside is written as usual
        local r = nn.utils.meta_init(function()
            local x = ddpl.tensor({1.0, 2.0})
            x:fill_(7)
            return x
        end)
        H.assert_close(r, ddpl.ones(2) * 7, 0, 0)
    end)

    it('restores the factories after an error inside', function()
        H.assert_error(function()
            nn.utils.meta_init(function() error('inside') end)
        end, 'inside')
        assert.is_false(nn.utils.is_meta(ddpl.zeros(2)))
        local z = ddpl.zeros(2):fill_(3)
        H.assert_close(z, ddpl.ones(2) * 3, 0, 0)
        H.assert_error(function() nn.utils.meta_init(42) end, 'expected a function')
    end)

    it('materialises one module: reset_parameters, or the init function, tied kept', function()
        local lin, ln = nn.utils.meta_init(function() return nn.Linear(16, 4), nn.LayerNorm(4) end)
        assert.is_true(nn.utils.materialize_module_(lin))
        assert.is_false(nn.utils.is_meta(lin.weight))
        local bound = 1 / math.sqrt(16)
        assert.is_true(lin.weight:abs():max():item() <= bound)
        assert.is_true(lin.weight:abs():sum():item() > 0)
        assert.is_true(ln.weight.requires_grad)
        nn.utils.materialize_module_(ln)
        H.assert_close(ln.weight, ddpl.ones(4), 0, 0)
        H.assert_close(ln.bias, ddpl.zeros(4), 0, 0)
        -- nothing meta left: false, nothing run
        assert.is_false(nn.utils.materialize_module_(lin))
        -- an init function instead of reset_parameters; a parameter in two slots stays one
        local m = nn.utils.meta_init(function()
            local mod = nn.Module()
            mod.a = nn.Parameter(ddpl.empty(3))
            mod:register_parameter('b', mod.a)
            return mod
        end)
        nn.utils.materialize_module_(m, function(mm) mm.a:fill_(4) end)
        assert.is_true(rawequal(m.a, m.b))
        H.assert_close(m.b, ddpl.ones(3) * 4, 0, 0)
        -- no reset_parameters and no init function: refused
        local bare = nn.utils.meta_init(function()
            local mod = nn.Module()
            mod.w = nn.Parameter(ddpl.randn(3))
            return mod
        end)
        H.assert_error(function() nn.utils.materialize_module_(bare) end, 'meta_init',
                       'param_init_fn')
    end)
end)
