/* Error injection for ops_rope and ops_kv_cache_append (harness.h). */
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

enum { ROPE = 0, APPEND = 1 };

static ops_status call_op(errs_fixture *f) {
  if (f->op == ROPE) {
    return ops_rope(f->h, &f->p.rope, errs_ptr(f, "positions"), errs_ptr(f, "q"), errs_ptr(f, "q_out"), f->workspace,
                    f->workspace_bytes);
  }
  return ops_kv_cache_append(f->h, &f->p.append.p, errs_ptr(f, "k"), errs_ptr(f, "v"), errs_ptr(f, "slot_mapping"),
                             errs_ptr(f, "k_cache"), errs_ptr(f, "v_cache"), f->workspace, f->workspace_bytes);
}

/* rope: q [2, 3, 4, 16] with k [2, 3, 2, 16], positions [2, 3]. append: 6 tokens into every
 * slot of 3 pages of 2 (a valid call writes each cache element), RoPE on k. */
static void build(errs_fixture *f, opst_rng *r, int variant) {
  f->op = variant;
  f->call = call_op;
  if (variant == ROPE) {
    const int64_t qs[4] = {2, 3, 4, 16}, ks[4] = {2, 3, 2, 16}, ps[2] = {2, 3};
    ops_rope_params_init(&f->p.rope);
    errs_add(f, r, "positions", ERRS_INPUT, OPS_DTYPE_I32, 2, ps);
    errs_add(f, r, "q", ERRS_INPUT, OPS_DTYPE_BF16, 4, qs);
    errs_add(f, r, "q_out", ERRS_OUTPUT, OPS_DTYPE_BF16, 4, qs);
    f->p.rope.k = errs_add(f, r, "params->k", ERRS_INPUT | ERRS_OPTIONAL, OPS_DTYPE_BF16, 4, ks);
    f->p.rope.k_out = errs_add(f, r, "params->k_out", ERRS_OUTPUT | ERRS_OPTIONAL, OPS_DTYPE_BF16, 4, ks);
    return;
  }
  const int64_t ks[3] = {6, 2, 16}, vs[3] = {6, 2, 8}, ss[1] = {6}, kc[4] = {3, 2, 2, 16}, vc[4] = {3, 2, 2, 8};
  ops_kv_cache_append_params_init(&f->p.append.p);
  ops_rope_params_init(&f->p.append.rope);
  f->p.append.rope.style = OPS_ROPE_GPTJ;
  f->p.append.p.rope = &f->p.append.rope;
  errs_add(f, r, "k", ERRS_INPUT, OPS_DTYPE_BF16, 3, ks);
  errs_add(f, r, "v", ERRS_INPUT, OPS_DTYPE_BF16, 3, vs);
  errs_add(f, r, "slot_mapping", ERRS_INPUT, OPS_DTYPE_I64, 1, ss);
  errs_add(f, r, "k_cache", ERRS_OUTPUT, OPS_DTYPE_BF16, 4, kc);
  errs_add(f, r, "v_cache", ERRS_OUTPUT, OPS_DTYPE_BF16, 4, vc);
  f->p.append.p.positions = errs_add(f, r, "params->positions", ERRS_INPUT | ERRS_OPTIONAL, OPS_DTYPE_I32, 1, ss);
  static const int slots[6] = {4, 1, 5, 0, 3, 2};
  for (int i = 0; i < 6; ++i) {
    opst_set_flat(&errs_find(f, "slot_mapping")->t, i, slots[i]);
    opst_set_flat(&errs_find(f, "params->positions")->t, i, 1000 * i);
  }
  opst_snapshot(&errs_find(f, "slot_mapping")->t);
  opst_snapshot(&errs_find(f, "params->positions")->t);
}

static ops_tensor *T(errs_fixture *f, const char *name) { return &errs_find(f, name)->t.t; }

