/* distributed/gloo_pg.cpp: the Gloo backend behind an extern "C" face: the only C++ in the engine.
 * defines: ddpl_gloo_connect/free, ddpl_gloo_allreduce/broadcast/allgather/barrier,
 *          ddpl_gloo_reduce/gather/scatter/alltoallv,
 *          ddpl_gloo_send/recv/p2p_wait, ddpl_gloo_set_peers, ddpl_gloo_abort (declared in
 *          gloo_pg.h).
 *
 * Gloo's rendezvous goes through our TCP store (StoreAdapter forwards set/get/wait to ddpl_store);
 * the transport is Gloo's TCP device bound to the address that routes to the master, so the
 * same code works on loopback and across machines. Gloo reports failures (timeouts, a peer
 * that went away) by throwing; every entry point catches and turns them into ddpl_error
 * messages, so no exception ever crosses into C.
 *
 * Gloo's message for a peer that went away names only the address of the peer's end of the
 * connection ("Connection closed by peer [127.0.0.1]:41234", often an ephemeral port). After the
 * mesh is connected every rank publishes the local address of its end of each pair (the
 * pair's address()), so each rank knows which address is which peer's: the failing rank is
 * found by matching the message, and named with its pid and host (ddpl_gloo_set_peers) and
 * whether the process is gone. Only Gloo's public interface is used (Debian's libgloo-dev lacks
 * a header that the TCP pair's class declaration needs), and in this Gloo a pair's address() stays
 * the listening address of its device, which is what the peer sees only where this rank accepted
 * the connection: where it connected, the peer sees an ephemeral port that is matched nowhere. Such
 * a failure names the one peer whose process is gone (on this machine), or with 2 ranks the
 * other rank; else the message stays Gloo's, and the heartbeat names the silent rank.
 * ddpl_gloo_abort makes what waits on a pair return at once: it closes the pair, then sends on
 * it, which Gloo answers by failing every operation pending on that pair ("Socket closed"); the
 * operation then reports the heartbeat's message instead. The first connection ignores SIGPIPE
 * where it is at its default, as Python does (ignore_default_sigpipe). */
#include <cctype>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <signal.h>
#include <unistd.h>

#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/alltoallv.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/gather.h>
#include <gloo/reduce.h>
#include <gloo/scatter.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/tcp/device.h>
#include <gloo/transport/unbound_buffer.h>

#include "ddpl/tensor.h"
#include "distributed/gloo_pg.h"
#include "distributed/peer_fault.h"

/* From distributed/store.h, which C++ cannot include (it pulls in core.h's C11 atomics). */
extern "C" {
double ddpl_store_timeout(const ddpl_store *s);
int ddpl_store_set(ddpl_store *s, const char *key, const void *value, size_t len);
int ddpl_store_get(ddpl_store *s, const char *key, void **value, size_t *len);
int ddpl_store_wait(ddpl_store *s, int nkeys, const char *const *keys, double timeout_s);
}

namespace
{

/* Slot of point-to-point messages: above the prefixes Gloo's collectives use (< 0x20 << 56),
 * so a send/recv can never match a collective's message. */
constexpr uint64_t kP2PSlot = uint64_t(0x7d) << 56;
/* Slot of the send that ddpl_gloo_abort makes on a closed pair (never transmitted). */
constexpr uint64_t kAbortSlot = 0x7fffff;

std::chrono::milliseconds to_ms(double s)
{
    return std::chrono::milliseconds(static_cast<int64_t>(s * 1000.0));
}

/* gloo::rendezvous::Store over ddpl_store; errors become exceptions, as Gloo expects. */
class StoreAdapter : public gloo::rendezvous::Store
{
  public:
    StoreAdapter(ddpl_store *s, std::string prefix) : s_(s), prefix_(std::move(prefix)) {}

    void set(const std::string &key, const std::vector<char> &data) override
    {
        if (ddpl_store_set(s_, (prefix_ + key).c_str(), data.data(), data.size()) < 0)
            throw gloo::IoException(ddpl_last_error());
    }

    std::vector<char> get(const std::string &key) override
    {
        void *v = nullptr;
        size_t n = 0;
        if (ddpl_store_get(s_, (prefix_ + key).c_str(), &v, &n) < 0)
            throw gloo::IoException(ddpl_last_error());
        std::vector<char> out(static_cast<char *>(v), static_cast<char *>(v) + n);
        free(v);
        return out;
    }

