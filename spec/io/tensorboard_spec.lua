-- spec/io/tensorboard_spec.lua: ddpl.utils.tensorboard.SummaryWriter, read back with an independent
-- decoder (spec/support/tfevents_reader.lua: bitwise CRC-32C, its own protobuf parser): TFRecord
-- framing and both CRCs of every record, the file name, the first file_version record, the field
-- numbers of Event, Summary.Value, HistogramProto, TensorProto and SummaryMetadata, and the values
-- (scalars, histogram buckets, min/max/sum/sum_squares, text); add_scalars' sub-directories;
-- rank 0 only; errors naming the method and the argument; examples/train.lua and
-- examples/ddp_train.lua with --metrics and --tensorboard (tiny runs: 640 training images).
local ddpl = require 'ddplua'
local R = require 'tfevents_reader'
local S = require 'shell_util'
local SummaryWriter = require('ddplua.utils.tensorboard').SummaryWriter
local crc32c = require 'ddplua.utils.crc32c'

local function close_to(a, b, rel)
    return math.abs(a - b) <= (rel or 1e-12) * math.max(1, math.abs(a), math.abs(b))
end

-- The only value of the event with that tag and step.
local function find(events, tag, step)
    local found
    for _, e in ipairs(events) do
        for _, v in ipairs(e.values) do
            if v.tag == tag and e.step == step then
                assert.is_nil(found, 'two values for ' .. tag .. ' at step ' .. step)
                found = v
                found.event = e
            end
        end
    end
    assert.truthy(found, 'no value for ' .. tag .. ' at step ' .. step)
    return found
end

describe('CRC-32C', function()
    it('gives the standard check value 0xE3069283 for "123456789", both implementations', function()
        assert.are.equal(0xE3069283, crc32c.checksum('123456789'))
        assert.are.equal(0xE3069283, R.crc32c('123456789'))
        assert.are.equal(0, crc32c.checksum(''))
    end)

    it('the writer\'s table version agrees with the bitwise one at every length 0..70', function()
        local s = {}
        for i = 1, 70 do s[i] = string.char((i * 37 + 11) % 256) end
        s = table.concat(s)
        for n = 0, #s do
            local part = s:sub(1, n)
            assert.are.equal(R.crc32c(part), crc32c.checksum(part), 'length ' .. n)
            assert.are.equal(R.masked_crc(part), crc32c.masked(part), 'length ' .. n)
        end
        -- continuing a CRC over two pieces gives the CRC of the whole
        assert.are.equal(crc32c.checksum(s),
            crc32c.checksum(s:sub(31), crc32c.checksum(s:sub(1, 30))))
    end)
end)