static void style_2(errs_fixture *f) { f->p.rope.style = 2; }
static void theta_zero(errs_fixture *f) { f->p.rope.theta = 0.0f; }
static void theta_nan(errs_fixture *f) { f->p.rope.theta = NAN; }
static void rotary_odd(errs_fixture *f) { f->p.rope.rotary_dim = 5; }
static void rotary_over_dim(errs_fixture *f) { f->p.rope.rotary_dim = 18; }
static void scaling_3(errs_fixture *f) { f->p.rope.scaling = 3; }
static void factor_zero(errs_fixture *f) { f->p.rope.scaling = OPS_ROPE_SCALING_LINEAR, f->p.rope.factor = 0.0f; }
static void llama3_high_low(errs_fixture *f) {
  f->p.rope.scaling = OPS_ROPE_SCALING_LLAMA3;
  f->p.rope.high_freq_factor = 0.5f;
}
static void llama3_orig(errs_fixture *f) {
  f->p.rope.scaling = OPS_ROPE_SCALING_LLAMA3;
  f->p.rope.original_max_positions = 0;
}
static void k_without_k_out(errs_fixture *f) { f->p.rope.k_out = NULL; }
static void positions_dtype(errs_fixture *f) { T(f, "positions")->dtype = OPS_DTYPE_F32; }
static void positions_shape(errs_fixture *f) { T(f, "positions")->shape[1] = 4; }
static void q_ndim(errs_fixture *f) { T(f, "q")->ndim = 2; }
static void q_out_shape(errs_fixture *f) { T(f, "q_out")->shape[2] = 3; }
static void k_head_dim(errs_fixture *f) { T(f, "params->k")->shape[3] = 8; }
static void k_tokens(errs_fixture *f) { T(f, "params->k")->shape[1] = 2; }
static void k_dtype(errs_fixture *f) { T(f, "params->k")->dtype = OPS_DTYPE_F16; }
static void q_out_partially_on_q(errs_fixture *f) {
  ops_tensor *o = T(f, "q_out"), *q = T(f, "q");
  *o = *q;
  o->data = (uint16_t *)q->data + q->strides[3];
}
static void k_out_on_q(errs_fixture *f) {
  ops_tensor *o = T(f, "params->k_out");
  o->data = T(f, "q")->data;
  for (int i = 0; i < 4; ++i) o->strides[i] = T(f, "q")->strides[i];
}

/* k_out as heads 3 and 4 of q_out's rows (q_out's strides): head 3 is q_out's own, so the two
 * outputs share elements although their strides interleave (the exact overlap test). */
static void k_out_shares_heads_with_q_out(errs_fixture *f) {
  ops_tensor *o = T(f, "params->k_out"), *q = T(f, "q_out");
  for (int i = 0; i < 4; ++i) o->strides[i] = q->strides[i];
  o->data = (uint16_t *)q->data + 3 * q->strides[2];
}

static void slot_over_capacity(errs_fixture *f) { opst_set_flat(&errs_find(f, "slot_mapping")->t, 2, 6); }
static void slots_dtype(errs_fixture *f) { T(f, "slot_mapping")->dtype = OPS_DTYPE_F32; }
static void slots_shape(errs_fixture *f) { T(f, "slot_mapping")->shape[0] = 5; }
static void v_heads(errs_fixture *f) { T(f, "v")->shape[1] = 3; }
static void v_cache_pages(errs_fixture *f) { T(f, "v_cache")->shape[0] = 2; }
static void k_cache_dim(errs_fixture *f) { T(f, "k_cache")->shape[3] = 8; }
static void k_cache_ndim(errs_fixture *f) { T(f, "k_cache")->ndim = 3; }
static void rope_with_k(errs_fixture *f) { f->p.append.rope.k = T(f, "k"); }
static void rope_without_positions(errs_fixture *f) { f->p.append.p.positions = NULL; }
static void positions_without_rope(errs_fixture *f) { f->p.append.p.rope = NULL; }
static void rope_rotary_odd(errs_fixture *f) { f->p.append.rope.rotary_dim = 3; }
static void rope_struct_size(errs_fixture *f) { f->p.append.rope.struct_size = 7; }
static void positions_tokens(errs_fixture *f) { T(f, "params->positions")->shape[0] = 7; }
static void v_cache_on_k_cache(errs_fixture *f) { T(f, "v_cache")->data = T(f, "k_cache")->data; }
static void k_cache_on_k(errs_fixture *f) { T(f, "k_cache")->data = T(f, "k")->data; }

static void valid_calls_succeed(void **state) {
  (void)state;
  errs_check_valid_call(build, ROPE, &g_rng);
  errs_check_valid_call(build, APPEND, &g_rng);
}

