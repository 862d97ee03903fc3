/*
 * Stable kernel ids: op id * 100 + n. The CPU reference of each op is n = 0. Ids are
 * never renumbered or reused; a retired kernel keeps its number reserved.
 */
#ifndef OPSLIB_CAPABILITIES_KERNEL_IDS_H_
#define OPSLIB_CAPABILITIES_KERNEL_IDS_H_

enum {
  OPSI_KERNEL_CPU_SDPA = 100,
  OPSI_KERNEL_CPU_GEMM = 200,
  OPSI_KERNEL_CPU_LAYERNORM = 300,
  OPSI_KERNEL_CPU_RMSNORM = 400,
  OPSI_KERNEL_CPU_SOFTMAX = 500,
  OPSI_KERNEL_CPU_SIN_AFFINE = 600,
  OPSI_KERNEL_CPU_UNARY = 700,
  OPSI_KERNEL_CPU_BINARY = 800,
  OPSI_KERNEL_CPU_REDUCE = 900
};

#endif /* OPSLIB_CAPABILITIES_KERNEL_IDS_H_ */
