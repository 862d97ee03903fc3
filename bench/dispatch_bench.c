/*
 * What the dispatcher costs on the host, per call:
 *   plan_cache/hit         the lookup a cached call makes (key hash + seqlock read);
 *   plan_cache/miss        what a miss adds: every candidate against the rules + the cost
 *                          model over the eligible ones (opsi_evaluate);
 *   dispatch/<op>_hit      a whole workspace-size query (validation, problem, cached choice),
 *                          the host work of an op call minus the launch;
 *   dispatch/<op>_miss     the same with a new shape every call (so every call misses);
 *   dispatch/sdpa_*_sm90   the same on a described sm_90 device (ops_handle_create_virtual):
 *                          the miss ranks the GPU rows, the Hopper ones with their grid
 *                          functions (the key tiles each work tile computes).
 * Targets (issue 3): a hit <= 50 ns, a miss <= 5 us.
 */
#include <stdint.h>
#include <string.h>

#include "bench/shim/opsb.h"
#include "dispatch/dispatch.h"
#include "opslib/opslib.h"
#include "runtime/handle_internal.h"

static ops_handle g_h, g_sm90;

static opsi_problem sdpa_problem(void) {
  opsi_problem p;
  opsi_problem_init(&p, OPS_OP_SDPA, g_h);
  p.dtype = p.out_dtype = OPS_DTYPE_BF16;
  const int64_t dims[7] = {2, 4096, 4096, 16, 4, 128, 128};
  memcpy(p.dims, dims, sizeof dims);
  p.extra[0] = -1, p.extra[1] = 0;
  p.flags = OPSI_F_CAUSAL | OPSI_F_GQA;
  return p;
}

/* A cache of its own: the values stored here are not plans. */
static opsi_plan_cache g_cache;

static void plan_cache_hit(opsb_state *s, const void *arg) {
  (void)arg;
  const opsi_problem p = sdpa_problem();
  const uint64_t *key = (const uint64_t *)(const void *)&p;
  const int words = (int)(sizeof p / sizeof(uint64_t));
  uint64_t value[2] = {1, 2};
  opsi_plan_cache_put(&g_cache, key, words, value);
  int64_t hits = 0;
  while (opsb_keep_running(s)) hits += opsi_plan_cache_get(&g_cache, key, words, value);
  if (hits != opsb_iterations(s)) opsb_skip(s, "the cached entry was not found");
}

static void plan_cache_miss(opsb_state *s, const void *arg) {
  (void)arg;
  const opsi_problem p = sdpa_problem();
  const opsi_vctx v = {"bench", g_h, OPSI_RUN, NULL, NULL};
  int64_t chosen = 0;
  while (opsb_keep_running(s)) chosen += opsi_evaluate(&v, &p, NULL, NULL) != NULL;
  if (chosen != opsb_iterations(s)) opsb_skip(s, "no kernel chosen");
}

static void sdpa_query(opsb_state *s, int vary, ops_handle h, ops_device dev) {
  const int64_t qs[4] = {2, 4096, 16, 128}, ks[4] = {2, 4096, 4, 128};
  ops_tensor q, k;
  ops_tensor_init(&q, NULL, OPS_DTYPE_BF16, dev, 4, qs, NULL);
  ops_tensor_init(&k, NULL, OPS_DTYPE_BF16, dev, 4, ks, NULL);
  ops_sdpa_params p;
  ops_sdpa_params_init(&p);
  p.causal = 1;
  size_t bytes = 0;
  int64_t i = 0, ok = 0;
  while (opsb_keep_running(s)) {
    if (vary) q.shape[1] = k.shape[1] = 1024 + (i++ & 0xFFFFF); /* a new problem every call */
    ok += ops_sdpa_workspace_size(h, &p, &q, &k, &k, &q, NULL, &bytes) == OPS_OK;
  }
  if (ok != opsb_iterations(s)) opsb_skip(s, ops_last_error());
}

static void sdpa_hit(opsb_state *s, const void *arg) {
  (void)arg;
  sdpa_query(s, 0, g_h, ops_device_cpu());
}

static void sdpa_miss(opsb_state *s, const void *arg) {
  (void)arg;
  sdpa_query(s, 1, g_h, ops_device_cpu());
}

static void sdpa_hit_sm90(opsb_state *s, const void *arg) {
  (void)arg;
  sdpa_query(s, 0, g_sm90, ops_device_cuda(0));
}

static void sdpa_miss_sm90(opsb_state *s, const void *arg) {
  (void)arg;
  sdpa_query(s, 1, g_sm90, ops_device_cuda(0));
}

static void rmsnorm_query(opsb_state *s, int vary) {
  const int64_t xs[2] = {16384, 4096}, ws[1] = {4096};
  ops_tensor x, w;
  ops_tensor_init(&x, NULL, OPS_DTYPE_BF16, ops_device_cpu(), 2, xs, NULL);
  ops_tensor_init(&w, NULL, OPS_DTYPE_BF16, ops_device_cpu(), 1, ws, NULL);
  size_t bytes = 0;
  int64_t i = 0, ok = 0;
  while (opsb_keep_running(s)) {
    if (vary) x.shape[0] = 1 + (i++ & 0xFFFFF);
    ok += ops_rmsnorm_workspace_size(g_h, NULL, &x, &w, &x, &bytes) == OPS_OK;
  }
  if (ok != opsb_iterations(s)) opsb_skip(s, ops_last_error());
}

static void rmsnorm_hit(opsb_state *s, const void *arg) {
  (void)arg;
  rmsnorm_query(s, 0);
}

static void rmsnorm_miss(opsb_state *s, const void *arg) {
  (void)arg;
  rmsnorm_query(s, 1);
}

int main(int argc, char **argv) {
  if (ops_handle_create(&g_h, ops_device_cpu()) != OPS_OK) return 1;
  ops_device_info sm90;
  if (ops_device_info_for_sm(90, &sm90) != OPS_OK || ops_handle_create_virtual(&g_sm90, &sm90) != OPS_OK) return 1;
  opsb_register("plan_cache/hit", plan_cache_hit, NULL, 0);
  opsb_register("plan_cache/miss", plan_cache_miss, NULL, 0);
  opsb_register("dispatch/sdpa_hit", sdpa_hit, NULL, 0);
  opsb_register("dispatch/sdpa_miss", sdpa_miss, NULL, 0);
  opsb_register("dispatch/sdpa_hit_sm90", sdpa_hit_sm90, NULL, 0);
  opsb_register("dispatch/sdpa_miss_sm90", sdpa_miss_sm90, NULL, 0);
  opsb_register("dispatch/rmsnorm_hit", rmsnorm_hit, NULL, 0);
  opsb_register("dispatch/rmsnorm_miss", rmsnorm_miss, NULL, 0);
  const int rc = opsb_main(argc, argv);
  ops_handle_destroy(g_sm90);
  ops_handle_destroy(g_h);
  return rc;
}
