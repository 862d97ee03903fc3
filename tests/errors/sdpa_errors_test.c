/* Error injection for ops_sdpa: dense (with LSE and a mask), varlen, and paged KV cache calls;
 * and for ops_sdpa_backward, dense (with a mask) and varlen. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tests/errors/harness.h"

static opst_rng g_rng;

enum { DENSE = 0, VARLEN = 1, PAGED = 2 };

static ops_status call_sdpa(errs_fixture *f) {
  return ops_sdpa(f->h, &f->p.sdpa, errs_ptr(f, "q"), errs_ptr(f, "k"), errs_ptr(f, "v"), errs_ptr(f, "o"),
                  errs_ptr(f, "lse"), f->workspace, f->workspace_bytes);
}

/* The varlen fixtures' sequences: 2 of 4 and 5 query rows (9 packed) over 5 and 6 keys (11),
 * a left window of 2. The offsets are held in params, so the generic NULL-descriptor fault
 * cannot reach them; a missing one is the specific fault "cu_seqlens_k missing" below. */
static void add_varlen(errs_fixture *f, opst_rng *r) {
  const int64_t cs[1] = {3};
  f->p.sdpa.cu_seqlens_q = errs_add(f, r, "params->cu_seqlens_q", ERRS_INPUT | ERRS_OPTIONAL, OPS_DTYPE_I32, 1, cs);
  f->p.sdpa.cu_seqlens_k = errs_add(f, r, "params->cu_seqlens_k", ERRS_INPUT | ERRS_OPTIONAL, OPS_DTYPE_I32, 1, cs);
  const int32_t cq[3] = {0, 4, 9}, ck[3] = {0, 5, 11};
  for (int i = 0; i < 3; ++i) {
    opst_set_flat(&errs_find(f, "params->cu_seqlens_q")->t, i, cq[i]);
    opst_set_flat(&errs_find(f, "params->cu_seqlens_k")->t, i, ck[i]);
  }
  f->p.sdpa.max_seqlen_q = 5, f->p.sdpa.max_seqlen_k = 6, f->p.sdpa.window_left = 2;
}

