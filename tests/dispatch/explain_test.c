/*
 * Explain, checked for a set of problems: on the CPU and on described sm_90 / sm_80
 * devices, with data pointers NULL; text and JSON renderings; explain's choice is the
 * kernel that runs (seen by the profiler); its own errors.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "opslib/opslib.h"
#include "tests/support/json_check.h"
#include "tests/support/opst.h"

static ops_tensor desc(int32_t dtype, ops_device dev, int ndim, const int64_t *shape) {
  ops_tensor t;
  if (ops_tensor_init(&t, NULL, (ops_dtype)dtype, dev, ndim, shape, NULL) != OPS_OK) fail();
  return t;
}

static void check_renderings(const ops_explain *e, const char *const *needles) {
  char text[8192], json[8192];
  const size_t tn = ops_explain_to_text(e, text, sizeof text);
  const size_t jn = ops_explain_to_json(e, json, sizeof json);
  assert_true(tn < sizeof text && jn < sizeof json);
  if (!opst_json_valid(json)) {
    print_error("invalid JSON: %s\n", json);
    fail();
  }
  for (const char *const *n = needles; *n != NULL; ++n) {
    if (strstr(text, *n) == NULL && strstr(json, *n) == NULL) {
      print_error("explain lacks \"%s\":\n%s\n%s\n", *n, text, json);
      fail();
    }
  }
  /* Truncation reports the full length and stays NUL-terminated. */
  char small[16];
  assert_int_equal(ops_explain_to_text(e, small, sizeof small), tn);
  assert_int_equal(strlen(small), sizeof small - 1);
}

static const ops_verdict *verdict_of(const ops_explain *e, const char *name);

static void sdpa_on_the_cpu_and_on_described_gpus(void **state) {
  (void)state;
  const int64_t qs[4] = {2, 4096, 16, 128}, ks[4] = {2, 4096, 4, 128};
  ops_sdpa_params p;
  ops_sdpa_params_init(&p);
  p.causal = 1;
  ops_explain e;
  e.struct_size = sizeof e;

  ops_handle cpu = opst_cpu_handle();
  ops_tensor q = desc(OPS_DTYPE_BF16, ops_device_cpu(), 4, qs), k = desc(OPS_DTYPE_BF16, ops_device_cpu(), 4, ks);
  OPST_OK(ops_sdpa_explain(cpu, &p, &q, &k, &k, &q, NULL, &e));
  assert_int_equal(e.op, OPS_OP_SDPA);
  assert_int_equal(e.count, 16); /* the CPU reference and 15 CUDA kernels, which say why not */
  assert_int_equal(e.chosen, 0);
  assert_true(e.verdicts[0].est_us > 0);
  check_renderings(&e, (const char *const[]){"sdpa bf16 -> bf16 on cpu: batch=2 seqlen_q=4096 seqlen_k=4096 heads_q=16 "
                                             "heads_kv=4 head_dim=128 head_dim_v=128 tokens_q=8192 window=(-1, 0) [causal, gqa]",
                                             "chosen: cpu_sdpa_ref", "\"chosen\":\"cpu_sdpa_ref\"", "memory ",
                                             NULL});
  ops_handle_destroy(cpu);

  /* On a GPU: the Hopper kernel on sm_90, the sm_80-class one elsewhere, each in the head-dim
   * variant whose padding is least (128 for head_dim 128; 256 pads by x2 and costs more). */
  for (int sm = 80; sm <= 90; sm += 10) {
    ops_handle v = opst_virtual_handle(sm);
    ops_tensor gq = desc(OPS_DTYPE_BF16, ops_device_cuda(0), 4, qs), gk = desc(OPS_DTYPE_BF16, ops_device_cuda(0), 4, ks);
    OPST_OK(ops_sdpa_explain(v, &p, &gq, &gk, &gk, &gq, NULL, &e));
    assert_true(e.chosen >= 0);
    const char *want = sm == 90 ? "cuda_sdpa_sm90_d128" : "cuda_sdpa_mma_d128";
    assert_string_equal(e.verdicts[e.chosen].kernel_name, want);
    assert_int_equal(e.verdicts[0].reason, OPS_REASON_BACKEND);
    char on[32], chosen[64];
    snprintf(on, sizeof on, "on cuda sm_%d:", sm);
    snprintf(chosen, sizeof chosen, "chosen: %s", want);
    check_renderings(&e, (const char *const[]){on, "runs on cpu, the handle's device is cuda", chosen,
                                               "needs head_dim <= 64, got 128", "padding x2.00", NULL});
    if (sm == 80) { /* the Hopper rows say why not */
      const ops_verdict *h = verdict_of(&e, "cuda_sdpa_sm90_d128");
      assert_non_null(h);
      assert_int_equal(h->reason, OPS_REASON_SM_TOO_OLD);
    }
    /* with a mask (or a row that is not unit-stride) only the sm_80-class kernel serves */
    ops_tensor mask = desc(OPS_DTYPE_BF16, ops_device_cuda(0), 4, (const int64_t[]){2, 16, 4096, 4096});
    p.attn_mask = &mask;
    OPST_OK(ops_sdpa_explain(v, &p, &gq, &gk, &gk, &gq, NULL, &e));
    assert_string_equal(e.verdicts[e.chosen].kernel_name, "cuda_sdpa_mma_d128");
    if (sm == 90) check_renderings(&e, (const char *const[]){"[causal, gqa, mask]", "feature", NULL});
    p.attn_mask = NULL;
    /* a sequence axis walked backwards, or K / V broadcast over the batch (stride 0): aligned,
     * yet no TMA map describes them, so the call is strided and only the sm_80 class serves */
    for (int which = 0; which < 2; ++which) {
      ops_tensor sq = gq, sk = gk;
      if (which == 0) sq.strides[1] = -sq.strides[1];
      else sk.strides[0] = 0;
      OPST_OK(ops_sdpa_explain(v, &p, &sq, &sk, &sk, &gq, NULL, &e));
      assert_string_equal(e.verdicts[e.chosen].kernel_name, "cuda_sdpa_mma_d128");
      assert_non_null(strstr(e.problem, "strided"));
      if (sm == 90) assert_int_equal(verdict_of(&e, "cuda_sdpa_sm90_d128")->reason, OPS_REASON_FEATURE);
    }
    /* no key rows at all: no TMA map describes an empty axis, the Hopper rows need Sk >= 1 */
    if (sm == 90) {
      const int64_t ks0[4] = {2, 0, 4, 128};
      ops_tensor k0 = desc(OPS_DTYPE_BF16, ops_device_cuda(0), 4, ks0);
      p.causal = 0;
      OPST_OK(ops_sdpa_explain(v, &p, &gq, &k0, &k0, &gq, NULL, &e));
      p.causal = 1;
      assert_true(e.chosen >= 0); /* an sm_80-class kernel (which one is the calibrated model's call) */
      assert_null(strstr(e.verdicts[e.chosen].kernel_name, "sm90"));
      assert_int_equal(verdict_of(&e, "cuda_sdpa_sm90_d128")->reason, OPS_REASON_SHAPE);
    }
    /* A described device explains and sizes the workspace (none), never runs. */
    size_t ws = 1;
    OPST_OK(ops_sdpa_workspace_size(v, &p, &gq, &gk, &gk, &gq, NULL, &ws));
    assert_int_equal(ws, 0);
    assert_int_not_equal(ops_sdpa(v, &p, &gq, &gk, &gk, &gq, NULL, NULL, 0), OPS_OK);
    ops_handle_destroy(v);
  }
}

