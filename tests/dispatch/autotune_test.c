#define _POSIX_C_SOURCE 200809L /* setenv, mkdtemp, dup */
/*
 * Measured autotuning and the tune cache on the CPU backend, where ops_gemm has two kernels
 * with the same arithmetic (cpu_gemm_ref, cpu_gemm_panel) and equal estimates, so only a
 * measurement tells them apart: off by default; the first run of a shape bucket times both
 * on the host clock and keeps the faster; in-place calls, single candidates and pins are not
 * timed; the tune cache carries choices across handles; missing, corrupt, truncated, stale
 * and foreign files are ignored with one stderr line; concurrent writers leave a valid file;
 * the first ops_explain layout is still accepted and nothing past it is written.
 */
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "opslib/opslib.h"
#include "tests/support/opst.h"

static opst_rng g_rng;
static char g_dir[256];

/* ---- helpers ------------------------------------------------------------------------ */

static void path_in_dir(char *buf, size_t n, const char *name) { snprintf(buf, n, "%s/%s", g_dir, name); }

/* stderr into a file between capture_begin and capture_end, which returns what was written. */
static int g_saved_fd = -1;
static char g_capture[8192];

static void capture_begin(void) {
  char path[300];
  path_in_dir(path, sizeof path, "stderr.txt");
  fflush(stderr);
  g_saved_fd = dup(2);
  const int fd = open(path, O_CREAT | O_TRUNC | O_WRONLY, 0600);
  assert_true(fd >= 0 && g_saved_fd >= 0);
  dup2(fd, 2);
  close(fd);
}

static const char *capture_end(void) {
  char path[300];
  path_in_dir(path, sizeof path, "stderr.txt");
  fflush(stderr);
  dup2(g_saved_fd, 2);
  close(g_saved_fd);
  FILE *f = fopen(path, "rb");
  size_t n = f != NULL ? fread(g_capture, 1, sizeof g_capture - 1, f) : 0;
  if (f != NULL) fclose(f);
  g_capture[n] = '\0';
  return g_capture;
}

/* A CPU handle with autotune on. */
static ops_handle tuning_handle(void) {
  ops_handle h = opst_cpu_handle();
  OPST_OK(ops_handle_set_autotune(h, OPS_AUTOTUNE_MEASURE));
  return h;
}

/* Attaches path to h as its tune cache; returns what that printed on stderr. */
static const char *attach(ops_handle h, const char *path) {
  capture_begin();
  const ops_status st = ops_handle_set_tune_cache(h, path);
  const char *err = capture_end();
  OPST_OK(st);
  return err;
}

static int count_lines(const char *s) {
  int n = 0;
  for (; *s; ++s) n += *s == '\n';
  return n;
}

static char *read_text(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  assert_non_null(f);
  static char buf[1 << 20];
  *len = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[*len] = '\0';
  char *copy = (char *)malloc(*len + 1);
  memcpy(copy, buf, *len + 1);
  return copy;
}

static void write_text(const char *path, const char *text, size_t len) {
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  assert_int_equal(fwrite(text, 1, len, f), len);
  fclose(f);
}

/* The file's checksum (FNV-1a, 64 bits, of everything before its end line), for files this
 * test edits on purpose and wants read as stale or foreign rather than corrupt. */
static void reseal(char *text, size_t *len) {
  char *end = strstr(text, "\nend ") + 1;
  uint64_t h = 0xCBF29CE484222325ull;
  for (const char *c = text; c < end; ++c) h = (h ^ (unsigned char)*c) * 0x100000001B3ull;
  int count = 0;
  assert_int_equal(sscanf(end, "end %d", &count), 1);
  *len = (size_t)(end - text) + (size_t)sprintf(end, "end %d %016llx\n", count, (unsigned long long)h);
}

/* A gemm of f32 operands: A [m, k] row-major, B [k, n] row-major (N-major, the layout the
 * panel kernel reads in order), D [m, n]. */
typedef struct gemm_call {
  float *a, *b, *d;
  ops_tensor ta, tb, td;
} gemm_call;