static void build(errs_fixture *f, opst_rng *r, int variant) {
  ops_sdpa_params_init(&f->p.sdpa);
  f->call = call_sdpa;
  if (variant == DENSE) {
    const int64_t qs[4] = {2, 5, 4, 8}, ks[4] = {2, 7, 2, 8}, ls[3] = {2, 4, 5}, ms[4] = {1, 4, 5, 7};
    errs_add(f, r, "q", ERRS_INPUT, OPS_DTYPE_BF16, 4, qs);
    errs_add(f, r, "k", ERRS_INPUT, OPS_DTYPE_BF16, 4, ks);
    errs_add(f, r, "v", ERRS_INPUT, OPS_DTYPE_BF16, 4, ks);
    errs_add(f, r, "o", ERRS_OUTPUT, OPS_DTYPE_BF16, 4, qs);
    errs_add(f, r, "lse", ERRS_OUTPUT | ERRS_OPTIONAL, OPS_DTYPE_F32, 3, ls);
    f->p.sdpa.attn_mask = errs_add(f, r, "params->attn_mask", ERRS_INPUT | ERRS_OPTIONAL, OPS_DTYPE_F32, 4, ms);
    f->p.sdpa.causal = 1;
  } else if (variant == PAGED) {
    /* 2 sequences of 3 new queries over 5 and 8 cached keys, in 4-key pages of a 5-page pool */
    const int64_t qs[4] = {2, 3, 4, 8}, ks[4] = {5, 4, 2, 8}, ls[3] = {2, 4, 3}, bs[1] = {2}, ts[2] = {2, 2};
    errs_add(f, r, "q", ERRS_INPUT, OPS_DTYPE_BF16, 4, qs);
    errs_add(f, r, "k", ERRS_INPUT, OPS_DTYPE_BF16, 4, ks);
    errs_add(f, r, "v", ERRS_INPUT, OPS_DTYPE_BF16, 4, ks);
    errs_add(f, r, "o", ERRS_OUTPUT, OPS_DTYPE_BF16, 4, qs);
    errs_add(f, r, "lse", ERRS_OUTPUT | ERRS_OPTIONAL, OPS_DTYPE_F32, 3, ls);
    f->p.sdpa.kv_lens = errs_add(f, r, "params->kv_lens", ERRS_INPUT | ERRS_OPTIONAL, OPS_DTYPE_I32, 1, bs);
    f->p.sdpa.block_table = errs_add(f, r, "params->block_table", ERRS_INPUT | ERRS_OPTIONAL, OPS_DTYPE_I32, 2, ts);
    const int32_t lens[2] = {5, 8}, table[4] = {3, 0, 4, 1};
    for (int i = 0; i < 2; ++i) opst_set_flat(&errs_find(f, "params->kv_lens")->t, i, lens[i]);
    for (int i = 0; i < 4; ++i) opst_set_flat(&errs_find(f, "params->block_table")->t, i, table[i]);
    f->p.sdpa.causal = 1;
  } else {
    const int64_t qs[3] = {9, 4, 8}, ks[3] = {11, 2, 8}, ls[2] = {4, 9};
    errs_add(f, r, "q", ERRS_INPUT, OPS_DTYPE_F16, 3, qs);
    errs_add(f, r, "k", ERRS_INPUT, OPS_DTYPE_F16, 3, ks);
    errs_add(f, r, "v", ERRS_INPUT, OPS_DTYPE_F16, 3, ks);
    errs_add(f, r, "o", ERRS_OUTPUT, OPS_DTYPE_F16, 3, qs);
    errs_add(f, r, "lse", ERRS_OUTPUT | ERRS_OPTIONAL, OPS_DTYPE_F32, 2, ls);
    add_varlen(f, r);
  }
  OPST_OK(ops_sdpa_workspace_size(f->h, &f->p.sdpa, errs_ptr(f, "q"), errs_ptr(f, "k"), errs_ptr(f, "v"),
                                  errs_ptr(f, "o"), errs_ptr(f, "lse"), &f->workspace_bytes));
  assert_true(f->workspace_bytes > 0);
  f->workspace = f->workspace_alloc = opst_workspace(f->workspace_bytes);
}

/* ops_sdpa_backward: the forward's operands (o and lse inputs here), dout, and the gradients */
enum { BWD_DENSE = 0, BWD_VARLEN = 1 };

static ops_status call_backward(errs_fixture *f) {
  return ops_sdpa_backward(f->h, &f->p.sdpa, errs_ptr(f, "q"), errs_ptr(f, "k"), errs_ptr(f, "v"), errs_ptr(f, "o"),
                           errs_ptr(f, "lse"), errs_ptr(f, "dout"), errs_ptr(f, "dq"), errs_ptr(f, "dk"),
                           errs_ptr(f, "dv"), f->workspace, f->workspace_bytes);
}

