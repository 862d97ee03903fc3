// Host time per call from C, beside the CUDA launches it is made of: ops_sdpa (GQA 32:8, d 128:
// decode at B8 and B1, 1024 and 4096 keys, one launch or two; B1 causal prefill of 128 and 512
// tokens, the Hopper forward with its tensor maps) and ops_gemm (M16 N4096
// K4096) with their workspace queries, and empty kernels launched each way a launcher does
// (<<<>>>, cudaLaunchKernelEx plain, with the programmatic-serialization attribute, in
// clusters, with 68 KB of shared memory) and the runtime calls around them. Each figure is
// the median of 15 rounds of 200 calls issued behind a GPU spin (the GPU never waits on the
// host, nor the host on the GPU): the host's time alone. bf16, zeroed inputs.
//
// In the GPU bundle (gpu_bundle/jobs.sh host builds and runs it):
//   nvcc -O2 -std=c++17 -arch=sm_90a -Iinclude host_launch.cu -Llib -lopslib -o host_launch
//   LD_LIBRARY_PATH=lib ./host_launch [default]   (default: the legacy stream, else a new one)
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <algorithm>
#include <vector>

#include "opslib/opslib.h"

static __global__ void spin(long long cycles) {
  const long long t = clock64();
  while (clock64() - t < cycles) {
  }
}
static __global__ void empty_kernel(int) {}
static __global__ void smem_kernel(int) {
  extern __shared__ char buf[];
  if (threadIdx.x == 1000) buf[0] = 1;
}

static double now_us() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec * 1e-3;
}

template <class F> static double host_us(cudaStream_t s, F f) {
  for (int i = 0; i < 20; ++i) f();
  cudaStreamSynchronize(s);
  std::vector<double> r;
  for (int rep = 0; rep < 15; ++rep) {
    spin<<<1, 1, 0, s>>>(60000000LL); /* ~30 ms: every call below queues behind it */
    const double t0 = now_us();
    for (int i = 0; i < 200; ++i) f();
    r.push_back((now_us() - t0) / 200);
    cudaStreamSynchronize(s);
  }
  std::sort(r.begin(), r.end());
  return r[r.size() / 2];
}