static void gemm_make(gemm_call *g, int64_t m, int64_t n, int64_t k) {
  g->a = (float *)malloc((size_t)(m * k) * sizeof(float));
  g->b = (float *)malloc((size_t)(k * n) * sizeof(float));
  g->d = (float *)malloc((size_t)(m * n) * sizeof(float));
  for (int64_t i = 0; i < m * k; ++i) g->a[i] = (float)opst_uniform(&g_rng, -1, 1);
  for (int64_t i = 0; i < k * n; ++i) g->b[i] = (float)opst_uniform(&g_rng, -1, 1);
  for (int64_t i = 0; i < m * n; ++i) g->d[i] = NAN; /* poisoned */
  const int64_t as[2] = {m, k}, bs[2] = {k, n}, ds[2] = {m, n};
  OPST_OK(ops_tensor_init(&g->ta, g->a, OPS_DTYPE_F32, ops_device_cpu(), 2, as, NULL));
  OPST_OK(ops_tensor_init(&g->tb, g->b, OPS_DTYPE_F32, ops_device_cpu(), 2, bs, NULL));
  OPST_OK(ops_tensor_init(&g->td, g->d, OPS_DTYPE_F32, ops_device_cpu(), 2, ds, NULL));
}

static void gemm_free(gemm_call *g) {
  free(g->a);
  free(g->b);
  free(g->d);
}

static void gemm_explain(ops_handle h, gemm_call *g, ops_explain *e) {
  memset(e, 0, sizeof *e);
  e->struct_size = sizeof *e;
  OPST_OK(ops_gemm_explain(h, NULL, &g->ta, &g->tb, &g->td, e));
  assert_true(e->chosen >= 0);
}

static const char *chosen_name(const ops_explain *e) { return e->verdicts[e->chosen].kernel_name; }

/* The index of the smallest measured time, and the count of measured verdicts. */
static int fastest_measured(const ops_explain *e, int *measured) {
  int best = -1;
  *measured = 0;
  for (int i = 0; i < e->count; ++i) {
    if (e->measured_us[i] <= 0) continue;
    ++*measured;
    if (best < 0 || e->measured_us[i] < e->measured_us[best]) best = i;
  }
  return best;
}

/* D of g computed by the reference kernel, pinned on its own handle. */
static float *reference_d(gemm_call *g, int64_t mn) {
  ops_handle r = opst_cpu_handle();
  OPST_OK(ops_handle_pin_kernel(r, "cpu_gemm_ref"));
  float *want = (float *)malloc((size_t)mn * sizeof(float));
  ops_tensor td = g->td;
  td.data = want;
  OPST_OK(ops_gemm(r, NULL, &g->ta, &g->tb, &td, NULL, 0));
  ops_handle_destroy(r);
  return want;
}

typedef struct seen {
  int records, choice, hit;
  char kernel[64];
} seen;

static void on_record(const ops_profile_record *rec, void *user) {
  seen *s = (seen *)user;
  ++s->records;
  s->choice = rec->choice;
  s->hit = rec->plan_cache_hit;
  snprintf(s->kernel, sizeof s->kernel, "%s", rec->kernel_name);
}

/* ---- tests -------------------------------------------------------------------------- */

static void off_by_default_the_model_decides(void **state) {
  (void)state;
  ops_handle h = opst_cpu_handle();
  ops_autotune_mode mode = OPS_AUTOTUNE_MEASURE;
  OPST_OK(ops_handle_get_autotune(h, &mode));
  assert_int_equal(mode, OPS_AUTOTUNE_OFF);
  gemm_call g;
  gemm_make(&g, 8, 72, 40);
  ops_explain e;
  gemm_explain(h, &g, &e);
  assert_int_equal(e.choice, OPS_CHOICE_MODEL);
  assert_non_null(strstr(e.choice_note, "autotune is off"));
  assert_int_equal(e.measured, 0);
  assert_string_equal(chosen_name(&e), "cpu_gemm_ref"); /* equal estimates: the earlier row */
  OPST_OK(ops_gemm(h, NULL, &g.ta, &g.tb, &g.td, NULL, 0));
  gemm_explain(h, &g, &e);
  assert_int_equal(e.choice, OPS_CHOICE_MODEL);
  char text[8192];
  ops_explain_to_text(&e, text, sizeof text);
  assert_non_null(strstr(text, "(model: the cost model's lowest estimate: autotune is off"));
  gemm_free(&g);
  ops_handle_destroy(h);
}