    void wait(const std::vector<std::string> &keys) override
    {
        wait(keys, to_ms(ddpl_store_timeout(s_)));
    }

    void wait(const std::vector<std::string> &keys, const std::chrono::milliseconds &t) override
    {
        std::vector<std::string> full;
        std::vector<const char *> ptrs;
        for (const auto &k : keys) full.push_back(prefix_ + k);
        for (const auto &k : full) ptrs.push_back(k.c_str());
        if (ddpl_store_wait(s_, static_cast<int>(ptrs.size()), ptrs.data(), t.count() / 1000.0) < 0)
            throw gloo::IoException(ddpl_last_error());
    }

  private:
    ddpl_store *s_;
    std::string prefix_;
};

} // namespace

struct ddpl_gloo {
    std::shared_ptr<gloo::rendezvous::Context> ctx;
    std::chrono::milliseconds timeout;
    /* per group rank (ddpl_gloo_set_peers): global rank, pid, host; empty until set */
    std::vector<int> global, pids;
    std::vector<std::string> hosts;
    std::vector<std::string> peer_addr; /* per group rank: the address of its end of our pair */
    std::mutex mu;
    std::string fault; /* ddpl_gloo_abort's message: every later failure reports it */
};

namespace
{

/* The group rank whose end of a pair `what` (a Gloo message) names, or -1. An address must not
 * be followed by another digit ("[127.0.0.1]:4000" inside "[127.0.0.1]:40001"). */
int peer_named_in(ddpl_gloo *g, const std::string &what)
{
    for (size_t q = 0; q < g->peer_addr.size(); q++) {
        const std::string &addr = g->peer_addr[q];
        if (addr.empty()) continue;
        for (size_t at = what.find(addr); at != std::string::npos; at = what.find(addr, at + 1)) {
            size_t end = at + addr.size();
            if (end >= what.size() || !isdigit(static_cast<unsigned char>(what[end])))
                return static_cast<int>(q);
        }
    }
    return -1;
}

/* How long a failure that names no peer waits for a peer's process to be seen gone: a killed
 * process's sockets close before its teardown ends, which takes milliseconds on a quiet machine
 * but, measured, over half a second for an ASan build on a loaded 2-core one (the case
 * spec/dist/dist_faults_spec.lua's "a killed rank is named" hit 1 run in 5 with a 0.5 s wait,
 * and once more in a fresh-clone CI with 3 s: an ASan process's teardown unmaps its shadow).
 * Only failures pay it, and only while some peer is on this machine, where /proc can tell. */
constexpr int GONE_WAIT_MS = 10000;
constexpr int GONE_POLL_MS = 10;
/* A peer already named may still be told apart as exited ("(the process has exited)"): a
 * shorter wait, for a detail the message can do without. */
constexpr int EXITED_WAIT_MS = 500;

/* Whether rank q's process is gone, waiting up to EXITED_WAIT_MS for it. */
bool gone_soon(ddpl_gloo *g, int q)
{
    if (!peer_is_local(g->hosts[q].c_str())) return false;
    for (int waited = 0; waited < EXITED_WAIT_MS; waited += GONE_POLL_MS) {
        if (peer_gone(g->pids[q], g->hosts[q].c_str())) return true;
        usleep(GONE_POLL_MS * 1000);
    }
    return false;
}

/* The one peer whose process is gone (on this machine), waiting up to GONE_WAIT_MS for the
 * kernel to finish ending it (its sockets close before it becomes a zombie); with 2 ranks the
 * other rank. -1 when that names nobody, or more than one. */
int gone_peer(ddpl_gloo *g)
{
    int size = static_cast<int>(g->pids.size()), me = g->ctx->rank;
    if (size == 0) return -1;
    bool local = false;
    for (int q = 0; q < size; q++) local = local || (q != me && peer_is_local(g->hosts[q].c_str()));
    for (int waited = 0; local && waited < GONE_WAIT_MS; waited += GONE_POLL_MS) {
        int found = -1, n = 0;
        for (int q = 0; q < size; q++)
            if (q != me && peer_gone(g->pids[q], g->hosts[q].c_str())) found = q, n++;
        if (n == 1) return found;
        if (n > 1) return -1;
        if (size == 2) break; /* the other rank is the one either way: no need to wait */
        usleep(GONE_POLL_MS * 1000);
    }
    return size == 2 ? 1 - me : -1;
}

/* The error for Gloo's exception text `what`: the heartbeat's message after ddpl_gloo_abort;
 * else, when it names a peer's address, "rank R (pid P, host H) closed its connection: ..."
 * (without Gloo's "[file:line] " prefix; then whether that process has exited or, on this
 * machine, still runs), or "timed out waiting for rank R ...: ..." when Gloo
 * gave up waiting; else "gloo: <what>". Always -1. */
int gloo_failed(ddpl_gloo *g, const char *what)
{
    if (!g) return ddpl_error("gloo: %s", what);
    {
        std::lock_guard<std::mutex> lock(g->mu);
        if (!g->fault.empty()) return ddpl_error("%s", g->fault.c_str());
    }
    std::string text(what);
    int q = peer_named_in(g, text);
    if (q < 0) q = gone_peer(g);
    if (q < 0) return ddpl_error("gloo: %s", what);
    if (text.size() > 1 && text[0] == '[') {
        size_t close = text.find("] ");
        if (close != std::string::npos) text = text.substr(close + 2);
    }
    bool known = static_cast<size_t>(q) < g->pids.size();
    int rank = known ? g->global[q] : q, pid = known ? g->pids[q] : 0;
    const char *host = known ? g->hosts[q].c_str() : nullptr;
    char label[320];
    peer_label(label, sizeof label, rank, pid, host);
    bool gone = known && gone_soon(g, q);
    /* Gloo's own timeout ("Timed out waiting 5000ms for recv operation to complete"): nobody
     * closed anything; a peer that still runs is most likely waiting too, e.g. both ranks in a
     * recv from each other */
    if (text.find("Timed out") != std::string::npos)
        return ddpl_error("timed out waiting for %s: %s; %s", label, text.c_str(),
                          gone ? "that process has exited"
                               : "it is still running (waiting as well? a recv needs a matching "
                                 "send on the other side)");
    /* A peer on this machine that closed its connection and still runs gave up by itself: Gloo
     * closes every pair of a rank whose wait failed or timed out (two ranks receiving from each
     * other: the one whose wait began later sees the other's close before its own limit). */
    bool local = known && peer_is_local(host);
    return ddpl_error("%s closed its connection: %s%s", label, text.c_str(),
                      gone    ? " (the process has exited)"
                      : local ? "; it is still running: its own operation failed or timed out first"
                              : "");
}

/* Runs f, turning any exception into an error (gloo_failed); 0 or -1. g may be NULL. */
template <typename F> int guarded(ddpl_gloo *g, F &&f)
{
    try {
        f();
        return 0;
    } catch (const std::exception &e) {
        return gloo_failed(g, e.what());
    } catch (...) {
        return ddpl_error("gloo: unknown C++ exception");
    }
}

/* AllreduceOptions wants a typed pointer only to learn the element size. */
template <typename T>
void allreduce_typed(const std::shared_ptr<gloo::Context> &ctx, void *data, size_t count,
                     ddpl_reduce_fn fn, std::chrono::milliseconds timeout)
{
    gloo::AllreduceOptions opts(ctx);
    opts.setOutput(static_cast<T *>(data), count);
    opts.setReduceFunction(
        [fn](void *out, const void *a, const void *b, size_t n) { fn(out, a, b, n); });
    opts.setTimeout(timeout);
    gloo::allreduce(opts);
}

} // namespace