static void descriptor_faults(void **state) {
  (void)state;
  errs_run_descriptor_faults(build, ROPE, &g_rng);
  errs_run_descriptor_faults(build, APPEND, &g_rng);
}

static void call_faults(void **state) {
  (void)state;
  errs_run_call_faults(build, ROPE, &g_rng, "ops_rope");
  errs_run_call_faults(build, APPEND, &g_rng, "ops_kv_cache_append");
}

static void shape_dtype_alias_param_faults(void **state) {
  (void)state;
  static const errs_case rope[] = {
      {"style 2", style_2, OPS_ERR_INVALID_ARGUMENT, {"params->style", "OPS_ROPE_NEOX (0)", "got 2", NULL}},
      {"theta 0", theta_zero, OPS_ERR_INVALID_ARGUMENT, {"params->theta", "> 0", "got 0", NULL}},
      {"theta nan", theta_nan, OPS_ERR_INVALID_ARGUMENT, {"params->theta", "finite", "got nan", NULL}},
      {"rotary odd", rotary_odd, OPS_ERR_INVALID_ARGUMENT, {"params->rotary_dim", "even", "got 5", NULL}},
      {"rotary over the head dim", rotary_over_dim, OPS_ERR_INVALID_ARGUMENT, {"params->rotary_dim", "(16)", "got 18", NULL}},
      {"scaling 3", scaling_3, OPS_ERR_INVALID_ARGUMENT, {"params->scaling", "0..2", "got 3", NULL}},
      {"factor 0", factor_zero, OPS_ERR_INVALID_ARGUMENT, {"params->factor", "> 0", "got 0", NULL}},
      {"llama3 high < low", llama3_high_low, OPS_ERR_INVALID_ARGUMENT, {"high_freq_factor", "low < high", "got 1 and 0.5", NULL}},
      {"llama3 original 0", llama3_orig, OPS_ERR_INVALID_ARGUMENT, {"params->original_max_positions", "> 0", "got 0", NULL}},
      {"k without k_out", k_without_k_out, OPS_ERR_NULL_POINTER, {"params->k_out", "with params->k", "got NULL", NULL}},
      {"positions dtype", positions_dtype, OPS_ERR_DTYPE_MISMATCH, {"positions: dtype", "i32, i64", "got f32", NULL}},
      {"positions shape", positions_shape, OPS_ERR_SHAPE_MISMATCH, {"positions: shape", "expected [2, 3]", "got [2, 4]", NULL}},
      {"q ndim", q_ndim, OPS_ERR_BAD_NDIM, {"q: ndim", "expected 3..4", "got 2", NULL}},
      {"q_out shape", q_out_shape, OPS_ERR_SHAPE_MISMATCH, {"q_out: shape", "(q's shape)", "got [2, 3, 3, 16]", NULL}},
      {"k head dim", k_head_dim, OPS_ERR_SHAPE_MISMATCH, {"params->k", "q's head dim", "expected 16, got 8", NULL}},
      {"k tokens", k_tokens, OPS_ERR_SHAPE_MISMATCH, {"params->k", "axis 1", "expected 3, got 2", NULL}},
      {"k dtype", k_dtype, OPS_ERR_DTYPE_MISMATCH, {"params->k: dtype", "(q's dtype)", "got f16", NULL}},
      {"q_out partially on q", q_out_partially_on_q, OPS_ERR_ALIASING, {"q_out: expected no overlap with q", "partial", NULL, NULL}},
      {"k_out on q", k_out_on_q, OPS_ERR_ALIASING, {"params->k_out", "disjoint from input q", NULL, NULL}},
      {"k_out sharing heads with q_out", k_out_shares_heads_with_q_out, OPS_ERR_ALIASING, {"q_out: expected memory disjoint from output params->k_out", NULL, NULL, NULL}},
  };
  static const errs_case append[] = {
      {"slot over the capacity", slot_over_capacity, OPS_ERR_INVALID_ARGUMENT, {"slot_mapping[2]", "0..5", "got 6", NULL}},
      {"slot_mapping dtype", slots_dtype, OPS_ERR_DTYPE_MISMATCH, {"slot_mapping: dtype", "i32, i64", "got f32", NULL}},
      {"slot_mapping shape", slots_shape, OPS_ERR_SHAPE_MISMATCH, {"slot_mapping: shape", "expected [6]", "got [5]", NULL}},
      {"v heads", v_heads, OPS_ERR_SHAPE_MISMATCH, {"v", "k's heads", "expected 2, got 3", NULL}},
      {"v_cache pages", v_cache_pages, OPS_ERR_SHAPE_MISMATCH, {"v_cache: shape", "expected [3, 2, 2, 8]", "got [2, 2, 2, 8]", NULL}},
      {"k_cache head dim", k_cache_dim, OPS_ERR_SHAPE_MISMATCH, {"k_cache", "k's head dim", "expected 16, got 8", NULL}},
      {"k_cache ndim", k_cache_ndim, OPS_ERR_BAD_NDIM, {"k_cache: ndim", "expected 4", "got 3", NULL}},
      {"rope with k", rope_with_k, OPS_ERR_INVALID_ARGUMENT, {"params->rope->k", "expected NULL", NULL, NULL}},
      {"rope without positions", rope_without_positions, OPS_ERR_NULL_POINTER, {"params->positions", "with params->rope", "got NULL", NULL}},
      {"positions without rope", positions_without_rope, OPS_ERR_INVALID_ARGUMENT, {"params->positions", "expected NULL without params->rope", NULL, NULL}},
      {"rope rotary odd", rope_rotary_odd, OPS_ERR_INVALID_ARGUMENT, {"params->rope->rotary_dim", "even", "got 3", NULL}},
      {"rope struct_size", rope_struct_size, OPS_ERR_STRUCT_SIZE, {"params->rope->struct_size", "ops_rope_params_init", "got 7", NULL}},
      {"positions tokens", positions_tokens, OPS_ERR_SHAPE_MISMATCH, {"params->positions: shape", "expected [6]", "got [7]", NULL}},
      {"v_cache on k_cache", v_cache_on_k_cache, OPS_ERR_ALIASING, {"v_cache", "k_cache", NULL, NULL}},
      {"k_cache on k", k_cache_on_k, OPS_ERR_ALIASING, {"k_cache", "disjoint from input k", NULL, NULL}},
  };
  errs_run_cases(build, ROPE, &g_rng, rope, ERRS_COUNT(rope));
  errs_run_cases(build, APPEND, &g_rng, append, ERRS_COUNT(append));
}