static void the_first_run_times_both_and_keeps_the_faster(void **state) {
  (void)state;
  ops_handle h = tuning_handle();
  seen s;
  memset(&s, 0, sizeof s);
  OPST_OK(ops_handle_set_profiler(h, on_record, &s));
  gemm_call g;
  gemm_make(&g, 48, 200, 150);
  ops_explain e;
  gemm_explain(h, &g, &e);
  assert_int_equal(e.choice, OPS_CHOICE_MODEL);
  assert_non_null(strstr(e.choice_note, "until the first run times the best 2"));

  OPST_OK(ops_gemm(h, NULL, &g.ta, &g.tb, &g.td, NULL, 0));
  OPST_OK(ops_handle_flush_profiler(h));
  assert_int_equal(s.records, 1); /* the timing runs are not profiled; the call's run is */
  assert_int_equal(s.choice, OPS_CHOICE_MEASURED);
  float *want = reference_d(&g, 48 * 200);
  assert_memory_equal(g.d, want, 48 * 200 * sizeof(float)); /* same arithmetic, bitwise */

  gemm_explain(h, &g, &e);
  int measured = 0;
  const int best = fastest_measured(&e, &measured);
  assert_int_equal(e.choice, OPS_CHOICE_MEASURED);
  assert_int_equal(measured, 2);
  assert_int_equal(e.measured, 2);
  assert_int_equal(e.chosen, best);
  assert_string_equal(s.kernel, chosen_name(&e));
  assert_non_null(strstr(e.choice_note, "timed on this handle: cpu_gemm_"));

  /* the second call hits the plan cache with the measured choice, and times nothing */
  OPST_OK(ops_gemm(h, NULL, &g.ta, &g.tb, &g.td, NULL, 0));
  OPST_OK(ops_handle_flush_profiler(h));
  assert_int_equal(s.records, 2);
  assert_int_equal(s.hit, 1);
  assert_int_equal(s.choice, OPS_CHOICE_MEASURED);

  /* a shape of the same bucket (m 40 -> 48, n 250 -> 256, k 130 -> 192) takes the choice */
  gemm_call near;
  gemm_make(&near, 40, 250, 130);
  ops_explain en;
  gemm_explain(h, &near, &en);
  assert_int_equal(en.choice, OPS_CHOICE_MEASURED);
  assert_string_equal(chosen_name(&en), chosen_name(&e));
  /* one of another bucket does not */
  gemm_call far;
  gemm_make(&far, 100, 200, 150);
  gemm_explain(h, &far, &en);
  assert_int_equal(en.choice, OPS_CHOICE_MODEL);

  free(want);
  gemm_free(&g);
  gemm_free(&near);
  gemm_free(&far);
  ops_handle_destroy(h);
}

