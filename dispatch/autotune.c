/*
 * Measured autotuning and the tune cache file of autotune.h, and their entry points.
 *
 * The file is text: a header naming the format, the library version, a hash of the kernel
 * set (every row's id and name), the device name, SM and SM count; one line a measured
 * choice (the bucket key as hex words, the chosen kernel, each timed kernel and its time,
 * and the bucket in words after a '|'); and a last line with the entry count and a hash of
 * everything before it, so that a torn or edited file reads as corrupt.
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime, strtok_r, strdup, fsync, getpid */
#include "dispatch/autotune.h"

#include <errno.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dispatch/dispatch.h"
#include "opslib/version.h"
#include "runtime/cuda_device.h"
#include "runtime/error.h"
#include "runtime/handle_internal.h"
#include "runtime/timing.h"

#define MAGIC "opslib-tune-cache 1"
#define MAX_FILE_BYTES (16 << 20)
#define TRIALS 3

/* ---- buckets and lookups ---------------------------------------------------------------- */

/* The next 2^k or 3 * 2^(k-1) at or above x (x > 2). */
static int64_t bucket(int64_t x) {
  if (x <= 2 || x > ((int64_t)1 << 60)) return x;
  int64_t p = 4;
  while (p < x) p <<= 1;
  const int64_t three = p / 4 * 3;
  return three >= x ? three : p;
}

void opsi_tune_key(const opsi_problem *p, uint64_t key[OPSI_CACHE_KEY_WORDS]) {
  opsi_problem b = *p;
  for (int i = 0; i < 8; ++i) b.dims[i] = bucket(b.dims[i]);
  memset(key, 0, OPSI_CACHE_KEY_WORDS * sizeof key[0]);
  memcpy(key, &b, sizeof b);
}

int opsi_tune_lookup(ops_handle h, const opsi_problem *p, opsi_tune_entry *out) {
  uint64_t key[OPSI_CACHE_KEY_WORDS];
  opsi_tune_key(p, key);
  return opsi_tuner_find(&h->tuner, key, out);
}

const char *opsi_tune_blocker(const opsi_vctx *v, int eligible) {
  const ops_handle h = v->handle;
  if (h->autotune != OPS_AUTOTUNE_MEASURE) return "autotune is off (ops_handle_set_autotune, OPSLIB_AUTOTUNE=1)";
  if (eligible < 2) return "one eligible kernel, nothing to compare";
  if (h->is_virtual) return "a described device, where nothing runs";
  if (opsi_stream_capturing(h)) return "the handle's stream is capturing a CUDA graph, where autotune does not time";
  if (v->mode == OPSI_RUN && opsi_call_in_place()) {
    return "an output is written in place of an input, which a repeated run would change";
  }
  return NULL;
}

/* ---- measuring -------------------------------------------------------------------------- */

typedef struct trial {
  const opsi_kernel_row *row;
  const opsi_launch *ctx;
  const void *args;
  const char *fn;
} trial;

static ops_status run_trial(void *arg) {
  const trial *t = (const trial *)arg;
  return opsi_run_row(t->fn, t->row, t->ctx, t->args);
}

