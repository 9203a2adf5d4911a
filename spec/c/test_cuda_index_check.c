/* spec/c/test_cuda_index_check.c: the deferred bad-index checks of the CUDA index ops
 * (cuda_index_check.c) on the CPU: the ring is compiled into this test over fake device calls
 * (flags in host memory, a count of waits), and "kernels" are the test writing a flag.
 * defines: main (no wait per op; the first failing op in issue order reported once at the next
 *          flush, naming where it surfaced; index tensors kept until checked and released
 *          after; a full ring read before the next op; devices independent; failures of the
 *          device calls). */
#include "check.h"
#include "core/core.h"

/* This test's own copy of the ring, renamed so that it cannot clash with the engine's copy in a
 * CUDA build of the library it links against. */
#define cuda_index_check_setup test_cuda_index_check_setup
#define cuda_index_check_push  test_cuda_index_check_push
#define cuda_index_check_flush test_cuda_index_check_flush
#include "cuda/cuda_index_check.c"

/* ---- fakes ---- */
static struct {
    uint64_t memory[2][RING]; /* each device's flag allocation */
    int allocs, resets, reads, fail_alloc, fail_reset;
} fake;

static void *fake_alloc(int device, size_t nbytes)
{
    CHECK(nbytes == sizeof fake.memory[0]);
    if (fake.fail_alloc) {
        ddpl_error("fake alloc failed");
        return NULL;
    }
    fake.allocs++;
    return fake.memory[device];
}

static int fake_reset(void *flag, int device)
{
    CHECK((uint64_t *)flag >= fake.memory[device] && (uint64_t *)flag < fake.memory[device] + RING);
    if (fake.fail_reset) return ddpl_error("fake reset failed");
    fake.resets++;
    *(uint64_t *)flag = UINT64_MAX;
    return 0;
}

static int fake_read(uint64_t *dst, const void *src, size_t n, int device)
{
    CHECK((const uint64_t *)src >= fake.memory[device] &&
          (const uint64_t *)src + n <= fake.memory[device] + RING);
    fake.reads++;
    memcpy(dst, src, n * sizeof *dst);
    return 0;
}

static const cuda_index_check_raw fake_raw = {fake_alloc, fake_reset, fake_read};

/* the op's own message, as the glue's report writes it */
static int fake_report(const cuda_index_pending *p, int64_t pos)
{
    const int64_t *v = ddpl_tensor_data(p->index);
    return ddpl_error("%s: index %lld at position %lld is out of range for dimension %d with size "
                      "%lld",
                      p->op, (long long)v[pos], (long long)pos, p->dim, (long long)p->bound);
}

static ddpl_tensor *indices(int64_t a, int64_t b)
{
    int64_t n = 2;
    ddpl_tensor *t = ddpl_zeros(1, &n, DDPL_INT64, ddpl_cpu());
    int64_t *d = ddpl_tensor_data(t);
    d[0] = a;
    d[1] = b;
    return t;
}

static long refs(const ddpl_tensor *t)
{
    return atomic_load(&t->refcount);
}

static uint64_t *push(int device, const char *op, ddpl_tensor *index, int64_t bound)
{
    cuda_index_pending p = {
        .op = op, .index = index, .dim = 0, .bound = bound, .report = fake_report};
    return test_cuda_index_check_push(device, &p);
}

static bool has(const char *s, const char *want)
{
    return s && strstr(s, want) != NULL;
}