static void build_backward(errs_fixture *f, opst_rng *r, int variant) {
  ops_sdpa_params_init(&f->p.sdpa);
  f->call = call_backward;
  const int varlen = variant == BWD_VARLEN;
  const int nd = varlen ? 3 : 4;
  const int64_t qs4[4] = {2, 5, 4, 8}, ks4[4] = {2, 7, 2, 8}, ls3[3] = {2, 4, 5}, ms[4] = {1, 4, 5, 7};
  const int64_t qs3[3] = {9, 4, 8}, ks3[3] = {11, 2, 8}, ls2[2] = {4, 9};
  const int64_t *qs = varlen ? qs3 : qs4, *ks = varlen ? ks3 : ks4;
  const int32_t dt = varlen ? OPS_DTYPE_F16 : OPS_DTYPE_BF16;
  errs_add(f, r, "q", ERRS_INPUT, dt, nd, qs);
  errs_add(f, r, "k", ERRS_INPUT, dt, nd, ks);
  errs_add(f, r, "v", ERRS_INPUT, dt, nd, ks);
  errs_add(f, r, "o", ERRS_INPUT, dt, nd, qs);
  errs_add(f, r, "lse", ERRS_INPUT, OPS_DTYPE_F32, nd - 1, varlen ? ls2 : ls3);
  errs_add(f, r, "dout", ERRS_INPUT, dt, nd, qs);
  errs_add(f, r, "dq", ERRS_OUTPUT, dt, nd, qs);
  errs_add(f, r, "dk", ERRS_OUTPUT, dt, nd, ks);
  errs_add(f, r, "dv", ERRS_OUTPUT, dt, nd, ks);
  if (varlen) {
    add_varlen(f, r);
  } else {
    f->p.sdpa.attn_mask = errs_add(f, r, "params->attn_mask", ERRS_INPUT | ERRS_OPTIONAL, OPS_DTYPE_F32, 4, ms);
    f->p.sdpa.causal = 1;
  }
  OPST_OK(ops_sdpa_backward_workspace_size(f->h, &f->p.sdpa, errs_ptr(f, "q"), errs_ptr(f, "k"), errs_ptr(f, "v"),
                                           errs_ptr(f, "o"), errs_ptr(f, "lse"), errs_ptr(f, "dout"),
                                           errs_ptr(f, "dq"), errs_ptr(f, "dk"), errs_ptr(f, "dv"),
                                           &f->workspace_bytes));
  assert_true(f->workspace_bytes > 0);
  f->workspace = f->workspace_alloc = opst_workspace(f->workspace_bytes);
}

static ops_tensor *T(errs_fixture *f, const char *name) { return &errs_find(f, name)->t.t; }

/* dense faults */
static void k_batch(errs_fixture *f) { T(f, "k")->shape[0] = 1; }
static void k_head_dim(errs_fixture *f) { T(f, "k")->shape[3] = 4; }
static void v_seqlen(errs_fixture *f) { T(f, "v")->shape[1] = 6; }
static void heads_not_divisor(errs_fixture *f) { T(f, "k")->shape[2] = 3, T(f, "v")->shape[2] = 3; }
static void o_shape(errs_fixture *f) { T(f, "o")->shape[1] = 4; }
static void lse_shape(errs_fixture *f) { T(f, "lse")->shape[2] = 4; }
static void q_ndim(errs_fixture *f) { T(f, "q")->ndim = 3; }
static void k_dtype(errs_fixture *f) { T(f, "k")->dtype = OPS_DTYPE_F16; }
static void mask_dtype(errs_fixture *f) { T(f, "params->attn_mask")->dtype = OPS_DTYPE_F16; }
static void mask_shape(errs_fixture *f) { T(f, "params->attn_mask")->shape[3] = 6; }
static void o_is_q(errs_fixture *f) { *T(f, "o") = *T(f, "q"); }
static void lse_on_o(errs_fixture *f) { /* lse element 0 covers o element 0, aligned for f32 */
  T(f, "lse")->data = (void *)((uintptr_t)T(f, "o")->data & ~(uintptr_t)3);
}
static void o_overlaps_itself(errs_fixture *f) { T(f, "o")->strides[1] = 0; }
static void window_below_minus_one(errs_fixture *f) { f->p.sdpa.window_left = -2; }
static void causal_with_right_window(errs_fixture *f) { f->p.sdpa.window_right = 3; }
static void causal_two(errs_fixture *f) { f->p.sdpa.causal = 2; }
static void scale_nan(errs_fixture *f) { f->p.sdpa.scale = NAN; }
static void workspace_short(errs_fixture *f) { f->workspace_bytes -= 1; }
static void workspace_null(errs_fixture *f) { f->workspace = NULL; }
static void workspace_misaligned(errs_fixture *f) { f->workspace = (char *)f->workspace + 8; f->workspace_bytes -= 8; }
static void workspace_misaligned_roomy(errs_fixture *f) { f->workspace = (char *)f->workspace + 8; }