ops_status opsi_tune_measure(const opsi_vctx *v, const opsi_problem *p, const opsi_kernel_row *const *ranked,
                             int n, const void *args, void *workspace, size_t workspace_bytes,
                             const opsi_kernel_row **best, int *measured) {
  const ops_handle h = v->handle;
  *best = ranked[0];
  *measured = 0;
  const opsi_kernel_row *fit[OPSI_TUNE_MAX_K];
  int k = 0;
  for (int i = 0; i < n && k < OPSI_TUNE_MAX_K; ++i) {
    const size_t need = ranked[i]->workspace != NULL ? ranked[i]->workspace(p) : 0;
    if (need <= workspace_bytes) fit[k++] = ranked[i];
  }
  if (k < 2) return OPS_OK; /* too little workspace to compare: the model's choice stands */
  opsi_tune_entry e;
  memset(&e, 0, sizeof e);
  opsi_tune_key(p, e.key);
  e.source = OPS_CHOICE_MEASURED;
  opsi_launch_info info;
  memset(&info, 0, sizeof info);
  const opsi_launch ctx = {h, h->info.sm_count, h->stream, workspace, workspace_bytes, &info, h->info.sm_version};
  const int reps = p->backend == OPS_DEVICE_CUDA ? 3 : 1;
  double best_us = INFINITY;
  for (int i = 0; i < k; ++i) {
    trial t = {fit[i], &ctx, args, v->fn};
    double us = 0.0;
    OPSI_TRY(opsi_time_runs(h, run_trial, &t, TRIALS, reps, &us));
    e.ids[e.count] = fit[i]->id;
    e.us[e.count++] = us;
    if (us < best_us) {
      best_us = us;
      *best = fit[i];
      e.kernel_id = fit[i]->id;
    }
  }
  *measured = 1;
  opsi_tuner_put(&h->tuner, &e, 1);
  if (h->tuner.path != NULL && opsi_tune_file_save(h, v->fn) != OPS_OK) {
    fprintf(stderr, "opslib: %s\n", ops_last_error());
    opsi_clear_error();
  }
  return OPS_OK;
}

/* ---- the file ------------------------------------------------------------------------- */

static uint64_t fnv(const void *data, size_t n, uint64_t h) {
  const unsigned char *c = (const unsigned char *)data;
  for (size_t i = 0; i < n; ++i) h = (h ^ c[i]) * 0x100000001B3ull;
  return h;
}

static uint64_t kernel_set_hash(void) {
  size_t n = 0;
  const opsi_kernel_row *const *rows = opsi_all_rows(&n);
  uint64_t h = 0xCBF29CE484222325ull;
  for (size_t i = 0; i < n; ++i) {
    h = fnv(&rows[i]->id, sizeof rows[i]->id, h);
    h = fnv(rows[i]->name, strlen(rows[i]->name) + 1, h);
  }
  return h;
}

static const char *row_name(int32_t id) {
  size_t n = 0;
  const opsi_kernel_row *const *rows = opsi_all_rows(&n);
  for (size_t i = 0; i < n; ++i) {
    if (rows[i]->id == id) return rows[i]->name;
  }
  return "unknown";
}

/* The header lines of this build and device; *build_len: the bytes naming the build. */
static int header(ops_handle h, char *buf, size_t n, size_t *build_len) {
  const int b = snprintf(buf, n, MAGIC "\nlibrary %s\nkernels %016llx\n", ops_version_string(),
                         (unsigned long long)kernel_set_hash());
  *build_len = (size_t)b;
  return b + snprintf(buf + b, n - (size_t)b, "device %s\nsm %d sms %d\n", h->info.name, (int)h->info.sm_version,
                      (int)h->info.sm_count);
}

/* Everything a read file holds; `why` says what is wrong with it (NULL: nothing). */
typedef struct parsed {
  opsi_tune_entry *entries;
  int count;
  const char *why;
  char detail[160];
} parsed;

static char *read_all(const char *path, size_t *len, int *missing) {
  *missing = 0;
  FILE *f = fopen(path, "rb");
  if (f == NULL) {
    *missing = errno == ENOENT;
    return NULL;
  }
  /* a buffer that grows with the file (read at every save), until past MAX_FILE_BYTES */
  size_t cap = 1 << 16, n = 0;
  char *buf = (char *)malloc(cap + 1);
  while (buf != NULL) {
    n += fread(buf + n, 1, cap - n, f);
    if (n < cap || cap > MAX_FILE_BYTES) break; /* the end (or an error), or too large */
    char *grown = (char *)realloc(buf, 2 * cap + 1);
    if (grown == NULL) free(buf);
    buf = grown;
    cap *= 2;
  }
  fclose(f);
  if (buf == NULL) return NULL;
  buf[n] = '\0';
  *len = n;
  return buf;
}

