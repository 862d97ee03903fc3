/*
 * The handle's measured choices: a table from a problem's shape-bucket key to the kernel
 * that was fastest there and the times of the kernels timed, filled by the autotuner
 * (dispatch/autotune.c) and by the tune cache file it reads and writes. Looked up only when
 * the plan cache misses, so one mutex guards it.
 */
#ifndef OPSLIB_RUNTIME_TUNER_H_
#define OPSLIB_RUNTIME_TUNER_H_

#include <pthread.h>
#include <stdint.h>

#include "opslib/handle.h"
#include "runtime/plan_cache.h"

#define OPSI_TUNE_MAX_K OPS_AUTOTUNE_TOP_K
#define OPSI_TUNE_MAX_ENTRIES 4096

typedef struct opsi_tune_entry {
  uint64_t key[OPSI_CACHE_KEY_WORDS]; /* the bucketed problem, zero-filled */
  int32_t kernel_id;                  /* the fastest of ids[] */
  int32_t source;                     /* ops_choice: OPS_CHOICE_MEASURED or OPS_CHOICE_TUNE_CACHE */
  int32_t count;                      /* kernels timed */
  int32_t ids[OPSI_TUNE_MAX_K];
  double us[OPSI_TUNE_MAX_K];         /* best time a run of each */
} opsi_tune_entry;

typedef struct opsi_tuner {
  pthread_mutex_t lock;
  char *path; /* the attached tune cache file; NULL: none */
  int count, capacity;
  opsi_tune_entry *entries;
} opsi_tuner;

void opsi_tuner_init(opsi_tuner *t);
void opsi_tuner_free(opsi_tuner *t);

/* Copies the entry of `key` into *out: 1, or 0 when there is none. Locks. */
int opsi_tuner_find(opsi_tuner *t, const uint64_t key[OPSI_CACHE_KEY_WORDS], opsi_tune_entry *out);

/* Adds e, replacing the entry of the same key (replace != 0) or keeping it (replace == 0).
 * Returns 0 when the table is full (OPSI_TUNE_MAX_ENTRIES) or cannot grow. The caller holds
 * the lock (opsi_tuner_put_locked) or not (opsi_tuner_put). */
int opsi_tuner_put_locked(opsi_tuner *t, const opsi_tune_entry *e, int replace);
int opsi_tuner_put(opsi_tuner *t, const opsi_tune_entry *e, int replace);

#endif /* OPSLIB_RUNTIME_TUNER_H_ */