/* D = A B + D in place: a timed repeat would add A B more than once. */
static void in_place_pinned_and_single_candidate_calls_are_not_timed(void **state) {
  (void)state;
  ops_handle h = tuning_handle();
  gemm_call g;
  gemm_make(&g, 24, 96, 64);
  for (int i = 0; i < 24 * 96; ++i) g.d[i] = (float)opst_uniform(&g_rng, -1, 1);
  float *old = (float *)malloc(24 * 96 * sizeof(float));
  memcpy(old, g.d, 24 * 96 * sizeof(float));
  ops_gemm_params p;
  ops_gemm_params_init(&p);
  p.c = &g.td;
  p.beta = 1.0f;
  OPST_OK(ops_gemm(h, &p, &g.ta, &g.tb, &g.td, NULL, 0));
  for (int i = 0; i < 24; ++i) {
    for (int j = 0; j < 96; ++j) {
      double acc = 0;
      for (int q = 0; q < 64; ++q) acc += (double)g.a[i * 64 + q] * g.b[q * 96 + j];
      assert_float_equal(g.d[i * 96 + j], (float)(acc + old[i * 96 + j]), 1e-5);
    }
  }
  ops_explain e;
  memset(&e, 0, sizeof e);
  e.struct_size = sizeof e;
  OPST_OK(ops_gemm_explain(h, &p, &g.ta, &g.tb, &g.td, &e));
  assert_int_equal(e.choice, OPS_CHOICE_MODEL);
  assert_int_equal(e.measured, 0);

  /* a single candidate (softmax has one CPU kernel) */
  float x[6] = {1, 2, 3, 4, 5, 6}, y[6];
  const int64_t xs[2] = {2, 3};
  ops_tensor tx, ty;
  OPST_OK(ops_tensor_init(&tx, x, OPS_DTYPE_F32, ops_device_cpu(), 2, xs, NULL));
  OPST_OK(ops_tensor_init(&ty, y, OPS_DTYPE_F32, ops_device_cpu(), 2, xs, NULL));
  OPST_OK(ops_softmax(h, NULL, &tx, &ty, NULL, 0));
  OPST_OK(ops_softmax_explain(h, NULL, &tx, &ty, &e));
  assert_int_equal(e.choice, OPS_CHOICE_MODEL);
  assert_non_null(strstr(e.choice_note, "one eligible kernel"));

  /* a pin */
  OPST_OK(ops_handle_pin_kernel(h, "cpu_gemm_panel"));
  gemm_explain(h, &g, &e);
  assert_int_equal(e.choice, OPS_CHOICE_PINNED);
  assert_string_equal(chosen_name(&e), "cpu_gemm_panel");
  free(old);
  gemm_free(&g);
  ops_handle_destroy(h);
}

static void the_tune_cache_carries_choices_across_handles(void **state) {
  (void)state;
  char path[300];
  path_in_dir(path, sizeof path, "carry.tune");
  remove(path);
  ops_handle a = tuning_handle();
  const char *err = attach(a, path);
  assert_int_equal(count_lines(err), 1);
  assert_non_null(strstr(err, "not found"));
  assert_non_null(strstr(err, path));
  gemm_call g;
  gemm_make(&g, 16, 130, 96);
  OPST_OK(ops_gemm(a, NULL, &g.ta, &g.tb, &g.td, NULL, 0));
  ops_explain ea;
  gemm_explain(a, &g, &ea);
  assert_int_equal(ea.choice, OPS_CHOICE_MEASURED);
  size_t len = 0;
  char *text = read_text(path, &len);
  assert_true(strncmp(text, "opslib-tune-cache 1\n", 20) == 0);
  assert_non_null(strstr(text, "| gemm f32 -> f32 on cpu:"));
  free(text);

  ops_handle b = opst_cpu_handle(); /* autotune off: the file's choices still apply */
  assert_string_equal(attach(b, path), "");
  ops_explain eb;
  gemm_explain(b, &g, &eb);
  assert_int_equal(eb.choice, OPS_CHOICE_TUNE_CACHE);
  assert_string_equal(chosen_name(&eb), chosen_name(&ea));
  for (int i = 0; i < eb.count; ++i) assert_float_equal(eb.measured_us[i], ea.measured_us[i], 1e-3);
  seen s;
  memset(&s, 0, sizeof s);
  OPST_OK(ops_handle_set_profiler(b, on_record, &s));
  OPST_OK(ops_gemm(b, NULL, &g.ta, &g.tb, &g.td, NULL, 0));
  OPST_OK(ops_handle_flush_profiler(b));
  assert_int_equal(s.choice, OPS_CHOICE_TUNE_CACHE);
  assert_string_equal(s.kernel, chosen_name(&ea));

  /* the environment: OPSLIB_TUNE_CACHE and OPSLIB_AUTOTUNE at creation */
  setenv("OPSLIB_TUNE_CACHE", path, 1);
  setenv("OPSLIB_AUTOTUNE", "1", 1);
  ops_handle c = NULL;
  OPST_OK(ops_handle_create(&c, ops_device_cpu()));
  ops_autotune_mode mode = OPS_AUTOTUNE_OFF;
  OPST_OK(ops_handle_get_autotune(c, &mode));
  assert_int_equal(mode, OPS_AUTOTUNE_MEASURE);
  ops_explain ec;
  gemm_explain(c, &g, &ec);
  assert_int_equal(ec.choice, OPS_CHOICE_TUNE_CACHE);
  ops_handle_destroy(c);
  setenv("OPSLIB_AUTOTUNE", "yes", 1);
  assert_int_equal(ops_handle_create(&c, ops_device_cpu()), OPS_ERR_INVALID_ARGUMENT);
  assert_null(c);
  assert_non_null(strstr(ops_last_error(), "OPSLIB_AUTOTUNE: expected 0 or 1, got 'yes'"));
  unsetenv("OPSLIB_AUTOTUNE");
  unsetenv("OPSLIB_TUNE_CACHE");

  /* detached: choices already read stay, the file is no longer written */
  OPST_OK(ops_handle_set_tune_cache(b, NULL));
  gemm_explain(b, &g, &eb);
  assert_int_equal(eb.choice, OPS_CHOICE_TUNE_CACHE);
  assert_int_equal(ops_handle_save_tune_cache(b), OPS_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(ops_last_error(), "expected a tune cache attached"));
  gemm_free(&g);
  ops_handle_destroy(a);
  ops_handle_destroy(b);
}

