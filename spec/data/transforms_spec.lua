-- spec/data/transforms_spec.lua: ddpl.data.transforms: Normalize, pad, RandomCrop,
-- RandomHorizontalFlip, Compose, Lambda, their draws from data.transform_rng and their errors.
-- Expected values are worked out by hand from small images whose pixel values name their
-- position (value = 10 * row + column), so a crop window or a flip is read off its output.
local H = require 'helpers'
local ddpl = H.ddpl
local data = ddpl.data
local T = data.transforms
local TF = T.functional
local rng = data.transform_rng

-- (C, h, w) float32 image with value 100 * c + 10 * row + column
local function grid(c, h, w)
    local v = {}
    for k = 0, c - 1 do
        for i = 0, h - 1 do
            for j = 0, w - 1 do v[#v + 1] = 100 * k + 10 * i + j end
        end
    end
    return ddpl.tensor(v, { dtype = 'float32' }):view(c, h, w)
end

-- The expected crop of grid(c, h, w) padded by (l, t) with fill, window (i, j, th, tw).
local function expected_crop(c, h, w, l, t, fill, i, j, th, tw)
    local v = {}
    for k = 0, c - 1 do
        for y = i, i + th - 1 do
            for x = j, j + tw - 1 do
                local sy, sx = y - t, x - l
                local inside = sy >= 0 and sy < h and sx >= 0 and sx < w
                v[#v + 1] = inside and (100 * k + 10 * sy + sx) or fill
            end
        end
    end
    return v
end

describe('Normalize', function()
    it('computes (x - mean[c]) / std[c] per channel, out of place or in place', function()
        local img = ddpl.tensor({ 1, 3, 5, 7, 2, 6, 10, 14 }, { dtype = 'float32' }):view(2, 2, 2)
        local out = T.Normalize({ 1, 2 }, { 2, 4 })(img)
        H.assert_close(out, { { { 0, 1 }, { 2, 3 } }, { { 0, 1 }, { 2, 3 } } })
        H.assert_close(img, { 1, 3, 5, 7, 2, 6, 10, 14 }) -- untouched
        -- numbers apply to every channel; float64 stays float64
        local d = T.Normalize(0.5, 0.25)(img:double())
        assert.equals('float64', H.dtype_name(d.dtype))
        H.assert_close(d, { 2, 10, 18, 26, 6, 22, 38, 54 })
        -- in place: the same tensor comes back, overwritten
        local same = T.Normalize({ 1, 2 }, { 2, 4 }, { inplace = true })(img)
        assert.equals(img, same)
        H.assert_close(img, { 0, 1, 2, 3, 0, 1, 2, 3 })
        -- a batch (N, C, H, W) is normalised per channel too
        local batch = ddpl.ones(3, 2, 1, 1)
        H.assert_close(T.Normalize({ 1, 0 }, { 1, 2 })(batch), { 0, 0.5, 0, 0.5, 0, 0.5 })
        assert.equals('Normalize(mean={1, 2}, std={2, 4})', tostring(T.Normalize({ 1, 2 }, { 2, 4 })))
        -- one Normalize for images of several dtypes and channel counts (its tensors are kept
        -- per dtype and channel count)
        local n = T.Normalize({ 1, 2 }, { 2, 4 })
        H.assert_close(n(ddpl.ones(2, 1, 1)), { 0, -0.25 })
        local n64 = n(ddpl.ones(2, 1, 1, { dtype = 'float64' }))
        assert.equals('float64', H.dtype_name(n64.dtype))
        H.assert_close(n64, { 0, -0.25 })
        H.assert_error(function() n(ddpl.ones(3, 1, 1)) end,
            'mean has 2 values but the image has 3 channels')
        H.assert_close(n(ddpl.ones(2, 1, 1)), { 0, -0.25 })
    end)

    it('refuses a zero std, integer images, wrong channel counts and bad arguments', function()
        H.assert_error(function() T.Normalize({ 0, 0 }, { 1, 0 }) end, 'Normalize', 'std', 'zero')
        -- 1e-50 is not zero as a double but is in float32
        local tiny = T.Normalize(0, 1e-50)
        H.assert_close(tiny(ddpl.ones(1, 1, 1, { dtype = 'float64' })), { 1e50 })
        H.assert_error(function() tiny(ddpl.ones(1, 2, 2)) end,
            'std evaluated to zero after conversion to float32')
        H.assert_error(function() T.Normalize(0, 1)(ddpl.ones(1, 2, 2, { dtype = 'uint8' })) end,
            'normalize', 'floating point', 'uint8')
        H.assert_error(function() T.Normalize(0, 1)(ddpl.ones(2, 2)) end, 'at least 3 dimensions',
            '[2, 2]')
        H.assert_error(function() T.Normalize({ 1, 2, 3 }, 1)(ddpl.ones(2, 2, 2)) end,
            'mean has 3 values but the image has 2 channels')
        H.assert_error(function() T.Normalize('a', 1) end, 'Normalize', 'mean', 'number')
        H.assert_error(function() T.Normalize({ 1, 'x' }, 1) end, 'mean must hold numbers',
            'position 2')
        H.assert_error(function() T.Normalize(0, {}) end, 'std', 'non-empty')
        H.assert_error(function() T.Normalize(0, 1, { inplac = true }) end, "unknown option 'inplac'")
        H.assert_error(function() T.Normalize(0, 1)('img') end, 'image tensor', 'string')
    end)
end)

describe('functional.pad', function()
    it('pads with a constant fill in every padding form', function()
        local img = grid(1, 2, 3)
        -- {left, top, right, bottom} = {1, 2, 0, 1}: 2 + 2 + 1 rows, 1 + 3 columns
        local out = TF.pad(img, { 1, 2, 0, 1 }, -1)
        H.assert_close(out, { { { -1, -1, -1, -1 }, { -1, -1, -1, -1 }, { -1, 0, 1, 2 },
            { -1, 10, 11, 12 }, { -1, -1, -1, -1 } } })
        assert.same({ 1, 6, 5 }, H.shape(TF.pad(img, { 1, 2 })))       -- left/right 1, top/bottom 2
        assert.same({ 1, 4, 5 }, H.shape(TF.pad(img, 1)))
        assert.same({ 1, 4, 5 }, H.shape(TF.pad(img, { 1 })))
        -- the default fill is 0; uint8 images stay uint8
        local u = TF.pad(ddpl.full({ 1, 1, 1 }, 7, { dtype = 'uint8' }), 1)
        assert.equals('uint8', H.dtype_name(u.dtype))
        assert.same({ 0, 0, 0, 0, 7, 0, 0, 0, 0 }, H.values(u))
    end)

    it("repeats edge values in the 'edge', 'reflect' and 'symmetric' modes", function()
        local row = ddpl.tensor({ 1, 2, 3, 4 }):view(1, 1, 4) -- a b c d
        H.assert_close(TF.pad(row, { 3, 0 }, 0, 'edge'), { 1, 1, 1, 1, 2, 3, 4, 4, 4, 4 })
        H.assert_close(TF.pad(row, { 3, 0 }, 0, 'reflect'), { 4, 3, 2, 1, 2, 3, 4, 3, 2, 1 })
        H.assert_close(TF.pad(row, { 3, 0 }, 0, 'symmetric'), { 3, 2, 1, 1, 2, 3, 4, 4, 3, 2 })
        -- vertically (top 1, bottom 2), on a column
        local col = ddpl.tensor({ 1, 2, 3 }):view(1, 3, 1)
        H.assert_close(TF.pad(col, { 0, 1, 0, 2 }, 0, 'reflect'), { 2, 1, 2, 3, 2, 1 })
        -- both dimensions at once: the corners come from the corner pixel
        H.assert_close(TF.pad(grid(1, 2, 2), 1, 0, 'edge'), { { { 0, 0, 1, 1 }, { 0, 0, 1, 1 },
            { 10, 10, 11, 11 }, { 10, 10, 11, 11 } } })
    end)

    it('refuses bad padding, fill and modes', function()
        local img = grid(1, 3, 3)
        H.assert_error(function() TF.pad(img, { 1, 2, 3 }) end, 'pad', 'list of 3')
        H.assert_error(function() TF.pad(img, -1) end, 'non-negative')
        H.assert_error(function() TF.pad(img, 1.5) end, 'padding must be an integer', '1.5')
        H.assert_error(function() TF.pad(img, 1, 'x') end, 'fill must be a number')
        H.assert_error(function() TF.pad(img, 1, 0, 'wrap') end, 'padding_mode', 'wrap')
        H.assert_error(function() TF.pad(img, 3, 0, 'reflect') end,
            "padding (3, 3) of the width (3) is too large for mode 'reflect' (at most 2)")
        H.assert_error(function() TF.pad(img, { 0, 4 }, 0, 'symmetric') end,
            'of the height (3)', 'at most 3')
        H.assert_error(function() TF.pad(ddpl.ones(3), 1) end, 'at least 2 dimensions', '[3]')
    end)
end)

describe('RandomCrop', function()
    it('draws the top first, then the left, from transform_rng', function()
        local img = grid(2, 4, 6)
        local crop = T.RandomCrop({ 2, 3 })
        for seed = 1, 20 do
            rng.seed(seed)
            local i = rng.randint(0, 4 - 2 + 1) -- top in 0..2
            local j = rng.randint(0, 6 - 3 + 1) -- left in 0..3
            rng.seed(seed)
            local out = crop(img)
            H.assert_close(out, expected_crop(2, 4, 6, 0, 0, 0, i, j, 2, 3))
            assert.same({ 2, 2, 3 }, H.shape(out))
            rng.seed(seed)
            assert.same({ i, j, 2, 3 }, { T.RandomCrop.get_params(img, { 2, 3 }) })
        end
    end)

    it('pads first (with fill), covers every window and is reproducible', function()
        local img = grid(1, 2, 2)
        -- padding 4 on a 2x2 image and a 10x10 window: the whole padded image, no draw
        rng.seed(3)
        local before = rng.state()
        local whole = T.RandomCrop(10, { padding = 4, fill = -5 })(img)
        assert.equals(before, rng.state())
        H.assert_close(whole, expected_crop(1, 2, 2, 4, 4, -5, 0, 0, 10, 10))
        -- padding {left, top, right, bottom} = {1, 0, 2, 1}: a 3x5 image, 2x2 windows
        local crop = T.RandomCrop(2, { padding = { 1, 0, 2, 1 }, fill = -1 })
        local seen = {}
        rng.seed(7)
        for _ = 1, 300 do
            local state = rng.state()
            local out = crop(img)
            rng.set_state(state)
            local i, j = rng.randint(0, 2), rng.randint(0, 4)
            H.assert_close(out, expected_crop(1, 2, 2, 1, 0, -1, i, j, 2, 2))
            seen[i * 10 + j] = true
        end
        local windows = 0
        for _ in pairs(seen) do windows = windows + 1 end
        assert.equals(2 * 4, windows) -- every (top, left) came up
        -- the same seed gives the same crops
        local function run(seed)
            rng.seed(seed)
            local outs = {}
            for k = 1, 5 do outs[k] = H.values(crop(img)) end
            return outs
        end
        assert.same(run(11), run(11))
        assert.are_not.same(run(11), run(12))
        assert.equals('RandomCrop(size={2, 2}, padding={1, 0, 2, 1}, fill=-1)', tostring(crop))
    end)

    it("pads small images with pad_if_needed as torchvision (both sides), any padding_mode", function()
        local img = grid(1, 2, 3)
        -- width 3 < 5: 2 columns on the left AND the right (7); height 2 < 4: 2 rows top and
        -- bottom (6); then a 4x5 window of the 6x7 image
        rng.seed(5)
        local out = T.RandomCrop({ 4, 5 }, { pad_if_needed = true })(img)
        rng.seed(5)
        local i, j = rng.randint(0, 3), rng.randint(0, 3)
        H.assert_close(out, expected_crop(1, 2, 3, 2, 2, 0, i, j, 4, 5))
        -- edge mode: a 1x1 image padded by 1 everywhere is all that pixel's value
        local e = T.RandomCrop(3, { padding = 1, padding_mode = 'edge' })(ddpl.full({ 1, 1, 1 }, 9))
        H.assert_close(e, { 9, 9, 9, 9, 9, 9, 9, 9, 9 })
    end)

    it('refuses windows larger than the image and bad arguments', function()
        H.assert_error(function() T.RandomCrop(5)(grid(1, 4, 4)) end,
            'required crop size (5, 5) is larger than the input image size (4, 4)')
        H.assert_error(function() T.RandomCrop({ 2, 5 }, { padding = { 0, 1 } })(grid(1, 4, 4)) end,
            'required crop size (2, 5)', 'input image size (6, 4)')
        H.assert_error(function() T.RandomCrop(0) end, 'RandomCrop', 'size', 'positive', 'got 0')
        H.assert_error(function() T.RandomCrop({ 2, 0 }) end, 'got a list of 2 {2, 0}')
        H.assert_error(function() T.RandomCrop({ 1, 2, 3 }) end, 'RandomCrop', 'size', 'list of 3')
        H.assert_error(function() T.RandomCrop(2, { padding = { 1, 2, 3 } }) end, 'RandomCrop',
            'padding', 'list of 3')
        H.assert_error(function() T.RandomCrop(2, { padding = -2 }) end, 'RandomCrop', 'non-negative')
        H.assert_error(function() T.RandomCrop(2, { padding_mode = 'wrap' }) end, 'padding_mode',
            'wrap')
        H.assert_error(function() T.RandomCrop(2, { fill = 'red' }) end, 'fill must be a number')
        H.assert_error(function() T.RandomCrop(2, { pading = 4 }) end, "unknown option 'pading'")
        H.assert_error(function() T.RandomCrop(2)(42) end, 'RandomCrop', 'image tensor', 'number')
    end)
end)

describe('RandomHorizontalFlip', function()
    it('flips when random() < p, one draw per call', function()
        local img = grid(2, 2, 3)
        local flipped = { 2, 1, 0, 12, 11, 10, 102, 101, 100, 112, 111, 110 }
        H.assert_close(T.RandomHorizontalFlip(1)(img), flipped)
        H.assert_close(T.RandomHorizontalFlip(0)(img), img)
        H.assert_close(TF.hflip(img), flipped)
        local flip = T.RandomHorizontalFlip()
        assert.equals(0.5, flip.p)
        rng.seed(9)
        local flips = 0
        for _ = 1, 200 do
            local state = rng.state()
            local out = flip(img)
            rng.set_state(state)
            local expect_flip = rng.random() < 0.5
            H.assert_close(out, expect_flip and flipped or H.values(img))
            if expect_flip then flips = flips + 1 end
        end
        assert.is_true(flips > 60 and flips < 140, 'flips: ' .. flips)
        -- p = 0 still draws once, so later draws do not depend on p
        rng.seed(1)
        T.RandomHorizontalFlip(0)(img)
        local after = rng.state()
        rng.seed(1)
        rng.random()
        assert.equals(rng.state(), after)
        -- a batch (N, C, H, W) flips as one image
        local batch = ddpl.stack({ img, img }, 0)
        H.assert_close(T.RandomHorizontalFlip(1)(batch):select(0, 1), flipped)
        assert.equals('RandomHorizontalFlip(p=0.5)', tostring(flip))
        H.assert_error(function() T.RandomHorizontalFlip(1.5) end, 'p must be a probability')
        H.assert_error(function() T.RandomHorizontalFlip(1)(ddpl.ones(3)) end, 'at least 2 dimensions')
    end)
end)

describe('Compose and Lambda', function()
    it('applies transforms in order and names the one that failed', function()
        local double, inc = T.Lambda(function(x) return x * 2 end), T.Lambda(function(x) return x + 1 end)
        assert.equals(3, T.Compose({ double, inc })(1))
        assert.equals(4, T.Compose({ inc, double })(1))
        assert.equals(5, T.Compose({})(5))
        -- plain functions and transforms mix
        local c = T.Compose({ T.RandomCrop(2, { padding = 1 }), function(x) return x:sum() end })
        rng.seed(0)
        local i, j = rng.randint(0, 4), rng.randint(0, 4)
        local window = 0
        for _, v in ipairs(expected_crop(1, 3, 3, 1, 1, 0, i, j, 2, 2)) do window = window + v end
        rng.seed(0)
        assert.equals(window, c(grid(1, 3, 3)):item())
        assert.is_true(T.RandomCrop(2):is_instance_of(T.Transform))
        local bad = T.Compose({ double, T.RandomCrop(9) })
        H.assert_error(function() bad(grid(1, 3, 3)) end, 'Compose: in transform 2 (RandomCrop)',
            'required crop size (9, 9)')
        assert.equals('Compose(\n    Lambda()\n    RandomCrop(size={9, 9})\n)', tostring(bad))
        H.assert_error(function() T.Compose({ double, 3 }) end, 'Compose', 'transform 2',
            'callable', 'number')
        H.assert_error(function() T.Compose(double) end, 'Compose', 'list')
        H.assert_error(function() T.Compose({ double, nil, inc }) end, 'Compose')
        H.assert_error(function() T.Lambda('x') end, 'Lambda', 'callable', 'string')
    end)

    it("never draws from ddpl's generator", function()
        local aug = T.Compose({ T.RandomCrop(3, { padding = 1 }), T.RandomHorizontalFlip() })
        ddpl.manual_seed(4)
        local a = ddpl.rand(5)
        ddpl.manual_seed(4)
        for _ = 1, 20 do aug(grid(3, 4, 4)) end
        H.assert_close(ddpl.rand(5), a)
    end)
end)