struct ddpl_gloo_p2p {
    ddpl_gloo *g; /* for the messages; outlived by the group (its work drains first) */
    std::unique_ptr<gloo::transport::UnboundBuffer> buf;
    bool is_send;
    int peer;
};

/* Publishes "<address of our end of the pair with q>" for every q (lines, in rank order; ours
 * empty) and learns, from every peer's list, the address of its end of the pair with us. */
static void exchange_ends(ddpl_gloo *g, StoreAdapter &store)
{
    int size = g->ctx->size, me = g->ctx->rank;
    std::string mine;
    for (int q = 0; q < size; q++) {
        if (q != me) mine += g->ctx->getPair(q)->address().str();
        mine += '\n';
    }
    store.set("ends/" + std::to_string(me), std::vector<char>(mine.begin(), mine.end()));
    g->peer_addr.assign(static_cast<size_t>(size), std::string());
    for (int r = 0; r < size; r++) {
        if (r == me) continue;
        std::vector<char> v = store.get("ends/" + std::to_string(r));
        std::string lines(v.begin(), v.end());
        size_t at = 0;
        for (int q = 0; q < me && at != std::string::npos; q++) {
            at = lines.find('\n', at);
            if (at != std::string::npos) at++;
        }
        if (at == std::string::npos) continue;
        size_t end = lines.find('\n', at);
        g->peer_addr[r] = lines.substr(at, end == std::string::npos ? end : end - at);
    }
}

