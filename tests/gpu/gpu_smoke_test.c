/*
 * The GPU smoke test: on a CUDA host it proves that this build's device code runs there
 * (a kernel from the project's nvcc rule), that a CUDA handle reads the device, and that
 * ops on CUDA tensors are dispatched and, where no CUDA kernel serves them (f32 SDPA; an f32
 * GEMM batch past the portable kernels' grid), refused with OPS_ERR_UNSUPPORTED and a reason per candidate, with device memory untouched.
 * And that the launchers' shared-memory opt-in holds once per context. Without a CUDA device
 * every test is skipped and says why.
 */
#include <cuda_runtime_api.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/launch.h"
#include "opslib/opslib.h"
#include "tests/gpu/cuda_check.h"
#include "tests/support/opst.h"

int opst_gpu_affine(const float *x, float *y, int n, float a, float b, void *stream);
const void *opst_gpu_smem_kernel(void);
int opst_gpu_smem_launch(float *y, int bytes, void *stream);

static int g_have_cuda;

#define REQUIRE_GPU()        \
  do {                       \
    if (!g_have_cuda) {      \
      skip();                \
    }                        \
  } while (0)

static void handle_reads_the_device(void **state) {
  (void)state;
  REQUIRE_GPU();
  ops_handle h = NULL;
  OPST_OK(ops_handle_create(&h, ops_device_cuda(0)));
  ops_device_info info;
  info.struct_size = sizeof info;
  OPST_OK(ops_handle_get_device_info(h, &info));
  printf("[ DEVICE   ] %s: sm_%d (running sm_%d code), %d SMs, %lld KiB smem/block opt-in, %lld MiB L2\n",
         info.name, info.sm_version, info.code_sm, info.sm_count, (long long)(info.smem_per_block_optin / 1024),
         (long long)(info.l2_bytes >> 20));
  assert_true(info.sm_count > 0);
  assert_true(info.code_sm > 0 && info.code_sm <= info.sm_version);
  if (info.sm_version == 90) {
    /* The default arch list carries sm_90a machine code: Hopper must run it, not sm_80. */
    assert_int_equal(info.code_sm, 90);
  }
  cudaStream_t s;
  CUDA_OK(cudaStreamCreate(&s));
  OPST_OK(ops_handle_set_stream(h, s));
  void *got = NULL;
  OPST_OK(ops_handle_get_stream(h, &got));
  assert_ptr_equal(got, s);
  CUDA_OK(cudaStreamDestroy(s));
  OPST_OK(ops_handle_destroy(h));
}

