/*
 * The CUDA attention kernels, listed once. Each list entry is one kernel with one capability
 * row and one launcher (extern "C" opsi_sdpa_cuda_<family>_<NAME>), built for every dtype of
 * OPSI_SDPA_DTYPES as one explicit instantiation a source file,
 * kernels/flash/sdpa_<family>_<dtype>_<NAME>.cu, which tools/gen_kernel_sources.py writes from
 * these lists (//tests/tools:kernel_sources_test fails when the files and the lists differ).
 * The rows (capabilities/sdpa_rows.c), the prototypes (sdpa_cuda.h), the launchers and their
 * extern template declarations (sdpa_cuda_launch.cu) expand the same lists.
 */
#ifndef OPSLIB_KERNELS_FLASH_SDPA_KERNELS_H_
#define OPSLIB_KERNELS_FLASH_SDPA_KERNELS_H_

/* X(SUFFIX, T): the element types every attention kernel is built for */
#define OPSI_SDPA_DTYPES(X) X(bf16, __nv_bfloat16) X(f16, __half)

/* X(ID, NAME, DP): sdpa_mma.cuh, any SM >= 80, head dims up to DP */
#define OPSI_SDPA_MMA_KERNELS(X)                \
  X(OPSI_KERNEL_CUDA_SDPA_MMA_D64, d64, 64)     \
  X(OPSI_KERNEL_CUDA_SDPA_MMA_D128, d128, 128)  \
  X(OPSI_KERNEL_CUDA_SDPA_MMA_D256, d256, 256)

/* X(ID, NAME, SHAPE, DP, CL): sdpa_sm90.cuh, sm_90a, the shape OPSI_SDPA_SM90_<SHAPE>_*
 * (sdpa_sm90_shape.h), head dims up to DP, clusters of CL blocks (the _pair kernels share each
 * K / V tile by TMA multicast). Row order is rank order on ties. */
#define OPSI_SDPA_SM90_KERNELS(X)                                     \
  X(OPSI_KERNEL_CUDA_SDPA_SM90_D64_PAIR, d64_pair, D64, 64, 2)        \
  X(OPSI_KERNEL_CUDA_SDPA_SM90_D128_PAIR, d128_pair, D128, 128, 2)    \
  X(OPSI_KERNEL_CUDA_SDPA_SM90_D64, d64, D64, 64, 1)                  \
  X(OPSI_KERNEL_CUDA_SDPA_SM90_D64_M128, d64_m128, D64_M128, 64, 1)   \
  X(OPSI_KERNEL_CUDA_SDPA_SM90_D128, d128, D128, 128, 1)              \
  X(OPSI_KERNEL_CUDA_SDPA_SM90_D256, d256, D256, 256, 1)

/* X(ID, NAME, DP, BM): sdpa_split.cuh, any SM >= 80, head dims up to DP, BM packed query rows
 * (query rows x the query heads of a KV head) a block, keys split across blocks. */
#define OPSI_SDPA_SPLIT_KERNELS(X)                             \
  X(OPSI_KERNEL_CUDA_SDPA_SPLIT_D64_M16, d64_m16, 64, 16)     \
  X(OPSI_KERNEL_CUDA_SDPA_SPLIT_D64_M64, d64_m64, 64, 64)     \
  X(OPSI_KERNEL_CUDA_SDPA_SPLIT_D128_M16, d128_m16, 128, 16)  \
  X(OPSI_KERNEL_CUDA_SDPA_SPLIT_D128_M64, d128_m64, 128, 64)  \
  X(OPSI_KERNEL_CUDA_SDPA_SPLIT_D256_M16, d256_m16, 256, 16)  \
  X(OPSI_KERNEL_CUDA_SDPA_SPLIT_D256_M64, d256_m64, 256, 64)

/* X(ID, NAME, DP): sdpa_bwd_mma.cuh (ops_sdpa_backward), any SM >= 80, head dims up to DP */
#define OPSI_SDPA_BWD_MMA_KERNELS(X)                     \
  X(OPSI_KERNEL_CUDA_SDPA_BACKWARD_MMA_D64, d64, 64)     \
  X(OPSI_KERNEL_CUDA_SDPA_BACKWARD_MMA_D128, d128, 128)  \
  X(OPSI_KERNEL_CUDA_SDPA_BACKWARD_MMA_D256, d256, 256)

/* X(ID, NAME, DP): sdpa_bwd_sm90.cuh (ops_sdpa_backward), sm_90a, head dims up to DP, dQ by
 * atomics */
#define OPSI_SDPA_BWD_SM90_KERNELS(X)                    \
  X(OPSI_KERNEL_CUDA_SDPA_BACKWARD_SM90_D64, d64, 64)    \
  X(OPSI_KERNEL_CUDA_SDPA_BACKWARD_SM90_D128, d128, 128) \
  X(OPSI_KERNEL_CUDA_SDPA_BACKWARD_SM90_D256, d256, 256)

/* X(ID, NAME, DP): sdpa_bwd_sm90.cuh with DET (ops_sdpa_backward), sm_90a, head dims up to DP,
 * dQ by atomics that take turns in a fixed order */
#define OPSI_SDPA_BWD_SM90_DET_KERNELS(X)                       \
  X(OPSI_KERNEL_CUDA_SDPA_BACKWARD_SM90_DET_D64, d64, 64)    \
  X(OPSI_KERNEL_CUDA_SDPA_BACKWARD_SM90_DET_D128, d128, 128) \
  X(OPSI_KERNEL_CUDA_SDPA_BACKWARD_SM90_DET_D256, d256, 256)

#endif /* OPSLIB_KERNELS_FLASH_SDPA_KERNELS_H_ */
