/*
 * The plan cache: a bounded map from a problem key (up to 16 words) to a plan (two words),
 * embedded in the handle, safe for any number of concurrent readers and writers, with no
 * allocation and no lock on a hit.
 *
 * Direct-mapped slots, each guarded by a sequence number (a seqlock): a writer claims the
 * slot by moving its sequence from even to odd with one compare-and-swap (a writer that
 * loses simply does not cache), writes, and publishes an even sequence; a reader copies
 * key and value between two reads of the sequence and keeps the copy only when both reads
 * agree and are even. A colliding key overwrites the slot (eviction by replacement).
 */
#ifndef OPSLIB_RUNTIME_PLAN_CACHE_H_
#define OPSLIB_RUNTIME_PLAN_CACHE_H_

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define OPSI_CACHE_SLOTS 256 /* a power of two */
#define OPSI_CACHE_KEY_WORDS 16

typedef struct opsi_cache_slot {
  _Atomic uint32_t seq; /* odd while written; 0 and never written: empty */
  _Atomic uint32_t used;
  _Atomic uint64_t key[OPSI_CACHE_KEY_WORDS];
  _Atomic uint64_t value[2];
} opsi_cache_slot;

typedef struct opsi_plan_cache {
  opsi_cache_slot slots[OPSI_CACHE_SLOTS];
} opsi_plan_cache;

void opsi_plan_cache_clear(opsi_plan_cache *c);

/* key: `words` uint64 (<= OPSI_CACHE_KEY_WORDS); the caller zero-fills unused bytes. */
bool opsi_plan_cache_get(opsi_plan_cache *c, const uint64_t *key, int words, uint64_t value[2]);
void opsi_plan_cache_put(opsi_plan_cache *c, const uint64_t *key, int words, const uint64_t value[2]);

#endif /* OPSLIB_RUNTIME_PLAN_CACHE_H_ */
