/* The public ABI as C sees it: versions, status codes, dtypes, tensor helpers, DLPack. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "opslib/dlpack.h"
#include "opslib/opslib.h"
#include "tests/abi/abi_sizes.h"
#include "tests/support/opst.h"

_Static_assert(sizeof(ops_tensor) == OPST_SIZEOF_TENSOR, "ops_tensor layout");
_Static_assert(sizeof(ops_device_info) == OPST_SIZEOF_DEVICE_INFO, "ops_device_info layout");
_Static_assert(sizeof(ops_sdpa_params) == OPST_SIZEOF_SDPA_PARAMS, "ops_sdpa_params layout");
_Static_assert(sizeof(ops_gemm_params) == OPST_SIZEOF_GEMM_PARAMS, "ops_gemm_params layout");
_Static_assert(sizeof(ops_norm_params) == OPST_SIZEOF_NORM_PARAMS, "ops_norm_params layout");
_Static_assert(sizeof(ops_softmax_params) == OPST_SIZEOF_SOFTMAX_PARAMS, "ops_softmax_params");
_Static_assert(sizeof(ops_sin_affine_params) == OPST_SIZEOF_SIN_AFFINE_PARAMS, "sin_affine params");
_Static_assert(sizeof(ops_unary_params) == OPST_SIZEOF_UNARY_PARAMS, "ops_unary_params");
_Static_assert(sizeof(ops_binary_params) == OPST_SIZEOF_BINARY_PARAMS, "ops_binary_params");
_Static_assert(sizeof(ops_reduce_params) == OPST_SIZEOF_REDUCE_PARAMS, "ops_reduce_params");
_Static_assert(sizeof(ops_rope_params) == OPST_SIZEOF_ROPE_PARAMS, "ops_rope_params");
_Static_assert(sizeof(ops_kv_cache_append_params) == OPST_SIZEOF_KV_CACHE_APPEND_PARAMS, "kv_cache_append params");

static void version_matches_headers(void **state) {
  (void)state;
  assert_int_equal(ops_version(), OPS_VERSION_NUMBER);
  assert_string_equal(ops_version_string(), OPS_VERSION_STRING);
}

static void status_codes_keep_their_numbers_and_names(void **state) {
  (void)state;
  /* ABI: these values are shipped and never change. */
  static const struct {
    ops_status st;
    int value;
    const char *name;
  } k[] = {
      {OPS_OK, 0, "OPS_OK"},
      {OPS_ERR_INVALID_ARGUMENT, 1, "OPS_ERR_INVALID_ARGUMENT"},
      {OPS_ERR_NULL_POINTER, 2, "OPS_ERR_NULL_POINTER"},
      {OPS_ERR_STRUCT_SIZE, 3, "OPS_ERR_STRUCT_SIZE"},
      {OPS_ERR_DTYPE_MISMATCH, 4, "OPS_ERR_DTYPE_MISMATCH"},
      {OPS_ERR_SHAPE_MISMATCH, 5, "OPS_ERR_SHAPE_MISMATCH"},
      {OPS_ERR_BAD_NDIM, 6, "OPS_ERR_BAD_NDIM"},
      {OPS_ERR_BAD_SIZE, 7, "OPS_ERR_BAD_SIZE"},
      {OPS_ERR_ALIASING, 8, "OPS_ERR_ALIASING"},
      {OPS_ERR_MISALIGNED, 9, "OPS_ERR_MISALIGNED"},
      {OPS_ERR_DEVICE_MISMATCH, 10, "OPS_ERR_DEVICE_MISMATCH"},
      {OPS_ERR_UNSUPPORTED_DEVICE, 11, "OPS_ERR_UNSUPPORTED_DEVICE"},
      {OPS_ERR_WORKSPACE_TOO_SMALL, 12, "OPS_ERR_WORKSPACE_TOO_SMALL"},
      {OPS_ERR_UNSUPPORTED, 13, "OPS_ERR_UNSUPPORTED"},
      {OPS_ERR_CUDA, 14, "OPS_ERR_CUDA"},
      {OPS_ERR_OUT_OF_MEMORY, 15, "OPS_ERR_OUT_OF_MEMORY"},
      {OPS_ERR_INTERNAL, 16, "OPS_ERR_INTERNAL"},
      {OPS_ERR_IO, 17, "OPS_ERR_IO"},
  };
  for (size_t i = 0; i < sizeof k / sizeof k[0]; ++i) {
    assert_int_equal((int)k[i].st, k[i].value);
    assert_string_equal(ops_status_name(k[i].st), k[i].name);
    assert_true(strlen(ops_status_string(k[i].st)) > 0);
    assert_string_not_equal(ops_status_string(k[i].st), "unknown status");
  }
  assert_string_equal(ops_status_string((ops_status)999), "unknown status");
  assert_string_equal(ops_status_name((ops_status)999), "OPS_ERR_UNKNOWN");
}

