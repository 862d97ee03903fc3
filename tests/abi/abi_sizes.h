/* The sizes of the public structs on LP64, written down once: the C and the C++ test both
 * assert them, so the two languages see one layout and a change to the ABI is noticed. */
#ifndef OPSLIB_TESTS_ABI_ABI_SIZES_H_
#define OPSLIB_TESTS_ABI_ABI_SIZES_H_

#define OPST_SIZEOF_TENSOR 160
#define OPST_SIZEOF_DEVICE_INFO 152
#define OPST_SIZEOF_SDPA_PARAMS 72
#define OPST_SIZEOF_GEMM_PARAMS 40
#define OPST_SIZEOF_NORM_PARAMS 48
#define OPST_SIZEOF_SOFTMAX_PARAMS 8
#define OPST_SIZEOF_SIN_AFFINE_PARAMS 32
#define OPST_SIZEOF_UNARY_PARAMS 8
#define OPST_SIZEOF_BINARY_PARAMS 8
#define OPST_SIZEOF_REDUCE_PARAMS 16
#define OPST_SIZEOF_ROPE_PARAMS 56
#define OPST_SIZEOF_KV_CACHE_APPEND_PARAMS 24

#endif /* OPSLIB_TESTS_ABI_ABI_SIZES_H_ */
