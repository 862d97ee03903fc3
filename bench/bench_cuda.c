/* The shared GPU benchmark helpers of bench_cuda.h. */
#include "bench/bench_cuda.h"

#include <stdint.h>
#include <string.h>

__extension__ typedef _Float16 bench_half; /* gcc's IEEE half, for filling f16 buffers */

int bench_open(const char *name, ops_handle *h, cudaStream_t *stream) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    printf("%s: no CUDA device; nothing to measure\n", name);
    return 0;
  }
  CHECK_OPS(ops_handle_create(h, ops_device_cuda(0)));
  CHECK_CUDA(cudaStreamCreateWithFlags(stream, cudaStreamNonBlocking));
  CHECK_OPS(ops_handle_set_stream(*h, *stream));
  return 1;
}

void *bench_dev_fill(int32_t dtype, int64_t n, double lo, double hi, uint64_t seed) {
  const size_t es = ops_dtype_size((ops_dtype)dtype), bytes = (size_t)n * es;
  unsigned char *h = malloc(bytes ? bytes : 1);
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  for (int64_t i = 0; i < n; ++i) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    const float v = (float)(lo + (hi - lo) * (double)(s >> 40) / 16777216.0);
    uint32_t bits;
    memcpy(&bits, &v, 4);
    if (dtype == OPS_DTYPE_F32) {
      memcpy(h + 4 * i, &v, 4);
    } else if (dtype == OPS_DTYPE_BF16) {
      const uint16_t b = (uint16_t)((bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16);
      memcpy(h + 2 * i, &b, 2);
    } else {
      const bench_half f = (bench_half)v;
      memcpy(h + 2 * i, &f, 2);
    }
  }
  void *d = bench_dev_alloc(bytes);
  CHECK_CUDA(cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice));
  free(h);
  return d;
}

void *bench_dev_alloc(size_t bytes) {
  void *d = NULL;
  CHECK_CUDA(cudaMalloc(&d, bytes ? bytes : 1));
  return d;
}

double bench_time(opsb_state *s, void (*call)(void *ctx), void *ctx, cudaStream_t stream) {
  cudaEvent_t a, b;
  CHECK_CUDA(cudaEventCreate(&a));
  CHECK_CUDA(cudaEventCreate(&b));
  for (int i = 0; i < 3; ++i) call(ctx); /* warm-up */
  CHECK_CUDA(cudaEventRecord(a, stream));
  call(ctx);
  CHECK_CUDA(cudaEventRecord(b, stream));
  CHECK_CUDA(cudaEventSynchronize(b));
  float ms = 0.0f;
  CHECK_CUDA(cudaEventElapsedTime(&ms, a, b));
  int reps = (int)(2.0 / (ms > 1e-3f ? ms : 1e-3f)); /* >= ~2 ms per timed iteration */
  if (reps < 1) reps = 1;
  if (reps > 200) reps = 200;
  double total_s = 0.0;
  while (opsb_keep_running(s)) {
    CHECK_CUDA(cudaEventRecord(a, stream));
    for (int r = 0; r < reps; ++r) call(ctx);
    CHECK_CUDA(cudaEventRecord(b, stream));
    CHECK_CUDA(cudaEventSynchronize(b));
    CHECK_CUDA(cudaEventElapsedTime(&ms, a, b));
    const double sec = (double)ms * 1e-3 / reps;
    opsb_set_iteration_time(s, sec);
    total_s += sec;
  }
  CHECK_CUDA(cudaGetLastError());
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return total_s / (double)opsb_iterations(s);
}

double bench_copy_tbps(cudaStream_t stream) {
  const size_t bytes = 512u << 20;
  void *src = bench_dev_alloc(bytes), *dst = bench_dev_alloc(bytes);
  CHECK_CUDA(cudaMemset(src, 1, bytes));
  cudaEvent_t a, b;
  CHECK_CUDA(cudaEventCreate(&a));
  CHECK_CUDA(cudaEventCreate(&b));
  float ms = 0.0f, best = 1e30f;
  for (int i = 0; i < 20; ++i) {
    CHECK_CUDA(cudaEventRecord(a, stream));
    CHECK_CUDA(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream));
    CHECK_CUDA(cudaEventRecord(b, stream));
    CHECK_CUDA(cudaEventSynchronize(b));
    CHECK_CUDA(cudaEventElapsedTime(&ms, a, b));
    if (i >= 3 && ms < best) best = ms;
  }
  cudaFree(src), cudaFree(dst);
  cudaEventDestroy(a), cudaEventDestroy(b);
  return 2.0 * (double)bytes / (best * 1e-3) / 1e12;
}
