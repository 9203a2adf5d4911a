/* tools/cuemu/runtime/cuemu_sched.cpp: running a grid: blocks one after another, the threads of
 * a block as fibers scheduled cooperatively between their barriers and warp shuffles.
 * defines: cuemu::self, launch_check, launch_run, kernel_entry, syncthreads, warp_exchange,
 *          dynamic_shared, static_shared.
 *
 * A fiber runs until it reaches __syncthreads or a shuffle whose lanes are not all there yet,
 * then the next one runs (in thread order, or in a seeded random order per pass with
 * DDPL_CUEMU_SCHEDULE=SEED, so that code missing a barrier sees other orders too). Exited threads
 * leave barriers, as on sm_70 and later. Shared memory is allocated per block and filled with
 * 0xff bytes (NaN for floats, -1 for integers), so a read before the write that a missing
 * barrier should have ordered gives a loud wrong answer; under AddressSanitizer each shared
 * array is its own allocation, so an index past its end is reported. */
#include <algorithm>
#include <atomic>
#include <mutex>
#include <random>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string>
#include <unordered_set>
#include <vector>

#include "cuemu.h"
#include "cuemu_fiber.h"
#include "cuemu_internal.h"

namespace cuemu
{

thread_local const thread_view *self;

namespace
{

enum thread_state { NEW, RUNNING, AT_BARRIER, AT_SHUFFLE, DONE };

struct cuda_thread {
    thread_view view;
    thread_state state;
    void *sp;
    fiber_stack stack; /* base NULL: none held */
    unsigned linear, lane, warp;
    /* shuffles: the count entered, and the value published for each by parity (a lane is at
     * most one shuffle ahead of any lane it waits for, so two slots suffice) */
    unsigned shuffles;
    unsigned shuffle_mask;
    uint64_t shuffle_value[2];
};

/* A warp's shuffles as counts, so that a full-mask shuffle (nearly all of them) is checked in
 * O(1) rather than by visiting the 32 lanes: `front` is the highest shuffle number a lane has
 * entered and `arrived` how many lanes have entered it. Trusted only while every shuffle of the
 * warp used the full mask and the warp has 32 lanes (`counted`); otherwise the lanes are
 * visited. */
struct warp_progress {
    unsigned front, arrived;
    bool counted;
};

struct block_run {
    const launch_config *cfg;
    void (*body)(void *);
    void *ctx;
    std::vector<cuda_thread> threads;
    std::vector<warp_progress> warps;
    unsigned live, at_barrier;
    void *scheduler_sp;
    cuda_thread *current;
    void *dynamic_smem;
    std::vector<std::pair<const void *, void *>> statics;
    const char *kernel_name;
    cudaError_t failed;
};

thread_local block_run *running; /* the block this host thread is running, if any */

/* read at every launch (a getenv is nothing beside a launch), so a forked test child or a
 * program that sets it late is obeyed */
uint64_t schedule_seed()
{
    return env_u64("DDPL_CUEMU_SCHEDULE", 0);
}

cuda_thread &me()
{
    if (!running || !running->current)
        fatal("a device function (__syncthreads, __shfl_*, shared memory) was called outside a "
              "kernel");
    return *running->current;
}

void yield(thread_state st)
{
    cuda_thread &t = me();
    t.state = st;
    fiber_switch(&t.sp, running->scheduler_sp, fiber_stack{NULL, 0}, false);
}

void fiber_main(void *arg)
{
    fiber_entered();
    cuda_thread *t = static_cast<cuda_thread *>(arg);
    block_run *b = running;
    b->body(b->ctx);
    t->state = DONE;
    fiber_switch(&t->sp, b->scheduler_sp, fiber_stack{NULL, 0}, true);
    __builtin_unreachable();
}

const char *name_of(const block_run &b)
{
    return b.kernel_name ? b.kernel_name : "(kernel)";
}

/* Whether t, waiting in its shuffle number t.shuffles, may read: every lane of its mask has
 * published that shuffle's value. Visits the lanes (and stops the program on a lane that has
 * exited or does not exist). */
bool shuffle_ready_by_lanes(block_run &b, const cuda_thread &t)
{
    unsigned base = t.warp * 32;
    for (unsigned l = 0; l < 32; l++) {
        if (!(t.shuffle_mask >> l & 1)) continue;
        unsigned idx = base + l;
        if (idx >= b.threads.size())
            fatal("kernel %s (%s:%d): thread %u shuffles with mask 0x%08x, which names lane %u; "
                  "the block has %zu threads, so that lane does not exist",
                  name_of(b), b.cfg->file, b.cfg->line, t.linear, t.shuffle_mask, l,
                  b.threads.size());
        const cuda_thread &o = b.threads[idx];
        if (o.shuffles < t.shuffles) {
            if (o.state == DONE)
                fatal("kernel %s (%s:%d): thread %u shuffles with mask 0x%08x, but lane %u has "
                      "exited",
                      name_of(b), b.cfg->file, b.cfg->line, t.linear, t.shuffle_mask, l);
            return false;
        }
    }
    return true;
}

/* The same, in O(1) where the warp's counts can be trusted: with full masks, a lane that entered
 * shuffle k + 1 had found every lane at k or beyond, so t (at k) is ready once the front has
 * moved past k or all 32 lanes are at k. */
bool shuffle_ready(block_run &b, const cuda_thread &t)
{
    const warp_progress &w = b.warps[t.warp];
    if (!w.counted) return shuffle_ready_by_lanes(b, t);
    return w.front > t.shuffles || w.arrived == 32;
}

[[noreturn]] void deadlock(block_run &b)
{
    /* a shuffle that waits for an exited lane is the more precise report */
    for (const cuda_thread &t : b.threads)
        if (t.state == AT_SHUFFLE) shuffle_ready_by_lanes(b, t);
    unsigned barrier = 0, shuffle = 0, first_shuffle = 0;
    for (const cuda_thread &t : b.threads) {
        if (t.state == AT_BARRIER) barrier++;
        if (t.state == AT_SHUFFLE && shuffle++ == 0) first_shuffle = t.linear;
    }
    fatal("kernel %s (%s:%d) hangs in block (%u,%u,%u): %u live threads, %u waiting at "
          "__syncthreads, %u in a shuffle (first: thread %u) whose lanes never all arrive",
          name_of(b), b.cfg->file, b.cfg->line, b.threads[0].view.block_idx.x,
          b.threads[0].view.block_idx.y, b.threads[0].view.block_idx.z, b.live, barrier, shuffle,
          first_shuffle);
}

void *poisoned(size_t size, size_t align)
{
    if (align < 16) align = 16;
    void *p = NULL;
    if (posix_memalign(&p, align, size ? size : 1) != 0)
        fatal("out of host memory for shared memory");
    memset(p, 0xff, size);
    return p;
}

void run_block(block_run &b, uint3 block_idx, std::mt19937_64 *rng)
{
    const dim3 bd = b.cfg->block;
    unsigned n = bd.x * bd.y * bd.z;
    b.threads.assign(n, cuda_thread{});
    for (unsigned i = 0; i < n; i++) {
        cuda_thread &t = b.threads[i];
        t.view.thread_idx = make_uint3(i % bd.x, i / bd.x % bd.y, i / (bd.x * bd.y));
        t.view.block_idx = block_idx;
        t.view.block_dim = bd;
        t.view.grid_dim = b.cfg->grid;
        t.state = NEW;
        t.linear = i;
        t.lane = i % 32;
        t.warp = i / 32;
    }
    b.warps.assign((n + 31) / 32, warp_progress{0, 0, true});
    if (n % 32) b.warps.back().counted = false; /* a partial warp: its lanes are visited */
    b.live = n;
    b.at_barrier = 0;
    b.dynamic_smem = poisoned(b.cfg->dynamic_smem, 16);
    std::vector<unsigned> order(n);
    for (unsigned i = 0; i < n; i++) order[i] = i;

    while (b.live > 0) {
        if (rng) std::shuffle(order.begin(), order.end(), *rng);
        bool progressed = false;
        for (unsigned i : order) {
            cuda_thread &t = b.threads[i];
            if (t.state == DONE || t.state == AT_BARRIER) continue;
            if (t.state == AT_SHUFFLE && !shuffle_ready(b, t)) continue;
            if (t.state == NEW) {
                t.stack = fiber_stack_take();
                fiber_start(&t.sp, t.stack, fiber_main, &t);
            }
            t.state = RUNNING;
            b.current = &t;
            self = &t.view;
            fiber_switch(&b.scheduler_sp, t.sp, t.stack, false);
            b.current = NULL;
            self = NULL;
            progressed = true;
            if (t.state == DONE) {
                fiber_stack_give(t.stack);
                t.stack = fiber_stack{NULL, 0};
                b.live--;
            }
            if (b.at_barrier > 0 && b.at_barrier == b.live) { /* everyone left has arrived */
                for (cuda_thread &o : b.threads)
                    if (o.state == AT_BARRIER) o.state = RUNNING;
                b.at_barrier = 0;
            }
        }
        if (!progressed && b.live > 0) deadlock(b);
    }
    free(b.dynamic_smem);
    b.dynamic_smem = NULL;
    for (auto &s : b.statics) free(s.second);
    b.statics.clear();
}

std::mutex coverage_mutex;

} // namespace

bool launch_check(const launch_config &c)
{
    cudaError_t e = cudaSuccess;
    uint64_t threads = (uint64_t)c.block.x * c.block.y * c.block.z;
    if (threads == 0 || (uint64_t)c.grid.x * c.grid.y * c.grid.z == 0 ||
        threads > MAX_THREADS_PER_BLOCK || c.block.z > 64 || c.grid.x > 0x7fffffffu ||
        c.grid.y > 65535 || c.grid.z > 65535)
        e = cudaErrorInvalidConfiguration;
    else if (c.dynamic_smem > DEFAULT_SMEM && c.dynamic_smem > func_max_dynamic_smem(c.kernel))
        e = cudaErrorInvalidValue;
    else {
        int dev = stream_device(c.stream), current = -1;
        cudaGetDevice(&current);
        if (dev < 0 || dev != current) e = cudaErrorInvalidResourceHandle;
    }
    if (e != cudaSuccess) {
        set_last_error(e);
        return false;
    }
    if (running)
        fatal("%s:%d: a kernel launched from inside a kernel (dynamic parallelism is not "
              "emulated)",
              c.file, c.line);
    return true;
}

void launch_run(const launch_config &cfg, void (*body)(void *), void *ctx)
{
    static std::atomic<uint64_t> launches{0};
    uint64_t seed = schedule_seed();
    std::mt19937_64 rng(seed * 0x9E3779B97F4A7C15ull + launches++);
    block_run b{};
    b.cfg = &cfg;
    b.body = body;
    b.ctx = ctx;
    running = &b;
    for (unsigned z = 0; z < cfg.grid.z && b.failed == cudaSuccess; z++)
        for (unsigned y = 0; y < cfg.grid.y && b.failed == cudaSuccess; y++)
            for (unsigned x = 0; x < cfg.grid.x && b.failed == cudaSuccess; x++)
                run_block(b, make_uint3(x, y, z), seed ? &rng : NULL);
    running = NULL;
    if (b.failed != cudaSuccess) set_last_error(b.failed);
}

bool kernel_entry(const char *name, int max_threads)
{
    block_run &b = *running;
    if (!b.kernel_name) {
        b.kernel_name = name;
        static const char *path = getenv("DDPL_CUEMU_COVERAGE");
        static std::unordered_set<std::string> seen;
        if (path && path[0]) {
            std::lock_guard<std::mutex> hold(coverage_mutex);
            if (seen.insert(name).second) {
                FILE *f = fopen(path, "a");
                if (f) {
                    fprintf(f, "%s\n", name);
                    fclose(f);
                }
            }
        }
    }
    const dim3 bd = b.cfg->block;
    if (max_threads > 0 && bd.x * bd.y * bd.z > (unsigned)max_threads) {
        b.failed = cudaErrorLaunchOutOfResources; /* the hardware refuses such a launch */
        return false;
    }
    return b.failed == cudaSuccess;
}

void syncthreads()
{
    me();
    running->at_barrier++;
    yield(AT_BARRIER);
}

void warp_exchange(unsigned mask, const void *value, size_t size, int src, void *out)
{
    cuda_thread &t = me();
    if (!(mask >> t.lane & 1))
        fatal("kernel %s (%s:%d): thread %u calls a shuffle with mask 0x%08x, which leaves out "
              "its own lane %u",
              name_of(*running), running->cfg->file, running->cfg->line, t.linear, mask, t.lane);
    if (src < 0 || src > 31 || !(mask >> src & 1))
        fatal("kernel %s (%s:%d): thread %u shuffles from lane %d, outside the mask 0x%08x",
              name_of(*running), running->cfg->file, running->cfg->line, t.linear, src, mask);
    t.shuffles++;
    t.shuffle_mask = mask;
    warp_progress &w = running->warps[t.warp];
    if (mask != 0xffffffffu) w.counted = false;
    if (t.shuffles > w.front) {
        w.front = t.shuffles;
        w.arrived = 1;
    } else if (t.shuffles == w.front) {
        w.arrived++;
    }
    memcpy(&t.shuffle_value[t.shuffles & 1], value, size);
    if (!shuffle_ready(*running, t)) yield(AT_SHUFFLE);
    const cuda_thread &from = running->threads[t.warp * 32 + (unsigned)src];
    memcpy(out, &from.shuffle_value[t.shuffles & 1], size);
}

void *dynamic_shared()
{
    me();
    return running->dynamic_smem;
}

void *static_shared(const void *key, size_t size, size_t align)
{
    me();
    for (auto &s : running->statics)
        if (s.first == key) return s.second;
    void *p = poisoned(size, align);
    running->statics.emplace_back(key, p);
    return p;
}

void fatal(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("cuemu: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    fflush(stderr);
    abort();
}

} // namespace cuemu