static int parse_entry(char *line, opsi_tune_entry *e) {
  memset(e, 0, sizeof *e);
  e->source = OPS_CHOICE_TUNE_CACHE;
  char *save = NULL;
  char *tok = strtok_r(line, " ", &save);
  if (tok == NULL || strcmp(tok, "entry") != 0) return 0;
  tok = strtok_r(NULL, " ", &save);
  for (int w = 0; w < OPSI_CACHE_KEY_WORDS; ++w) {
    if (tok == NULL || strlen(tok) < 16) return 0;
    char word[17];
    memcpy(word, tok + 0, 16);
    word[16] = '\0';
    char *end = NULL;
    e->key[w] = strtoull(word, &end, 16);
    if (end != word + 16) return 0;
    tok += 16;
    if (*tok == ',') ++tok;
    else if (*tok != '\0' || w != OPSI_CACHE_KEY_WORDS - 1) return 0;
  }
  opsi_problem p;
  memcpy(&p, e->key, sizeof p);
  const opsi_kernel_row *chosen = (tok = strtok_r(NULL, " ", &save)) != NULL ? opsi_row_named(tok) : NULL;
  if (chosen == NULL || chosen->op != p.op) return 0;
  e->kernel_id = chosen->id;
  const char *count = strtok_r(NULL, " ", &save);
  e->count = count != NULL ? atoi(count) : 0;
  if (e->count < 1 || e->count > OPSI_TUNE_MAX_K) return 0;
  int has_chosen = 0;
  for (int i = 0; i < e->count; ++i) {
    const char *name = strtok_r(NULL, " ", &save), *us = strtok_r(NULL, " ", &save);
    const opsi_kernel_row *r = name != NULL ? opsi_row_named(name) : NULL;
    char *end = NULL;
    e->us[i] = us != NULL ? strtod(us, &end) : -1.0;
    if (r == NULL || r->op != p.op || end == us || !(e->us[i] > 0.0) || !isfinite(e->us[i])) return 0;
    e->ids[i] = r->id;
    has_chosen |= r->id == e->kernel_id;
  }
  tok = strtok_r(NULL, " ", &save);
  return has_chosen && tok != NULL && strcmp(tok, "|") == 0;
}

static void parse(ops_handle h, char *text, size_t len, parsed *out) {
  memset(out, 0, sizeof *out);
  char *last = len > 1 ? text + len - 2 : text;
  while (last > text && last[-1] != '\n') --last;
  if (len == 0 || text[len - 1] != '\n' || strncmp(last, "end ", 4) != 0) {
    out->why = "corrupt (no end line: a torn or truncated file)";
    return;
  }
  unsigned long long sum = 0;
  int count = -1;
  if (sscanf(last, "end %d %llx", &count, &sum) != 2 ||
      fnv(text, (size_t)(last - text), 0xCBF29CE484222325ull) != (uint64_t)sum) {
    out->why = "corrupt (its checksum does not match its contents)";
    return;
  }
  if (strncmp(text, MAGIC "\n", strlen(MAGIC) + 1) != 0) {
    out->why = "not a tune cache of this format (" MAGIC ")";
    return;
  }
  char mine[512];
  size_t build_len = 0;
  const int hl = header(h, mine, sizeof mine, &build_len);
  if (strncmp(text, mine, build_len) != 0) {
    out->why = "stale (written by another opslib build: version or kernel set)";
    return;
  }
  if (strncmp(text, mine, (size_t)hl) != 0) {
    const char *dev = text + build_len + (strncmp(text + build_len, "device ", 7) == 0 ? 7 : 0);
    const char *nl = strchr(dev, '\n');
    snprintf(out->detail, sizeof out->detail, "written for another device (%.*s)",
             nl != NULL ? (int)(nl - dev) : 0, dev);
    out->why = out->detail;
    return;
  }
  out->entries = (opsi_tune_entry *)calloc(count > 0 ? (size_t)count : 1, sizeof *out->entries);
  if (out->entries == NULL) {
    out->why = "too large to read";
    return;
  }
  *last = '\0'; /* the entries end where the end line begins */
  char *save = NULL;
  int n = 0;
  for (char *line = strtok_r(text + hl, "\n", &save); line != NULL; line = strtok_r(NULL, "\n", &save)) {
    if (n == count || !parse_entry(line, &out->entries[n])) {
      out->why = "corrupt (a malformed entry, or an unknown kernel)";
      return;
    }
    ++n;
  }
  out->count = n;
  if (n != count) out->why = "corrupt (fewer entries than its end line counts)";
}