/* The verdict of kernel `name` in e, or NULL. */
static const ops_verdict *verdict_of(const ops_explain *e, const char *name) {
  for (int i = 0; i < e->count; ++i) {
    if (strcmp(e->verdicts[i].kernel_name, name) == 0) return &e->verdicts[i];
  }
  return NULL;
}

static const char *chosen_name(const ops_explain *e) { return e->chosen >= 0 ? e->verdicts[e->chosen].kernel_name : ""; }

/* GEMM on described GPUs: the path (Hopper, portable, GEMV) and the tile shape follow the
 * operands' layout, the shape and the SM, and explain names the layout flags and why each
 * kernel was refused. */
/* Decode against a paged KV cache (B8, 32768 keys, GQA 32:8, d128): only the split-KV rows
 * take a cache; explain names the feature, the part count the device's SMs give (64 blocks
 * unsplit; sm_90: 6 parts fill one wave of 132 x 3 slots 97%; sm_80: 4 would fill 108 x 3
 * slots 79%, 24 fill five waves 95%), the memory efficiency
 * beside the math one, and sizes the parts' workspace. */
static void decode_against_a_paged_cache(void **state) {
  (void)state;
  const int64_t qs[4] = {8, 1, 32, 128}, ks[4] = {8 * 32768 / 16, 16, 8, 128}, ls[1] = {8}, ts[2] = {8, 2048};
  ops_sdpa_params p;
  ops_sdpa_params_init(&p);
  ops_explain e;
  e.struct_size = sizeof e;
  for (int sm = 80; sm <= 90; sm += 10) {
    ops_handle v = opst_virtual_handle(sm);
    const ops_device dev = ops_device_cuda(0);
    ops_tensor q = desc(OPS_DTYPE_BF16, dev, 4, qs), k = desc(OPS_DTYPE_BF16, dev, 4, ks);
    ops_tensor lens = desc(OPS_DTYPE_I32, dev, 1, ls), table = desc(OPS_DTYPE_I32, dev, 2, ts);
    p.kv_lens = &lens, p.block_table = &table;
    OPST_OK(ops_sdpa_explain(v, &p, &q, &k, &k, &q, NULL, &e));
    assert_true(e.chosen >= 0);
    assert_string_equal(e.verdicts[e.chosen].kernel_name, "cuda_sdpa_split_d128_m16");
    assert_int_equal(verdict_of(&e, "cuda_sdpa_mma_d128")->reason, OPS_REASON_FEATURE);
    check_renderings(&e, (const char *const[]){"[gqa, kv_cache, paged]", "does not support: kv_cache, paged",
                                               sm == 90 ? "plan: keys split in 6 parts + combine"
                                                        : "plan: keys split in 24 parts + combine",
                                               sm == 90 ? "calibrated h100" : "row efficiency 0.25 (memory 0.85)",
                                               NULL});
    size_t ws = 0;
    OPST_OK(ops_sdpa_workspace_size(v, &p, &q, &k, &k, &q, NULL, &ws));
    const size_t parts = sm == 90 ? 6 : 24, rows = 8 * 32; /* tokens_q x heads_q */
    assert_int_equal(ws, parts * rows * 4 + parts * rows * 128 * 4); /* LSE, then O (16-byte multiple) */
    ops_handle_destroy(v);
  }
}

/* Paged decode on sm_90 with pages under 64 keys: the TMA kernel (_d128_m64) loads a box a page
 * run and a 64-column half, its copies spread over the warps, and streams pages of 16 as fast as
 * a dense cache, so the model gives the boxes no cost of their own. B64 kv4k
 * Sq 1 (GQA 32:8, d128): pages of 16, of 64 and the dense cache all go to _m64 (H100,
 * bench/RESULTS.md, section "Session 42", both pinned: 378.8 against 387.6 us with pages of 16;
 * 373.6 against 385.7 with 64). */
static void small_pages_cost_the_tma_kernel_nothing(void **state) {
  (void)state;
  static const int64_t pages[3] = {0, 16, 64};
  ops_sdpa_params p;
  ops_sdpa_params_init(&p);
  ops_explain e;
  e.struct_size = sizeof e;
  for (int i = 0; i < 3; ++i) {
    ops_handle v = opst_virtual_handle(90);
    const ops_device dev = ops_device_cuda(0);
    const int64_t pg = pages[i], qs[4] = {64, 1, 32, 128}, ls[1] = {64}, ts[2] = {64, pg > 0 ? 4096 / pg : 1};
    const int64_t ks[4] = {pg > 0 ? 64 * 4096 / pg : 64, pg > 0 ? pg : 4096, 8, 128};
    ops_tensor q = desc(OPS_DTYPE_BF16, dev, 4, qs), k = desc(OPS_DTYPE_BF16, dev, 4, ks);
    ops_tensor lens = desc(OPS_DTYPE_I32, dev, 1, ls), table = desc(OPS_DTYPE_I32, dev, 2, ts);
    p.kv_lens = &lens, p.block_table = pg > 0 ? &table : NULL;
    OPST_OK(ops_sdpa_explain(v, &p, &q, &k, &k, &q, NULL, &e));
    assert_string_equal(chosen_name(&e), "cuda_sdpa_split_d128_m64");
    ops_handle_destroy(v);
  }
}

/* Short decode (a dense cache, GQA 32:8, d128): on sm_90 a cluster a row tile merges the parts
 * in the one launch, no workspace, where the grid fits the blocks that GPC-bound clusters can
 * have resident (0.9 of 132 x 3 slots): B1 kv1k, the wave's 8 parts (64 blocks). Where the
 * wave's count is one a cluster holds but its blocks do not fit as clusters, a smaller count
 * that does is taken if its parts hold at most a third more key tiles: B8 kv1k's 6 parts (384
 * blocks, 3 tiles a part) -> 4 (4 tiles), B8 kv2k's 6 -> 4 (6 -> 8 tiles), B16 kv1k's 3 -> 2
 * (6 -> 8). Counts past a cluster's stay with the combine: B4 kv4k's 12, B1 kv2k's 16, B1
 * kv4k's 32. sm_80 has no clusters. */
