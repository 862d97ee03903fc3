/* The GPU op tests' call harness (gpu_call.h). */
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
#include "tests/support/coverage.h"
#include "tests/gpu/cuda_check.h"
#include "tests/support/opst.h"
#include "tests/support/gpu_call.h"

int g_have_cuda;
ops_handle g_cpu, g_gpu;
opst_rng g_rng;
int g_runs, g_refusals;

const int32_t kDtypes[3] = {OPS_DTYPE_F32, OPS_DTYPE_F16, OPS_DTYPE_BF16};

/* ---- one call, run on both backends ----------------------------------------------- */

void add_tensor(gcall *c, opst_tensor *t, int role, int alias) {
  assert_true(c->n < MAXT);
  const int i = c->n++;
  c->h[i] = t;
  c->role[i] = role;
  c->alias[i] = alias;
  c->has[i] = 1;
  if (role != IN) {
    opst_alloc(&c->ref[i], &g_rng, t->t.dtype, t->t.ndim, t->t.shape, OPST_CONTIGUOUS);
  }
}

/* A copy of x (buffer and view) for an output in place on x. */
void clone_tensor(opst_tensor *dst, const opst_tensor *src) {
  *dst = *src;
  dst->buf = malloc(src->bytes ? src->bytes : 1);
  dst->snap = malloc(src->bytes ? src->bytes : 1);
  memcpy(dst->buf, src->buf, src->bytes);
  memcpy(dst->snap, src->buf, src->bytes);
  dst->t.data = dst->buf + ((unsigned char *)src->t.data - src->buf);
}

ops_tensor relocated(const opst_tensor *x, void *mem) {
  ops_tensor d = x->t;
  d.data = (unsigned char *)mem + ((unsigned char *)x->t.data - x->buf);
  d.device = ops_device_cuda(0);
  return d;
}

/* Set while the GPU handle allows tf32: f32 results are then held to tf32's precision (inputs
 * rounded to 10-bit mantissas: ~5e-4 relative a product). */
int g_tf32;

double l2_tol(int32_t dt) {
  if (dt == OPS_DTYPE_F32) return g_tf32 ? 2e-3 : 1e-5;
  return dt == OPS_DTYPE_F16 ? 1e-3 : 5e-3;
}
double elem_tol(int32_t dt) {
  if (dt == OPS_DTYPE_F32) return g_tf32 ? 4e-3 : 1e-5;
  return dt == OPS_DTYPE_F16 ? 2e-3 : 1.6e-2;
}

/* out vs ref: |o - r| <= tol (|r| + s) per element, s the element's scale, else max |ref| (or
 * `floor` where max |ref| is below it), and the relative L2 error; NaN only where the reference
 * has NaN. */
int compare(const opst_tensor *out, const opst_tensor *ref, const double *scale, double floor, int use_l2,
            char *why, size_t n) {
  const int64_t count = opst_numel(out);
  const int32_t dt = out->t.dtype;
  double max_ref = 0.0, num = 0.0, den = 0.0;
  for (int64_t i = 0; i < count; ++i) {
    const double r = opst_at_flat(ref, i);
    if (isfinite(r) && fabs(r) > max_ref) max_ref = fabs(r);
  }
  const int floored = scale == NULL && max_ref < floor;
  for (int64_t i = 0; i < count; ++i) {
    const double o = opst_at_flat(out, i), r = opst_at_flat(ref, i);
    if (isnan(r) || isnan(o) || isinf(r) || isinf(o)) {
      if (!((isnan(r) && isnan(o)) || o == r)) {
        snprintf(why, n, "element %lld: got %g, want %g", (long long)i, o, r);
        return 0;
      }
      continue;
    }
    const double s = scale ? scale[i] : floored ? floor : max_ref;
    /* f16 results below 2^-14 are subnormal: their spacing is a fixed 2^-24 */
    const double bound = elem_tol(dt) * (fabs(r) + s) + (dt == OPS_DTYPE_F16 ? 0x1p-24 : 1e-30);
    if (fabs(o - r) > bound) {
      snprintf(why, n, "element %lld: got %.9g, want %.9g (|diff| %.3g > bound %.3g)", (long long)i, o, r,
               fabs(o - r), bound);
      return 0;
    }
    num += (o - r) * (o - r);
    den += scale || floored ? (fabs(r) + s) * (fabs(r) + s) : r * r; /* with scales: relative to what cancelled */
  }
  if (use_l2 && den > 0.0 && sqrt(num / den) > l2_tol(dt)) {
    snprintf(why, n, "relative L2 error %.3g > %.3g", sqrt(num / den), l2_tol(dt));
    return 0;
  }
  return 1;
}

