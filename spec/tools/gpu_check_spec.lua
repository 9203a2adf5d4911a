-- spec/tools/gpu_check_spec.lua: the dry run of scripts/gpu-check.sh on this GPU-less machine. A
-- fake nvidia-smi on PATH lists an H200, so the script takes its GPU path: it must refuse to go on
-- (exit status 3, CUDA's reason in its summary) at the probe, before configuring anything, and
-- at once when there is no nvcc. What is left untested here is the GPU itself.
local S = require 'shell_util'

local fake_smi = [[#!/bin/sh
# a fake nvidia-smi: one H200 (gpu_check_spec.lua)
case "$*" in
-L) echo "GPU 0: NVIDIA H200 (UUID: GPU-00000000-0000-0000-0000-000000000000)" ;;
*--query-gpu=compute_cap*) echo "9.0" ;;
*--query-gpu=*) echo "NVIDIA H200, 143771 MiB, 570.86.15, 9.0" ;;
*) echo "fake nvidia-smi: unexpected arguments: $*" >&2; exit 9 ;;
esac
]]

local function have_nvcc()
    local _, code = S.sh('command -v nvcc || test -x /usr/local/cuda/bin/nvcc')
    return code == 0
end

local function real_gpu()
    local out = S.sh('command -v nvidia-smi >/dev/null && nvidia-smi -L')
    return out:match('^GPU %d') ~= nil
end

describe('gpu-check.sh where nvidia-smi lists a GPU that CUDA cannot use', function()
    local tmp

    before_each(function()
        if real_gpu() then
            pending('a real GPU is present: the dry run is for GPU-less machines')
        end
        tmp = S.new_tmpdir()
        assert(os.execute('mkdir -p ' .. S.q(tmp .. '/bin')))
        S.write(tmp .. '/bin/nvidia-smi', fake_smi)
        assert(os.execute('chmod +x ' .. S.q(tmp .. '/bin/nvidia-smi')))
    end)

    after_each(function()
        if tmp then os.execute('rm -rf ' .. S.q(tmp)) end
        tmp = nil
    end)

    -- Runs the check with the fake on PATH; returns its output, exit status and summary.
    local function check(env)
        local cmd = ('cd %s && env PATH=%s:"$PATH" OUT=%s %s timeout -k 5 110 '
            .. 'scripts/gpu-check.sh --system --skip-bench --build-dir %s'):format(
            S.q(S.src), S.q(tmp .. '/bin'), S.q(tmp .. '/out'), env or '', S.q(tmp .. '/build'))
        local out, code = S.sh(cmd)
        return out, code, S.slurp(tmp .. '/out/summary.txt')
    end

    it('stops at the probe with CUDA\'s reason, before configuring', function()
        if not have_nvcc() then return pending('no nvcc here') end
        local out, code, summary = check()
        assert.are.equal(3, code, out)
        assert.truthy(summary:find('gpus listed: 1; CUDA architectures: 90', 1, true), summary)
        -- the probe ran and said why, in CUDA's words
        assert.truthy(summary:find('gpu-check: probe: runtime: CUDA', 1, true), summary)
        local reason = summary:match(
            'FAILED: the GPU is unusable %(probe rc 1 after %d+ s%): ([^\n]+)')
        assert.truthy(reason, summary)
        assert.truthy(reason:find('^cuda%a+: .+ %(cudaError%a+%)$'), reason)
        -- nothing was configured or built
        assert.is_nil(io.open(tmp .. '/build/CMakeCache.txt'))
    end)

    it('fails at once when there is no nvcc to build the CUDA backend with', function()
        local out, code, summary = check('NVCC=/nonexistent/nvcc')
        assert.are.equal(3, code, out)
        assert.truthy(summary:find('FAILED: nvidia-smi lists 1 GPU(s) but there is no nvcc at '
            .. '/nonexistent/nvcc', 1, true), summary)
        assert.is_nil(io.open(tmp .. '/build/gpu-probe/gpu-probe'))
    end)
end)