static void build_runs_its_own_device_code(void **state) {
  (void)state;
  REQUIRE_GPU();
  enum { N = 100003 };
  float *hx = malloc(N * sizeof(float)), *hy = malloc(N * sizeof(float));
  for (int i = 0; i < N; ++i) hx[i] = (float)(i % 1000) * 0.25f;
  float *dx, *dy;
  CUDA_OK(cudaMalloc((void **)&dx, N * sizeof(float)));
  CUDA_OK(cudaMalloc((void **)&dy, N * sizeof(float)));
  CUDA_OK(cudaMemcpy(dx, hx, N * sizeof(float), cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemset(dy, 0xFF, N * sizeof(float)));
  assert_int_equal(opst_gpu_affine(dx, dy, N, 2.0f, 1.0f, NULL), 0);
  CUDA_OK(cudaDeviceSynchronize());
  CUDA_OK(cudaMemcpy(hy, dy, N * sizeof(float), cudaMemcpyDeviceToHost));
  for (int i = 0; i < N; ++i) {
    if (hy[i] != 2.0f * hx[i] + 1.0f) {
      print_error("y[%d] = %g, want %g\n", i, (double)hy[i], 2.0 * hx[i] + 1.0);
      fail();
    }
  }
  cudaFree(dx);
  cudaFree(dy);
  free(hx);
  free(hy);
}

/* A device buffer poisoned with 0xA5 bytes, described as a tensor on cuda:0. */
static void *device_tensor(ops_tensor *t, int32_t dtype, int ndim, const int64_t *shape) {
  int64_t n = 1;
  for (int i = 0; i < ndim; ++i) n *= shape[i];
  const size_t bytes = (size_t)n * ops_dtype_size((ops_dtype)dtype);
  void *p = NULL;
  CUDA_OK(cudaMalloc(&p, bytes));
  CUDA_OK(cudaMemset(p, 0xA5, bytes));
  OPST_OK(ops_tensor_init(t, p, (ops_dtype)dtype, ops_device_cuda(0), ndim, shape, NULL));
  return p;
}

static int still_poisoned(const void *p, size_t bytes) {
  unsigned char *h = malloc(bytes);
  CUDA_OK(cudaMemcpy(h, p, bytes, cudaMemcpyDeviceToHost));
  int ok = 1;
  for (size_t i = 0; i < bytes; ++i) ok = ok && h[i] == 0xA5;
  free(h);
  return ok;
}

static void ops_without_cuda_kernels_are_refused_cleanly(void **state) {
  (void)state;
  REQUIRE_GPU();
  ops_handle h = NULL;
  OPST_OK(ops_handle_create(&h, ops_device_cuda(0)));
  const int64_t qs[4] = {2, 64, 4, 64}, rs[2] = {128, 256}, ws[1] = {256}, bs[2] = {256, 128}, cs[2] = {128, 128};
  ops_tensor q, o, x, y, w, b, d;
  /* SDPA has CUDA kernels for f16 / bf16; f32 has none */
  void *pq = device_tensor(&q, OPS_DTYPE_F32, 4, qs), *po = device_tensor(&o, OPS_DTYPE_F32, 4, qs);
  void *px = device_tensor(&x, OPS_DTYPE_F32, 2, rs), *py = device_tensor(&y, OPS_DTYPE_F32, 2, rs);
  void *pw = device_tensor(&w, OPS_DTYPE_F32, 1, ws), *pb = device_tensor(&b, OPS_DTYPE_F32, 2, bs);
  void *pd = device_tensor(&d, OPS_DTYPE_F32, 2, cs);
  /* GEMM has CUDA kernels; an f32 batch past the portable kernels' grid (65535) has none */
  const int64_t gas[3] = {70000, 2, 2}, gbs[2] = {2, 2};
  ops_tensor ga, gb, gd;
  void *pga = device_tensor(&ga, OPS_DTYPE_F32, 3, gas), *pgb = device_tensor(&gb, OPS_DTYPE_F32, 2, gbs);
  void *pgd = device_tensor(&gd, OPS_DTYPE_F32, 3, gas);
  struct {
    const char *what;
    ops_status st;
    void *out;
    size_t bytes;
  } calls[] = {
      {"sdpa (f32)", ops_sdpa(h, NULL, &q, &q, &q, &o, NULL, NULL, 0), po, 2 * 64 * 4 * 64 * 4},
      {"gemm (f32, batch 70000)", ops_gemm(h, NULL, &ga, &gb, &gd, NULL, 0), pgd, 70000 * 4 * 4},
  };
  for (size_t i = 0; i < sizeof calls / sizeof calls[0]; ++i) {
    if (calls[i].st != OPS_ERR_UNSUPPORTED) {
      print_error("%s on cuda: expected OPS_ERR_UNSUPPORTED (no CUDA kernel of this build serves it), got %s\n",
                  calls[i].what, ops_status_name(calls[i].st));
      fail();
    }
    assert_true(still_poisoned(calls[i].out, calls[i].bytes));
  }
  /* The message lists each candidate and its reason. */
  assert_int_equal(ops_gemm(h, NULL, &x, &y, &y, NULL, 0), OPS_ERR_SHAPE_MISMATCH); /* K 256 vs 128 */
  assert_int_equal(ops_gemm(h, NULL, &ga, &gb, &gd, NULL, 0), OPS_ERR_UNSUPPORTED);
  assert_non_null(strstr(ops_last_error(), "cpu_gemm_ref [backend]: runs on cpu, the handle's device is cuda"));
  /* Host tensors with a CUDA handle are a device mismatch. */
  float host[256];
  ops_tensor th;
  OPST_OK(ops_tensor_init(&th, host, OPS_DTYPE_F32, ops_device_cpu(), 1, ws, NULL));
  assert_int_equal(ops_unary(h, NULL, &th, &w, NULL, 0), OPS_ERR_DEVICE_MISMATCH);
  assert_non_null(strstr(ops_last_error(), "expected cuda:0 (the handle's), got cpu"));
  cudaFree(pq), cudaFree(po), cudaFree(px), cudaFree(py), cudaFree(pw), cudaFree(pb), cudaFree(pd);
  cudaFree(pga), cudaFree(pgb), cudaFree(pgd);
  OPST_OK(ops_handle_destroy(h));
}

static int g_records;
static void count_records(const ops_profile_record *r, void *user) {
  (void)r;
  (void)user;
  ++g_records;
}

/* Dispatcher paths on a real CUDA handle: explain, pins, the profiler's CUDA events. */
static void dispatcher_on_a_cuda_handle(void **state) {
  (void)state;
  REQUIRE_GPU();
  ops_handle h = NULL;
  OPST_OK(ops_handle_create(&h, ops_device_cuda(0)));
  OPST_OK(ops_handle_set_profiler(h, count_records, NULL)); /* creates the event ring */
  const int64_t xs[2] = {64, 1024}, ws[1] = {1024};
  ops_tensor x, w;
  void *px = device_tensor(&x, OPS_DTYPE_BF16, 2, xs), *pw = device_tensor(&w, OPS_DTYPE_BF16, 1, ws);
  ops_explain e;
  e.struct_size = sizeof e;
  OPST_OK(ops_rmsnorm_explain(h, NULL, &x, &w, &x, &e));
  assert_true(e.chosen >= 0);
  assert_int_equal(e.verdicts[0].reason, OPS_REASON_BACKEND);
  /* the model's choice is the one explain gives for a described device of the same SM and SM
   * count (which kernel that is, the calibration decides) */
  ops_device_info info;
  info.struct_size = sizeof info;
  OPST_OK(ops_handle_get_device_info(h, &info));
  ops_handle described = NULL;
  OPST_OK(ops_handle_create_virtual(&described, &info));
  ops_explain ev;
  ev.struct_size = sizeof ev;
  OPST_OK(ops_rmsnorm_explain(described, NULL, &x, &w, &x, &ev));
  assert_string_equal(e.verdicts[e.chosen].kernel_name, ev.verdicts[ev.chosen].kernel_name);
  assert_true(strncmp(e.verdicts[e.chosen].kernel_name, "cuda_rmsnorm_", 13) == 0);
  OPST_OK(ops_handle_destroy(described));
  char text[4096];
  ops_explain_to_text(&e, text, sizeof text);
  assert_non_null(strstr(text, "on cuda sm_"));
  OPST_OK(ops_handle_pin_kernel(h, "cpu_rmsnorm_ref")); /* a pin that cannot serve a CUDA call */
  assert_int_equal(ops_rmsnorm(h, NULL, &x, &w, &x, NULL, 0), OPS_ERR_UNSUPPORTED);
  assert_true(still_poisoned(px, 64 * 1024 * 2));
  OPST_OK(ops_handle_flush_profiler(h));
  assert_int_equal(g_records, 0); /* nothing ran, nothing recorded */
  OPST_OK(ops_handle_pin_kernel(h, NULL));
  OPST_OK(ops_rmsnorm(h, NULL, &x, &w, &x, NULL, 0)); /* runs; its record arrives at the flush */
  OPST_OK(ops_handle_flush_profiler(h));
  assert_int_equal(g_records, 1);
  cudaFree(px), cudaFree(pw);
  OPST_OK(ops_handle_destroy(h)); /* destroys the event ring */
}

/* The launchers' shared-memory opt-in (core/launch.h's opsi_cuda_smem_optin) sets a kernel's
 * limit once per context: a kernel's default limit is under 64 KB, and after the opt-in a
 * 64 KB launch runs (no launch is made to fail: the sanitizers count that as an error); a smaller
 * request keeps the larger limit, a larger one raises it; in a new context (after
 * cudaDeviceReset) the opt-in holds again (the runtime keeps the limit across contexts, and
 * the opt-in's table sets it there once more). Last in the list: it resets the device. */
static int max_dynamic_smem(const void *fn) {
  struct cudaFuncAttributes a;
  CUDA_OK(cudaFuncGetAttributes(&a, fn));
  return a.maxDynamicSharedSizeBytes;
}

static void shared_memory_opt_in_is_kept_per_context(void **state) {
  (void)state;
  REQUIRE_GPU();
  CUDA_OK(cudaSetDevice(0));
  const void *fn = opst_gpu_smem_kernel();
  float *y = NULL;
  CUDA_OK(cudaMalloc((void **)&y, sizeof(float)));
  const int big = 64 * 1024;
  assert_true(max_dynamic_smem(fn) < big); /* the default: 48 KB (a launch over it fails) */
  assert_int_equal(opsi_cuda_smem_optin(fn, big), 0);
  assert_int_equal(max_dynamic_smem(fn), big);
  assert_int_equal(opst_gpu_smem_launch(y, big, NULL), 0);
  assert_int_equal(opsi_cuda_smem_optin(fn, 32 * 1024), 0);
  assert_int_equal(max_dynamic_smem(fn), big);
  assert_int_equal(opsi_cuda_smem_optin(fn, 96 * 1024), 0);
  assert_int_equal(max_dynamic_smem(fn), 96 * 1024);
  assert_int_equal(opst_gpu_smem_launch(y, 96 * 1024, NULL), 0);
  CUDA_OK(cudaDeviceSynchronize());
  CUDA_OK(cudaFree(y));
  CUDA_OK(cudaDeviceReset());
  CUDA_OK(cudaMalloc((void **)&y, sizeof(float)));
  assert_int_equal(opsi_cuda_smem_optin(fn, big), 0);
  assert_int_equal(max_dynamic_smem(fn), big);
  assert_int_equal(opst_gpu_smem_launch(y, big, NULL), 0);
  float got = 0.0f;
  CUDA_OK(cudaMemcpy(&got, y, sizeof got, cudaMemcpyDeviceToHost));
  assert_true(got == 31.0f);
  CUDA_OK(cudaFree(y));
}

static int setup(void **state) {
  (void)state;
  g_have_cuda = opst_have_cuda("gpu_smoke");
  return 0;
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(handle_reads_the_device),
      cmocka_unit_test(build_runs_its_own_device_code),
      cmocka_unit_test(ops_without_cuda_kernels_are_refused_cleanly),
      cmocka_unit_test(dispatcher_on_a_cuda_handle),
      cmocka_unit_test(shared_memory_opt_in_is_kept_per_context),
  };
  return cmocka_run_group_tests_name("gpu_smoke", tests, setup, NULL);
}