/* Writes `text` as the file, attaches it to a fresh handle, and checks one stderr line
 * containing `why`, and that the model decides. */
static void expect_ignored(const char *path, const char *text, size_t len, const char *why, gemm_call *g) {
  write_text(path, text, len);
  ops_handle h = opst_cpu_handle();
  const char *err = attach(h, path);
  if (count_lines(err) != 1 || strstr(err, why) == NULL || strstr(err, path) == NULL) {
    print_error("expected one line naming %s and '%s', got '%s'\n", path, why, err);
    fail();
  }
  ops_explain e;
  gemm_explain(h, g, &e);
  assert_int_equal(e.choice, OPS_CHOICE_MODEL);
  OPST_OK(ops_gemm(h, NULL, &g->ta, &g->tb, &g->td, NULL, 0));
  ops_handle_destroy(h);
}

static void bad_files_are_ignored_with_one_line(void **state) {
  (void)state;
  char good_path[300], path[300];
  path_in_dir(good_path, sizeof good_path, "good.tune");
  path_in_dir(path, sizeof path, "bad.tune");
  remove(good_path);
  gemm_call g;
  gemm_make(&g, 12, 80, 70);
  ops_handle w = tuning_handle();
  attach(w, good_path);
  OPST_OK(ops_gemm(w, NULL, &g.ta, &g.tb, &g.td, NULL, 0));
  ops_handle_destroy(w);
  size_t len = 0;
  char *good = read_text(good_path, &len);
  char *bad = (char *)malloc(len + 256);

  expect_ignored(path, "not a tune cache\n", 17, "corrupt", &g);
  expect_ignored(path, "", 0, "corrupt", &g);
  expect_ignored(path, good, len - 12, "corrupt", &g); /* truncated */
  memcpy(bad, good, len + 1);
  char *entry = strstr(bad, "\nentry ") + 7;
  entry[3] = entry[3] == '0' ? '1' : '0'; /* a flipped key digit */
  expect_ignored(path, bad, len, "corrupt", &g);
  const char *lib = strstr(good, "library ");
  const size_t at = (size_t)(lib - good);
  memcpy(bad, good, at);
  size_t n = at + (size_t)sprintf(bad + at, "library 99.0.0%s", strchr(lib, '\n'));
  reseal(bad, &n);
  expect_ignored(path, bad, n, "stale", &g);
  const char *dev = strstr(good, "device ");
  memcpy(bad, good, (size_t)(dev - good));
  n = (size_t)(dev - good) + (size_t)sprintf(bad + (dev - good), "device NVIDIA H100 80GB HBM3%s", strchr(dev, '\n'));
  reseal(bad, &n);
  expect_ignored(path, bad, n, "another device (NVIDIA H100 80GB HBM3)", &g);
  memcpy(bad, good, len + 1);
  n = len;
  char *name = strstr(bad, " cpu_gemm_");
  memcpy(name + 1, "cpu_gemm_xxxxx", 14); /* an unknown kernel, resealed */
  reseal(bad, &n);
  expect_ignored(path, bad, n, "unknown kernel", &g);
  remove(path);
  expect_ignored(path, "", 0, "corrupt", &g);
  remove(path);

  /* an ignored file is replaced by the next write, and then reads back */
  write_text(path, "garbage\n", 8);
  ops_handle h = tuning_handle();
  attach(h, path);
  OPST_OK(ops_gemm(h, NULL, &g.ta, &g.tb, &g.td, NULL, 0));
  OPST_OK(ops_handle_save_tune_cache(h));
  ops_handle r = opst_cpu_handle();
  assert_string_equal(attach(r, path), "");
  ops_explain e;
  gemm_explain(r, &g, &e);
  assert_int_equal(e.choice, OPS_CHOICE_TUNE_CACHE);

  /* a file that cannot be written is an error of the save, and only a line after a run */
  assert_non_null(strstr(attach(h, "/nonexistent-opslib-dir/x.tune"),
                         "/nonexistent-opslib-dir/x.tune: not found; ignoring it"));
  assert_int_equal(ops_handle_save_tune_cache(h), OPS_ERR_IO);
  assert_non_null(strstr(ops_last_error(), "ops_handle_save_tune_cache: tune cache /nonexistent-opslib-dir/x.tune: "
                                           "cannot be written"));
  free(good);
  free(bad);
  gemm_free(&g);
  ops_handle_destroy(h);
  ops_handle_destroy(r);
}

