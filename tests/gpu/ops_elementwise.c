/* gpu_ops_test: the elementwise ops, dropout and fused elementwise chains against the CPU reference (tests/support/gpu_call.h). */
#include <cuda_runtime_api.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "opslib/opslib.h"
#include "tests/gpu/cuda_check.h"
#include "tests/gpu/gpu_ops.h"
#include "tests/support/gpu_call.h"
#include "tests/support/opst.h"

/* ---- elementwise ------------------------------------------------------------------- */

static ops_status run_ew(ops_handle h, gcall *c, void *ws, size_t wsb, size_t *q, ops_explain *ex) {
  /* tensors: 0 x (a), 1 y, 2 second operand (binary b, sin_affine a), 3 sin_affine b */
  switch (c->op) {
    case OPS_OP_SIN_AFFINE: {
      ops_sin_affine_params p = c->sin;
      p.a_tensor = c->has[2] ? &c->v[2] : NULL;
      p.b_tensor = c->has[3] ? &c->v[3] : NULL;
      if (ex) return ops_sin_affine_explain(h, &p, &c->v[0], &c->v[1], ex);
      return q ? ops_sin_affine_workspace_size(h, &p, &c->v[0], &c->v[1], q)
               : ops_sin_affine(h, &p, &c->v[0], &c->v[1], ws, wsb);
    }
    case OPS_OP_UNARY:
      if (ex) return ops_unary_explain(h, &c->unary, &c->v[0], &c->v[1], ex);
      return q ? ops_unary_workspace_size(h, &c->unary, &c->v[0], &c->v[1], q)
               : ops_unary(h, &c->unary, &c->v[0], &c->v[1], ws, wsb);
    case OPS_OP_BINARY:
      if (ex) return ops_binary_explain(h, &c->binary, &c->v[0], &c->v[2], &c->v[1], ex);
      return q ? ops_binary_workspace_size(h, &c->binary, &c->v[0], &c->v[2], &c->v[1], q)
               : ops_binary(h, &c->binary, &c->v[0], &c->v[2], &c->v[1], ws, wsb);
    case OPS_OP_SCALE:
      if (ex) return ops_scale_explain(h, &c->scale_p, &c->v[0], &c->v[1], ex);
      return q ? ops_scale_workspace_size(h, &c->scale_p, &c->v[0], &c->v[1], q)
               : ops_scale(h, &c->scale_p, &c->v[0], &c->v[1], ws, wsb);
    default:
      if (ex) return ops_dropout_explain(h, &c->dropout, &c->v[0], &c->v[1], ex);
      return q ? ops_dropout_workspace_size(h, &c->dropout, &c->v[0], &c->v[1], q)
               : ops_dropout(h, &c->dropout, &c->v[0], &c->v[1], ws, wsb);
  }
}

/* A random shape that broadcasts to y: some leading axes dropped, some extents set to 1. */
static int bcast_shape(opst_rng *r, int ndim, const int64_t *y, int64_t *out) {
  const int nd = opst_chance(r, 0.3) ? (int)opst_int(r, 0, ndim) : ndim;
  for (int i = 0; i < nd; ++i) out[i] = opst_chance(r, 0.3) ? 1 : y[ndim - nd + i];
  return nd;
}

/* A random case of op iter % 5; plain: contiguous operands of one shape, 8192 elements (the
 * vec16 kernels' case, which the random draws may miss). */