/* varlen faults */
static void cu_start(errs_fixture *f) { opst_set_flat(&errs_find(f, "params->cu_seqlens_q")->t, 0, 1); }
static void cu_decreasing(errs_fixture *f) { opst_set_flat(&errs_find(f, "params->cu_seqlens_k")->t, 1, 12); }
static void cu_end(errs_fixture *f) { opst_set_flat(&errs_find(f, "params->cu_seqlens_q")->t, 2, 8); }
static void max_seqlen_small(errs_fixture *f) { f->p.sdpa.max_seqlen_q = 4; }
static void max_seqlen_negative(errs_fixture *f) { f->p.sdpa.max_seqlen_k = -1; }
static void cu_k_missing(errs_fixture *f) { f->p.sdpa.cu_seqlens_k = NULL; }
static void cu_k_length(errs_fixture *f) { T(f, "params->cu_seqlens_k")->shape[0] = 2; }
static void varlen_with_mask(errs_fixture *f) { f->p.sdpa.attn_mask = T(f, "q"); }
static void varlen_q_ndim(errs_fixture *f) {
  ops_tensor *q = T(f, "q");
  q->ndim = 4;
  q->shape[3] = 1;
  q->strides[3] = 1;
}

/* paged faults */
static void table_without_lens(errs_fixture *f) { f->p.sdpa.kv_lens = NULL; }
static void lens_with_cu_k(errs_fixture *f) { f->p.sdpa.cu_seqlens_k = T(f, "params->kv_lens"); }
static void lens_with_mask(errs_fixture *f) { f->p.sdpa.attn_mask = T(f, "o"); }
static void lens_dtype(errs_fixture *f) { T(f, "params->kv_lens")->dtype = OPS_DTYPE_F32; }
static void lens_shape(errs_fixture *f) { T(f, "params->kv_lens")->shape[0] = 1; }
static void lens_over_capacity(errs_fixture *f) { opst_set_flat(&errs_find(f, "params->kv_lens")->t, 1, 9); }
static void lens_negative(errs_fixture *f) { opst_set_flat(&errs_find(f, "params->kv_lens")->t, 0, -1); }
static void page_out_of_pool(errs_fixture *f) { opst_set_flat(&errs_find(f, "params->block_table")->t, 3, 5); }
static void page_negative(errs_fixture *f) { opst_set_flat(&errs_find(f, "params->block_table")->t, 2, -1); }
static void table_batch(errs_fixture *f) { T(f, "params->block_table")->shape[0] = 1; }
static void table_dtype(errs_fixture *f) { T(f, "params->block_table")->dtype = OPS_DTYPE_F32; }
static void v_pages(errs_fixture *f) { T(f, "v")->shape[0] = 4; }
static void v_page_size(errs_fixture *f) { T(f, "v")->shape[1] = 3; }
static void table_on_o(errs_fixture *f) { T(f, "params->block_table")->data = T(f, "lse")->data; }

/* backward faults */
static void bwd_dq_shape(errs_fixture *f) { T(f, "dq")->shape[1] = 4; }
static void bwd_dk_dtype(errs_fixture *f) { T(f, "dk")->dtype = OPS_DTYPE_F16; }
static void bwd_dout_shape(errs_fixture *f) { T(f, "dout")->shape[3] = 7; }
static void bwd_lse_dtype(errs_fixture *f) { T(f, "lse")->dtype = OPS_DTYPE_BF16; }
static void bwd_dq_is_q(errs_fixture *f) { *T(f, "dq") = *T(f, "q"); }
static void bwd_dv_on_dk(errs_fixture *f) { *T(f, "dv") = *T(f, "dk"); }
/* dk and dout share memory, dk (the fewer elements) dense over dout's lowest ones, so that no
 * third operand (each its own allocation) is touched and the overlap found is theirs */
static void bwd_dk_on_dout(errs_fixture *f) { errs_dense_over(f, "dk", "dout"); }
static void bwd_dv_overlaps_itself(errs_fixture *f) { T(f, "dv")->strides[1] = 0; }
static void bwd_kv_lens(errs_fixture *f) { f->p.sdpa.kv_lens = T(f, "lse"); }
static void bwd_workspace_short(errs_fixture *f) { f->workspace_bytes -= 1; }