typedef struct writer {
  const char *path;
  int index;
  ops_handle h;
  ops_status st;
} writer;

enum { WRITERS = 4, SHAPES = 3 };

/* M of writer t's shape s: one extent of each bucket, so that no two shapes share one */
static int64_t writer_m(int t, int s) {
  static const int64_t m[WRITERS * SHAPES] = {3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128};
  return m[s * WRITERS + t];
}

static void *write_some(void *arg) {
  writer *w = (writer *)arg;
  w->st = OPS_OK;
  for (int s = 0; s < SHAPES && w->st == OPS_OK; ++s) {
    gemm_call g;
    gemm_make(&g, writer_m(w->index, s), 72, 24);
    w->st = ops_gemm(w->h, NULL, &g.ta, &g.tb, &g.td, NULL, 0);
    gemm_free(&g);
  }
  return NULL;
}

static void concurrent_writers_leave_a_valid_file(void **state) {
  (void)state;
  char path[300];
  path_in_dir(path, sizeof path, "shared.tune");
  remove(path);
  writer w[WRITERS];
  pthread_t th[WRITERS];
  capture_begin();
  for (int t = 0; t < WRITERS; ++t) {
    w[t].path = path;
    w[t].index = t;
    w[t].h = tuning_handle();
    OPST_OK(ops_handle_set_tune_cache(w[t].h, path));
  }
  for (int t = 0; t < WRITERS; ++t) assert_int_equal(pthread_create(&th[t], NULL, write_some, &w[t]), 0);
  (void)path;
  for (int t = 0; t < WRITERS; ++t) pthread_join(th[t], NULL);
  const char *err = capture_end();
  assert_int_equal(count_lines(err), WRITERS); /* "not found" once a handle, nothing else */
  for (int t = 0; t < WRITERS; ++t) OPST_OK(w[t].st);

  /* whatever the interleaving, the file is whole; each save merges, so after one more save a
   * handle every writer's shapes are there */
  ops_handle r = opst_cpu_handle();
  assert_string_equal(attach(r, path), "");
  for (int t = 0; t < WRITERS; ++t) OPST_OK(ops_handle_save_tune_cache(w[t].h));
  ops_handle f = opst_cpu_handle();
  assert_string_equal(attach(f, path), "");
  for (int t = 0; t < WRITERS; ++t) {
    for (int s = 0; s < SHAPES; ++s) {
      gemm_call g;
      gemm_make(&g, writer_m(t, s), 72, 24);
      ops_explain e;
      gemm_explain(f, &g, &e);
      assert_int_equal(e.choice, OPS_CHOICE_TUNE_CACHE);
      gemm_free(&g);
    }
    ops_handle_destroy(w[t].h);
  }
  ops_handle_destroy(r);
  ops_handle_destroy(f);
}