static void elementwise_case(int iter, int plain) {
  opst_rng *r = &g_rng;
  pick_layout();
  if (plain) g_layout = 0;
  const int32_t dt = kDtypes[opst_int(r, 0, 2)];
  static const int32_t ops[5] = {OPS_OP_SIN_AFFINE, OPS_OP_UNARY, OPS_OP_BINARY, OPS_OP_SCALE, OPS_OP_DROPOUT};
  gcall c;
  memset(&c, 0, sizeof c);
  c.op = ops[iter % 5];
  c.run = run_ew;
  /* every op gets x broadcast to y in 4 of each 20 cases, and at random besides */
  const int bcast_x = !plain && c.op != OPS_OP_DROPOUT && (iter % 20 >= 15 || opst_chance(r, 0.2));
  int ndim;
  int64_t ys[OPS_MAX_DIMS];
  if (plain) {
    ndim = 1, ys[0] = 8192;
  } else if (opst_chance(r, 0.25)) { /* long flat runs: vector tails */
    ndim = 1, ys[0] = opst_int(r, 1, 300000);
  } else {
    ndim = (int)opst_int(r, 0, 4);
    for (int i = 0; i < ndim; ++i) ys[i] = opst_int(r, opst_chance(r, 0.03) ? 0 : 1, 40);
  }
  if (bcast_x && ndim == 0) ndim = 1, ys[0] = opst_int(r, 2, 40); /* something to broadcast over */
  opst_tensor x, y, a2, b2;
  int64_t s[OPS_MAX_DIMS];
  int xnd = bcast_x ? bcast_shape(r, ndim, ys, s) : ndim;
  if (bcast_x && xnd == ndim && ndim > 0) { /* make sure x really broadcasts */
    int same_shape = 1;
    for (int i = 0; i < ndim; ++i) same_shape = same_shape && s[i] == ys[i];
    if (same_shape && ys[0] > 1) s[0] = 1;
    else if (same_shape) xnd = 0;
  }
  alloc_x(&x, dt, xnd, bcast_x ? s : ys);
  opst_fill_uniform(&x, r, -2, 2);
  const int same = xnd == ndim && !bcast_x;
  const int in_place = same && opst_chance(r, 0.25);
  if (in_place) clone_tensor(&y, &x);
  else alloc_x(&y, dt, ndim, ys);
  add_tensor(&c, &x, IN, -1);
  add_tensor(&c, &y, OUT, in_place ? 0 : -1);
  const char *what = "";
  switch (c.op) {
    case OPS_OP_SIN_AFFINE:
      what = "sin_affine";
      ops_sin_affine_params_init(&c.sin);
      c.sin.a = (float)opst_uniform(r, -3, 3);
      c.sin.b = (float)opst_uniform(r, -3, 3);
      for (int k = 0; k < 2; ++k) {
        if (!plain && opst_chance(r, 0.3)) {
          const int nd = bcast_shape(r, ndim, ys, s);
          opst_tensor *t = k == 0 ? &a2 : &b2;
          opst_alloc_any(t, r, dt, nd, s);
          opst_fill_uniform(t, r, -2, 2);
          add_tensor(&c, t, IN, -1);
        } else {
          add_absent(&c);
        }
      }
      break;
    case OPS_OP_UNARY:
      what = "unary";
      ops_unary_params_init(&c.unary);
      c.unary.fn = (int32_t)opst_int(r, 0, OPS_ACT_SIN);
      break;
    case OPS_OP_BINARY: {
      what = "binary";
      ops_binary_params_init(&c.binary);
      c.binary.op = (int32_t)opst_int(r, 0, OPS_BINARY_MIN);
      const int nd = bcast_x || plain ? ndim : bcast_shape(r, ndim, ys, s);
      alloc_x(&a2, dt, nd, bcast_x || plain ? ys : s);
      opst_fill_uniform(&a2, r, -2, 2);
      if (c.binary.op == OPS_BINARY_DIV) { /* divisors away from 0 */
        const int64_t n = opst_numel(&a2);
        for (int64_t e = 0; e < n; ++e) {
          const double v = opst_at_flat(&a2, e);
          opst_set_flat(&a2, e, v < 0 ? v - 0.5 : v + 0.5);
        }
        opst_snapshot(&a2);
      }
      add_tensor(&c, &a2, IN, -1);
      break;
    }
    case OPS_OP_SCALE:
      what = "scale";
      ops_scale_params_init(&c.scale_p);
      c.scale_p.alpha = (float)opst_uniform(r, -3, 3);
      break;
    default: {
      what = "dropout";
      static const float ps[5] = {0.0f, 0.1f, 0.5f, 0.9f, 1.0f};
      ops_dropout_params_init(&c.dropout);
      c.dropout.p = ps[opst_int(r, 0, 4)];
      c.dropout.seed = opst_u64(r);
      c.dropout.offset = opst_u64(r) >> (opst_int(r, 0, 1) ? 0 : 40);
      break;
    }
  }
  char label[160];
  snprintf(label, sizeof label, "%s case %d %s %d-d y of %lld%s%s%s", what, iter, ops_dtype_name((ops_dtype)dt),
           ndim, (long long)opst_numel(&y), in_place ? " in place" : "", bcast_x ? " x broadcast" : "",
           plain ? " (plain)" : "");
  c.label = label;
  check_call(&c);
  free_call(&c);
}

void elementwise(void **state) {
  (void)state;
  for (int i = 0; i < 150; ++i) elementwise_case(i, 0);
  for (int i = 0; i < 5; ++i) elementwise_case(i, 1); /* each op's vec16 kernel, whatever the draws */
}

/* Dropout's mask is a function of (seed, offset, element): the GPU's equals the CPU's bit
 * for bit (checked above through the values), and the same call twice gives the same bits. */
void dropout_is_reproducible(void **state) {
  (void)state;
  if (!g_have_cuda) skip();
  const int64_t n = 1 << 20;
  float *d = NULL;
  CUDA_OK(cudaMalloc((void **)&d, 3 * n * sizeof(float)));
  float *hx = malloc(n * sizeof(float)), *h1 = malloc(n * sizeof(float)), *h2 = malloc(n * sizeof(float));
  for (int64_t i = 0; i < n; ++i) hx[i] = 1.0f + (float)(i % 7);
  CUDA_OK(cudaMemcpy(d, hx, n * sizeof(float), cudaMemcpyHostToDevice));
  ops_tensor x, y1, y2;
  OPST_OK(ops_tensor_init(&x, d, OPS_DTYPE_F32, ops_device_cuda(0), 1, &n, NULL));
  OPST_OK(ops_tensor_init(&y1, d + n, OPS_DTYPE_F32, ops_device_cuda(0), 1, &n, NULL));
  OPST_OK(ops_tensor_init(&y2, d + 2 * n, OPS_DTYPE_F32, ops_device_cuda(0), 1, &n, NULL));
  ops_dropout_params p;
  ops_dropout_params_init(&p);
  p.p = 0.3f, p.seed = 0x1234567890abcdefULL, p.offset = 77;
  OPST_OK(ops_dropout(g_gpu, &p, &x, &y1, NULL, 0));
  OPST_OK(ops_dropout(g_gpu, &p, &x, &y2, NULL, 0));
  CUDA_OK(cudaMemcpy(h1, d + n, n * sizeof(float), cudaMemcpyDeviceToHost));
  CUDA_OK(cudaMemcpy(h2, d + 2 * n, n * sizeof(float), cudaMemcpyDeviceToHost));
  assert_memory_equal(h1, h2, n * sizeof(float));
  int64_t dropped = 0;
  for (int64_t i = 0; i < n; ++i) dropped += h1[i] == 0.0f;
  /* 0.3 of 2^20, 5 standard deviations */
  assert_true(fabs((double)dropped - 0.3 * n) < 5.0 * sqrt(0.21 * n));
  cudaFree(d);
  free(hx), free(h1), free(h2);
}