/* Reads path; 0 with *p filled (p->why set when unusable), or -1 when missing. */
static int read_file(ops_handle h, const char *path, parsed *p) {
  size_t len = 0;
  int missing = 0;
  char *text = read_all(path, &len, &missing);
  memset(p, 0, sizeof *p);
  if (text == NULL) {
    if (missing) return -1;
    p->why = "cannot be read";
    return 0;
  }
  if (len > MAX_FILE_BYTES) {
    p->why = "too large (over 16 MB)";
  } else {
    parse(h, text, len, p);
  }
  free(text);
  return 0;
}

void opsi_tune_file_load(ops_handle h, const char *path, int quiet) {
  parsed p;
  const int r = read_file(h, path, &p);
  if (r == 0 && p.why == NULL) {
    pthread_mutex_lock(&h->tuner.lock);
    for (int i = 0; i < p.count; ++i) opsi_tuner_put_locked(&h->tuner, &p.entries[i], 0);
    pthread_mutex_unlock(&h->tuner.lock);
  } else if (!quiet) {
    fprintf(stderr, "opslib: tune cache %s: %s; ignoring it\n", path, r < 0 ? "not found" : p.why);
  }
  free(p.entries);
}

static size_t put_entry(char *buf, size_t n, const opsi_tune_entry *e) {
  size_t used = 0;
#define PUT(...)                                                                \
  do {                                                                          \
    if (used < n) used += (size_t)snprintf(buf + used, n - used, __VA_ARGS__); \
  } while (0)
  PUT("entry ");
  for (int w = 0; w < OPSI_CACHE_KEY_WORDS; ++w) PUT("%s%016llx", w ? "," : "", (unsigned long long)e->key[w]);
  PUT(" %s %d", row_name(e->kernel_id), e->count);
  for (int i = 0; i < e->count; ++i) PUT(" %s %.3f", row_name(e->ids[i]), e->us[i]);
  opsi_problem p;
  memcpy(&p, e->key, sizeof p);
  char what[256];
  opsi_describe_problem(&p, what, sizeof what);
  PUT(" | %s\n", what);
#undef PUT
  return used;
}

static ops_status write_file(const char *fn, const char *path, const char *text, size_t len) {
  static atomic_uint seq;
  const size_t plen = strlen(path) + 48;
  char *tmp = (char *)malloc(plen);
  if (tmp == NULL) return opsi_fail(OPS_ERR_IO, "%s: tune cache %s: out of memory", fn, path);
  snprintf(tmp, plen, "%s.tmp.%ld.%u", path, (long)getpid(), atomic_fetch_add(&seq, 1u));
  FILE *f = fopen(tmp, "wb");
  int ok = f != NULL;
  const int err_open = errno;
  if (ok) ok = fwrite(text, 1, len, f) == len;
  if (ok) ok = fflush(f) == 0 && fsync(fileno(f)) == 0;
  if (f != NULL && fclose(f) != 0) ok = 0;
  if (ok) ok = rename(tmp, path) == 0;
  const int err = errno;
  if (!ok) remove(tmp);
  free(tmp);
  if (!ok) {
    return opsi_fail(OPS_ERR_IO, "%s: tune cache %s: cannot be written (%s)", fn, path,
                     strerror(f == NULL ? err_open : err));
  }
  return OPS_OK;
}