static void enum_values_are_stable(void **state) {
  (void)state;
  assert_int_equal(OPS_DTYPE_F32, 1);
  assert_int_equal(OPS_DTYPE_F16, 2);
  assert_int_equal(OPS_DTYPE_BF16, 3);
  assert_int_equal(OPS_DTYPE_I32, 4);
  assert_int_equal(OPS_DTYPE_I64, 5);
  assert_int_equal(OPS_DTYPE_U8, 6);
  assert_int_equal(OPS_DTYPE_FP8_E4M3, 7);
  assert_int_equal(OPS_DTYPE_FP8_E5M2, 8);
  assert_int_equal(OPS_OP_SDPA, 1);
  assert_int_equal(OPS_OP_REDUCE, 9);
  assert_int_equal(OPS_OP_ROPE, 16);
  assert_int_equal(OPS_OP_KV_CACHE_APPEND, 17);
  assert_int_equal(OPS_OP_SDPA_BACKWARD, 18);
  assert_int_equal(OPS_ROPE_GPTJ, 1);
  assert_int_equal(OPS_ROPE_SCALING_LLAMA3, 2);
  assert_int_equal(OPS_ACT_GELU_ERF, 3);
  assert_int_equal(OPS_ACT_SIN, 10);
  assert_int_equal(OPS_BINARY_MIN, 5);
  assert_int_equal(OPS_REDUCE_MIN, 3);
  assert_int_equal(OPS_DEVICE_CUDA, 2);
  assert_int_equal(OPS_REASON_NOT_PINNED, 13);
  assert_int_equal(OPS_REASON_CLUSTER, 14);
  assert_int_equal(OPS_AUTOTUNE_OFF, 0);
  assert_int_equal(OPS_AUTOTUNE_MEASURE, 1);
  assert_int_equal(OPS_CHOICE_MODEL, 0);
  assert_int_equal(OPS_CHOICE_MEASURED, 1);
  assert_int_equal(OPS_CHOICE_TUNE_CACHE, 2);
  assert_int_equal(OPS_CHOICE_PINNED, 3);
  /* the structs that grew keep their first layout as a prefix */
  assert_int_equal(OPS_EXPLAIN_SIZE_V1, 7192);
  assert_int_equal(offsetof(ops_explain, verdicts), 280);
  assert_int_equal(offsetof(ops_profile_record, problem), 112);
  assert_int_equal(offsetof(ops_profile_record, choice), 120);
  assert_int_equal(offsetof(ops_kernel_info, cluster_blocks), offsetof(ops_kernel_info, vector_bytes) + 4);
  assert_int_equal(offsetof(ops_profile_record, launch_plan), 128);
  assert_int_equal(offsetof(ops_profile_record, cluster_blocks), 136);
  assert_int_equal(sizeof(ops_warp_role), 24);
  assert_int_equal(offsetof(ops_warp_role, work), 16);
}

static void dtype_sizes_and_names(void **state) {
  (void)state;
  assert_int_equal(ops_dtype_size(OPS_DTYPE_F32), 4);
  assert_int_equal(ops_dtype_size(OPS_DTYPE_BF16), 2);
  assert_int_equal(ops_dtype_size(OPS_DTYPE_I64), 8);
  assert_int_equal(ops_dtype_size(OPS_DTYPE_FP8_E4M3), 1);
  assert_int_equal(ops_dtype_size((ops_dtype)0), 0);
  assert_string_equal(ops_dtype_name(OPS_DTYPE_BF16), "bf16");
  assert_string_equal(ops_dtype_name((ops_dtype)42), "invalid");
}