/* A sequence's table entries past its last page are never read (nor checked). */
static void unused_pages_are_not_read(void **state) {
  (void)state;
  errs_fixture f;
  memset(&f, 0, sizeof f);
  f.h = opst_cpu_handle();
  build(&f, &g_rng, PAGED);
  opst_set_flat(&errs_find(&f, "params->kv_lens")->t, 0, 4); /* sequence 0 uses page 3 only */
  opst_set_flat(&errs_find(&f, "params->block_table")->t, 1, 1 << 30);
  OPST_OK(call_sdpa(&f));
  errs_free(&f);
}

static void valid_calls_succeed(void **state) {
  (void)state;
  errs_check_valid_call(build_backward, BWD_DENSE, &g_rng);
  errs_check_valid_call(build_backward, BWD_VARLEN, &g_rng);
  errs_check_valid_call(build, DENSE, &g_rng);
  errs_check_valid_call(build, VARLEN, &g_rng);
  errs_check_valid_call(build, PAGED, &g_rng);
}

static void descriptor_faults(void **state) {
  (void)state;
  errs_run_descriptor_faults(build_backward, BWD_DENSE, &g_rng);
  errs_run_descriptor_faults(build_backward, BWD_VARLEN, &g_rng);
  errs_run_descriptor_faults(build, DENSE, &g_rng);
  errs_run_descriptor_faults(build, VARLEN, &g_rng);
  errs_run_descriptor_faults(build, PAGED, &g_rng);
}

static void call_faults(void **state) {
  (void)state;
  errs_run_call_faults(build, DENSE, &g_rng, "ops_sdpa");
  errs_run_call_faults(build_backward, BWD_DENSE, &g_rng, "ops_sdpa_backward");
}

