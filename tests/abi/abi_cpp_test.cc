// The public headers as C++: they compile warning-free and describe the same layout as in C.
#include <opslib/dlpack.h>
#include <opslib/opslib.h>

#include <cstdio>
#include <cstring>

#include "tests/abi/abi_sizes.h"

static_assert(sizeof(ops_tensor) == OPST_SIZEOF_TENSOR, "ops_tensor layout");
static_assert(sizeof(ops_device_info) == OPST_SIZEOF_DEVICE_INFO, "ops_device_info layout");
static_assert(sizeof(ops_sdpa_params) == OPST_SIZEOF_SDPA_PARAMS, "ops_sdpa_params layout");
static_assert(sizeof(ops_gemm_params) == OPST_SIZEOF_GEMM_PARAMS, "ops_gemm_params layout");
static_assert(sizeof(ops_norm_params) == OPST_SIZEOF_NORM_PARAMS, "ops_norm_params layout");
static_assert(sizeof(ops_softmax_params) == OPST_SIZEOF_SOFTMAX_PARAMS, "ops_softmax_params");
static_assert(sizeof(ops_sin_affine_params) == OPST_SIZEOF_SIN_AFFINE_PARAMS, "sin_affine params");
static_assert(sizeof(ops_unary_params) == OPST_SIZEOF_UNARY_PARAMS, "ops_unary_params");
static_assert(sizeof(ops_binary_params) == OPST_SIZEOF_BINARY_PARAMS, "ops_binary_params");
static_assert(sizeof(ops_reduce_params) == OPST_SIZEOF_REDUCE_PARAMS, "ops_reduce_params");
static_assert(sizeof(ops_rope_params) == OPST_SIZEOF_ROPE_PARAMS, "ops_rope_params");
static_assert(sizeof(ops_kv_cache_append_params) == OPST_SIZEOF_KV_CACHE_APPEND_PARAMS, "kv_cache_append params");

int main() {
  // Linking from C++ works: the declarations carry C linkage.
  ops_handle h = nullptr;
  if (ops_handle_create(&h, ops_device_cpu()) != OPS_OK) {
    std::printf("FAILED: ops_handle_create: %s\n", ops_last_error());
    return 1;
  }
  float x[3] = {1.0f, 2.0f, 3.0f}, y[3] = {0, 0, 0};
  const int64_t shape[1] = {3};
  ops_tensor tx, ty;
  ops_tensor_init(&tx, x, OPS_DTYPE_F32, ops_device_cpu(), 1, shape, nullptr);
  ops_tensor_init(&ty, y, OPS_DTYPE_F32, ops_device_cpu(), 1, shape, nullptr);
  ops_unary_params p;
  ops_unary_params_init(&p);
  p.fn = OPS_ACT_NEG;
  const ops_status st = ops_unary(h, &p, &tx, &ty, nullptr, 0);
  ops_handle_destroy(h);
  if (st != OPS_OK || y[0] != -1.0f || y[2] != -3.0f) {
    std::printf("FAILED: ops_unary from C++: %s\n", ops_last_error());
    return 1;
  }
  if (std::strcmp(ops_version_string(), OPS_VERSION_STRING) != 0) {
    std::printf("FAILED: version %s vs header %s\n", ops_version_string(), OPS_VERSION_STRING);
    return 1;
  }
  std::printf("[  PASSED  ] 1 test(s).\n");
  return 0;
}
