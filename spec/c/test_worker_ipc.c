/* spec/c/test_worker_ipc.c: the DataLoader workers' transport (engine/distributed/worker_ipc.c)
 * from C, the way a worker and the main process use it:
 *   - a forked worker writes two batches into one slot, sends its memfd once with the first
 *     message; the main process maps it, reads tensors over the mapping with the worker's
 *     values, and the slot is free again exactly when the last tensor of a batch is released;
 *   - messages of every size up to a few MB arrive whole; a wait with nothing sent times out;
 *     a worker that exits is seen as the end (-2), also in the middle of a message;
 *   - wrong input is an error, never a crash: a batch with a non-contiguous tensor, a slot too
 *     small, a write into a lent slot, a segment too small to map, an announced message over
 *     the limit; and a slot whose header a hostile worker scribbled over (5,000 random
 *     corruptions of the descriptors) reads as the same batch or gives an error naming the
 *     segment, never a tensor outside the mapping.
 * defines: main. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "distributed/worker_ipc.h"

static ddpl_tensor *arange_f32(int64_t n, float start)
{
    ddpl_tensor *t = ddpl_empty(1, &n, DDPL_FLOAT32, ddpl_cpu());
    float *p = ddpl_tensor_data(t);
    for (int64_t i = 0; i < n; i++) p[i] = start + (float)i;
    return t;
}

static ddpl_tensor *labels_i64(int64_t n, int64_t start)
{
    ddpl_tensor *t = ddpl_empty(1, &n, DDPL_INT64, ddpl_cpu());
    int64_t *p = ddpl_tensor_data(t);
    for (int64_t i = 0; i < n; i++) p[i] = start + i;
    return t;
}

/* The worker: batch b is {x = [b*100, b*100+1, ...] (3 x 4), y = [b, b+1, b+2, b+3, b+4]}. It
 * waits for the main process's "next" before reusing the slot. */
static int worker(int fd)
{
    ddpl_batch_slot *slot = NULL;
    for (int b = 0; b < 2; b++) {
        ddpl_tensor *flat = arange_f32(12, (float)(b * 100));
        int64_t shape[2] = {3, 4};
        ddpl_tensor *x = ddpl_reshape(flat, 2, shape);
        ddpl_tensor *y = labels_i64(5, b);
        ddpl_tensor *batch[2] = {x, y};
        size_t need;
        if (ddpl_batch_slot_bytes(batch, 2, &need) < 0) return 10;
        if (!slot && !(slot = ddpl_batch_slot_new(need))) return 11;
        while (!ddpl_batch_slot_is_free(slot)) usleep(1000);
        if (ddpl_batch_slot_write(slot, batch, 2) < 0) return 12;
        /* a lent slot is not written again */
        if (ddpl_batch_slot_write(slot, batch, 2) == 0) return 13;
        if (!strstr(ddpl_last_error(), "still in use")) return 14;
        if (ddpl_ipc_send(fd, "batch", 5, b == 0 ? ddpl_batch_slot_fd(slot) : -1) < 0) return 15;
        size_t len;
        int passfd;
        char next[8];
        if (ddpl_ipc_recv_header(fd, 10.0, &len, &passfd) != 1 || len > sizeof next ||
            ddpl_ipc_recv_body(fd, next, len) < 0)
            return 16;
        ddpl_tensor_release(flat);
        ddpl_tensor_release(x);
        ddpl_tensor_release(y);
    }
    ddpl_batch_slot_free(slot);
    return 0;
}

static int recv_message(int fd, char *buf, size_t cap, size_t *len, int *passfd)
{
    int rc = ddpl_ipc_recv_header(fd, 10.0, len, passfd);
    if (rc != 1) return rc;
    if (*len > cap) return -1;
    return ddpl_ipc_recv_body(fd, buf, *len) < 0 ? -2 : 1;
}