/* The launch just run on g_gpu (its profiler is coverage.h's) is the kernel explain chose,
 * and took the launch plan explain named for it. */
static void launch_is_explained(const gcall *c, const char *kernel, const ops_explain *e, int launches_before) {
  OPST_OK(ops_handle_flush_profiler(g_gpu));
  char ran[64], plan[192];
  const int launches = opst_coverage_last_launch(ran, sizeof ran, plan, sizeof plan);
  if (launches == 0) return; /* no profiler on the handle: nothing recorded */
  assert_true(launches > launches_before);
  assert_true(e->chosen >= 0);
  const char *want = e->verdicts[e->chosen].kernel_name, *want_plan = e->plan[e->chosen] ? e->plan[e->chosen] : "";
  if (strcmp(ran, want) != 0 || strcmp(plan, want_plan) != 0) {
    print_error("%s [%s]: explain names %s (plan '%s'), the launch ran %s (plan '%s')\n", c->label,
                kernel ? kernel : "dispatcher", want, want_plan, ran, plan);
    fail();
  }
}

/* One GPU run of c on the current pin; returns 0 when the pinned kernel refused it. */
int gpu_run(gcall *c, void **mem, const char *kernel) {
  /* fresh inputs, poisoned outputs */
  for (int i = 0; i < c->n; ++i) {
    if (c->role[i] != IN && c->alias[i] < 0) memcpy(c->h[i]->buf, c->h[i]->snap, c->h[i]->bytes);
  }
  for (int i = 0; i < c->n; ++i) {
    if (c->alias[i] >= 0) continue;
    if (c->h[i]->bytes > 0) CUDA_OK(cudaMemcpy(mem[i], c->h[i]->buf, c->h[i]->bytes, cudaMemcpyHostToDevice));
    c->v[i] = relocated(c->h[i], mem[i]);
  }
  for (int i = 0; i < c->n; ++i) {
    if (c->alias[i] >= 0) c->v[i] = relocated(c->h[i], mem[c->alias[i]]);
  }
  size_t ws = 0;
  ops_status st = c->run(g_gpu, c, NULL, 0, &ws, NULL);
  if (st == OPS_ERR_UNSUPPORTED && kernel != NULL) {
    /* refused: the message names the kernel's reason, and the call itself writes nothing */
    if (c->op != OPS_OP_EW_CHAIN) assert_non_null(strstr(ops_last_error(), kernel));
    assert_int_equal(c->run(g_gpu, c, NULL, 0, NULL, NULL), OPS_ERR_UNSUPPORTED);
    CUDA_OK(cudaDeviceSynchronize());
    for (int i = 0; i < c->n; ++i) {
      if (c->role[i] == IN || c->alias[i] >= 0 || c->h[i]->bytes == 0) continue;
      CUDA_OK(cudaMemcpy(c->h[i]->buf, mem[i], c->h[i]->bytes, cudaMemcpyDeviceToHost));
      assert_true(opst_untouched(c->h[i]));
    }
    ++g_refusals;
    return 0;
  }
  if (st != OPS_OK) {
    print_error("%s [%s]: workspace query: %s: %s\n", c->label, kernel ? kernel : "dispatcher", ops_status_name(st),
                ops_last_error());
    fail();
  }
  ops_explain e; /* what explain says will run, and how */
  e.struct_size = sizeof e;
  const int explained = c->op != OPS_OP_EW_CHAIN;
  int launches_before = 0;
  if (explained) {
    OPST_OK(c->run(g_gpu, c, NULL, 0, NULL, &e));
    OPST_OK(ops_handle_flush_profiler(g_gpu));
    launches_before = opst_coverage_last_launch(NULL, 0, NULL, 0);
  }
  void *dws = NULL;
  if (ws > 0) {
    CUDA_OK(cudaMalloc(&dws, ws));
    CUDA_OK(cudaMemset(dws, 0xFF, ws)); /* NaN-filled: a kernel that reads before writing shows it */
  }
  st = c->run(g_gpu, c, dws, ws, NULL, NULL);
  if (st != OPS_OK) {
    print_error("%s [%s]: %s: %s\n", c->label, kernel ? kernel : "dispatcher", ops_status_name(st), ops_last_error());
    fail();
  }
  CUDA_OK(cudaDeviceSynchronize());
  CUDA_OK(cudaGetLastError());
  cudaFree(dws);
  if (explained && !e.empty) launch_is_explained(c, kernel, &e, launches_before);
  char why[256];
  for (int i = 0; i < c->n; ++i) {
    if (c->role[i] != OUT) continue;
    void *src = c->alias[i] >= 0 ? mem[c->alias[i]] : mem[i];
    if (c->h[i]->bytes > 0) CUDA_OK(cudaMemcpy(c->h[i]->buf, src, c->h[i]->bytes, cudaMemcpyDeviceToHost));
    if ((c->alias[i] < 0 && !opst_fully_written(c->h[i], why, sizeof why)) ||
        !compare(c->h[i], &c->ref[i], c->scale[i], c->scale_floor, !c->no_l2[i], why, sizeof why)) {
      print_error("%s [%s], output %d: %s\n", c->label, kernel ? kernel : "dispatcher's choice", i, why);
      fail();
    }
  }
  ++g_runs;
  return 1;
}

