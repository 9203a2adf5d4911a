/* distributed/store_map.h: the store server's key-value map (chained buckets, FNV-1a hashes,
 * doubled at load 1), internal to engine/distributed: one thread (the server's) uses it.
 * defines: store_entry, store_map, store_map_init, store_map_find, store_map_set,
 *          store_map_delete, store_map_free. */
#ifndef DDPL_DIST_STORE_MAP_H
#define DDPL_DIST_STORE_MAP_H

#include <stdbool.h>
#include <stdint.h>

#include "store_proto.h"

typedef struct store_entry {
    struct store_entry *next;
    uint64_t hash;
    uint8_t *key, *val;
    uint32_t klen, vlen;
} store_entry;

typedef struct store_map {
    store_entry **buckets;
    size_t nbuckets, count;
    uint64_t bytes; /* of every key and value */
} store_map;

/* An empty map; false when out of memory. */
bool store_map_init(store_map *m);
/* The entry of key k, or NULL. */
store_entry *store_map_find(store_map *m, const store_field *k);
/* Sets key k to val; false when out of memory (the map is as it was). m->bytes counts what the
 * keys and values hold. */
bool store_map_set(store_map *m, const store_field *k, const void *val, uint32_t vlen);
/* Removes key k; whether it was there. */
bool store_map_delete(store_map *m, const store_field *k);
void store_map_free(store_map *m);

#endif