describe('SummaryWriter', function()
    local dir
    before_each(function() dir = S.new_tmpdir() end)
    after_each(function() os.execute('rm -rf ' .. S.q(dir)) end)

    it('writes one event file named as TensorBoard does, starting with brain.Event:2', function()
        local before = os.time()
        local w = SummaryWriter(dir .. '/run')
        w:add_scalar('loss', 1.5, 3)
        w:close()
        local files = R.event_files(dir .. '/run')
        assert.are.equal(1, #files)
        local host = S.sh('hostname'):gsub('%s+$', '')
        local t, name_host, pid, n = files[1]:match(
            '/events%.out%.tfevents%.(%d%d%d%d%d%d%d%d%d%d)%.(.+)%.(%d+)%.(%d+)$')
        assert.truthy(t, files[1])
        assert.are.equal(host, name_host)
        assert.is_true(tonumber(t) >= before and tonumber(t) <= os.time() + 1, files[1])
        assert.are.equal(files[1], w:get_path())
        local recs = R.records(files[1])
        assert.are.equal(2, #recs)
        local first = R.event(recs[1])
        assert.are.equal('brain.Event:2', first.file_version)
        assert.is_true(math.abs(first.wall_time - os.time()) < 60, tostring(first.wall_time))
        assert.is_nil(first.summary)
        -- exactly the fields wall_time (1, fixed64) and file_version (3, bytes)
        local f = R.fields(recs[1])
        assert.are.same({{1, 1}, {3, 2}}, {{f[1].num, f[1].wire}, {f[2].num, f[2].wire}})
        assert.are.equal(2, #f)
    end)

    it('scalars: Event{wall_time 1, step 2, summary 5}, Value{tag 1, simple_value 2}', function()
        local w = SummaryWriter(dir)
        w:add_scalar('train/loss', 0.25, 1)
        w:add_scalar('train/loss', ddpl.tensor(0.125), 2, 1700000000.5)
        w:add_scalar('train/loss', -3, 0) -- step 0: proto3 leaves the field out
        w:add_scalar('big', 2 ^ 40, 5000000000) -- a step beyond 32 bits
        w:close()
        local recs = R.records(R.event_files(dir)[1])
        assert.are.equal(5, #recs)
        -- the raw fields of record 2: wall_time (1, fixed64), step (2, varint), summary (5, bytes)
        local f = R.fields(recs[2])
        assert.are.same({1, 2, 5}, {f[1].num, f[2].num, f[3].num})
        assert.are.same({1, 0, 2}, {f[1].wire, f[2].wire, f[3].wire})
        local value = R.fields(R.fields(f[3].value)[1].value) -- Summary.value[1]
        assert.are.same({1, 2}, {value[1].num, value[2].num})
        assert.are.same({2, 5}, {value[1].wire, value[2].wire})
        local events = R.read_dir(dir)
        assert.are.equal(0.25, find(events, 'train/loss', 1).simple_value)
        local second = find(events, 'train/loss', 2)
        assert.are.equal(0.125, second.simple_value)
        assert.are.equal(1700000000.5, second.event.wall_time)
        assert.are.equal(-3, find(events, 'train/loss', 0).simple_value)
        assert.is_nil(R.field_map(recs[4])[2]) -- no step field at step 0
        local big = find(events, 'big', 5000000000)
        assert.are.equal(2 ^ 40, big.simple_value)
        for _, e in ipairs(events) do
            assert.is_true(e.wall_time > 1.6e9, 'wall_time ' .. e.wall_time)
        end
    end)

    it('add_scalars: one file per name in log_dir/<main_tag>_<name>, tag main_tag', function()
        local w = SummaryWriter(dir)
        w:add_scalars('run/loss', {train = 1.5, test = 2.5}, 7)
        w:add_scalars('run/loss', {train = 1.0, test = 2.0}, 8)
        w:close()
        assert.are.same({[7] = 1.5, [8] = 1.0}, R.scalars(dir .. '/run_loss_train', 'run/loss'))
        assert.are.same({[7] = 2.5, [8] = 2.0}, R.scalars(dir .. '/run_loss_test', 'run/loss'))
        assert.are.equal(1, #R.event_files(dir .. '/run_loss_train'))
    end)

    it('histogram with n bins: numpy\'s edges, one empty bin in front, the values\' figures',
        function()
            local w = SummaryWriter(dir)
            -- bins of width 1 from -1 to 3: [-1,0) [0,1) [1,2) [2,3]
            w:add_histogram('h', {-1, 0, 0.5, 0.5, 2, 3}, 4, {bins = 4})
            w:close()
            local recs = R.records(R.event_files(dir)[1])
            local value = R.fields(R.fields(R.event(recs[2]).summary)[1].value)
            assert.are.same({1, 5}, {value[1].num, value[2].num}) -- tag, histo
            local h = R.field_map(value[2].value)
            for num = 1, 5 do assert.are.equal(1, h[num][1].wire, 'field ' .. num) end -- doubles
            assert.are.equal(2, h[6][1].wire) -- packed
            assert.are.equal(2, h[7][1].wire)
            local v = find(R.read_dir(dir), 'h', 4)
            assert.are.same({-1, 0, 1, 2, 3}, v.histo.bucket_limit)
            assert.are.same({0, 1, 3, 0, 2}, v.histo.bucket)
            assert.are.equal(-1, v.histo.min)
            assert.are.equal(3, v.histo.max)
            assert.are.equal(6, v.histo.num)
            assert.are.equal(5, v.histo.sum)
            assert.are.equal(1 + 0.25 + 0.25 + 4 + 9, v.histo.sum_squares)
        end)

    it('histogram of a tensor with PyTorch\'s default bins: counts match the values', function()
        ddpl.manual_seed(5)
        local x = ddpl.randn(40, 25) * 3
        local w = SummaryWriter(dir)
        w:add_histogram('weights', x, 10)
        w:close()
        local v = find(R.read_dir(dir), 'weights', 10).histo
        local values = x:double():reshape(-1):tolist()
        local lo, hi, sum, sq = math.huge, -math.huge, 0, 0
        for _, a in ipairs(values) do
            lo, hi, sum, sq = math.min(lo, a), math.max(hi, a), sum + a, sq + a * a
        end
        assert.are.equal(1000, v.num)
        assert.are.equal(lo, v.min)
        assert.are.equal(hi, v.max)
        assert.is_true(close_to(sum, v.sum, 1e-9), v.sum .. ' vs ' .. sum)
        assert.is_true(close_to(sq, v.sum_squares, 1e-9))
        -- PyTorch's default edges: 0 and +-1e-12 * 1.1^k below 1e20; the limits are a run of them
        local edges, e = {0.0}, 1e-12
        while e < 1e20 do
            table.insert(edges, 1, -e)
            edges[#edges + 1] = e
            e = e * 1.1
        end
        assert.are.equal(1549, #edges)
        local at
        for i, edge in ipairs(edges) do if edge == v.bucket_limit[1] then at = i end end
        assert.truthy(at, 'the first limit is no default edge')
        for j, limit in ipairs(v.bucket_limit) do assert.are.equal(edges[at + j - 1], limit) end
        -- bucket j counts the values in [limit j-1, limit j); the first bucket is empty
        assert.are.equal(#v.bucket_limit, #v.bucket)
        assert.are.equal(0, v.bucket[1])
        local total = 0
        for j = 2, #v.bucket do
            local count = 0
            for _, a in ipairs(values) do
                if a >= v.bucket_limit[j - 1] and a < v.bucket_limit[j] then count = count + 1 end
            end
            assert.are.equal(count, v.bucket[j], 'bucket ' .. j)
            total = total + v.bucket[j]
        end
        assert.are.equal(1000, total)
        assert.is_true(v.bucket[2] > 0 and v.bucket[#v.bucket] > 0) -- trimmed to the support
    end)

    it('text: tag/text_summary, a DT_STRING TensorProto of shape [1], plugin "text"', function()
        local text = 'lr = 0.05\n**markdown** é'
        local w = SummaryWriter(dir)
        w:add_text('config', text, 0)
        w:close()
        local recs = R.records(R.event_files(dir)[1])
        local value = R.fields(R.fields(R.event(recs[2]).summary)[1].value)
        assert.are.same({1, 8, 9}, {value[1].num, value[2].num, value[3].num})
        local v = R.read_dir(dir)[1].values[1]
        assert.are.equal('config/text_summary', v.tag)
        assert.are.equal(7, v.tensor.dtype) -- DT_STRING
        assert.are.same({1}, v.tensor.dims)
        assert.are.same({text}, v.tensor.string_val)
        assert.are.equal('text', v.plugin_name)
    end)

    it('buffers records until flush (max_queue), then the file reads whole', function()
        local w = SummaryWriter(dir, {max_queue = 100, flush_secs = 1e9})
        w:add_scalar('a', 1, 1)
        assert.are.equal(1, #R.records(w:get_path())) -- only the file_version record so far
        w:flush()
        assert.are.equal(2, #R.records(w:get_path()))
        w:close()
        w:close() -- a second close does nothing
        -- a writer never closed writes its records out when the interpreter closes
        S.write(dir .. '/open.lua', "local w = require('ddplua.utils.tensorboard')"
            .. ".SummaryWriter(arg[1]); w:add_scalar('kept', 4, 9)")
        local out, code = S.sh(('%s %s %s'):format(S.q(S.bin), S.q(dir .. '/open.lua'),
            S.q(dir .. '/open')))
        assert.are.equal(0, code, out)
        assert.are.same({[9] = 4}, R.scalars(dir .. '/open', 'kept'))
    end)

    it('errors name the method and the bad argument', function()
        local w = SummaryWriter(dir)
        local function err(pattern, f) assert.has_error(f, pattern) end
        err('SummaryWriter.add_scalar: tag must be a non-empty string, got nil',
            function() w:add_scalar(nil, 1, 1) end)
        err('SummaryWriter.add_scalar: value must be a number or a one-element tensor, got string',
            function() w:add_scalar('a', 'x', 1) end)
        err('SummaryWriter.add_scalar: value must be a number or a one-element tensor, got a '
            .. 'tensor of 3 elements', function() w:add_scalar('a', ddpl.zeros(3), 1) end)
        err('SummaryWriter.add_scalar: step must be an integer or nil, got 1.5',
            function() w:add_scalar('a', 1, 1.5) end)
        err('SummaryWriter.add_scalars: values must be a table {name = value}, got number',
            function() w:add_scalars('a', 3, 1) end)
        err('SummaryWriter.add_histogram: the values are empty',
            function() w:add_histogram('h', {}, 1) end)
        err('SummaryWriter.add_histogram: the values hold NaN (element 2): a histogram needs '
            .. 'finite values', function() w:add_histogram('h', {1, 0 / 0}, 1) end)
        err('SummaryWriter.add_histogram: bins must increase, but bins[2] = 1 follows 2',
            function() w:add_histogram('h', {1}, 1, {bins = {2, 1}}) end)
        err('SummaryWriter.add_text: text must be a string, got number',
            function() w:add_text('t', 5, 1) end)
        err('SummaryWriter.add_scalar: call it as writer:add_scalar(...), with a colon',
            function() w.add_scalar('a', 1, 1) end)
        w:close()
        err('SummaryWriter.add_scalar: the writer is closed',
            function() w:add_scalar('a', 1, 1) end)
        err('SummaryWriter.new: log_dir must be a non-empty string, got 5',
            function() SummaryWriter(5) end)
        -- nothing half-written: the file holds the file_version record only
        assert.are.equal(1, #R.records(w:get_path()))
        S.write(dir .. '/plain', 'x')
        err('SummaryWriter: cannot create the log directory ' .. dir .. '/plain/sub',
            function() SummaryWriter(dir .. '/plain/sub') end)
    end)

    it('in a distributed job only rank 0 writes, unless all_ranks', function()
        local code = "local W = require('ddplua.utils.tensorboard').SummaryWriter; "
            .. "local w = W(arg[1], {all_ranks = arg[2] == 'all'}); w:add_scalar('x', 1, 1); "
            .. 'w:close()'
        local script = dir .. '/w.lua'
        S.write(script, code)
        local function run(rank, log_dir, mode)
            local out, status = S.sh(('RANK=%d %s %s %s %s'):format(rank, S.q(S.bin), S.q(script),
                S.q(log_dir), mode or ''))
            assert.are.equal(0, status, out)
        end
        run(1, dir .. '/r1')
        assert.are.equal(0, #R.event_files(dir .. '/r1'))
        assert.is_nil(io.open(dir .. '/r1')) -- not even the directory
        run(0, dir .. '/r0')
        assert.are.same({[1] = 1}, R.scalars(dir .. '/r0', 'x'))
        run(1, dir .. '/r1all', 'all')
        assert.are.same({[1] = 1}, R.scalars(dir .. '/r1all', 'x'))
    end)
end)

describe('the examples log metrics and TensorBoard scalars and show progress', function()
    local dir
    before_each(function() dir = S.new_tmpdir() end)
    after_each(function() os.execute('rm -rf ' .. S.q(dir)) end)

    local json = require 'ddplua.json'

    -- The records of a metrics file, by event.
    local function records(path)
        local by = {}
        for line in io.lines(path) do
            local r = json.decode(line, path)
            by[r.event] = by[r.event] or {}
            table.insert(by[r.event], r)
        end
        return by
    end

    -- What both examples must have written: step records every 4 steps (10 steps an epoch),
    -- epoch records, the same figures as TensorBoard scalars, a plain progress line per tenth.
    local function check(out, metrics, tb_dir)
        local by = records(metrics)
        assert.are.same({4, 8, 12, 16, 20}, (function()
            local steps = {}
            for _, r in ipairs(by.step) do steps[#steps + 1] = r.step end
            return steps
        end)(), out)
        for _, r in ipairs(by.step) do
            assert.are.equal('integer', math.type(r.step))
            assert.is_true(r.loss > 0 and r.loss < 5 and r.lr == 0.05 and r.samples_per_s > 0)
        end
        assert.are.equal(2, #by.epoch)
        assert.are.same({10, 20}, {by.epoch[1].step, by.epoch[2].step})
        assert.is_true(by.epoch[2].accuracy > 0.3, out)
        local loss = R.scalars(tb_dir, 'train/loss')
        for _, r in ipairs(by.step) do
            assert.is_true(math.abs(loss[r.step] - r.loss) < 1e-6 * r.loss, 'step ' .. r.step)
        end
        local acc = R.scalars(tb_dir, 'test/accuracy')
        for _, r in ipairs(by.epoch) do
            assert.is_true(math.abs(acc[r.step] - r.accuracy) < 1e-6, 'epoch ' .. r.epoch)
        end
        assert.is_truthy(R.scalars(tb_dir, 'train/samples_per_s')[20])
        -- stdout is a pipe: plain progress lines, no '\r'
        assert.truthy(out:find('epoch 2: 100%% 640/640 %[[^\n]*img/s, loss='), out)
        assert.is_nil(out:find('\r', 1, true))
        assert.are.equal(1, select(2, out:gsub('epoch 2: 100%%', '')), out) -- one rank prints
    end

    it('examples/train.lua --metrics --tensorboard', function()
        local m, tb = dir .. '/m.jsonl', dir .. '/tb'
        local out, code = S.sh(('%s %s --epochs 2 --train-size 640 --test-size 200 --threads 1 '
            .. '--log-every 4 --metrics %s --tensorboard %s'):format(S.q(S.bin),
            S.q(S.src .. '/examples/train.lua'), S.q(m), S.q(tb)))
        assert.are.equal(0, code, out)
        check(out, m, tb)
        assert.are.equal(1, #records(m).start)
        local config = R.read_dir(tb)[1].values[1]
        assert.are.equal('config/text_summary', config.tag)
        assert.are.equal('mlp', json.decode(config.tensor.string_val[1]).model)
    end)

    it('examples/ddp_train.lua on 2 ranks: rank 0 writes', function()
        local m, tb = dir .. '/m.jsonl', dir .. '/tb'
        local out, code = S.launch(S.src .. '/examples/ddp_train.lua', 2, ('--epochs 2 '
            .. '--train-size 640 --test-size 200 --log-every 4 --metrics %s --tensorboard %s')
            :format(S.q(m), S.q(tb)), nil, 300)
        assert.are.equal(0, code, out)
        check(out, m, tb)
        assert.are.equal(1, #R.event_files(tb)) -- rank 1 wrote none
    end)
end)

-- Optional: PyTorch's own make_histogram (its source read from the installed torch, run with
-- numpy; the tensorboard and protobuf packages it imports are not needed for this function) on
-- the same values gives the same buckets. Skipped where /usr/bin/python3 has no torch sources or
-- numpy: the decoder checks above are the required ones.
describe('PyTorch\'s make_histogram (optional: /usr/bin/python3 with numpy and torch)', function()
    local script = [==[
import ast, json, struct, sys, os, numpy as np
import importlib.util
spec = importlib.util.find_spec('torch')
path = os.path.join(os.path.dirname(spec.origin), 'utils', 'tensorboard', 'summary.py')
# torch 1.13 passes dtype=np.int32 to np.greater, which numpy >= 1.24 refuses; same result:
src = open(path).read().replace('np.greater(counts, 0, dtype=np.int32)',
                                'np.greater(counts, 0).astype(np.int32)')
tree = ast.parse(src)
fn = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == 'make_histogram')
env = {'np': np, 'HistogramProto': lambda **kw: kw}
exec(compile(ast.Module(body=[fn], type_ignores=[]), path, 'exec'), env)
data = open(sys.argv[1], 'rb').read()
values = np.array(struct.unpack('<%dd' % (len(data) // 8), data))
v, buckets = 1e-12, []
while v < 1e20:
    buckets.append(v)
    v *= 1.1
default_bins = [-b for b in buckets[::-1]] + [0] + buckets
out = {}
for name, bins in (('tensorflow', default_bins), ('four', 4)):
    h = env['make_histogram'](values, bins)
    out[name] = {k: (list(map(float, x)) if k in ('bucket', 'bucket_limit') else float(x))
                 for k, x in h.items()}
print(json.dumps(out))
]==]
    local have = os.execute('/usr/bin/python3 -c "import numpy, importlib.util; '
        .. 'assert importlib.util.find_spec(\'torch\')" >/dev/null 2>&1')

    it('gives the buckets, limits and figures SummaryWriter writes', function()
        if not have then
            return pending('/usr/bin/python3 with numpy and torch is not available')
        end
        local dir = S.new_tmpdir()
        ddpl.manual_seed(11)
        local values = (ddpl.randn(3000, {dtype = 'float64'}) * 2):tolist()
        -- values on edges: 0, the first default edges on both sides
        for _, v in ipairs({0.0, 0.0, 1e-12, -1e-12, 1e-12 * 1.1, 5e-13, -5e-13}) do
            values[#values + 1] = v
        end
        S.write(dir .. '/values.bin', string.pack('<' .. ('d'):rep(#values), table.unpack(values)))
        S.write(dir .. '/mh.py', script)
        local out, code = S.sh(('/usr/bin/python3 %s %s'):format(S.q(dir .. '/mh.py'),
            S.q(dir .. '/values.bin')))
        assert.are.equal(0, code, out)
        local ref = require('ddplua.json').decode(out)
        local w = SummaryWriter(dir .. '/tb')
        w:add_histogram('tf', values, 1)
        w:add_histogram('four', values, 2, {bins = 4})
        w:close()
        local events = R.read_dir(dir .. '/tb')
        for tag, step in pairs({tf = 1, four = 2}) do
            local mine = find(events, tag, step).histo
            local theirs = ref[tag == 'tf' and 'tensorflow' or 'four']
            assert.are.same(theirs.bucket_limit, mine.bucket_limit, tag)
            assert.are.same(theirs.bucket, mine.bucket, tag)
            for _, k in ipairs({'min', 'max', 'num'}) do
                assert.are.equal(theirs[k], mine[k], tag .. ' ' .. k)
            end
            for _, k in ipairs({'sum', 'sum_squares'}) do -- numpy sums pairwise
                assert.is_true(close_to(theirs[k], mine[k], 1e-12), tag .. ' ' .. k)
            end
        end
        os.execute('rm -rf ' .. S.q(dir))
    end)
end)
