/* The measured-choice table of tuner.h. */
#include "runtime/tuner.h"

#include <stdlib.h>
#include <string.h>

void opsi_tuner_init(opsi_tuner *t) {
  memset(t, 0, sizeof *t);
  pthread_mutex_init(&t->lock, NULL);
}

void opsi_tuner_free(opsi_tuner *t) {
  free(t->entries);
  free(t->path);
  pthread_mutex_destroy(&t->lock);
}

static opsi_tune_entry *find_locked(opsi_tuner *t, const uint64_t *key) {
  for (int i = 0; i < t->count; ++i) {
    if (memcmp(t->entries[i].key, key, sizeof t->entries[i].key) == 0) return &t->entries[i];
  }
  return NULL;
}

int opsi_tuner_find(opsi_tuner *t, const uint64_t key[OPSI_CACHE_KEY_WORDS], opsi_tune_entry *out) {
  pthread_mutex_lock(&t->lock);
  const opsi_tune_entry *e = find_locked(t, key);
  if (e != NULL) *out = *e;
  pthread_mutex_unlock(&t->lock);
  return e != NULL;
}

int opsi_tuner_put_locked(opsi_tuner *t, const opsi_tune_entry *e, int replace) {
  opsi_tune_entry *old = find_locked(t, e->key);
  if (old != NULL) {
    if (replace) *old = *e;
    return 1;
  }
  if (t->count == t->capacity) {
    if (t->capacity >= OPSI_TUNE_MAX_ENTRIES) return 0;
    const int cap = t->capacity ? 2 * t->capacity : 64;
    opsi_tune_entry *grown = (opsi_tune_entry *)realloc(t->entries, (size_t)cap * sizeof *grown);
    if (grown == NULL) return 0;
    t->entries = grown;
    t->capacity = cap;
  }
  t->entries[t->count++] = *e;
  return 1;
}

int opsi_tuner_put(opsi_tuner *t, const opsi_tune_entry *e, int replace) {
  pthread_mutex_lock(&t->lock);
  const int ok = opsi_tuner_put_locked(t, e, replace);
  pthread_mutex_unlock(&t->lock);
  return ok;
}