/* Gloo's TCP pairs write with writev, which raises SIGPIPE when the peer's end is closed (a rank
 * that died): its default action kills this rank before Gloo can throw, so the survivors'
 * "rank N exited" message never comes (exit 141 in dist_hier_allreduce_spec's dying-leader
 * case). Python ignores SIGPIPE at start-up, which is why PyTorch's Gloo never meets it; the
 * first Gloo context does the same where the process left SIGPIPE at its default (a handler
 * or disposition the program chose stays). The write then fails with EPIPE and Gloo throws. */
static void ignore_default_sigpipe()
{
    static std::once_flag once;
    std::call_once(once, [] {
        struct sigaction sa;
        if (sigaction(SIGPIPE, nullptr, &sa) == 0 && !(sa.sa_flags & SA_SIGINFO) &&
            sa.sa_handler == SIG_DFL)
            signal(SIGPIPE, SIG_IGN);
    });
}

extern "C" ddpl_gloo *ddpl_gloo_connect(ddpl_store *store, const char *prefix, int rank, int size,
                                        const char *bind_host, double timeout_s)
{
    ignore_default_sigpipe();
    auto *g = new ddpl_gloo;
    g->timeout = to_ms(timeout_s);
    int rc = guarded(nullptr, [&] {
        gloo::transport::tcp::attr attr(bind_host);
        auto dev = gloo::transport::tcp::CreateDevice(attr);
        g->ctx = std::make_shared<gloo::rendezvous::Context>(rank, size);
        g->ctx->setTimeout(g->timeout);
        StoreAdapter adapter(store, prefix);
        g->ctx->connectFullMesh(adapter, dev);
        exchange_ends(g, adapter);
    });
    if (rc < 0) {
        delete g;
        return nullptr;
    }
    return g;
}

extern "C" void ddpl_gloo_free(ddpl_gloo *g)
{
    if (!g) return;
    guarded(nullptr, [&] { g->ctx.reset(); });
    delete g;
}

extern "C" int ddpl_gloo_allreduce(ddpl_gloo *g, void *data, size_t count, size_t elsize,
                                   ddpl_reduce_fn fn)
{
    if (count == 0) return 0;
    return guarded(g, [&] {
        switch (elsize) {
        case 1:
            allreduce_typed<uint8_t>(g->ctx, data, count, fn, g->timeout);
            break;
        case 2:
            allreduce_typed<uint16_t>(g->ctx, data, count, fn, g->timeout);
            break;
        case 4:
            allreduce_typed<uint32_t>(g->ctx, data, count, fn, g->timeout);
            break;
        case 8:
            allreduce_typed<uint64_t>(g->ctx, data, count, fn, g->timeout);
            break;
        default:
            throw std::runtime_error("allreduce: unsupported element size");
        }
    });
}

extern "C" int ddpl_gloo_broadcast(ddpl_gloo *g, void *data, size_t nbytes, int root)
{
    if (nbytes == 0) return 0;
    return guarded(g, [&] {
        gloo::BroadcastOptions opts(g->ctx);
        uint8_t *p = static_cast<uint8_t *>(data);
        if (g->ctx->rank == root) opts.setInput(p, nbytes);
        opts.setOutput(p, nbytes);
        opts.setRoot(root);
        opts.setTimeout(g->timeout);
        gloo::broadcast(opts);
    });
}