static void shape_dtype_alias_param_workspace_faults(void **state) {
  (void)state;
  static const errs_case dense[] = {
      {"k batch", k_batch, OPS_ERR_SHAPE_MISMATCH, {"k: axis 0 (batch, from q)", "expected 2", "got 1", NULL}},
      {"k head_dim", k_head_dim, OPS_ERR_SHAPE_MISMATCH, {"k: axis 3 (head_dim, from q)", "expected 8", "got 4", NULL}},
      {"v seqlen", v_seqlen, OPS_ERR_SHAPE_MISMATCH, {"v: axis 1 (seqlen_k, from k)", "expected 7", "got 6", NULL}},
      {"GQA ratio", heads_not_divisor, OPS_ERR_SHAPE_MISMATCH, {"heads_kv", "divisor of heads_q = 4", "got 3", NULL}},
      {"o shape", o_shape, OPS_ERR_SHAPE_MISMATCH, {"o: shape", "expected [2, 5, 4, 8]", "got [2, 4, 4, 8]", NULL}},
      {"lse shape", lse_shape, OPS_ERR_SHAPE_MISMATCH, {"lse: shape", "expected [2, 4, 5]", NULL, NULL}},
      {"q ndim", q_ndim, OPS_ERR_BAD_NDIM, {"q: ndim", "expected 4", "got 3", NULL}},
      {"k dtype", k_dtype, OPS_ERR_DTYPE_MISMATCH, {"k: dtype", "expected bf16 (q's dtype)", "got f16", NULL}},
      {"mask dtype", mask_dtype, OPS_ERR_DTYPE_MISMATCH, {"params->attn_mask: dtype", "f32, bf16", "got f16", NULL}},
      {"mask shape", mask_shape, OPS_ERR_SHAPE_MISMATCH, {"params->attn_mask", "broadcasts to [2, 4, 5, 7]", NULL, NULL}},
      {"o is q", o_is_q, OPS_ERR_ALIASING, {"o: expected memory disjoint from input q", NULL, NULL, NULL}},
      {"lse on o", lse_on_o, OPS_ERR_ALIASING, {"o: expected memory disjoint from output lse", NULL, NULL, NULL}},
      {"o overlaps itself", o_overlaps_itself, OPS_ERR_ALIASING, {"o: strides", "overlaps itself", NULL, NULL}},
      {"window -2", window_below_minus_one, OPS_ERR_INVALID_ARGUMENT, {"params->window_left", "got -2", NULL, NULL}},
      {"causal + right window", causal_with_right_window, OPS_ERR_INVALID_ARGUMENT, {"params->window_right", "with causal", "got 3", NULL}},
      {"causal 2", causal_two, OPS_ERR_INVALID_ARGUMENT, {"params->causal", "expected 0 or 1", "got 2", NULL}},
      {"scale NaN", scale_nan, OPS_ERR_INVALID_ARGUMENT, {"params->scale", "finite", "got nan", NULL}},
      {"workspace short", workspace_short, OPS_ERR_WORKSPACE_TOO_SMALL, {"workspace_bytes", "expected at least", NULL, NULL}},
      {"workspace NULL", workspace_null, OPS_ERR_NULL_POINTER, {"workspace", "got NULL", NULL, NULL}},
      {"workspace misaligned, short", workspace_misaligned, OPS_ERR_WORKSPACE_TOO_SMALL, {"workspace_bytes", NULL, NULL, NULL}},
      {"workspace misaligned", workspace_misaligned_roomy, OPS_ERR_MISALIGNED, {"workspace", "aligned to 16 bytes", NULL, NULL}},
  };
  errs_run_cases(build, DENSE, &g_rng, dense, ERRS_COUNT(dense));
  static const errs_case varlen[] = {
      {"cu_seqlens start", cu_start, OPS_ERR_INVALID_ARGUMENT, {"params->cu_seqlens_q[0]", "expected 0", "got 1", NULL}},
      {"cu_seqlens decreasing", cu_decreasing, OPS_ERR_INVALID_ARGUMENT, {"params->cu_seqlens_k", "sequence 0 has length 12", NULL, NULL}},
      {"cu_seqlens end", cu_end, OPS_ERR_INVALID_ARGUMENT, {"params->cu_seqlens_q[2]", "expected 9", "got 8", NULL}},
      {"max_seqlen too small", max_seqlen_small, OPS_ERR_INVALID_ARGUMENT, {"sequence 1 has length 5", "max_seqlen_q", NULL, NULL}},
      {"max_seqlen negative", max_seqlen_negative, OPS_ERR_INVALID_ARGUMENT, {"params->max_seqlen_k", "got -1", NULL, NULL}},
      {"cu_seqlens_k missing", cu_k_missing, OPS_ERR_NULL_POINTER, {"params->cu_seqlens_k", "got NULL", NULL, NULL}},
      {"cu_seqlens_k length", cu_k_length, OPS_ERR_SHAPE_MISMATCH, {"params->cu_seqlens_k", "batch + 1", "got 2", NULL}},
      {"mask with varlen", varlen_with_mask, OPS_ERR_INVALID_ARGUMENT, {"params->attn_mask", "with varlen", NULL, NULL}},
      {"varlen q ndim", varlen_q_ndim, OPS_ERR_BAD_NDIM, {"q: ndim", "expected 3", "got 4", NULL}},
  };
  errs_run_cases(build, VARLEN, &g_rng, varlen, ERRS_COUNT(varlen));
  static const errs_case paged[] = {
      {"block_table without kv_lens", table_without_lens, OPS_ERR_NULL_POINTER, {"params->kv_lens", "block_table", "got NULL", NULL}},
      {"kv_lens with cu_seqlens_k", lens_with_cu_k, OPS_ERR_INVALID_ARGUMENT, {"params->cu_seqlens_k", "with a KV cache", NULL, NULL}},
      {"kv_lens with a mask", lens_with_mask, OPS_ERR_INVALID_ARGUMENT, {"params->attn_mask", "with a KV cache", NULL, NULL}},
      {"kv_lens dtype", lens_dtype, OPS_ERR_DTYPE_MISMATCH, {"params->kv_lens: dtype", "i32", "got f32", NULL}},
      {"kv_lens shape", lens_shape, OPS_ERR_SHAPE_MISMATCH, {"params->kv_lens: shape", "expected [2]", NULL, NULL}},
      {"kv_lens over capacity", lens_over_capacity, OPS_ERR_INVALID_ARGUMENT, {"params->kv_lens[1]", "expected 0..8", "got 9", NULL}},
      {"kv_lens negative", lens_negative, OPS_ERR_INVALID_ARGUMENT, {"params->kv_lens[0]", "got -1", NULL, NULL}},
      {"page outside the pool", page_out_of_pool, OPS_ERR_INVALID_ARGUMENT, {"params->block_table[1, 1]", "0..4", "got 5", NULL}},
      {"negative page", page_negative, OPS_ERR_INVALID_ARGUMENT, {"params->block_table[1, 0]", "got -1", NULL, NULL}},
      {"block_table batch", table_batch, OPS_ERR_SHAPE_MISMATCH, {"params->block_table: axis 0 (batch)", "expected 2", "got 1", NULL}},
      {"block_table dtype", table_dtype, OPS_ERR_DTYPE_MISMATCH, {"params->block_table: dtype", "got f32", NULL, NULL}},
      {"v pages", v_pages, OPS_ERR_SHAPE_MISMATCH, {"v: axis 0 (num_pages, from k)", "expected 5", "got 4", NULL}},
      {"v page size", v_page_size, OPS_ERR_SHAPE_MISMATCH, {"v: axis 1 (page_size, from k)", "expected 4", "got 3", NULL}},
      {"block_table on lse", table_on_o, OPS_ERR_ALIASING, {"lse", "params->block_table", NULL, NULL}},
  };
  errs_run_cases(build, PAGED, &g_rng, paged, ERRS_COUNT(paged));
  static const errs_case backward[] = {
      {"dq shape", bwd_dq_shape, OPS_ERR_SHAPE_MISMATCH, {"dq: shape", "expected [2, 5, 4, 8] (q's shape)", "got [2, 4, 4, 8]", NULL}},
      {"dk dtype", bwd_dk_dtype, OPS_ERR_DTYPE_MISMATCH, {"dk: dtype", "expected bf16 (q's dtype)", "got f16", NULL}},
      {"dout shape", bwd_dout_shape, OPS_ERR_SHAPE_MISMATCH, {"dout: shape", "(o's shape)", NULL, NULL}},
      {"lse dtype", bwd_lse_dtype, OPS_ERR_DTYPE_MISMATCH, {"lse: dtype", "f32", "got bf16", NULL}},
      {"dq is q", bwd_dq_is_q, OPS_ERR_ALIASING, {"dq: expected memory disjoint from input q", NULL, NULL, NULL}},
      {"dv is dk", bwd_dv_on_dk, OPS_ERR_ALIASING, {"dk", "dv", "disjoint", NULL}},
      {"dk on dout", bwd_dk_on_dout, OPS_ERR_ALIASING, {"dk: expected memory disjoint from input dout", NULL, NULL, NULL}},
      {"dv overlaps itself", bwd_dv_overlaps_itself, OPS_ERR_ALIASING, {"dv: strides", "overlaps itself", NULL, NULL}},
      {"a KV cache", bwd_kv_lens, OPS_ERR_INVALID_ARGUMENT, {"params->kv_lens", "expected NULL", "got a tensor", NULL}},
      {"workspace short", bwd_workspace_short, OPS_ERR_WORKSPACE_TOO_SMALL, {"workspace_bytes", "expected at least", NULL, NULL}},
  };
  errs_run_cases(build_backward, BWD_DENSE, &g_rng, backward, ERRS_COUNT(backward));
}

