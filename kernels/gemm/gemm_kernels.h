/*
 * The Hopper GEMM kernels, listed once. Each entry of OPSI_GEMM_SM90_KERNELS is one kernel
 * with one capability row and one launcher (extern "C" opsi_gemm_cuda_sm90_<NAME>), built
 * for every dtype of OPSI_GEMM_SM90_DTYPES and every B layout of OPSI_GEMM_SM90_B_LAYOUTS (the
 * launcher picks the layout at run time) as one explicit instantiation a source file,
 * kernels/gemm/gemm_sm90_<dtype>_<BN>_<layout>.cu, and once more for calls without an
 * epilogue, ..._<layout>_plain.cu (the launcher runs it where the call is plain: the kernel
 * without the fused epilogues, a tenth of the code). tools/gen_kernel_sources.py writes them
 * from these lists (//tests/tools:kernel_sources_test fails when the files and the lists
 * differ). The rows (capabilities/gemm_rows.c), the prototypes (gemm_cuda.h), the launchers
 * and their extern template declarations (gemm_cuda_launch.cu) expand the same lists.
 */
#ifndef OPSLIB_KERNELS_GEMM_GEMM_KERNELS_H_
#define OPSLIB_KERNELS_GEMM_GEMM_KERNELS_H_

/* X(SUFFIX, T) */
#define OPSI_GEMM_SM90_DTYPES(X) X(bf16, __nv_bfloat16) X(f16, __half)

/* X(SUFFIX, B_MN): B K-major, or N-major (row-major [K, N]) */
#define OPSI_GEMM_SM90_B_LAYOUTS(X) X(bk, false) X(bmn, true)

/* X(ID, NAME, BN): tiles of 128 x BN (gemm_shape.h gives each BN its stages). Row order is
 * rank order on ties. */
#define OPSI_GEMM_SM90_KERNELS(X)                               \
  X(OPSI_KERNEL_CUDA_GEMM_SM90_128X256, 128x256, 256)           \
  X(OPSI_KERNEL_CUDA_GEMM_SM90_128X128, 128x128, 128)           \
  X(OPSI_KERNEL_CUDA_GEMM_SM90_128X64, 128x64, 64)              \
  X(OPSI_KERNEL_CUDA_GEMM_SM90_128X192, 128x192, 192)

/* X(ID, NAME, BN): the split-K rows over the instantiations above (tiles of 128 x BN, K
 * split by gemm_shape.h's opsi_gemm_splitk_parts, the parts of a tile a cluster); no sources
 * of their own. */
#define OPSI_GEMM_SM90_SPLITK_KERNELS(X)                          \
  X(OPSI_KERNEL_CUDA_GEMM_SM90_128X128_SPLITK, 128x128_splitk, 128) \
  X(OPSI_KERNEL_CUDA_GEMM_SM90_128X256_SPLITK, 128x256_splitk, 256) \
  X(OPSI_KERNEL_CUDA_GEMM_SM90_128X64_SPLITK, 128x64_splitk, 64)   \
  X(OPSI_KERNEL_CUDA_GEMM_SM90_128X112_SPLITK, 128x112_splitk, 112) \
  X(OPSI_KERNEL_CUDA_GEMM_SM90_128X96_SPLITK, 128x96_splitk, 96)

/* X(ID, NAME, BN): tiles of 128 x BN with BN not a multiple of 64 (gemm_shape.h's
 * OPSI_GEMM_SM90_BOXED): built for B K-major only, gemm_sm90_<dtype>_<BN>_bk.cu; rows, launchers
 * and split rows as the list above. */
#define OPSI_GEMM_SM90_KMAJOR_KERNELS(X)                \
  X(OPSI_KERNEL_CUDA_GEMM_SM90_128X112, 128x112, 112)   \
  X(OPSI_KERNEL_CUDA_GEMM_SM90_128X96, 128x96, 96)

#endif /* OPSLIB_KERNELS_GEMM_GEMM_KERNELS_H_ */