/* An empty cache (no KV heads) whose pages times page size pass int64 (described on a virtual
 * Hopper): a size error. */
static void cache_capacity_overflow_is_refused(void **state) {
  (void)state;
  ops_handle h = opst_virtual_handle(90);
  const int64_t ks[3] = {1, 0, 8}, ss[1] = {1}, cs[4] = {(int64_t)1 << 33, (int64_t)1 << 31, 0, 8},
                cst[4] = {1, 1, 1, 1};
  ops_tensor k, slots, kc;
  OPST_OK(ops_tensor_init(&k, NULL, OPS_DTYPE_BF16, ops_device_cuda(0), 3, ks, NULL));
  OPST_OK(ops_tensor_init(&slots, NULL, OPS_DTYPE_I32, ops_device_cuda(0), 1, ss, NULL));
  OPST_OK(ops_tensor_init(&kc, NULL, OPS_DTYPE_BF16, ops_device_cuda(0), 4, cs, cst));
  ops_tensor vc = kc;
  ops_explain e;
  e.struct_size = sizeof e;
  const ops_status st = ops_kv_cache_append_explain(h, NULL, &k, &k, &slots, &kc, &vc, &e);
  assert_int_equal(st, OPS_ERR_BAD_SIZE);
  assert_non_null(strstr(ops_last_error(), "the cache's capacity (k_cache's pages x page_size)"));
  ops_handle_destroy(h);
}

static int setup(void **state) {
  (void)state;
  opst_rng_init(&g_rng, opst_seed("rope_errors"));
  return 0;
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(valid_calls_succeed),
      cmocka_unit_test(descriptor_faults),
      cmocka_unit_test(call_faults),
      cmocka_unit_test(shape_dtype_alias_param_faults),
      cmocka_unit_test(cache_capacity_overflow_is_refused),
  };
  return cmocka_run_group_tests_name("rope_errors", tests, setup, NULL);
}