int is_contiguous(const ops_tensor *t) { return ops_tensor_is_contiguous(t); }

/* Without a device: which CUDA kernels would accept c on a described H100 (explain on a
 * virtual handle), noted for the coverage check; nothing runs on a GPU. */
void dry_call(gcall *c) {
  for (int i = 0; i < c->n; ++i) {
    c->v[i] = relocated(c->h[i], c->alias[i] >= 0 ? c->h[c->alias[i]]->buf : c->h[i]->buf);
  }
  ops_explain e;
  e.struct_size = sizeof e;
  if (c->op != OPS_OP_EW_CHAIN) {
    OPST_OK(c->run(g_gpu, c, NULL, 0, NULL, &e));
    if (e.chosen < 0) {
      print_error("%s: no CUDA kernel would accept it: %s\n", c->label, e.problem);
      fail();
    }
    for (int k = 0; k < e.count; ++k) {
      if (e.verdicts[k].reason == OPS_REASON_ELIGIBLE) opst_coverage_note(e.verdicts[k].kernel_name, e.problem);
    }
    return;
  }
  /* chains: each chain kernel pinned in turn; the features as the dispatcher derives them */
  const ops_tensor *y = &c->v[4], *b = &c->v[2];
  int bcast = b->ndim != y->ndim;
  for (int d = 0; !bcast && d < y->ndim; ++d) bcast = b->shape[d] != y->shape[d];
  const int strided = !is_contiguous(&c->v[0]) || !is_contiguous(b) || !is_contiguous(y);
  char problem[64];
  snprintf(problem, sizeof problem, "ew_chain [%s%s%s]", bcast ? "broadcast" : "", bcast && strided ? ", " : "",
           strided ? "strided" : "");
  for (int k = 0; k < ops_kernel_count(); ++k) {
    ops_kernel_info info;
    info.struct_size = sizeof info;
    OPST_OK(ops_kernel_info_at(k, &info));
    if (info.op != c->op || info.backend != OPS_DEVICE_CUDA) continue;
    OPST_OK(ops_handle_pin_kernel(g_gpu, info.name));
    OPST_OK(c->run(g_gpu, c, NULL, 0, NULL, &e));
    if (e.chosen >= 0) opst_coverage_note(info.name, problem);
  }
  OPST_OK(ops_handle_pin_kernel(g_gpu, NULL));
}