extern "C" int ddpl_gloo_allgather(ddpl_gloo *g, const void *in, void *out, size_t nbytes)
{
    if (nbytes == 0) return 0;
    return guarded(g, [&] {
        gloo::AllgatherOptions opts(g->ctx);
        opts.setInput(static_cast<uint8_t *>(const_cast<void *>(in)), nbytes);
        opts.setOutput(static_cast<uint8_t *>(out), nbytes * static_cast<size_t>(g->ctx->size));
        opts.setTimeout(g->timeout);
        gloo::allgather(opts);
    });
}

extern "C" int ddpl_gloo_barrier(ddpl_gloo *g)
{
    return guarded(g, [&] {
        gloo::BarrierOptions opts(g->ctx);
        opts.setTimeout(g->timeout);
        gloo::barrier(opts);
    });
}

/* ReduceOptions, like AllreduceOptions, wants a typed pointer for the element size. */
template <typename T>
static void reduce_typed(ddpl_gloo *g, const void *in, void *out, size_t count, ddpl_reduce_fn fn,
                         int root)
{
    gloo::ReduceOptions opts(g->ctx);
    if (in != out) opts.setInput(static_cast<T *>(const_cast<void *>(in)), count);
    opts.setOutput(static_cast<T *>(out), count);
    opts.setRoot(root);
    opts.setReduceFunction(
        [fn](void *o, const void *a, const void *b, size_t n) { fn(o, a, b, n); });
    opts.setTimeout(g->timeout);
    gloo::reduce(opts);
}

extern "C" int ddpl_gloo_reduce(ddpl_gloo *g, const void *in, void *out, size_t count,
                                size_t elsize, ddpl_reduce_fn fn, int root)
{
    if (count == 0) return 0;
    return guarded(g, [&] {
        switch (elsize) {
        case 4:
            reduce_typed<uint32_t>(g, in, out, count, fn, root);
            break;
        case 8:
            reduce_typed<uint64_t>(g, in, out, count, fn, root);
            break;
        default:
            throw std::runtime_error("reduce: unsupported element size");
        }
    });
}

extern "C" int ddpl_gloo_gather(ddpl_gloo *g, const void *in, void *out, size_t nbytes, int root)
{
    if (nbytes == 0) return 0;
    return guarded(g, [&] {
        gloo::GatherOptions opts(g->ctx);
        opts.setInput(static_cast<uint8_t *>(const_cast<void *>(in)), nbytes);
        if (g->ctx->rank == root)
            opts.setOutput(static_cast<uint8_t *>(out), nbytes * static_cast<size_t>(g->ctx->size));
        opts.setRoot(root);
        opts.setTimeout(g->timeout);
        gloo::gather(opts);
    });
}

extern "C" int ddpl_gloo_scatter(ddpl_gloo *g, const void *in, void *out, size_t nbytes, int root)
{
    if (nbytes == 0) return 0;
    return guarded(g, [&] {
        gloo::ScatterOptions opts(g->ctx);
        if (g->ctx->rank == root) {
            std::vector<uint8_t *> ptrs;
            for (int r = 0; r < g->ctx->size; r++)
                ptrs.push_back(static_cast<uint8_t *>(const_cast<void *>(in)) +
                               static_cast<size_t>(r) * nbytes);
            opts.setInputs(ptrs, nbytes);
        }
        opts.setOutput(static_cast<uint8_t *>(out), nbytes);
        opts.setRoot(root);
        opts.setTimeout(g->timeout);
        gloo::scatter(opts);
    });
}

/* Gloo sends empty messages for empty pairs, but cannot register an empty buffer. A side (in or
 * out) with no bytes at all gets one dummy byte counted in this rank's own pair (copied locally,
 * never sent), and the other side then needs one too: it is staged with a one-byte gap at this
 * rank's slot. This happens only when a rank sends or receives nothing at all. */