static void test_batches_through_a_slot(void)
{
    int fds[2];
    CHECK(ddpl_ipc_socketpair(fds) == 0);
    pid_t pid = fork();
    if (pid == 0) {
        close(fds[0]);
        _exit(worker(fds[1]));
    }
    close(fds[1]);
    ddpl_batch_view *view = NULL;
    for (int b = 0; b < 2; b++) {
        char msg[16];
        size_t len;
        int passfd;
        CHECK(recv_message(fds[0], msg, sizeof msg, &len, &passfd) == 1);
        CHECK(len == 5 && memcmp(msg, "batch", 5) == 0);
        CHECK((b == 0) == (passfd >= 0)); /* the fd travels once */
        if (b == 0) {
            view = ddpl_batch_view_map(passfd, false);
            CHECK(view != NULL);
            close(passfd); /* the mapping stays */
        }
        ddpl_tensor **ts;
        int count;
        CHECK(ddpl_batch_view_read(view, &ts, &count) == 0);
        CHECK(count == 2);
        CHECK(ddpl_tensor_ndim(ts[0]) == 2 && ddpl_tensor_size(ts[0], 0) == 3 &&
              ddpl_tensor_size(ts[0], 1) == 4 && ddpl_tensor_dtype(ts[0]) == DDPL_FLOAT32);
        const float *x = ddpl_tensor_data(ts[0]);
        CHECK(x[0] == (float)(b * 100) && x[11] == (float)(b * 100 + 11));
        CHECK(ddpl_tensor_dtype(ts[1]) == DDPL_INT64 && ddpl_tensor_size(ts[1], 0) == 5);
        const int64_t *y = ddpl_tensor_data(ts[1]);
        CHECK(y[0] == b && y[4] == b + 4);
        CHECK((uintptr_t)x % 64 == 0 && (uintptr_t)y % 64 == 0); /* 64-byte aligned */
        /* the worker may not reuse the slot while any tensor of the batch lives: with x gone
         * and the worker told to go on, y still holds this batch's values */
        ddpl_tensor_release(ts[0]);
        CHECK(ddpl_ipc_send(fds[0], "next", 4, -1) == 0);
        usleep(50000);
        CHECK(y[0] == b && y[4] == b + 4);
        ddpl_tensor_release(ts[1]);
        free(ts);
    }
    ddpl_batch_view_free(view);
    int status;
    CHECK(waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    if (WIFEXITED(status) && WEXITSTATUS(status))
        fprintf(stderr, "worker: exit %d\n", WEXITSTATUS(status));
    /* the worker is gone: the end of the stream */
    size_t len;
    int passfd;
    CHECK(ddpl_ipc_recv_header(fds[0], 1.0, &len, &passfd) == -2);
    close(fds[0]);
}

static void test_messages(void)
{
    int fds[2];
    CHECK(ddpl_ipc_socketpair(fds) == 0);
    size_t len;
    int passfd;
    CHECK(ddpl_ipc_recv_header(fds[0], 0.05, &len, &passfd) == 0); /* nothing sent: time out */
    pid_t pid = fork();
    if (pid == 0) {
        close(fds[0]);
        size_t n = 3 << 20;
        char *big = malloc(n);
        for (size_t i = 0; i < n; i++) big[i] = (char)(i * 7);
        for (size_t k = 0; k <= n; k = k ? k * 4 : 1)
            if (ddpl_ipc_send(fds[1], big, k, -1) < 0) _exit(1);
        /* a message cut short: the length says 100, 10 bytes come, then the process exits */
        uint32_t hundred = 100;
        if (write(fds[1], &hundred, 4) != 4 || write(fds[1], big, 10) != 10) _exit(2);
        _exit(0);
    }
    close(fds[1]);
    char *buf = malloc(3 << 20);
    for (size_t k = 0; k <= (3u << 20); k = k ? k * 4 : 1) {
        CHECK(recv_message(fds[0], buf, 3 << 20, &len, &passfd) == 1);
        CHECK(len == k && passfd == -1);
        int whole = 1;
        for (size_t i = 0; i < len; i++) whole &= buf[i] == (char)(i * 7);
        CHECK(whole);
    }
    CHECK(ddpl_ipc_recv_header(fds[0], 5.0, &len, &passfd) == 1 && len == 100);
    CHECK(ddpl_ipc_recv_body(fds[0], buf, len) == -2);
    free(buf);
    waitpid(pid, NULL, 0);
    close(fds[0]);

    /* an announced length over the limit is refused before anything is allocated */
    CHECK(ddpl_ipc_socketpair(fds) == 0);
    uint32_t huge = (uint32_t)DDPL_IPC_MSG_MAX + 1;
    CHECK(write(fds[1], &huge, 4) == 4);
    CHECK(ddpl_ipc_recv_header(fds[0], 1.0, &len, &passfd) == -1);
    CHECK(strstr(ddpl_last_error(), "message of") != NULL);
    close(fds[0]);
    close(fds[1]);
}

static void test_bad_input(void)
{
    int64_t shape[2] = {4, 3};
    ddpl_tensor *a = ddpl_zeros(2, shape, DDPL_FLOAT32, ddpl_cpu());
    ddpl_tensor *at = ddpl_transpose(a, 0, 1);
    size_t need;
    CHECK(ddpl_batch_slot_bytes(&at, 1, &need) < 0);
    CHECK(strstr(ddpl_last_error(), "tensor 1 is not a contiguous CPU tensor") != NULL);
    CHECK(ddpl_batch_slot_bytes(&a, -1, &need) < 0);
    CHECK(ddpl_batch_slot_new(3) == NULL);
    CHECK(ddpl_batch_slot_bytes(&a, 1, &need) == 0);
    ddpl_batch_slot *small = ddpl_batch_slot_new(need - 64);
    CHECK(small != NULL);
    CHECK(ddpl_batch_slot_write(small, &a, 1) < 0);
    CHECK(strstr(ddpl_last_error(), "slot of") != NULL);
    ddpl_batch_slot_free(small);
    /* a segment too small to hold a header is not mapped */
    int fd = memfd_create("tiny", MFD_CLOEXEC);
    CHECK(ftruncate(fd, 16) == 0);
    CHECK(ddpl_batch_view_map(fd, false) == NULL);
    CHECK(strstr(ddpl_last_error(), "malformed batch segment") != NULL);
    close(fd);
    ddpl_tensor_release(at);
    ddpl_tensor_release(a);
}

/* A slot with one good batch; its descriptor bytes scribbled over at random. Every read either
 * fails naming the segment or gives tensors that lie inside the mapping. */
static void test_hostile_segment(void)
{
    ddpl_tensor *x = arange_f32(40, 0), *y = labels_i64(7, 0);
    ddpl_tensor *batch[2] = {x, y};
    size_t need;
    CHECK(ddpl_batch_slot_bytes(batch, 2, &need) == 0);
    ddpl_batch_slot *slot = ddpl_batch_slot_new(need);
    CHECK(slot != NULL);
    ddpl_batch_view *view = ddpl_batch_view_map(ddpl_batch_slot_fd(slot), false);
    CHECK(view != NULL);
    char *base = mmap(NULL, need, PROT_READ | PROT_WRITE, MAP_SHARED, ddpl_batch_slot_fd(slot), 0);
    CHECK(base != MAP_FAILED);
    /* where the view maps the slot: a good batch's first tensor, less its offset in the slot */
    CHECK(ddpl_batch_slot_write(slot, batch, 2) == 0);
    ddpl_tensor **ts;
    int count;
    CHECK(ddpl_batch_view_read(view, &ts, &count) == 0 && count == 2);
    uint64_t offset0;
    memcpy(&offset0, base + 64 + 8 + 8, sizeof offset0);
    const char *view_base = (const char *)ddpl_tensor_data(ts[0]) - offset0;
    for (int k = 0; k < count; k++) ddpl_tensor_release(ts[k]);
    free(ts);
    CHECK(ddpl_batch_slot_is_free(slot));

    unsigned seed = 12345;
    int errors = 0, reads = 0, outside = 0, unnamed = 0, kept = 0;
    double touched = 0;
    for (int trial = 0; trial < 5000; trial++) {
        CHECK(ddpl_batch_slot_write(slot, batch, 2) == 0);
        int flips = 1 + (int)(rand_r(&seed) % 4);
        for (int f = 0; f < flips; f++) {
            size_t at = 64 + (size_t)(rand_r(&seed) % 80); /* magic, count, descriptors */
            base[at] = (char)rand_r(&seed);
        }
        if (ddpl_batch_view_read(view, &ts, &count) < 0) {
            errors++;
            if (!strstr(ddpl_last_error(), "malformed batch segment")) unnamed++;
        } else {
            reads++;
            for (int k = 0; k < count; k++) {
                const unsigned char *d = ddpl_tensor_data(ts[k]);
                size_t nb = ddpl_tensor_nbytes(ts[k]);
                if (nb && (d < (const unsigned char *)view_base ||
                           d + nb > (const unsigned char *)view_base + need))
                    outside++;
                else
                    for (size_t i = 0; i < nb; i++) touched += d[i]; /* ASan sees a bad one */
                ddpl_tensor_release(ts[k]);
            }
            free(ts);
        }
        /* read or refused, the slot goes back to the worker */
        kept += !ddpl_batch_slot_is_free(slot);
    }
    CHECK(outside == 0);
    CHECK(unnamed == 0);
    CHECK(kept == 0);
    CHECK(errors > 100 && reads > 100); /* both paths ran */
    volatile double sink = touched;     /* keeps the reads */
    (void)sink;
    munmap(base, need);
    ddpl_batch_view_free(view);
    ddpl_batch_slot_free(slot);
    ddpl_tensor_release(x);
    ddpl_tensor_release(y);
}

int main(void)
{
    test_batches_through_a_slot();
    test_messages();
    test_bad_input();
    test_hostile_segment();
    return check_finish();
}