static void zero_size_call_is_a_no_op(void **state) {
  (void)state;
  ops_handle h = opst_cpu_handle();
  const int64_t qs[4] = {2, 0, 4, 8}, ks[4] = {2, 3, 2, 8};
  opst_tensor k;
  opst_alloc(&k, &g_rng, OPS_DTYPE_BF16, 4, ks, OPST_CONTIGUOUS);
  opst_fill_uniform(&k, &g_rng, -1, 1);
  ops_tensor q, o;
  OPST_OK(ops_tensor_init(&q, NULL, OPS_DTYPE_BF16, ops_device_cpu(), 4, qs, NULL));
  OPST_OK(ops_tensor_init(&o, NULL, OPS_DTYPE_BF16, ops_device_cpu(), 4, qs, NULL));
  OPST_OK(ops_sdpa(h, NULL, &q, &k.t, &k.t, &o, NULL, NULL, 0));
  assert_true(opst_untouched(&k));
  opst_free(&k);
  ops_handle_destroy(h);
}

/* A paged cache whose page size times the block table's width passes int64 (described on a
 * virtual Hopper: the tensors are never allocated): a size error. */
static void cache_capacity_overflow_is_refused(void **state) {
  (void)state;
  ops_handle v = opst_virtual_handle(90);
  const int64_t qs[4] = {2, 1, 4, 8}, ks[4] = {1, (int64_t)1 << 33, 2, 8}, ls[1] = {2},
                ts[2] = {2, (int64_t)1 << 31};
  ops_tensor q, k, o, lens, table;
  OPST_OK(ops_tensor_init(&q, NULL, OPS_DTYPE_BF16, ops_device_cuda(0), 4, qs, NULL));
  OPST_OK(ops_tensor_init(&o, NULL, OPS_DTYPE_BF16, ops_device_cuda(0), 4, qs, NULL));
  OPST_OK(ops_tensor_init(&k, NULL, OPS_DTYPE_BF16, ops_device_cuda(0), 4, ks, NULL));
  OPST_OK(ops_tensor_init(&lens, NULL, OPS_DTYPE_I32, ops_device_cuda(0), 1, ls, NULL));
  OPST_OK(ops_tensor_init(&table, NULL, OPS_DTYPE_I32, ops_device_cuda(0), 2, ts, NULL));
  ops_sdpa_params p;
  ops_sdpa_params_init(&p);
  p.kv_lens = &lens, p.block_table = &table;
  ops_explain e;
  e.struct_size = sizeof e;
  assert_int_equal(ops_sdpa_explain(v, &p, &q, &k, &k, &o, NULL, &e), OPS_ERR_BAD_SIZE);
  assert_non_null(strstr(ops_last_error(), "the cache's capacity (k's page_size x params->block_table's axis 1)"));
  ops_handle_destroy(v);
}

