/* The seqlock plan cache of plan_cache.h. */
#include "runtime/plan_cache.h"

static uint32_t slot_of(const uint64_t *key, int words) {
  uint64_t h = 0x9E3779B97F4A7C15ull;
  for (int i = 0; i < words; ++i) {
    h ^= key[i];
    h *= 0xBF58476D1CE4E5B9ull;
    h ^= h >> 29;
  }
  return (uint32_t)(h >> 32) & (OPSI_CACHE_SLOTS - 1);
}

void opsi_plan_cache_clear(opsi_plan_cache *c) {
  for (int i = 0; i < OPSI_CACHE_SLOTS; ++i) {
    opsi_cache_slot *s = &c->slots[i];
    uint32_t seq = atomic_load_explicit(&s->seq, memory_order_relaxed);
    if (seq & 1u) continue; /* a writer owns it; it will publish a valid entry */
    if (atomic_compare_exchange_strong_explicit(&s->seq, &seq, seq + 1u, memory_order_acquire,
                                                memory_order_relaxed)) {
      atomic_store_explicit(&s->used, 0u, memory_order_relaxed);
      atomic_store_explicit(&s->seq, seq + 2u, memory_order_release);
    }
  }
}

bool opsi_plan_cache_get(opsi_plan_cache *c, const uint64_t *key, int words, uint64_t value[2]) {
  opsi_cache_slot *s = &c->slots[slot_of(key, words)];
  const uint32_t before = atomic_load_explicit(&s->seq, memory_order_acquire);
  bool same = !(before & 1u) && atomic_load_explicit(&s->used, memory_order_relaxed) == (uint32_t)words;
  for (int i = 0; same && i < words; ++i) {
    same = atomic_load_explicit(&s->key[i], memory_order_relaxed) == key[i];
  }
  uint64_t v0 = 0, v1 = 0;
  if (same) {
    v0 = atomic_load_explicit(&s->value[0], memory_order_relaxed);
    v1 = atomic_load_explicit(&s->value[1], memory_order_relaxed);
  }
  atomic_thread_fence(memory_order_acquire);
  const uint32_t after = atomic_load_explicit(&s->seq, memory_order_relaxed);
  if (!same || before != after) {
    return false;
  }
  value[0] = v0;
  value[1] = v1;
  return true;
}

void opsi_plan_cache_put(opsi_plan_cache *c, const uint64_t *key, int words, const uint64_t value[2]) {
  opsi_cache_slot *s = &c->slots[slot_of(key, words)];
  uint32_t seq = atomic_load_explicit(&s->seq, memory_order_relaxed);
  if ((seq & 1u) || !atomic_compare_exchange_strong_explicit(&s->seq, &seq, seq + 1u, memory_order_acquire,
                                                              memory_order_relaxed)) {
    return; /* another writer has the slot: skip, it is only a cache */
  }
  atomic_store_explicit(&s->used, (uint32_t)words, memory_order_relaxed);
  for (int i = 0; i < words; ++i) atomic_store_explicit(&s->key[i], key[i], memory_order_relaxed);
  atomic_store_explicit(&s->value[0], value[0], memory_order_relaxed);
  atomic_store_explicit(&s->value[1], value[1], memory_order_relaxed);
  atomic_store_explicit(&s->seq, seq + 2u, memory_order_release);
}