static void short_decode_merges_in_a_cluster(void **state) {
  (void)state;
  static const struct {
    int64_t batch, keys;
    size_t parts80, parts90;
    int clustered90; /* 2: a cluster's count in place of the wave's */
  } cases[] = {{1, 1024, 8, 8, 1},  {8, 1024, 4, 4, 2},  {1, 2048, 16, 16, 0}, {8, 2048, 4, 4, 2},
               {16, 1024, 2, 2, 2}, {4, 4096, 8, 12, 0}, {1, 4096, 32, 32, 0}};
  ops_sdpa_params p;
  ops_sdpa_params_init(&p);
  ops_explain e;
  e.struct_size = sizeof e;
  for (int sm = 80; sm <= 90; sm += 10) {
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
      ops_handle v = opst_virtual_handle(sm);
      const ops_device dev = ops_device_cuda(0);
      const int64_t batch = cases[i].batch;
      const int64_t qs[4] = {batch, 1, 32, 128}, ks[4] = {batch, cases[i].keys, 8, 128}, ls[1] = {batch};
      ops_tensor q = desc(OPS_DTYPE_BF16, dev, 4, qs), k = desc(OPS_DTYPE_BF16, dev, 4, ks);
      ops_tensor lens = desc(OPS_DTYPE_I32, dev, 1, ls);
      p.kv_lens = &lens;
      OPST_OK(ops_sdpa_explain(v, &p, &q, &k, &k, &q, NULL, &e));
      assert_string_equal(chosen_name(&e), "cuda_sdpa_split_d128_m16");
      const int clustered = sm == 90 ? cases[i].clustered90 : 0;
      const size_t parts = sm == 90 ? cases[i].parts90 : cases[i].parts80, rows = (size_t)batch * 32;
      char plan[160];
      snprintf(plan, sizeof plan, "plan: keys split in %zu parts%s", parts,
               clustered == 2   ? ", merged in a cluster (the wave's count would need the combine)"
               : clustered == 1 ? ", merged in a cluster\n"
                                : " + combine");
      check_renderings(&e, (const char *const[]){plan, NULL});
      size_t ws = 0;
      OPST_OK(ops_sdpa_workspace_size(v, &p, &q, &k, &k, &q, NULL, &ws));
      assert_int_equal(ws, clustered ? 0 : parts * rows * 4 + parts * rows * 128 * 4); /* tokens_q x heads_q rows */
      ops_handle_destroy(v);
    }
  }
}

/* The two d64 Hopper rows split calls by the work their tiles compute: 128-row tiles for
 * short and causal calls (at S1024 causal, 192-row tiles compute x1.50 the visible pairs,
 * 128-row ones x1.12: explain prints the padding), 192-row tiles (three warpgroups) for long
 * causal heads, the pair kernel for long uniform ones. */