int main(void)
{
    test_cuda_index_check_setup(&fake_raw);

    /* ops that meet no bad index: no wait until the flush, which reads them all at once */
    ddpl_tensor *good = indices(0, 1);
    for (int i = 0; i < 3; i++) CHECK(push(0, "index_select", good, 4) != NULL);
    CHECK(fake.allocs == 1 && fake.resets == 3 && fake.reads == 0);
    CHECK(refs(good) == 4); /* kept for the messages until checked */
    CHECK(test_cuda_index_check_flush(0, "cuda.synchronize") == 0);
    CHECK(fake.reads == 1 && refs(good) == 1);
    CHECK(test_cuda_index_check_flush(0, "cuda.synchronize") == 0 && fake.reads == 1);

    /* two failing ops: the first in issue order is reported, once, with where it surfaced */
    ddpl_tensor *bad1 = indices(0, 7), *bad2 = indices(-1, 0);
    uint64_t *f1 = push(0, "index_select", bad1, 4);
    CHECK(push(0, "gather", good, 4) != NULL);
    uint64_t *f2 = push(0, "nll_loss", bad2, 3);
    CHECK(f1 && f2 && *f1 == UINT64_MAX);
    *f2 = 0; /* the kernels record the lowest bad position */
    *f1 = 1;
    CHECK(test_cuda_index_check_flush(0, "a copy from cuda") < 0);
    const char *e = ddpl_last_error();
    CHECK(
        has(e, "index_select: index 7 at position 1 is out of range for dimension 0 with size 4"));
    CHECK(has(e, "an asynchronous check of an earlier index_select; reported at a copy from cuda"));
    CHECK(!has(e, "nll_loss"));
    CHECK(refs(bad1) == 1 && refs(bad2) == 1 && refs(good) == 1);
    CHECK(test_cuda_index_check_flush(0, "cuda.synchronize") == 0); /* reported once */

    /* a program that never synchronises: the full ring is read before the next op, which then
     * fails with the earlier op's error; the ring wraps around its end */
    int reads = fake.reads;
    uint64_t *first = NULL;
    for (int i = 0; i < RING; i++) {
        uint64_t *f = push(0, "index_add", i == 5 ? bad1 : good, 4);
        CHECK(f != NULL);
        if (i == 5) first = f;
    }
    CHECK(fake.reads == reads && refs(good) == RING);
    *first = 1;
    CHECK(push(0, "embedding_backward", good, 4) == NULL);
    CHECK(has(ddpl_last_error(), "index_add: index 7") &&
          has(ddpl_last_error(), "reported at embedding_backward"));
    CHECK(fake.reads == reads + 2); /* the pending range crossed the ring's end: two reads */
    CHECK(refs(good) == 1 && refs(bad1) == 1);
    CHECK(push(0, "embedding_backward", good, 4) != NULL); /* the ring is free again */
    CHECK(test_cuda_index_check_flush(0, "cuda.synchronize") == 0);

    /* devices are independent: device 1's bad op is not reported by device 0's flush */
    uint64_t *g1 = push(1, "scatter_add", bad2, 2);
    CHECK(g1 != NULL && fake.allocs == 2);
    *g1 = 0;
    CHECK(test_cuda_index_check_flush(0, "cuda.synchronize") == 0);
    CHECK(test_cuda_index_check_flush(1, "cuda.synchronize") < 0);
    CHECK(has(ddpl_last_error(), "scatter_add: index -1 at position 0"));

    /* failing device calls: the op fails with their error and nothing stays pending */
    fake.fail_reset = 1;
    CHECK(push(0, "gather", good, 4) == NULL && has(ddpl_last_error(), "fake reset failed"));
    fake.fail_reset = 0;
    CHECK(refs(good) == 1);
    fake.fail_alloc = 1;
    CHECK(push(2, "gather", good, 4) == NULL && has(ddpl_last_error(), "fake alloc failed"));
    CHECK(push(CUDA_INDEX_CHECK_MAX_DEVICES, "gather", good, 4) == NULL);
    CHECK(has(ddpl_last_error(), "bad device"));
    CHECK(test_cuda_index_check_flush(2, "cuda.synchronize") == 0); /* never used: nothing */

    ddpl_tensor_release(good);
    ddpl_tensor_release(bad1);
    ddpl_tensor_release(bad2);
    return check_finish();
}
