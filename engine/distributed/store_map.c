/* distributed/store_map.c: the store server's key-value map (store_map.h).
 * defines: store_map_init, store_map_find, store_map_set, store_map_delete, store_map_free. */
#include "store_map.h"

#include <stdlib.h>
#include <string.h>

static uint64_t fnv1a(const uint8_t *p, uint32_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (uint32_t i = 0; i < n; i++) h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

static store_entry **slot_of(store_map *m, const store_field *k, uint64_t h)
{
    store_entry **e = &m->buckets[h & (m->nbuckets - 1)];
    while (*e &&
           !((*e)->hash == h && (*e)->klen == k->len && memcmp((*e)->key, k->data, k->len) == 0))
        e = &(*e)->next;
    return e;
}

store_entry *store_map_find(store_map *m, const store_field *k)
{
    return *slot_of(m, k, fnv1a(k->data, k->len));
}

/* Doubles the buckets; out of memory, the chains just grow longer. */
static void grow(store_map *m)
{
    size_t n = m->nbuckets * 2;
    store_entry **b = calloc(n, sizeof *b);
    if (!b) return;
    for (size_t i = 0; i < m->nbuckets; i++) {
        for (store_entry *e = m->buckets[i], *next; e; e = next) {
            next = e->next;
            e->next = b[e->hash & (n - 1)];
            b[e->hash & (n - 1)] = e;
        }
    }
    free(m->buckets);
    m->buckets = b;
    m->nbuckets = n;
}

/* A malloc'd copy of p[0..n) (one byte at least, so an empty value is not NULL); NULL when out
 * of memory. */
static void *dup_bytes(const void *p, uint32_t n)
{
    void *q = malloc(n ? n : 1);
    if (q && n) memcpy(q, p, n);
    return q;
}

/* Sets key k to val; false when out of memory (the map is as it was). m->bytes counts what the
 * keys and values hold. */
bool store_map_set(store_map *m, const store_field *k, const void *val, uint32_t vlen)
{
    uint64_t h = fnv1a(k->data, k->len);
    store_entry **slot = slot_of(m, k, h);
    void *copy = dup_bytes(val, vlen);
    if (!copy) return false;
    if (*slot) {
        m->bytes -= (*slot)->vlen;
        free((*slot)->val);
    } else {
        store_entry *e = calloc(1, sizeof *e);
        uint8_t *key = e ? dup_bytes(k->data, k->len) : NULL;
        if (!key) {
            free(e);
            free(copy);
            return false;
        }
        *e = (store_entry){NULL, h, key, NULL, k->len, 0};
        *slot = e;
        m->bytes += k->len;
        if (++m->count > m->nbuckets) grow(m);
        slot = slot_of(m, k, h);
    }
    (*slot)->val = copy;
    (*slot)->vlen = vlen;
    m->bytes += vlen;
    return true;
}

bool store_map_delete(store_map *m, const store_field *k)
{
    store_entry **slot = slot_of(m, k, fnv1a(k->data, k->len));
    store_entry *e = *slot;
    if (!e) return false;
    *slot = e->next;
    m->bytes -= (uint64_t)e->klen + e->vlen;
    free(e->key);
    free(e->val);
    free(e);
    m->count--;
    return true;
}

void store_map_free(store_map *m)
{
    for (size_t i = 0; i < m->nbuckets; i++) {
        for (store_entry *e = m->buckets[i], *next; e; e = next) {
            next = e->next;
            free(e->key);
            free(e->val);
            free(e);
        }
    }
    free(m->buckets);
}

bool store_map_init(store_map *m)
{
    *m = (store_map){.nbuckets = 64};
    m->buckets = calloc(m->nbuckets, sizeof *m->buckets);
    return m->buckets != NULL;
}