static void last_error_is_cleared_by_a_success(void **state) {
  (void)state;
  ops_tensor t;
  const int64_t shape[1] = {-1};
  assert_int_equal(ops_tensor_init(&t, NULL, OPS_DTYPE_F32, ops_device_cpu(), 1, shape, NULL), OPS_ERR_BAD_SIZE);
  assert_non_null(strstr(ops_last_error(), "shape"));
  assert_non_null(strstr(ops_last_error(), "[-1]"));
  const int64_t ok_shape[1] = {0};
  assert_int_equal(ops_tensor_init(&t, NULL, OPS_DTYPE_F32, ops_device_cpu(), 1, ok_shape, NULL), OPS_OK);
  assert_string_equal(ops_last_error(), "");
}

static void tensor_init_checks_what_it_can(void **state) {
  (void)state;
  ops_tensor t;
  const int64_t shape[2] = {3, 4};
  assert_int_equal(ops_tensor_init(NULL, NULL, OPS_DTYPE_F32, ops_device_cpu(), 2, shape, NULL), OPS_ERR_NULL_POINTER);
  assert_int_equal(ops_tensor_init(&t, NULL, (ops_dtype)0, ops_device_cpu(), 2, shape, NULL), OPS_ERR_DTYPE_MISMATCH);
  assert_non_null(strstr(ops_last_error(), "got 0"));
  assert_int_equal(ops_tensor_init(&t, NULL, OPS_DTYPE_F32, ops_device_cpu(), 9, shape, NULL), OPS_ERR_BAD_NDIM);
  assert_non_null(strstr(ops_last_error(), "expected 0..8, got 9"));
  assert_int_equal(ops_tensor_init(&t, NULL, OPS_DTYPE_F32, ops_device_cpu(), 2, NULL, NULL), OPS_ERR_NULL_POINTER);
  const int64_t huge[2] = {INT64_MAX / 2, 4};
  assert_int_equal(ops_tensor_init(&t, NULL, OPS_DTYPE_F32, ops_device_cpu(), 2, huge, NULL), OPS_ERR_BAD_SIZE);
  const int64_t big[1] = {INT64_MAX / 4};
  const int64_t stride[1] = {8};
  assert_int_equal(ops_tensor_init(&t, NULL, OPS_DTYPE_F32, ops_device_cpu(), 1, big, stride), OPS_ERR_BAD_SIZE);
  assert_non_null(strstr(ops_last_error(), "byte span"));
  /* empty: numel is 0, but the contiguous strides of the other extents must still fit */
  const int64_t empty_huge[4] = {2, 4, INT64_MAX / 2, 0}; /* axis 0's stride would be 4 x (2^62 - 1) */
  assert_int_equal(ops_tensor_init(&t, NULL, OPS_DTYPE_F32, ops_device_cpu(), 4, empty_huge, NULL), OPS_ERR_BAD_SIZE);
  assert_non_null(strstr(ops_last_error(), "contiguous strides"));
  const int64_t empty_fits[3] = {INT64_MAX / 2, 4, 0}; /* strides 4, 1, 1: the outer extent multiplies none */
  assert_int_equal(ops_tensor_init(&t, NULL, OPS_DTYPE_F32, ops_device_cpu(), 3, empty_fits, NULL), OPS_OK);
  assert_int_equal(t.strides[0], 4);

  float data[12];
  assert_int_equal(ops_tensor_init(&t, data, OPS_DTYPE_F32, ops_device_cpu(), 2, shape, NULL), OPS_OK);
  assert_int_equal(t.struct_size, sizeof(ops_tensor));
  assert_int_equal(t.strides[0], 4);
  assert_int_equal(t.strides[1], 1);
  assert_int_equal(ops_tensor_numel(&t), 12);
  assert_true(ops_tensor_is_contiguous(&t));
  assert_int_equal(ops_tensor_numel(NULL), -1);

  ops_tensor s;
  assert_int_equal(ops_tensor_init(&s, NULL, OPS_DTYPE_F32, ops_device_cpu(), 0, NULL, NULL), OPS_OK);
  assert_int_equal(ops_tensor_numel(&s), 1); /* a scalar */
}