/* ---- the fused elementwise chain --------------------------------------------------- */

static ops_status run_chain(ops_handle h, gcall *c, void *ws, size_t wsb, size_t *q, ops_explain *ex) {
  /* tensors: 0 x, 1 t1 = unary(x), 2 b, 3 t2 = t1 * b, 4 y = sin(a t2 + b) */
  ops_node n[3];
  for (int i = 0; i < 3; ++i) ops_node_init(&n[i]);
  n[0].op = OPS_OP_UNARY, n[0].params = &c->unary, n[0].in[0] = &c->v[0], n[0].out = &c->v[1];
  n[1].op = OPS_OP_BINARY, n[1].params = &c->binary, n[1].in[0] = &c->v[1], n[1].in[1] = &c->v[2];
  n[1].out = &c->v[3];
  n[2].op = OPS_OP_SIN_AFFINE, n[2].params = &c->sin, n[2].in[0] = &c->v[3], n[2].out = &c->v[4];
  ops_plan plan = NULL;
  ops_status st = ops_fuse(h, n, 3, 0, &plan);
  if (st != OPS_OK) return st;
  if (ex) { /* a dry run: chosen >= 0 when the chain fused into one kernel */
    ex->chosen = ops_plan_step_count(plan) == 1 ? 0 : -1;
    ops_plan_destroy(plan);
    return OPS_OK;
  }
  if (h == g_gpu && ops_plan_step_count(plan) != 1) {
    /* the pinned chain kernel refused the fused form (the plan says why): nothing runs */
    ops_plan_destroy(plan);
    return OPS_ERR_UNSUPPORTED;
  }
  if (q) {
    st = ops_plan_workspace_size(h, plan, q);
  } else {
    st = ops_plan_execute(h, plan, ws, wsb);
  }
  ops_plan_destroy(plan);
  return st;
}

static void chain_case(int iter) {
  opst_rng *r = &g_rng;
  pick_layout();
  const int32_t dt = kDtypes[opst_int(r, 0, 2)];
  const int ndim = (int)opst_int(r, 1, 3);
  int64_t ys[3], bs[3];
  for (int i = 0; i < ndim; ++i) ys[i] = opst_int(r, 1, i == ndim - 1 ? 3000 : 30);
  gcall c;
  memset(&c, 0, sizeof c);
  c.op = OPS_OP_EW_CHAIN;
  c.run = run_chain;
  ops_unary_params_init(&c.unary);
  c.unary.fn = (int32_t)opst_int(r, 0, OPS_ACT_SIN);
  ops_binary_params_init(&c.binary);
  c.binary.op = OPS_BINARY_MUL;
  ops_sin_affine_params_init(&c.sin);
  c.sin.a = 2.0f, c.sin.b = 1.0f;
  opst_tensor x, t1, b, t2, y;
  alloc_x(&x, dt, ndim, ys);
  opst_fill_uniform(&x, r, -2, 2);
  const int bnd = bcast_shape(r, ndim, ys, bs);
  alloc_x(&b, dt, bnd, bs);
  opst_fill_uniform(&b, r, -1, 1);
  opst_alloc(&t1, r, dt, ndim, ys, OPST_CONTIGUOUS);
  opst_alloc(&t2, r, dt, ndim, ys, OPST_CONTIGUOUS);
  alloc_x(&y, dt, ndim, ys);
  add_tensor(&c, &x, IN, -1);
  add_tensor(&c, &t1, SCRATCH, -1);
  add_tensor(&c, &b, IN, -1);
  add_tensor(&c, &t2, SCRATCH, -1);
  add_tensor(&c, &y, OUT, -1);
  char label[160];
  snprintf(label, sizeof label, "ew_chain case %d %s unary %d * b(%d-d) -> sin, y of %lld", iter,
           ops_dtype_name((ops_dtype)dt), c.unary.fn, bnd, (long long)opst_numel(&y));
  c.label = label;
  check_call(&c);
  free_call(&c);
}

void elementwise_chains(void **state) {
  (void)state;
  for (int i = 0; i < 30; ++i) chain_case(i);
}
