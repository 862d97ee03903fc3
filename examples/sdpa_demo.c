/*
 * sdpa_demo: ops_sdpa called from plain C on generated data.
 *
 * Causal grouped-query attention (B=2, S=256, 8 query heads sharing 2 key/value heads,
 * head dim 64, bf16). It runs on the first CUDA device when one is usable and a CUDA
 * kernel of this build serves the call, else on the CPU backend, and says which and why.
 * It prints the kernel the dispatcher chose (ops_sdpa_explain), times the first call and the
 * steady state apart, and checks sampled rows (of the first call's output) against a
 * double-precision reference computed here. Exit status 0 when the check passes.
 */
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <opslib/opslib.h>

enum { B = 2, S = 256, HQ = 8, HKV = 2, D = 64 };

static uint16_t to_bf16(float f) { /* round to nearest even */
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return (uint16_t)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

static float from_bf16(uint16_t b) {
  const uint32_t u = (uint32_t)b << 16;
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

static uint64_t g_state = 0x243F6A8885A308D3ull;
static float next_uniform(void) { /* xorshift64*, in [-1, 1) */
  g_state ^= g_state >> 12;
  g_state ^= g_state << 25;
  g_state ^= g_state >> 27;
  return (float)((g_state * 0x2545F4914F6CDD1Dull) >> 40) / (float)(1u << 23) - 1.0f;
}

static double now_ms(void) {
  struct timespec ts;
  timespec_get(&ts, TIME_UTC);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* One output row of causal GQA attention in double, from the host copies. */
static void reference_row(const uint16_t *q, const uint16_t *k, const uint16_t *v, int b, int i, int h,
                          double *out) {
  const int g = h / (HQ / HKV);
  double s[S], mx = -INFINITY, sum = 0;
  for (int j = 0; j <= i; ++j) { /* causal: keys 0..i */
    double dot = 0;
    for (int d = 0; d < D; ++d) {
      dot += from_bf16(q[((b * S + i) * HQ + h) * D + d]) * from_bf16(k[((b * S + j) * HKV + g) * D + d]);
    }
    s[j] = dot / sqrt((double)D);
    if (s[j] > mx) mx = s[j];
  }
  for (int d = 0; d < D; ++d) out[d] = 0;
  for (int j = 0; j <= i; ++j) {
    const double p = exp(s[j] - mx);
    sum += p;
    for (int d = 0; d < D; ++d) out[d] += p * from_bf16(v[((b * S + j) * HKV + g) * D + d]);
  }
  for (int d = 0; d < D; ++d) out[d] /= sum;
}

#define CHECK(call)                                                                         \
  do {                                                                                      \
    const ops_status st_ = (call);                                                          \
    if (st_ != OPS_OK) {                                                                    \
      fprintf(stderr, "%s failed: %s: %s\n", #call, ops_status_name(st_), ops_last_error()); \
      return 1;                                                                             \
    }                                                                                       \
  } while (0)

int main(void) {
  const size_t nq = (size_t)B * S * HQ * D, nk = (size_t)B * S * HKV * D;
  uint16_t *q = malloc(nq * 2), *k = malloc(nk * 2), *v = malloc(nk * 2), *o = malloc(nq * 2);
  for (size_t i = 0; i < nq; ++i) q[i] = to_bf16(next_uniform());
  for (size_t i = 0; i < nk; ++i) k[i] = to_bf16(next_uniform());
  for (size_t i = 0; i < nk; ++i) v[i] = to_bf16(next_uniform());
  printf("opslib %s sdpa demo: B=%d S=%d Hq=%d Hkv=%d D=%d bf16, causal, GQA %d:1\n", ops_version_string(), B, S,
         HQ, HKV, D, HQ / HKV);

  const int64_t qs[4] = {B, S, HQ, D}, ks[4] = {B, S, HKV, D};
  ops_sdpa_params p;
  ops_sdpa_params_init(&p);
  p.causal = 1;
  ops_explain why;
  why.struct_size = sizeof why;

  /* The GPU when it can serve the call, else the CPU backend. */
  ops_handle h = NULL;
  int on_gpu = 0;
  void *dq = NULL, *dk = NULL, *dv = NULL, *dout = NULL;
  if (ops_cuda_device_count() > 0 && ops_handle_create(&h, ops_device_cuda(0)) == OPS_OK) {
    ops_device_info info;
    info.struct_size = sizeof info;
    CHECK(ops_handle_get_device_info(h, &info));
    ops_tensor tq, tk, to;
    CHECK(ops_tensor_init(&tq, NULL, OPS_DTYPE_BF16, ops_device_cuda(0), 4, qs, NULL));
    CHECK(ops_tensor_init(&tk, NULL, OPS_DTYPE_BF16, ops_device_cuda(0), 4, ks, NULL));
    CHECK(ops_tensor_init(&to, NULL, OPS_DTYPE_BF16, ops_device_cuda(0), 4, qs, NULL));
    CHECK(ops_sdpa_explain(h, &p, &tq, &tk, &tk, &to, NULL, &why));
    if (why.chosen >= 0) {
      on_gpu = 1;
      printf("device: cuda:0 %s (sm_%d, %d SMs)\n", info.name, info.sm_version, info.sm_count);
    } else {
      printf("device: cpu; cuda:0 %s is there, but no CUDA kernel of this build serves this call:\n", info.name);
      char text[4096];
      ops_explain_to_text(&why, text, sizeof text);
      printf("%s", text);
      ops_handle_destroy(h);
      h = NULL;
    }
  } else {
    printf("device: cpu (no usable CUDA device: the CPU backend runs)\n");
  }
  if (!on_gpu) CHECK(ops_handle_create(&h, ops_device_cpu()));

  const ops_device dev = on_gpu ? ops_device_cuda(0) : ops_device_cpu();
  if (on_gpu) {
    if (cudaMalloc(&dq, nq * 2) != cudaSuccess || cudaMalloc(&dk, nk * 2) != cudaSuccess ||
        cudaMalloc(&dv, nk * 2) != cudaSuccess || cudaMalloc(&dout, nq * 2) != cudaSuccess) {
      fprintf(stderr, "cudaMalloc failed\n");
      return 1;
    }
    cudaMemcpy(dq, q, nq * 2, cudaMemcpyHostToDevice);
    cudaMemcpy(dk, k, nk * 2, cudaMemcpyHostToDevice);
    cudaMemcpy(dv, v, nk * 2, cudaMemcpyHostToDevice);
  }
  ops_tensor tq, tk, tv, to;
  CHECK(ops_tensor_init(&tq, on_gpu ? dq : (void *)q, OPS_DTYPE_BF16, dev, 4, qs, NULL));
  CHECK(ops_tensor_init(&tk, on_gpu ? dk : (void *)k, OPS_DTYPE_BF16, dev, 4, ks, NULL));
  CHECK(ops_tensor_init(&tv, on_gpu ? dv : (void *)v, OPS_DTYPE_BF16, dev, 4, ks, NULL));
  CHECK(ops_tensor_init(&to, on_gpu ? dout : (void *)o, OPS_DTYPE_BF16, dev, 4, qs, NULL));
  CHECK(ops_sdpa_explain(h, &p, &tq, &tk, &tv, &to, NULL, &why));
  printf("kernel: %s (id %d), chosen among %d candidate(s)\n", why.verdicts[why.chosen].kernel_name,
         why.verdicts[why.chosen].kernel_id, why.count);

  size_t ws_bytes = 0;
  CHECK(ops_sdpa_workspace_size(h, &p, &tq, &tk, &tv, &to, NULL, &ws_bytes));
  void *ws = NULL;
  if (ws_bytes > 0) {
    if (on_gpu) {
      cudaMalloc(&ws, ws_bytes);
    } else {
      ws = aligned_alloc(16, (ws_bytes + 15) / 16 * 16);
    }
  }
  /* The first call includes loading the kernel's module; a framework pays it once. The
   * steady state is the mean of back-to-back calls between two CUDA events (host clock on
   * the CPU backend), after that first call. */
  const double t0 = now_ms();
  CHECK(ops_sdpa(h, &p, &tq, &tk, &tv, &to, NULL, ws, ws_bytes));
  if (on_gpu) {
    cudaDeviceSynchronize();
    cudaMemcpy(o, dout, nq * 2, cudaMemcpyDeviceToHost);
  }
  const double first_ms = now_ms() - t0;
  const int reps = on_gpu ? 200 : 3;
  double warm_ms = 0;
  if (on_gpu) {
    cudaEvent_t a, b;
    cudaEventCreate(&a), cudaEventCreate(&b);
    cudaEventRecord(a, NULL);
    for (int r = 0; r < reps; ++r) CHECK(ops_sdpa(h, &p, &tq, &tk, &tv, &to, NULL, ws, ws_bytes));
    cudaEventRecord(b, NULL);
    cudaEventSynchronize(b);
    float ms = 0;
    cudaEventElapsedTime(&ms, a, b);
    warm_ms = ms / reps;
    cudaEventDestroy(a), cudaEventDestroy(b);
  } else {
    const double t1 = now_ms();
    for (int r = 0; r < reps; ++r) CHECK(ops_sdpa(h, &p, &tq, &tk, &tv, &to, NULL, ws, ws_bytes));
    warm_ms = (now_ms() - t1) / reps;
  }
  const double flops = 4.0 * B * HQ * D * (S * (S + 1) / 2.0); /* causal: half the score matrix */
  printf("first call: %.3f ms (module loading included)\n", first_ms);
  printf("steady state: %.4f ms a call over %d back-to-back calls (%.2f TFLOP/s counting the causal half)\n",
         warm_ms, reps, flops / warm_ms / 1e9);

  /* Check 32 sampled rows against the reference: relative L2 error per row. */
  double worst = 0;
  for (int n = 0; n < 32; ++n) {
    const int b = n % B, h = (n * 5) % HQ, i = (n * 37 + 11) % S;
    double ref[D], num = 0, den = 0;
    reference_row(q, k, v, b, i, h, ref);
    for (int d = 0; d < D; ++d) {
      const double got = from_bf16(o[((b * S + i) * HQ + h) * D + d]);
      num += (got - ref[d]) * (got - ref[d]);
      den += ref[d] * ref[d];
    }
    const double rel = sqrt(num / (den > 0 ? den : 1));
    if (rel > worst || rel != rel) worst = rel;
  }
  const int ok = worst < 1e-2;
  printf("check: 32 rows against a double-precision reference, worst relative error %.2e: %s\n", worst,
         ok ? "OK" : "FAILED");
  if (on_gpu) {
    cudaFree(dq), cudaFree(dk), cudaFree(dv), cudaFree(dout), cudaFree(ws);
  } else {
    free(ws);
  }
  ops_handle_destroy(h);
  free(q), free(k), free(v), free(o);
  return ok ? 0 : 1;
}