ops_status opsi_tune_file_save(ops_handle h, const char *fn) {
  pthread_mutex_lock(&h->tuner.lock);
  ops_status st = OPS_OK;
  char *path = h->tuner.path;
  if (path == NULL) {
    pthread_mutex_unlock(&h->tuner.lock);
    return opsi_fail(OPS_ERR_INVALID_ARGUMENT, "%s: handle: expected a tune cache attached "
                     "(ops_handle_set_tune_cache), got none", fn);
  }
  parsed now;
  if (read_file(h, path, &now) == 0 && now.why == NULL) { /* keep what other processes wrote */
    for (int i = 0; i < now.count; ++i) opsi_tuner_put_locked(&h->tuner, &now.entries[i], 0);
  }
  free(now.entries);
  const size_t cap = 1024 + (size_t)h->tuner.count * 1024;
  char *text = (char *)malloc(cap);
  if (text == NULL) {
    st = opsi_fail(OPS_ERR_IO, "%s: tune cache %s: out of memory", fn, path);
  } else {
    size_t build_len = 0;
    size_t used = (size_t)header(h, text, cap, &build_len);
    for (int i = 0; i < h->tuner.count && used < cap; ++i) {
      used += put_entry(text + used, cap - used, &h->tuner.entries[i]);
    }
    if (used + 64 >= cap) {
      st = opsi_fail(OPS_ERR_INTERNAL, "%s: tune cache %s: an entry outgrew its buffer", fn, path);
    } else {
      const uint64_t sum = fnv(text, used, 0xCBF29CE484222325ull);
      used += (size_t)snprintf(text + used, cap - used, "end %d %016llx\n", h->tuner.count, (unsigned long long)sum);
      st = write_file(fn, path, text, used);
    }
    free(text);
  }
  pthread_mutex_unlock(&h->tuner.lock);
  return st;
}

/* ---- entry points ------------------------------------------------------------------------ */

ops_status ops_handle_set_autotune(ops_handle handle, ops_autotune_mode mode) {
  opsi_clear_error();
  if (handle == NULL) return opsi_fail(OPS_ERR_NULL_POINTER, "ops_handle_set_autotune: handle is NULL");
  if (mode != OPS_AUTOTUNE_OFF && mode != OPS_AUTOTUNE_MEASURE) {
    return opsi_fail(OPS_ERR_INVALID_ARGUMENT, "ops_handle_set_autotune: mode: expected OPS_AUTOTUNE_OFF (0) or "
                     "OPS_AUTOTUNE_MEASURE (1), got %d", (int)mode);
  }
  handle->autotune = mode;
  opsi_plan_cache_clear(&handle->cache); /* cached choices predate the mode */
  return OPS_OK;
}

ops_status ops_handle_get_autotune(ops_handle handle, ops_autotune_mode *mode) {
  opsi_clear_error();
  if (handle == NULL) return opsi_fail(OPS_ERR_NULL_POINTER, "ops_handle_get_autotune: handle is NULL");
  if (mode == NULL) return opsi_fail(OPS_ERR_NULL_POINTER, "ops_handle_get_autotune: mode is NULL");
  *mode = (ops_autotune_mode)handle->autotune;
  return OPS_OK;
}

ops_status ops_handle_set_tune_cache(ops_handle handle, const char *path) {
  opsi_clear_error();
  if (handle == NULL) return opsi_fail(OPS_ERR_NULL_POINTER, "ops_handle_set_tune_cache: handle is NULL");
  const int attach = path != NULL && path[0] != '\0';
  if (attach && strlen(path) > 4095) {
    return opsi_fail(OPS_ERR_INVALID_ARGUMENT, "ops_handle_set_tune_cache: path: expected at most 4095 bytes, "
                     "got %zu", strlen(path));
  }
  char *copy = attach ? strdup(path) : NULL;
  if (attach && copy == NULL) return opsi_fail(OPS_ERR_OUT_OF_MEMORY, "ops_handle_set_tune_cache: strdup failed");
  pthread_mutex_lock(&handle->tuner.lock);
  free(handle->tuner.path);
  handle->tuner.path = copy;
  pthread_mutex_unlock(&handle->tuner.lock);
  if (attach) opsi_tune_file_load(handle, copy, 0);
  opsi_plan_cache_clear(&handle->cache); /* the file's choices apply from now */
  return OPS_OK;
}

ops_status ops_handle_save_tune_cache(ops_handle handle) {
  opsi_clear_error();
  if (handle == NULL) return opsi_fail(OPS_ERR_NULL_POINTER, "ops_handle_save_tune_cache: handle is NULL");
  return opsi_tune_file_save(handle, "ops_handle_save_tune_cache");
}

const char *ops_choice_name(ops_choice choice) {
  switch (choice) {
    case OPS_CHOICE_MODEL: return "model";
    case OPS_CHOICE_MEASURED: return "measured";
    case OPS_CHOICE_TUNE_CACHE: return "tune_cache";
    case OPS_CHOICE_PINNED: return "pinned";
    default: return "unknown";
  }
}