/* The CPU reference, then every CUDA kernel of the op pinned, then the dispatcher's pick. */
void check_call(gcall *c) {
  for (int i = 0; i < c->n; ++i) c->v[i] = c->role[i] == IN ? c->h[i]->t : c->ref[i].t;
  size_t ws = 0;
  OPST_OK(c->run(g_cpu, c, NULL, 0, &ws, NULL));
  void *hws = opst_workspace(ws);
  OPST_OK(c->run(g_cpu, c, hws, ws, NULL, NULL));
  free(hws);
  if (!g_have_cuda) {
    dry_call(c);
    return;
  }

  void *mem[MAXT] = {0};
  for (int i = 0; i < c->n; ++i) {
    if (c->alias[i] < 0 && c->h[i]->bytes > 0) CUDA_OK(cudaMalloc(&mem[i], c->h[i]->bytes));
  }
  int ran = 0;
  for (int k = 0; k < ops_kernel_count(); ++k) {
    ops_kernel_info info;
    info.struct_size = sizeof info;
    OPST_OK(ops_kernel_info_at(k, &info));
    if (info.op != c->op || info.backend != OPS_DEVICE_CUDA) continue;
    OPST_OK(ops_handle_pin_kernel(g_gpu, info.name));
    ran += gpu_run(c, mem, info.name);
  }
  OPST_OK(ops_handle_pin_kernel(g_gpu, NULL));
  if (ran == 0) {
    print_error("%s: no CUDA kernel accepted it\n", c->label);
    fail();
  }
  assert_int_equal(gpu_run(c, mem, NULL), 1);
  for (int i = 0; i < c->n; ++i) cudaFree(mem[i]);
}

/* Frees the call's references and every tensor the case handed it (add_tensor). */
void free_call(gcall *c) {
  for (int i = 0; i < c->n; ++i) {
    if (c->role[i] != IN) opst_free(&c->ref[i]);
    if (c->has[i]) opst_free(c->h[i]);
  }
}

/* ---- random shapes ----------------------------------------------------------------- */

/* `nd` leading extents whose product stays <= cap; now and then an extent of 0. */
void lead_shape(opst_rng *r, int nd, int64_t cap, int64_t *s) {
  int64_t left = cap < 1 ? 1 : cap;
  for (int i = 0; i < nd; ++i) {
    s[i] = opst_int(r, 1, left < 1 ? 1 : (left < 40 ? left : 40));
    if (i == nd - 1 && opst_chance(r, 0.5)) s[i] = opst_int(r, 1, left);
    left /= s[i];
  }
  if (nd > 0 && opst_chance(r, 0.03)) s[opst_int(r, 0, nd - 1)] = 0;
}

static const int64_t kCols[] = {1, 3, 8, 17, 64, 100, 256, 1000, 1024, 1032, 2048,
                                4096, 4104, 8192, 8200, 12000, 16384, 16392, 40000};

int64_t pick_cols(opst_rng *r) { return kCols[opst_int(r, 0, (int64_t)(sizeof kCols / sizeof kCols[0]) - 1)]; }

/* The case's layouts: 0 contiguous (the vec16 kernels' case), 1 rows padded by 8 elements
 * (aligned, not contiguous), 2 each tensor contiguous or randomly strided, 3 every other
 * element of the last axis (a stride of 2: the scalar kernels' case). */
int g_layout;

void pick_layout(void) {
  const double u = opst_uniform(&g_rng, 0, 1);
  g_layout = u < 0.4 ? 0 : u < 0.55 ? 1 : u < 0.8 ? 2 : 3;
}

void alloc_x(opst_tensor *t, int32_t dt, int nd, const int64_t *s) {
  if ((g_layout == 1 || g_layout == 3) && nd > 0) {
    int64_t wide[OPS_MAX_DIMS];
    memcpy(wide, s, (size_t)nd * sizeof s[0]);
    wide[nd - 1] = g_layout == 1 ? s[nd - 1] + 8 : 2 * s[nd - 1];
    opst_alloc(t, &g_rng, dt, nd, wide, OPST_CONTIGUOUS);
    t->t.shape[nd - 1] = s[nd - 1]; /* the view: part of each wide row */
    if (g_layout == 3) t->t.strides[nd - 1] = 2;
    return;
  }
  const int contiguous = g_layout == 0 || opst_chance(&g_rng, 0.5);
  opst_alloc(t, &g_rng, dt, nd, s, contiguous ? OPST_CONTIGUOUS : OPST_STRIDED);
}

/* Placeholder slots keep the tensor indices of run_norm fixed. */
static opst_tensor g_none;
void add_absent(gcall *c) {
  c->h[c->n] = &g_none;
  c->role[c->n] = IN;
  c->alias[c->n] = -1;
  c->has[c->n] = 0;
  ++c->n;
}