/* An empty q (head dim 0) whose batch times query rows passes int64: a size error, not an
 * overflowing row count in the dispatcher. */
static void query_rows_overflow_is_refused(void **state) {
  (void)state;
  ops_handle v = opst_virtual_handle(90);
  const int64_t qs[4] = {3, INT64_MAX / 2, 1, 0}, ks[4] = {3, 16, 1, 0};
  ops_tensor q, k, o;
  OPST_OK(ops_tensor_init(&q, NULL, OPS_DTYPE_BF16, ops_device_cuda(0), 4, qs, (const int64_t[]){0, 0, 0, 1}));
  OPST_OK(ops_tensor_init(&o, NULL, OPS_DTYPE_BF16, ops_device_cuda(0), 4, qs, (const int64_t[]){0, 0, 0, 1}));
  OPST_OK(ops_tensor_init(&k, NULL, OPS_DTYPE_BF16, ops_device_cuda(0), 4, ks, NULL));
  ops_explain e;
  e.struct_size = sizeof e;
  assert_int_equal(ops_sdpa_explain(v, NULL, &q, &k, &k, &o, NULL, &e), OPS_ERR_BAD_SIZE);
  assert_non_null(strstr(ops_last_error(), "batch x seqlen_q"));
  ops_handle_destroy(v);
}

static int setup(void **state) {
  (void)state;
  opst_rng_init(&g_rng, opst_seed("sdpa_errors"));
  return 0;
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(valid_calls_succeed),
      cmocka_unit_test(descriptor_faults),
      cmocka_unit_test(call_faults),
      cmocka_unit_test(shape_dtype_alias_param_workspace_faults),
      cmocka_unit_test(zero_size_call_is_a_no_op),
      cmocka_unit_test(cache_capacity_overflow_is_refused),
      cmocka_unit_test(query_rows_overflow_is_refused),
      cmocka_unit_test(unused_pages_are_not_read),
  };
  return cmocka_run_group_tests_name("sdpa_errors", tests, setup, NULL);
}