extern "C" int ddpl_gloo_alltoallv(ddpl_gloo *g, const void *in, const size_t *in_bytes, void *out,
                                   const size_t *out_bytes)
{
    int size = g->ctx->size, me = g->ctx->rank;
    std::vector<int64_t> ins(in_bytes, in_bytes + size), outs(out_bytes, out_bytes + size);
    size_t in_total = 0, out_total = 0, in_at = 0, out_at = 0; /* at: this rank's slot */
    for (int q = 0; q < size; q++) {
        if (q < me) in_at += in_bytes[q], out_at += out_bytes[q];
        in_total += in_bytes[q];
        out_total += out_bytes[q];
    }
    bool pad = in_total == 0 || out_total == 0;
    std::vector<uint8_t> in_stage, out_stage;
    const uint8_t *inp = static_cast<const uint8_t *>(in);
    uint8_t *outp = static_cast<uint8_t *>(out);
    if (pad) {
        ins[me] += 1;
        outs[me] += 1;
        in_stage.assign(in_total + 1, 0);
        out_stage.assign(out_total + 1, 0);
        size_t mine = in_bytes[me];
        if (in_total) {
            memcpy(in_stage.data(), inp, in_at + mine);
            memcpy(in_stage.data() + in_at + mine + 1, inp + in_at + mine, in_total - in_at - mine);
        }
        inp = in_stage.data();
        outp = out_stage.data();
    }
    int rc = guarded(g, [&] {
        gloo::AlltoallvOptions opts(g->ctx);
        opts.setInput(const_cast<uint8_t *>(inp), ins);
        opts.setOutput(outp, outs);
        opts.setTimeout(g->timeout);
        gloo::alltoallv(opts);
    });
    if (rc == 0 && pad && out_total) {
        size_t mine = out_bytes[me];
        uint8_t *o = static_cast<uint8_t *>(out);
        memcpy(o, out_stage.data(), out_at + mine);
        memcpy(o + out_at + mine, out_stage.data() + out_at + mine + 1, out_total - out_at - mine);
    }
    return rc;
}

static ddpl_gloo_p2p *post(ddpl_gloo *g, void *data, size_t nbytes, int peer, int channel,
                           bool is_send)
{
    auto *p = new ddpl_gloo_p2p;
    p->g = g;
    p->is_send = is_send;
    p->peer = peer;
    int rc = guarded(g, [&] {
        /* Gloo refuses empty buffers; a 1-byte dummy keeps the message count matched. */
        static thread_local char dummy;
        void *ptr = nbytes ? data : &dummy;
        p->buf = g->ctx->createUnboundBuffer(ptr, nbytes ? nbytes : 1);
        if (is_send)
            p->buf->send(peer, kP2PSlot + static_cast<uint64_t>(channel));
        else
            p->buf->recv(peer, kP2PSlot + static_cast<uint64_t>(channel));
    });
    if (rc < 0) {
        delete p;
        return nullptr;
    }
    return p;
}

extern "C" ddpl_gloo_p2p *ddpl_gloo_send(ddpl_gloo *g, void *data, size_t nbytes, int dst,
                                         int channel)
{
    return post(g, data, nbytes, dst, channel, true);
}

extern "C" ddpl_gloo_p2p *ddpl_gloo_recv(ddpl_gloo *g, void *data, size_t nbytes, int src,
                                         int channel)
{
    return post(g, data, nbytes, src, channel, false);
}

extern "C" int ddpl_gloo_p2p_wait(ddpl_gloo_p2p *p, double timeout_s)
{
    int rc = guarded(p->g, [&] {
        bool ok =
            p->is_send ? p->buf->waitSend(to_ms(timeout_s)) : p->buf->waitRecv(to_ms(timeout_s));
        if (!ok) throw std::runtime_error("aborted");
    });
    delete p;
    return rc;
}

extern "C" void ddpl_gloo_set_peers(ddpl_gloo *g, const int *global, const int *pids,
                                    const char *const *hosts)
{
    int n = g->ctx->size;
    g->global.assign(global, global + n);
    g->pids.assign(pids, pids + n);
    g->hosts.assign(hosts, hosts + n);
}

extern "C" void ddpl_gloo_abort(ddpl_gloo *g, const char *why)
{
    {
        std::lock_guard<std::mutex> lock(g->mu);
        if (!g->fault.empty()) return;
        g->fault = why;
    }
    static char dummy;
    for (int q = 0; q < g->ctx->size; q++) {
        if (q == g->ctx->rank) continue;
        auto &pair = g->ctx->getPair(q);
        if (!pair) continue;
        /* the send on a closed pair throws, after failing what is pending on it */
        guarded(nullptr, [&] {
            pair->close();
            auto buf = pair->createSendBuffer(static_cast<int>(kAbortSlot), &dummy, 1);
            buf->send(0, 1);
        });
    }
}