#define CHECK(x)                                                                   \
  do {                                                                             \
    const ops_status st_ = (x);                                                    \
    if (st_ != OPS_OK) {                                                           \
      fprintf(stderr, "%s: %s: %s\n", #x, ops_status_name(st_), ops_last_error()); \
      exit(1);                                                                     \
    }                                                                              \
  } while (0)

static ops_tensor device_tensor(int ndim, const int64_t *shape, void **mem) {
  size_t n = 2;
  for (int i = 0; i < ndim; ++i) n *= (size_t)shape[i];
  if (cudaMalloc(mem, n) != cudaSuccess || cudaMemset(*mem, 0, n) != cudaSuccess) exit(1);
  ops_tensor t;
  CHECK(ops_tensor_init(&t, *mem, OPS_DTYPE_BF16, ops_device_cuda(0), ndim, shape, NULL));
  return t;
}

/* One ops_sdpa row: GQA 32:8, d 128, B x Sq queries against B x Sk keys. */
static void sdpa_row(ops_handle h, cudaStream_t s, const char *what, int64_t b, int64_t sq, int64_t sk,
                     int causal) {
  const int64_t qs[4] = {b, sq, 32, 128}, ks[4] = {b, sk, 8, 128};
  void *m[4], *w = NULL;
  ops_tensor q = device_tensor(4, qs, &m[0]), o = device_tensor(4, qs, &m[1]);
  ops_tensor k = device_tensor(4, ks, &m[2]), v = device_tensor(4, ks, &m[3]);
  ops_sdpa_params p;
  ops_sdpa_params_init(&p);
  p.causal = causal;
  size_t ws = 0;
  CHECK(ops_sdpa_workspace_size(h, &p, &q, &k, &v, &o, NULL, &ws));
  if (ws > 0 && cudaMalloc(&w, ws) != cudaSuccess) exit(1);
  CHECK(ops_sdpa(h, &p, &q, &k, &v, &o, NULL, w, ws));
  ops_explain e;
  e.struct_size = sizeof e;
  CHECK(ops_sdpa_explain(h, &p, &q, &k, &v, &o, NULL, &e));
  const double run = host_us(s, [&] { ops_sdpa(h, &p, &q, &k, &v, &o, NULL, w, ws); });
  const double query = host_us(s, [&] {
    size_t x;
    ops_sdpa_workspace_size(h, &p, &q, &k, &v, &o, NULL, &x);
  });
  printf("ops_sdpa %s B%lld S%lld kv%lld (%s: %s)  %.2f us, workspace query %.2f us\n", what, (long long)b,
         (long long)sq, (long long)sk, e.chosen >= 0 ? e.verdicts[e.chosen].kernel_name : "-",
         e.chosen >= 0 && e.plan[e.chosen] ? e.plan[e.chosen] : "", run, query);
  for (void *p_ : m) cudaFree(p_);
  if (w) cudaFree(w);
}

/* decode (the split kernels: one launch or two), then causal prefill (the Hopper forward,
 * whose launch encodes a tensor map of each of Q, K, V and, where O is stored by TMA, O) */
static void sdpa_rows(ops_handle h, cudaStream_t s) {
  for (int64_t b : {8, 1}) {
    for (int64_t kv : {1024, 4096}) sdpa_row(h, s, "decode", b, 1, kv, 0);
  }
  for (int64_t n : {128, 512}) sdpa_row(h, s, "causal prefill", 1, n, n, 1);
}

static void gemm_row(ops_handle h, cudaStream_t s) {
  const int64_t as[2] = {16, 4096}, bs[2] = {4096, 4096};
  void *m[3], *w = NULL;
  ops_tensor a = device_tensor(2, as, &m[0]), b = device_tensor(2, bs, &m[1]), d = device_tensor(2, as, &m[2]);
  ops_gemm_params p;
  ops_gemm_params_init(&p);
  size_t ws = 0;
  CHECK(ops_gemm_workspace_size(h, &p, &a, &b, &d, &ws));
  if (ws > 0 && cudaMalloc(&w, ws) != cudaSuccess) exit(1);
  CHECK(ops_gemm(h, &p, &a, &b, &d, w, ws));
  const double run = host_us(s, [&] { ops_gemm(h, &p, &a, &b, &d, w, ws); });
  const double query = host_us(s, [&] {
    size_t x;
    ops_gemm_workspace_size(h, &p, &a, &b, &d, &x);
  });
  printf("ops_gemm M16 N4096 K4096  %.2f us, workspace query %.2f us\n", run, query);
  for (void *p_ : m) cudaFree(p_);
  if (w) cudaFree(w);
}

static void launch_rows(cudaStream_t s) {
  printf("<<<1, 32>>> empty  %.2f us\n", host_us(s, [&] { empty_kernel<<<1, 32, 0, s>>>(0); }));
  cudaLaunchConfig_t lc = {};
  lc.gridDim = dim3(1), lc.blockDim = dim3(32), lc.stream = s;
  printf("cudaLaunchKernelEx empty  %.2f us\n", host_us(s, [&] { cudaLaunchKernelEx(&lc, empty_kernel, 0); }));
  cudaLaunchAttribute at[1];
  at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  at[0].val.programmaticStreamSerializationAllowed = 1;
  lc.attrs = at, lc.numAttrs = 1;
  printf("cudaLaunchKernelEx empty, programmatic serialization  %.2f us\n",
         host_us(s, [&] { cudaLaunchKernelEx(&lc, empty_kernel, 0); }));
  printf("two: <<<>>> then the programmatic one  %.2f us\n", host_us(s, [&] {
           empty_kernel<<<1, 32, 0, s>>>(0);
           cudaLaunchKernelEx(&lc, empty_kernel, 0);
         }));
  const int smem = 68 * 1024;
  cudaFuncSetAttribute(smem_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  printf("<<<256, 128, 68 KB>>>  %.2f us\n", host_us(s, [&] { smem_kernel<<<256, 128, smem, s>>>(0); }));
  lc.gridDim = dim3(256), lc.blockDim = dim3(128), lc.dynamicSmemBytes = smem, lc.numAttrs = 0;
  printf("cudaLaunchKernelEx 256 x 128, 68 KB  %.2f us\n", host_us(s, [&] { cudaLaunchKernelEx(&lc, smem_kernel, 0); }));
  at[0].id = cudaLaunchAttributeClusterDimension;
  at[0].val.clusterDim.y = at[0].val.clusterDim.z = 1;
  lc.numAttrs = 1;
  for (unsigned c : {4u, 8u}) {
    at[0].val.clusterDim.x = c;
    printf("cudaLaunchKernelEx 256 x 128, 68 KB, clusters of %u  %.2f us\n", c,
           host_us(s, [&] { cudaLaunchKernelEx(&lc, smem_kernel, 0); }));
  }
  printf("cudaFuncSetAttribute (max dynamic shared memory)  %.2f us\n", host_us(s, [&] {
           cudaFuncSetAttribute(smem_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
         }));
  printf("cudaGetDevice  %.3f us\n", host_us(s, [&] {
           int d;
           cudaGetDevice(&d);
         }));
  printf("cudaGetLastError  %.3f us\n", host_us(s, [&] { cudaGetLastError(); }));
}

int main(int argc, char **argv) {
  if (ops_cuda_device_count() == 0) {
    printf("host_launch: no CUDA device\n");
    return 0;
  }
  const bool legacy = argc > 1 && strcmp(argv[1], "default") == 0;
  cudaStream_t s = 0;
  if (!legacy && cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess) return 1;
  ops_handle h;
  CHECK(ops_handle_create(&h, ops_device_cuda(0)));
  CHECK(ops_handle_set_stream(h, s));
  printf("host_launch: opslib %s, %s stream, 200 calls x 15 rounds behind a GPU spin (median)\n",
         ops_version_string(), legacy ? "the legacy default" : "a non-blocking");
  sdpa_rows(h, s);
  gemm_row(h, s);
  launch_rows(s);
  ops_handle_destroy(h);
  if (!legacy) cudaStreamDestroy(s);
  return 0;
}