static void d64_rows_by_the_tiles_work(void **state) {
  (void)state;
  ops_handle v = opst_virtual_handle(90);
  const ops_device dev = ops_device_cuda(0);
  ops_sdpa_params p;
  ops_sdpa_params_init(&p);
  ops_explain e;
  e.struct_size = sizeof e;
  const struct {
    int64_t b, s, hq, hkv;
    int causal;
    const char *want;
  } cases[] = {
      {8, 1024, 16, 16, 1, "cuda_sdpa_sm90_d64_m128"},
      {16, 256, 32, 8, 1, "cuda_sdpa_sm90_d64_m128"},
      {32, 512, 12, 12, 1, "cuda_sdpa_sm90_d64_m128"},
      {1, 8192, 32, 8, 1, "cuda_sdpa_sm90_d64"},
      {1, 16384, 32, 32, 0, "cuda_sdpa_sm90_d64_pair"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
    const int64_t qs[4] = {cases[i].b, cases[i].s, cases[i].hq, 64}, ks[4] = {cases[i].b, cases[i].s, cases[i].hkv, 64};
    ops_tensor q = desc(OPS_DTYPE_BF16, dev, 4, qs), k = desc(OPS_DTYPE_BF16, dev, 4, ks);
    p.causal = cases[i].causal;
    OPST_OK(ops_sdpa_explain(v, &p, &q, &k, &k, &q, NULL, &e));
    if (strcmp(chosen_name(&e), cases[i].want) != 0) {
      print_error("B%lld S%lld H%lld:%lld causal=%d: chose %s, want %s\n", (long long)cases[i].b,
                  (long long)cases[i].s, (long long)cases[i].hq, (long long)cases[i].hkv, cases[i].causal,
                  chosen_name(&e), cases[i].want);
      fail();
    }
    if (i == 0) {
      assert_non_null(strstr(verdict_of(&e, "cuda_sdpa_sm90_d64")->message, "padding x1.50"));
      assert_non_null(strstr(verdict_of(&e, "cuda_sdpa_sm90_d64_m128")->message, "padding x1.12"));
    }
  }
  ops_handle_destroy(v);
}

/* Prefill-length queries go to the prefill kernels: the split-KV rows, decode kernels, refuse
 * a call of more than 64 query rows without a KV cache (B64 S128 GQA 32:8 causal), and take it
 * against a cache, where no other GPU row reads one. The Hopper row's causal tiles run
 * persistent, head by head where the call has many KV heads (B64 x 8: more than 132 / 4), by
 * length over all heads where it has few (B1 S16384 H16). */
static void prefill_goes_to_prefill_kernels(void **state) {
  (void)state;
  ops_handle v = opst_virtual_handle(90);
  const ops_device dev = ops_device_cuda(0);
  ops_sdpa_params p;
  ops_sdpa_params_init(&p);
  p.causal = 1;
  ops_explain e;
  e.struct_size = sizeof e;
  const int64_t qs[4] = {64, 128, 32, 128}, ks[4] = {64, 128, 8, 128}, ls[1] = {64};
  ops_tensor q = desc(OPS_DTYPE_BF16, dev, 4, qs), k = desc(OPS_DTYPE_BF16, dev, 4, ks);
  OPST_OK(ops_sdpa_explain(v, &p, &q, &k, &k, &q, NULL, &e));
  assert_string_equal(chosen_name(&e), "cuda_sdpa_sm90_d128");
  const ops_verdict *split = verdict_of(&e, "cuda_sdpa_split_d128_m64");
  assert_int_equal(split->reason, OPS_REASON_SHAPE);
  assert_non_null(
      strstr(split->message, "decode kernel: without a KV cache it takes seqlen_q <= 64, got 128"));
  assert_string_equal(e.plan[e.chosen],
                      "persistent: a block an SM walks the work tiles, every other pass in reverse");
  /* the same queries against a KV cache: the split rows are the GPU's only */
  ops_tensor lens = desc(OPS_DTYPE_I32, dev, 1, ls);
  p.kv_lens = &lens;
  OPST_OK(ops_sdpa_explain(v, &p, &q, &k, &k, &q, NULL, &e));
  assert_int_equal(verdict_of(&e, "cuda_sdpa_split_d128_m64")->reason, OPS_REASON_ELIGIBLE);
  assert_int_equal(verdict_of(&e, "cuda_sdpa_sm90_d128")->reason, OPS_REASON_FEATURE);
  p.kv_lens = NULL;
  /* 16 heads of 16384 rows: 2048 causal tiles, 16 KV heads (64 <= 132) */
  const int64_t ls16[4] = {1, 16384, 16, 128};
  ops_tensor ql = desc(OPS_DTYPE_BF16, dev, 4, ls16);
  OPST_OK(ops_sdpa_explain(v, &p, &ql, &ql, &ql, &ql, NULL, &e));
  assert_string_equal(e.plan[verdict_of(&e, "cuda_sdpa_sm90_d128") - e.verdicts],
                      "persistent: a block an SM walks the work tiles longest first over all heads, "
                      "every other pass in reverse");
  /* no mask: every tile the same length, head by head */
  p.causal = 0;
  OPST_OK(ops_sdpa_explain(v, &p, &ql, &ql, &ql, &ql, NULL, &e));
  assert_string_equal(e.plan[verdict_of(&e, "cuda_sdpa_sm90_d128") - e.verdicts],
                      "persistent: a block an SM walks the work tiles, every other pass in reverse");
  ops_handle_destroy(v);
}

static void gemm_explains_its_path_and_tile(void **state) {
  (void)state;
  const ops_device dev = ops_device_cuda(0);
  ops_explain e;
  e.struct_size = sizeof e;
  ops_handle h90 = opst_virtual_handle(90), h80 = opst_virtual_handle(80);
  struct {
    int64_t m, n, k;
    int a_m_major, b_k_major; /* a_m_major 2: A K-major, its rows at a negative stride */
    int f32; /* 0: bf16; 1: f32, strict math; 2: f32, tf32 allowed */
    ops_handle h;
    const char *want, *features; /* features: the problem's bracket, "" for none */
  } cases[] = {
      {4096, 4096, 4096, 0, 1, 0, h90, "cuda_gemm_sm90_128x256", ""},
      {4096, 4096, 4096, 0, 0, 0, h90, "cuda_gemm_sm90_128x256", "[b_n_major]"},
      {4096, 4096, 4096, 1, 1, 0, h90, "cuda_gemm_mma", "[a_m_major]"},
      {4096, 4096, 4096, 2, 1, 0, h90, "cuda_gemm_mma", "[strided]"}, /* A's rows backwards: no TMA map */
      {64, 4096, 14336, 0, 1, 0, h90, "cuda_gemm_sm90_128x64_splitk", ""}, /* few tiles, long K: split (sweep) */
      {14336, 1, 4096, 0, 0, 0, h90, "cuda_gemv_n1", ""},
      {1, 4096, 4096, 0, 1, 0, h90, "cuda_gemv_m1", ""},
      {4096, 4096, 4096, 0, 1, 0, h80, "cuda_gemm_mma_cp", ""},
      {4096, 4096, 4096, 0, 0, 0, h80, "cuda_gemm_mma_cp", "[b_n_major]"},
      {4096, 4096, 4096, 1, 1, 0, h80, "cuda_gemm_mma", "[a_m_major]"},
      {4096, 4096, 4096, 0, 1, 1, h90, "cuda_gemm_ffma", ""},
      {4096, 4096, 4096, 0, 0, 2, h90, "cuda_gemm_tf32", "[b_n_major]"},
      {4096, 4096, 4096, 0, 1, 2, h80, "cuda_gemm_tf32", ""},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
    const int64_t m = cases[i].m, n = cases[i].n, k = cases[i].k;
    const int64_t as[2] = {m, k}, bs[2] = {k, n}, ds[2] = {m, n};
    const int64_t a_t[2] = {1, m}, a_neg[2] = {-k, 1}, b_t[2] = {1, k};
    const ops_dtype dt = cases[i].f32 ? OPS_DTYPE_F32 : OPS_DTYPE_BF16;
    ops_tensor a, b, d;
    const int64_t *a_strides = cases[i].a_m_major == 2 ? a_neg : cases[i].a_m_major ? a_t : NULL;
    OPST_OK(ops_tensor_init(&a, NULL, dt, dev, 2, as, a_strides));
    OPST_OK(ops_tensor_init(&b, NULL, dt, dev, 2, bs, cases[i].b_k_major ? b_t : NULL));
    OPST_OK(ops_tensor_init(&d, NULL, dt, dev, 2, ds, NULL));
    OPST_OK(ops_handle_set_math_mode(cases[i].h, cases[i].f32 == 2 ? OPS_MATH_ALLOW_TF32 : OPS_MATH_STRICT));
    OPST_OK(ops_gemm_explain(cases[i].h, NULL, &a, &b, &d, &e));
    if (strcmp(chosen_name(&e), cases[i].want) != 0) {
      char text[8192];
      ops_explain_to_text(&e, text, sizeof text);
      print_error("gemm case %zu: chose '%s', want '%s'\n%s\n", i, chosen_name(&e), cases[i].want, text);
      fail();
    }
    const int has_flags = cases[i].features[0] != '\0';
    check_renderings(&e, (const char *const[]){has_flags        ? cases[i].features
                                                : cases[i].f32 ? "gemm f32 -> f32"
                                                               : "gemm bf16 -> bf16",
                                               " blocks), padding x", NULL});
    if (!has_flags) assert_null(strstr(e.problem, "major"));
    if (cases[i].a_m_major == 1 && cases[i].h == h90) { /* the Hopper kernels read A K-major only, and say so */
      const ops_verdict *v = verdict_of(&e, "cuda_gemm_sm90_128x256");
      assert_non_null(v);
      assert_int_equal(v->reason, OPS_REASON_FEATURE);
      assert_non_null(strstr(v->message, "does not support: a_m_major"));
    }
    if (cases[i].a_m_major && cases[i].h == h80) { /* nor does the cp.async kernel */
      const ops_verdict *v = verdict_of(&e, "cuda_gemm_mma_cp");
      assert_non_null(v);
      assert_int_equal(v->reason, OPS_REASON_FEATURE);
    }
    if (cases[i].h == h80) {
      const ops_verdict *v = verdict_of(&e, "cuda_gemm_sm90_128x256");
      assert_non_null(v);
      assert_int_equal(v->reason, OPS_REASON_SM_TOO_OLD);
    }
    if (cases[i].f32) { /* tf32 only when the handle allows it; the problem says so */
      const ops_verdict *v = verdict_of(&e, "cuda_gemm_tf32");
      assert_non_null(v);
      assert_int_equal(v->reason, cases[i].f32 == 2 ? OPS_REASON_ELIGIBLE : OPS_REASON_MATH_MODE);
      assert_true((strstr(e.problem, " tf32") != NULL) == (cases[i].f32 == 2));
    }
    if (cases[i].h == h90 && !cases[i].f32 && !cases[i].a_m_major && m > 1 && n > 1) {
      /* the split rows run only calls they split: 4096^3 fills the SMs unsplit (rule "shape",
       * the row's parts function); the skinny call is split, and its plan says how */
      const ops_verdict *v = verdict_of(&e, "cuda_gemm_sm90_128x128_splitk");
      assert_non_null(v);
      if (m == 4096) {
        assert_int_equal(v->reason, OPS_REASON_SHAPE);
        assert_non_null(strstr(v->message, "in 1 part here"));
      } else {
        assert_int_equal(v->reason, OPS_REASON_ELIGIBLE);
        const char *plan = e.plan[v - e.verdicts];
        assert_non_null(plan);
        assert_non_null(strstr(plan, "K split in 2 parts, a cluster of 2 a tile"));
      }
    }
  }
  ops_handle_destroy(h90);
  ops_handle_destroy(h80);
}

/* The split-K part count (gemm_shape.h): the most parts whose clusters are all resident at
 * once, on the described H100 (132 SMs). 128 x 128 tiles of M 128, K 4096: 8 tiles take 8
 * parts (64 blocks); 16 tiles 4 (64; 8 parts would be 128 blocks in clusters of 8, more than
 * 0.9 of the SMs); 32 tiles 2 (64 clusters of 2; 128 blocks in clusters of 4 would not fit);
 * 64 tiles 2 (128 blocks, clusters of 2 fill the SMs); 128 tiles none (rule "shape"). */
static void gemm_split_parts_fit_resident_clusters(void **state) {
  (void)state;
  const ops_device dev = ops_device_cuda(0);
  ops_handle h90 = opst_virtual_handle(90);
  const struct {
    int64_t n;
    const char *plan; /* NULL: not split */
  } cases[] = {
      {1024, "K split in 8 parts, a cluster of 8 a tile"}, {2048, "K split in 4 parts, a cluster of 4 a tile"},
      {4096, "K split in 2 parts, a cluster of 2 a tile"}, {8192, "K split in 2 parts, a cluster of 2 a tile"},
      {16384, NULL},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
    const int64_t m = 128, n = cases[i].n, k = 4096;
    const int64_t as[2] = {m, k}, bs[2] = {k, n}, ds[2] = {m, n}, b_t[2] = {1, k};
    ops_tensor a, b, d;
    OPST_OK(ops_tensor_init(&a, NULL, OPS_DTYPE_BF16, dev, 2, as, NULL));
    OPST_OK(ops_tensor_init(&b, NULL, OPS_DTYPE_BF16, dev, 2, bs, b_t));
    OPST_OK(ops_tensor_init(&d, NULL, OPS_DTYPE_BF16, dev, 2, ds, NULL));
    ops_explain e;
    e.struct_size = sizeof e;
    OPST_OK(ops_gemm_explain(h90, NULL, &a, &b, &d, &e));
    const ops_verdict *v = verdict_of(&e, "cuda_gemm_sm90_128x128_splitk");
    assert_non_null(v);
    if (cases[i].plan == NULL) {
      assert_int_equal(v->reason, OPS_REASON_SHAPE);
    } else {
      assert_int_equal(v->reason, OPS_REASON_ELIGIBLE);
      const char *plan = e.plan[v - e.verdicts];
      assert_non_null(plan);
      if (strstr(plan, cases[i].plan) == NULL) {
        print_error("n %lld: plan '%s', want '%s'\n", (long long)n, plan, cases[i].plan);
        fail();
      }
    }
  }
  ops_handle_destroy(h90);
}

/* For each op: explain's choice is what the profiler sees run, on the same arguments. */
static const char *g_ran;
static void remember(const ops_profile_record *r, void *user) {
  (void)user;
  g_ran = r->kernel_name;
}

static void explain_names_the_kernel_that_runs(void **state) {
  (void)state;
  ops_handle h = opst_cpu_handle();
  OPST_OK(ops_handle_set_profiler(h, remember, NULL));
  float a[64], b[64], c[64];
  for (int i = 0; i < 64; ++i) a[i] = (float)i / 64, b[i] = 1.0f - a[i];
  const int64_t m8[2] = {8, 8}, v8[1] = {8};
  ops_tensor ta, tb, tc, tw;
  OPST_OK(ops_tensor_init(&ta, a, OPS_DTYPE_F32, ops_device_cpu(), 2, m8, NULL));
  OPST_OK(ops_tensor_init(&tb, b, OPS_DTYPE_F32, ops_device_cpu(), 2, m8, NULL));
  OPST_OK(ops_tensor_init(&tc, c, OPS_DTYPE_F32, ops_device_cpu(), 2, m8, NULL));
  OPST_OK(ops_tensor_init(&tw, b, OPS_DTYPE_F32, ops_device_cpu(), 1, v8, NULL));
  ops_explain e;
  e.struct_size = sizeof e;
  ops_reduce_params rp;
  ops_reduce_params_init(&rp);
  rp.axes = 1u << 1;
  ops_tensor row;
  OPST_OK(ops_tensor_init(&row, c, OPS_DTYPE_F32, ops_device_cpu(), 1, v8, NULL));
#define SAME(explain_call, run_call)                                  \
  do {                                                                \
    OPST_OK(explain_call);                                            \
    g_ran = NULL;                                                     \
    OPST_OK(run_call);                                                \
    assert_non_null(g_ran);                                           \
    assert_string_equal(g_ran, e.verdicts[e.chosen].kernel_name);     \
  } while (0)
  SAME(ops_gemm_explain(h, NULL, &ta, &tb, &tc, &e), ops_gemm(h, NULL, &ta, &tb, &tc, NULL, 0));
  SAME(ops_layernorm_explain(h, NULL, &ta, &tw, &tc, &e), ops_layernorm(h, NULL, &ta, &tw, &tc, NULL, 0));
  SAME(ops_rmsnorm_explain(h, NULL, &ta, &tw, &tc, &e), ops_rmsnorm(h, NULL, &ta, &tw, &tc, NULL, 0));
  SAME(ops_softmax_explain(h, NULL, &ta, &tc, &e), ops_softmax(h, NULL, &ta, &tc, NULL, 0));
  SAME(ops_sin_affine_explain(h, NULL, &ta, &tc, &e), ops_sin_affine(h, NULL, &ta, &tc, NULL, 0));
  SAME(ops_unary_explain(h, NULL, &ta, &tc, &e), ops_unary(h, NULL, &ta, &tc, NULL, 0));
  SAME(ops_binary_explain(h, NULL, &ta, &tb, &tc, &e), ops_binary(h, NULL, &ta, &tb, &tc, NULL, 0));
  SAME(ops_scale_explain(h, NULL, &ta, &tc, &e), ops_scale(h, NULL, &ta, &tc, NULL, 0));
  SAME(ops_reduce_explain(h, &rp, &ta, &row, &e), ops_reduce(h, &rp, &ta, &row, NULL, 0));
#undef SAME
  ops_handle_destroy(h);
}

static void explain_reads_descriptors_only(void **state) {
  (void)state;
  ops_handle h = opst_cpu_handle();
  const int64_t s[2] = {1000, 4096}, e0[2] = {0, 4096};
  ops_tensor x = desc(OPS_DTYPE_F16, ops_device_cpu(), 2, s), empty = desc(OPS_DTYPE_F16, ops_device_cpu(), 2, e0);
  ops_explain e;
  e.struct_size = sizeof e;
  OPST_OK(ops_softmax_explain(h, NULL, &x, &x, &e)); /* NULL data: fine for explain */
  assert_int_equal(e.empty, 0);
  assert_int_equal(ops_softmax(h, NULL, &x, &x, NULL, 0), OPS_ERR_NULL_POINTER); /* not for running */
  OPST_OK(ops_softmax_explain(h, NULL, &empty, &empty, &e));
  assert_int_equal(e.empty, 1);
  char text[2048];
  ops_explain_to_text(&e, text, sizeof text);
  assert_non_null(strstr(text, "nothing runs"));
  /* explain's own errors */
  assert_int_equal(ops_softmax_explain(h, NULL, &x, &x, NULL), OPS_ERR_NULL_POINTER);
  e.struct_size = 8;
  assert_int_equal(ops_softmax_explain(h, NULL, &x, &x, &e), OPS_ERR_STRUCT_SIZE);
  assert_non_null(strstr(ops_last_error(), "out->struct_size"));
  e.struct_size = sizeof e;
  x.dtype = OPS_DTYPE_I32; /* the op's validation still applies */
  assert_int_equal(ops_softmax_explain(h, NULL, &x, &x, &e), OPS_ERR_DTYPE_MISMATCH);
  ops_handle_destroy(h);
}

static void virtual_handles_are_checked(void **state) {
  (void)state;
  ops_device_info info;
  OPST_OK(ops_device_info_for_sm(90, &info));
  assert_int_equal(info.sm_count, 132);
  assert_int_equal(info.code_sm, 90);
  ops_handle h = NULL;
  info.sm_count = 0;
  assert_int_equal(ops_handle_create_virtual(&h, &info), OPS_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(ops_last_error(), "sm_count 0"));
  info.struct_size = 3;
  assert_int_equal(ops_handle_create_virtual(&h, &info), OPS_ERR_STRUCT_SIZE);
  assert_int_equal(ops_handle_create_virtual(&h, NULL), OPS_ERR_NULL_POINTER);
  OPST_OK(ops_device_info_for_sm(0, &info));
  OPST_OK(ops_handle_create_virtual(&h, &info)); /* a described CPU: explains, does not run */
  float x[4] = {1, 2, 3, 4};
  const int64_t s[1] = {4};
  ops_tensor t;
  OPST_OK(ops_tensor_init(&t, x, OPS_DTYPE_F32, ops_device_cpu(), 1, s, NULL));
  assert_int_equal(ops_unary(h, NULL, &t, &t, NULL, 0), OPS_ERR_UNSUPPORTED_DEVICE);
  assert_non_null(strstr(ops_last_error(), "ops_handle_create_virtual"));
  assert_true(x[3] == 4.0f);
  ops_handle_destroy(h);
}

/* The launch variants that decide speed: SDPA's pair kernels are rows of their own with the
 * cluster rule; the single-block Hopper rows and the Hopper GEMM rows print their plan. */
static void launch_variants_are_rows_or_plans(void **state) {
  (void)state;
#define PERSISTENT "persistent: a block an SM walks the work tiles, every other pass in reverse"
#define BY_LENGTH \
  "persistent: a block an SM walks the work tiles longest first over all heads, every other pass in reverse"
  ops_handle v = opst_virtual_handle(90);
  ops_sdpa_params p;
  ops_sdpa_params_init(&p);
  ops_explain e;
  e.struct_size = sizeof e;
  char text[16384];
  /* 4096 rows: 32 query tiles of 128 a head, even; no mask: the pair row is eligible */
  const int64_t qs[4] = {2, 4096, 16, 128};
  ops_tensor q = desc(OPS_DTYPE_BF16, ops_device_cuda(0), 4, qs);
  OPST_OK(ops_sdpa_explain(v, &p, &q, &q, &q, &q, NULL, &e));
  const ops_verdict *pair = verdict_of(&e, "cuda_sdpa_sm90_d128_pair");
  const ops_verdict *single = verdict_of(&e, "cuda_sdpa_sm90_d128");
  assert_non_null(pair);
  assert_int_equal(pair->reason, OPS_REASON_ELIGIBLE);
  assert_int_equal(single->reason, OPS_REASON_ELIGIBLE);
  assert_string_equal(e.plan[pair - e.verdicts], "persistent pairs: clusters of 2 blocks an SM pair, each K / V tile "
                                                 "loaded once for both (TMA multicast)");
  assert_string_equal(e.plan[single - e.verdicts], PERSISTENT);
  ops_explain_to_text(&e, text, sizeof text);
  assert_non_null(strstr(text, "; plan: persistent pairs"));
  ops_explain_to_json(&e, text, sizeof text);
  assert_non_null(strstr(text, "\"plan\":\"" PERSISTENT "\""));
  /* causal: tiles read different keys, a feature the pair row leaves out; the single row
   * still walks them persistent (tiles from one layout), by length (2 x 16 KV heads, 4 x 32
   * <= 132 SMs) */
  p.causal = 1;
  OPST_OK(ops_sdpa_explain(v, &p, &q, &q, &q, &q, NULL, &e));
  pair = verdict_of(&e, "cuda_sdpa_sm90_d128_pair");
  single = verdict_of(&e, "cuda_sdpa_sm90_d128");
  assert_int_equal(pair->reason, OPS_REASON_FEATURE);
  assert_non_null(strstr(pair->message, "causal"));
  assert_null(e.plan[pair - e.verdicts]);
  assert_string_equal(e.plan[single - e.verdicts], BY_LENGTH);
  /* a sliding window alike */
  p.causal = 0;
  p.window_left = 100;
  OPST_OK(ops_sdpa_explain(v, &p, &q, &q, &q, &q, NULL, &e));
  single = verdict_of(&e, "cuda_sdpa_sm90_d128");
  assert_string_equal(e.plan[single - e.verdicts], BY_LENGTH);
  p.window_left = -1;
  /* varlen: the sequences' tiles differ in a way no fixed order balances; a block a tile */
  {
    const int64_t vs[3] = {4096, 16, 128}, cs[1] = {3};
    ops_tensor qv = desc(OPS_DTYPE_BF16, ops_device_cuda(0), 3, vs);
    ops_tensor cu = desc(OPS_DTYPE_I32, ops_device_cuda(0), 1, cs);
    p.cu_seqlens_q = p.cu_seqlens_k = &cu;
    p.max_seqlen_q = p.max_seqlen_k = 2048;
    OPST_OK(ops_sdpa_explain(v, &p, &qv, &qv, &qv, &qv, NULL, &e));
    single = verdict_of(&e, "cuda_sdpa_sm90_d128");
    assert_int_equal(single->reason, OPS_REASON_ELIGIBLE);
    assert_string_equal(e.plan[single - e.verdicts], "a block a work tile, longest first");
    p.cu_seqlens_q = p.cu_seqlens_k = NULL;
    p.max_seqlen_q = p.max_seqlen_k = 0;
  }
  /* 384 rows: 3 query tiles a head, odd */
  const int64_t odd[4] = {2, 384, 16, 128};
  ops_tensor qo = desc(OPS_DTYPE_BF16, ops_device_cuda(0), 4, odd);
  OPST_OK(ops_sdpa_explain(v, &p, &qo, &qo, &qo, &qo, NULL, &e));
  pair = verdict_of(&e, "cuda_sdpa_sm90_d128_pair");
  assert_int_equal(pair->reason, OPS_REASON_CLUSTER);
  assert_non_null(strstr(pair->message, "seqlen_q=384 makes 3 tiles of 128"));
  assert_string_equal(ops_reason_name(OPS_REASON_CLUSTER), "cluster");
  ops_kernel_info info;
  info.struct_size = sizeof info;
  OPST_OK(ops_kernel_info_by_name("cuda_sdpa_sm90_d64_pair", &info));
  assert_int_equal(info.cluster_blocks, 2);
  OPST_OK(ops_kernel_info_by_name("cuda_sdpa_sm90_d64", &info));
  assert_int_equal(info.cluster_blocks, 1);
#undef PERSISTENT
#undef BY_LENGTH

  /* GEMM: a 16-bit D goes out by TMA, an f32 one by the threads, and so does a 16-bit one
   * whose row stride is no multiple of 8 elements (no TMA map; A and B still aligned). Tiles
   * of up to 128 columns are a consumer warpgroup's each where M is over 64 (and the call
   * unsplit); 256 columns never are, and 64 rows are the first consumer warpgroup's alone (the
   * tile's second half is empty). */
  const int64_t as[2] = {512, 1024}, bs[2] = {1024, 512}, ds[2] = {512, 512};
  ops_tensor a = desc(OPS_DTYPE_BF16, ops_device_cuda(0), 2, as), b = desc(OPS_DTYPE_BF16, ops_device_cuda(0), 2, bs);
  for (int c = 0; c < 3; ++c) {
    ops_tensor d = desc(c == 1 ? OPS_DTYPE_F32 : OPS_DTYPE_BF16, ops_device_cuda(0), 2, ds);
    if (c == 2) d.strides[0] = 516;
    OPST_OK(ops_gemm_explain(v, NULL, &a, &b, &d, &e));
    const ops_verdict *g = verdict_of(&e, "cuda_gemm_sm90_128x128"), *w = verdict_of(&e, "cuda_gemm_sm90_128x256");
    assert_int_equal(g->reason, OPS_REASON_ELIGIBLE);
    assert_string_equal(e.plan[g - e.verdicts], c > 0 ? "persistent, a 128-row tile a consumer warpgroup, the two in "
                                                          "turn; D stored by the threads"
                                                        : "persistent, a 128-row tile a consumer warpgroup, the two in "
                                                          "turn; D stored by TMA from swizzled shared memory");
    assert_string_equal(e.plan[w - e.verdicts], c > 0 ? "persistent; D stored by the threads"
                                                      : "persistent; D stored by TMA from swizzled shared memory");
    assert_null(e.plan[verdict_of(&e, "cuda_gemm_mma_cp") - e.verdicts]);
  }
  const int64_t as64[2] = {64, 1024}, ds64[2] = {64, 512};
  ops_tensor a64 = desc(OPS_DTYPE_BF16, ops_device_cuda(0), 2, as64);
  ops_tensor d64 = desc(OPS_DTYPE_BF16, ops_device_cuda(0), 2, ds64);
  OPST_OK(ops_gemm_explain(v, NULL, &a64, &b, &d64, &e));
  assert_string_equal(e.plan[verdict_of(&e, "cuda_gemm_sm90_128x128") - e.verdicts],
                      "persistent, the first consumer warpgroup's 64 rows alone, the second idle; D stored by TMA "
                      "from swizzled shared memory");
  assert_string_equal(e.plan[verdict_of(&e, "cuda_gemm_sm90_128x256") - e.verdicts],
                      "persistent, the first consumer warpgroup's 64 rows alone, the second idle; D stored by TMA "
                      "from swizzled shared memory");
  /* an unsplit call of half a wave or more that leaves part of it idle (96 tiles of 128 x 64
   * on 132 SMs) launches in clusters of 4; the same call's 128 x 128 tiles (48, under half a
   * wave) and the 4 tiles above do not */
  const int64_t as16[2] = {16, 4096}, bs16[2] = {4096, 6144}, ds16[2] = {16, 6144};
  ops_tensor a16 = desc(OPS_DTYPE_BF16, ops_device_cuda(0), 2, as16);
  ops_tensor b16 = desc(OPS_DTYPE_BF16, ops_device_cuda(0), 2, bs16);
  ops_tensor d16 = desc(OPS_DTYPE_BF16, ops_device_cuda(0), 2, ds16);
  OPST_OK(ops_gemm_explain(v, NULL, &a16, &b16, &d16, &e));
  assert_string_equal(e.plan[verdict_of(&e, "cuda_gemm_sm90_128x64") - e.verdicts],
                      "persistent, the first consumer warpgroup's 64 rows alone, the second idle; D stored by TMA "
                      "from swizzled shared memory; blocks in clusters of 4, a partial wave spread over the GPCs");
  assert_string_equal(e.plan[verdict_of(&e, "cuda_gemm_sm90_128x128") - e.verdicts],
                      "persistent, the first consumer warpgroup's 64 rows alone, the second idle; D stored by TMA "
                      "from swizzled shared memory");

  /* the attention backward: the default Hopper row cuts each key tile's walk in parts where
   * the key tiles fill too little of a wave (B1 S512 GQA 32:8: 32 key tiles on 132 SMs, 4
   * parts), a block a key tile where they fill it (B16 S256 H32: 1024), and launches causal
   * walks longest first; the deterministic row walks from the last query tile where causal
   * walks shrink by a GQA group's steps a key tile or the key tiles are few, from a place of
   * each walk's own where no mask cuts the walks and the blocks fit a wave (B1 S512: 32 or 64
   * key tiles, in 4 or 2 parts; B1 S256 H8: 16 key tiles), else from the first, and cuts its
   * key tiles' walks in the default row's parts */
  static const char *const kAsc = "walks from the first query tile, turns from the last key tile";
  static const char *const kDesc = "walks from the last query tile, turns from the first key tile";
  static const char *const kParts4 =
      "each key tile's walk in 4 parts, the last to finish adds their dK, dV in part order";
  static const char *const kRot =
      "walks from a place of their own, turns in the order the walks reach a query tile, every block "
      "resident";
  static const struct {
    int64_t b, s, hq, hkv;
    int causal;
    const char *plan, *det_plan;
  } kBwd[7] = {
      {1, 512, 32, 8, 1,
       "each key tile's walk in 4 parts, the last to finish adds their dK, dV in part order; the longest "
       "walks launched first",
       "walks from the first query tile, turns from the last key tile; each key tile's walk in 4 parts, "
       "the last to finish adds their dK, dV in part order"},
      {1, 512, 32, 8, 0, kParts4,
       "walks from a place of their own, turns in the order the walks reach a query tile, every block "
       "resident; each key tile's walk in 4 parts, the last to finish adds their dK, dV in part order"},
      {1, 512, 16, 16, 0,
       "each key tile's walk in 2 parts, the last to finish adds their dK, dV in part order",
       "walks from a place of their own, turns in the order the walks reach a query tile, every block "
       "resident; each key tile's walk in 2 parts, the last to finish adds their dK, dV in part order"},
      {16, 256, 32, 32, 1, "a block a key tile, the longest walks launched first", kDesc},
      {16, 256, 32, 32, 0, "a block a key tile", kAsc},
      {2, 4096, 16, 16, 1, "a block a key tile, the longest walks launched first", kAsc},
      {1, 256, 8, 8, 0, "a block a key tile", kRot}};
  for (int c = 0; c < 7; ++c) {
    const int64_t qs2[4] = {kBwd[c].b, kBwd[c].s, kBwd[c].hq, 128},
                  ks2[4] = {kBwd[c].b, kBwd[c].s, kBwd[c].hkv, 128},
                  ls2[3] = {kBwd[c].b, kBwd[c].hq, kBwd[c].s};
    ops_tensor tq = desc(OPS_DTYPE_BF16, ops_device_cuda(0), 4, qs2), tk = desc(OPS_DTYPE_BF16, ops_device_cuda(0), 4, ks2);
    ops_tensor tl = desc(OPS_DTYPE_F32, ops_device_cuda(0), 3, ls2);
    ops_sdpa_params_init(&p);
    p.causal = kBwd[c].causal;
    OPST_OK(ops_sdpa_backward_explain(v, &p, &tq, &tk, &tk, &tq, &tl, &tq, &tq, &tk, &tk, &e));
    const ops_verdict *dflt = verdict_of(&e, "cuda_sdpa_backward_sm90_d128");
    const ops_verdict *det = verdict_of(&e, "cuda_sdpa_backward_sm90_det_d128");
    assert_int_equal(dflt->reason, OPS_REASON_ELIGIBLE);
    assert_int_equal(det->reason, OPS_REASON_ELIGIBLE);
    assert_string_equal(e.plan[dflt - e.verdicts], kBwd[c].plan);
    assert_string_equal(e.plan[det - e.verdicts], kBwd[c].det_plan);
  }
  ops_handle_destroy(v);
}

/* A deterministic row is its twin's kernel with the reductions in a fixed order (rows.h): on a
 * handle that does not ask for determinism its estimate never falls below the twin's, where the
 * twin takes the call, so that ties and noisy fits leave the call to the twin (first in the
 * table); explain says when the twin's estimate raised it. On a deterministic handle the twin
 * is refused and the row stands on its own estimate; a pinned row likewise. */
static void deterministic_rows_never_undercut_their_twins(void **state) {
  (void)state;
  static const char *const kPairs[2][2] = {{"cuda_sdpa_backward_sm90_d64", "cuda_sdpa_backward_sm90_det_d64"},
                                           {"cuda_sdpa_backward_sm90_d128", "cuda_sdpa_backward_sm90_det_d128"}};
  static const int64_t kShapes[][4] = {{2, 128, 8, 2},  {1, 512, 16, 16}, {4, 512, 16, 16},  {8, 1024, 16, 16},
                                       {1, 8192, 32, 8}, {16, 256, 32, 32}, {32, 512, 16, 16}, {2, 2048, 32, 8},
                                       {64, 128, 12, 12}, {4, 4096, 16, 16}};
  ops_handle v = opst_virtual_handle(90);
  ops_explain e;
  e.struct_size = sizeof e;
  int raised = 0, compared = 0;
  for (int det_handle = 0; det_handle < 2; ++det_handle) {
    OPST_OK(ops_handle_set_deterministic(v, det_handle));
    for (size_t i = 0; i < sizeof kShapes / sizeof kShapes[0]; ++i) {
      for (int d = 0; d < 2; ++d) {
        for (int causal = 0; causal < 2; ++causal) {
          const int64_t dim = d == 0 ? 64 : 128, b = kShapes[i][0], s = kShapes[i][1];
          const int64_t qs[4] = {b, s, kShapes[i][2], dim}, ks[4] = {b, s, kShapes[i][3], dim},
                        ls[3] = {b, kShapes[i][2], s};
          ops_tensor tq = desc(OPS_DTYPE_BF16, ops_device_cuda(0), 4, qs);
          ops_tensor tk = desc(OPS_DTYPE_BF16, ops_device_cuda(0), 4, ks);
          ops_tensor tl = desc(OPS_DTYPE_F32, ops_device_cuda(0), 3, ls);
          ops_sdpa_params p;
          ops_sdpa_params_init(&p);
          p.causal = causal;
          OPST_OK(ops_sdpa_backward_explain(v, &p, &tq, &tk, &tk, &tq, &tl, &tq, &tq, &tk, &tk, &e));
          assert_true(e.chosen >= 0);
          const char *chosen = e.verdicts[e.chosen].kernel_name;
          for (int k = 0; k < 2; ++k) {
            const ops_verdict *twin = verdict_of(&e, kPairs[k][0]), *det = verdict_of(&e, kPairs[k][1]);
            if (det->reason != OPS_REASON_ELIGIBLE) continue;
            const int says = strstr(det->message, "raised to its twin") != NULL;
            if (det_handle) { /* the twin is refused: the row's own estimate */
              assert_int_not_equal(twin->reason, OPS_REASON_ELIGIBLE);
              assert_false(says);
              continue;
            }
            assert_int_equal(twin->reason, OPS_REASON_ELIGIBLE);
            assert_true(det->est_us >= twin->est_us);
            if (says) assert_true(det->est_us == twin->est_us);
            assert_string_not_equal(chosen, kPairs[k][1]);
            raised += says, ++compared;
          }
        }
      }
    }
  }
  printf("[ TWINS    ] %d deterministic estimates beside their twins', %d raised to the twin's\n", compared, raised);
  /* pinned, the row runs alone: no twin to raise it */
  OPST_OK(ops_handle_set_deterministic(v, 0));
  OPST_OK(ops_handle_pin_kernel(v, "cuda_sdpa_backward_sm90_det_d64"));
  const int64_t qs[4] = {4, 512, 16, 64}, ls[3] = {4, 16, 512};
  ops_tensor tq = desc(OPS_DTYPE_BF16, ops_device_cuda(0), 4, qs), tl = desc(OPS_DTYPE_F32, ops_device_cuda(0), 3, ls);
  ops_sdpa_params p;
  ops_sdpa_params_init(&p);
  p.causal = 1;
  OPST_OK(ops_sdpa_backward_explain(v, &p, &tq, &tq, &tq, &tq, &tl, &tq, &tq, &tq, &tq, &e));
  assert_string_equal(e.verdicts[e.chosen].kernel_name, "cuda_sdpa_backward_sm90_det_d64");
  assert_null(strstr(e.verdicts[e.chosen].message, "raised to its twin"));
  ops_handle_destroy(v);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(sdpa_on_the_cpu_and_on_described_gpus),
      cmocka_unit_test(d64_rows_by_the_tiles_work),
      cmocka_unit_test(deterministic_rows_never_undercut_their_twins),
      cmocka_unit_test(decode_against_a_paged_cache),
      cmocka_unit_test(small_pages_cost_the_tma_kernel_nothing),
      cmocka_unit_test(short_decode_merges_in_a_cluster),
      cmocka_unit_test(launch_variants_are_rows_or_plans),
      cmocka_unit_test(prefill_goes_to_prefill_kernels),
      cmocka_unit_test(gemm_explains_its_path_and_tile),
      cmocka_unit_test(gemm_split_parts_fit_resident_clusters),
      cmocka_unit_test(explain_names_the_kernel_that_runs),
      cmocka_unit_test(explain_reads_descriptors_only),
      cmocka_unit_test(virtual_handles_are_checked),
  };
  return cmocka_run_group_tests_name("explain", tests, NULL, NULL);
}