static void the_first_explain_layout_is_accepted_and_not_overrun(void **state) {
  (void)state;
  ops_handle h = opst_cpu_handle();
  gemm_call g;
  gemm_make(&g, 4, 8, 8);
  unsigned char *buf = (unsigned char *)malloc(sizeof(ops_explain));
  memset(buf, 0xA5, sizeof(ops_explain));
  ops_explain *e = (ops_explain *)(void *)buf;
  e->struct_size = (uint32_t)OPS_EXPLAIN_SIZE_V1;
  OPST_OK(ops_gemm_explain(h, NULL, &g.ta, &g.tb, &g.td, e));
  assert_true(e->chosen >= 0);
  for (size_t i = OPS_EXPLAIN_SIZE_V1; i < sizeof(ops_explain); ++i) assert_int_equal(buf[i], 0xA5);
  char text[4096];
  ops_explain_to_text(e, text, sizeof text); /* reads nothing past the first layout */
  assert_null(strstr(text, "(model"));
  e->struct_size = (uint32_t)OPS_EXPLAIN_SIZE_V1 + 8;
  assert_int_equal(ops_gemm_explain(h, NULL, &g.ta, &g.tb, &g.td, e), OPS_ERR_STRUCT_SIZE);
  free(buf);
  gemm_free(&g);
  ops_handle_destroy(h);
}

static void bad_arguments_are_refused(void **state) {
  (void)state;
  ops_handle h = opst_cpu_handle();
  ops_autotune_mode mode;
  assert_int_equal(ops_handle_set_autotune(NULL, OPS_AUTOTUNE_MEASURE), OPS_ERR_NULL_POINTER);
  assert_int_equal(ops_handle_set_autotune(h, (ops_autotune_mode)7), OPS_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(ops_last_error(), "mode: expected OPS_AUTOTUNE_OFF (0) or OPS_AUTOTUNE_MEASURE (1), got 7"));
  assert_int_equal(ops_handle_get_autotune(h, NULL), OPS_ERR_NULL_POINTER);
  assert_int_equal(ops_handle_get_autotune(NULL, &mode), OPS_ERR_NULL_POINTER);
  assert_int_equal(ops_handle_set_tune_cache(NULL, "x"), OPS_ERR_NULL_POINTER);
  char *longp = (char *)malloc(5000);
  memset(longp, 'a', 4999);
  longp[4999] = '\0';
  assert_int_equal(ops_handle_set_tune_cache(h, longp), OPS_ERR_INVALID_ARGUMENT);
  assert_int_equal(ops_handle_save_tune_cache(NULL), OPS_ERR_NULL_POINTER);
  assert_int_equal(ops_handle_save_tune_cache(h), OPS_ERR_INVALID_ARGUMENT);
  assert_string_equal(ops_choice_name(OPS_CHOICE_MODEL), "model");
  assert_string_equal(ops_choice_name(OPS_CHOICE_MEASURED), "measured");
  assert_string_equal(ops_choice_name(OPS_CHOICE_TUNE_CACHE), "tune_cache");
  assert_string_equal(ops_choice_name(OPS_CHOICE_PINNED), "pinned");
  assert_string_equal(ops_choice_name((ops_choice)9), "unknown");
  free(longp);
  ops_handle_destroy(h);
}

int main(void) {
  opst_rng_init(&g_rng, opst_seed("autotune_test"));
  const char *tmp = getenv("TEST_TMPDIR");
  snprintf(g_dir, sizeof g_dir, "%s/opslib_tuneXXXXXX", tmp != NULL ? tmp : "/tmp");
  if (mkdtemp(g_dir) == NULL) {
    fprintf(stderr, "mkdtemp failed\n");
    return 1;
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(off_by_default_the_model_decides),
      cmocka_unit_test(the_first_run_times_both_and_keeps_the_faster),
      cmocka_unit_test(in_place_pinned_and_single_candidate_calls_are_not_timed),
      cmocka_unit_test(the_tune_cache_carries_choices_across_handles),
      cmocka_unit_test(bad_files_are_ignored_with_one_line),
      cmocka_unit_test(concurrent_writers_leave_a_valid_file),
      cmocka_unit_test(the_first_explain_layout_is_accepted_and_not_overrun),
      cmocka_unit_test(bad_arguments_are_refused),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