static void permute_makes_a_view(void **state) {
  (void)state;
  float data[2 * 3 * 4 * 5];
  const int64_t bhsd[4] = {2, 3, 4, 5};
  ops_tensor t, u;
  OPST_OK(ops_tensor_init(&t, data, OPS_DTYPE_F32, ops_device_cpu(), 4, bhsd, NULL));
  const int perm[4] = {0, 2, 1, 3};
  OPST_OK(ops_tensor_permute(&t, perm, &u));
  assert_int_equal(u.shape[1], 4);
  assert_int_equal(u.shape[2], 3);
  assert_int_equal(u.strides[1], 5);
  assert_int_equal(u.strides[2], 20);
  assert_ptr_equal(u.data, data);
  assert_false(ops_tensor_is_contiguous(&u));
  const int bad[4] = {0, 1, 1, 3};
  assert_int_equal(ops_tensor_permute(&t, bad, &u), OPS_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(ops_last_error(), "perm[2]"));
}

static void dlpack_views_are_converted_without_copy(void **state) {
  (void)state;
  float data[24];
  int64_t shape[3] = {2, 3, 4};
  int64_t strides[3] = {1, 2, 6}; /* column-major */
  DLTensor dl;
  memset(&dl, 0, sizeof dl);
  dl.data = data;
  dl.device.device_type = kDLCPU;
  dl.ndim = 3;
  dl.dtype.code = kDLFloat;
  dl.dtype.bits = 32;
  dl.dtype.lanes = 1;
  dl.shape = shape;
  dl.strides = strides;
  dl.byte_offset = 8;
  ops_tensor t;
  OPST_OK(ops_tensor_from_dlpack(&dl, &t));
  assert_ptr_equal(t.data, data + 2);
  assert_int_equal(t.dtype, OPS_DTYPE_F32);
  assert_int_equal(t.device.type, OPS_DEVICE_CPU);
  assert_int_equal(t.strides[2], 6);

  dl.strides = NULL; /* compact row-major */
  OPST_OK(ops_tensor_from_dlpack(&dl, &t));
  assert_int_equal(t.strides[0], 12);
  assert_int_equal(t.strides[2], 1);

  dl.device.device_type = kDLCUDA;
  dl.device.device_id = 3;
  OPST_OK(ops_tensor_from_dlpack(&dl, &t));
  assert_int_equal(t.device.type, OPS_DEVICE_CUDA);
  assert_int_equal(t.device.ordinal, 3);

  dl.dtype.code = kDLBfloat;
  dl.dtype.bits = 16;
  dl.byte_offset = 2;
  OPST_OK(ops_tensor_from_dlpack(&dl, &t));
  assert_int_equal(t.dtype, OPS_DTYPE_BF16);

  dl.byte_offset = 3; /* not a whole element */
  assert_int_equal(ops_tensor_from_dlpack(&dl, &t), OPS_ERR_MISALIGNED);
  dl.byte_offset = UINT64_MAX - 1; /* data + byte_offset wraps */
  assert_int_equal(ops_tensor_from_dlpack(&dl, &t), OPS_ERR_BAD_SIZE);
  assert_non_null(strstr(ops_last_error(), "byte_offset"));
  dl.byte_offset = 0;
  dl.dtype.lanes = 4;
  assert_int_equal(ops_tensor_from_dlpack(&dl, &t), OPS_ERR_DTYPE_MISMATCH);
  assert_non_null(strstr(ops_last_error(), "4 lanes"));
  dl.dtype.lanes = 1;
  dl.device.device_type = kDLVulkan;
  assert_int_equal(ops_tensor_from_dlpack(&dl, &t), OPS_ERR_UNSUPPORTED_DEVICE);
  dl.device.device_type = kDLCPU;
  dl.ndim = 9;
  assert_int_equal(ops_tensor_from_dlpack(&dl, &t), OPS_ERR_BAD_NDIM);
  assert_int_equal(ops_tensor_from_dlpack(NULL, &t), OPS_ERR_NULL_POINTER);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(version_matches_headers),
      cmocka_unit_test(status_codes_keep_their_numbers_and_names),
      cmocka_unit_test(enum_values_are_stable),
      cmocka_unit_test(dtype_sizes_and_names),
      cmocka_unit_test(last_error_is_cleared_by_a_success),
      cmocka_unit_test(tensor_init_checks_what_it_can),
      cmocka_unit_test(permute_makes_a_view),
      cmocka_unit_test(dlpack_views_are_converted_without_copy),
  };
  return cmocka_run_group_tests_name("abi_c", tests, NULL, NULL);
}
