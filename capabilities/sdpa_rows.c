/* Capability rows of ops_sdpa. */
#include "capabilities/cpu_row.h"
#include "capabilities/cuda_row.h"
#include "capabilities/kernel_ids.h"
#include "kernels/flash/sdpa_cpu.h"
#include "kernels/flash/sdpa_cuda.h"
#include "kernels/flash/sdpa_kernels.h"
#include "kernels/flash/sdpa_mma_shape.h"
#include "kernels/flash/sdpa_sm90_shape.h"

#define SDPA_GPU_FLAGS                                                                                       \
  (OPSI_F_CAUSAL | OPSI_F_WINDOW | OPSI_F_GQA | OPSI_F_VARLEN | OPSI_F_LSE | OPSI_F_MASK | OPSI_F_STRIDED | \
   OPSI_F_DV_NE_D)

/* Query tiles of BM rows over the grid, times batch and heads; the head dim padded to DP. */
#define SDPA_TILING(BM, DP, PER_SM) \
  {{OPSI_SDPA_SQ, OPSI_SDPA_D, -1}, {BM, DP, 0}, {1, 0, 0}, {OPSI_SDPA_B, OPSI_SDPA_HQ, -1}, PER_SM}

/* The sm_80-class kernels (sdpa_mma.cuh), one per padded head dim DP, in the shape
 * sdpa_mma_shape.h gives it. SDPA_MMA_ROW expands the shape's macros (sdpa_kernels.h's list
 * entry X(ID, NAME, DP)); SDPA_MMA_ROW_ prints the numbers. */
#define SDPA_MMA_ROW(ID, NAME, D)                                                                             \
  SDPA_MMA_ROW_X(ID, "cuda_sdpa_mma_" #NAME, D, OPSI_SDPA_MMA_D##D##_BM, OPSI_SDPA_MMA_D##D##_BN,             \
                 OPSI_SDPA_MMA_D##D##_WARPS, OPSI_SDPA_MMA_D##D##_PER_SM, opsi_sdpa_cuda_mma_##NAME),
#define SDPA_MMA_ROW_X(...) SDPA_MMA_ROW_(__VA_ARGS__)
#define SDPA_MMA_ROW_(ID, NAME, DP, BM, BN, WARPS, PER_SM, LAUNCH)                                                   \
  {                                                                                                          \
      .id = ID, .name = NAME, .op = OPS_OP_SDPA, .backend = OPS_DEVICE_CUDA, .sm_min = 80, .sm_max = 90,    \
      .dtypes = OPSI_DTYPE_BIT(OPS_DTYPE_F16) | OPSI_DTYPE_BIT(OPS_DTYPE_BF16),                              \
      .out_dtypes = OPSI_DTYPE_BIT(OPS_DTYPE_F16) | OPSI_DTYPE_BIT(OPS_DTYPE_BF16),                          \
      .variants = OPSI_ALL_VARIANTS, .flags = SDPA_GPU_FLAGS, .fuses = OPSI_F_MASK, .align = 1,              \
      .dim_min = {[OPSI_SDPA_D] = 1, [OPSI_SDPA_DV] = 1},                                                    \
      .dim_max = {[OPSI_SDPA_B] = 65535, [OPSI_SDPA_HQ] = 65535, [OPSI_SDPA_SQ] = 2147483647,               \
                  [OPSI_SDPA_SK] = 2147483647, [OPSI_SDPA_D] = DP, [OPSI_SDPA_DV] = DP},                      \
      .roles = {{"mma warps", WARPS, "16 query rows each: mma.sync S = Q K^T, online softmax, O += P V; cp.async K / V"}}, \
      .stages = 2,                                                                                           \
      .smem_layout = "Q " #BM "x" #DP ", K and V 2 x " #BN "x" #DP " each, 16-byte chunks XOR-swizzled by "  \
                     "row % 8 (ldmatrix conflict-free); O staged through each warp's Q rows",              \
      .smem_bytes = OPSI_SDPA_MMA_SMEM(BM, BN, DP), .threads = WARPS * 32, .vector_bytes = 16,                 \
      .deterministic = 1,                                                                                    \
      .reduction_order = "per query row: key tiles of " #BN " in order (online softmax), mma k16 steps in order " \
                         "(f32)",                                                                            \
      .unit = OPSI_UNIT_MMA_F16, .efficiency = 0.5f, .bytes_factor = 1.0f,                                   \
      .tiling = SDPA_TILING(BM, DP, PER_SM), .workspace_formula = "0", .launch = LAUNCH,                     \
      .tests = OPSI_GPU_TESTS,                                                                               \
  }

/* The Hopper kernels (sdpa_sm90.cuh), one per padded head dim DP, in the shape
 * sdpa_sm90_shape.h gives it: NC consumer warpgroups of 64 query rows (BM = 64 NC rows a work
 * tile), BN key rows a tile, registers split by setmaxnreg as LOAD_REGS (producer) and
 * MMA_REGS (consumers), CLUSTER blocks a cluster on uniform calls. SDPA_SM90_ROW names the
 * shape's macros, SDPA_SM90_ROW_X expands them (its parameters are not stringified), and
 * SDPA_SM90_ROW_ prints the numbers. */
/* sdpa_kernels.h's list entry X(ID, NAME, DP, CL). The pair kernels (CL 2): every block of a
 * pair must read the same keys, so no causal mask, window or varlen (the features they leave
 * out), and an even count of query tiles (the cluster rule). */
#define SDPA_SM90_ROW(ID, NAME, D, CL)                                                                           \
  SDPA_SM90_ROW_X(ID, "cuda_sdpa_sm90_" #NAME, D, OPSI_SDPA_SM90_D##D##_BN, OPSI_SDPA_SM90_D##D##_BM,           \
                  OPSI_SDPA_SM90_D##D##_NC, OPSI_SDPA_SM90_D##D##_LOAD_REGS, OPSI_SDPA_SM90_D##D##_MMA_REGS, CL, \
                  SDPA_SM90_UNIFORM_FLAGS | ((CL) > 1 ? 0 : OPSI_F_CAUSAL | OPSI_F_WINDOW | OPSI_F_VARLEN),     \
                  0.45f, opsi_sdpa_cuda_sm90_##NAME),
#define SDPA_SM90_UNIFORM_FLAGS (OPSI_F_GQA | OPSI_F_LSE | OPSI_F_DV_NE_D)
#define SDPA_SM90_ROW_X(...) SDPA_SM90_ROW_(__VA_ARGS__)
#define SDPA_SM90_ROW_(ID, NAME, DP, BN, BM, NC, LOAD_REGS, MMA_REGS, CLUSTER, FLAGS, EFF, LAUNCH)                   \
  {                                                                                                          \
      .id = ID, .name = NAME, .op = OPS_OP_SDPA, .backend = OPS_DEVICE_CUDA, .sm_min = 90, .sm_max = 90,    \
      .dtypes = OPSI_DTYPE_BIT(OPS_DTYPE_F16) | OPSI_DTYPE_BIT(OPS_DTYPE_BF16),                              \
      .out_dtypes = OPSI_DTYPE_BIT(OPS_DTYPE_F16) | OPSI_DTYPE_BIT(OPS_DTYPE_BF16),                          \
      .variants = OPSI_ALL_VARIANTS, .flags = FLAGS,                                                         \
      .align = 16, .dim_min = {[OPSI_SDPA_SK] = 1, [OPSI_SDPA_D] = 1, [OPSI_SDPA_DV] = 1},                   \
      .dim_max = {[OPSI_SDPA_B] = 65535, [OPSI_SDPA_HQ] = 65535, [OPSI_SDPA_SQ] = 2147483647,               \
                  [OPSI_SDPA_SK] = 2147483647, [OPSI_SDPA_D] = DP, [OPSI_SDPA_DV] = DP},                      \
      .roles = {{"producer", 4, "setmaxnreg " #LOAD_REGS ": one thread, TMA Q / K / V into a 2-stage ring; clusters of " \
                                #CLUSTER},                                                                   \
                {"consumers", 4 * NC, "setmaxnreg " #MMA_REGS ": 64 query rows each, wgmma S and P V, online "   \
                                      "softmax, in a ring of turns"}},                                       \
      .stages = 2,                                                                                           \
      .smem_layout = "Q " #BM "x" #DP ", K and V 2 stages of " #BN "x" #DP " each, as boxes of 64 columns, "  \
                     "128-byte swizzle, 1024-byte aligned; 10 mbarriers (Q full / empty, K and V "          \
                     "full / empty a stage)",                                                              \
      .smem_bytes = OPSI_SDPA_SM90_SMEM(BM, BN, DP), .threads = 128 * (NC + 1), .vector_bytes = 16,       \
      .deterministic = 1,                                                                                    \
      .reduction_order = "per query row: key tiles of " #BN " in order (online softmax), wgmma k16 steps "    \
                         "in order (f32)",                                                                   \
      .unit = OPSI_UNIT_WGMMA_F16, .efficiency = EFF, .bytes_factor = 1.0f,                                  \
      .tiling = SDPA_TILING(BM, DP, 1), .workspace_formula = "0", .launch = LAUNCH,                          \
      .tests = OPSI_GPU_TESTS, .cluster = CLUSTER, .plan = CLUSTER > 1 ? sm90_pair_plan : sm90_plan,         \
  }

int opsi_uniform_work(const opsi_problem *p) {
  if (p->op != OPS_OP_SDPA) return 1;
  const int cuts_left = p->extra[0] >= 0 && p->extra[0] < p->dims[OPSI_SDPA_SK];
  const int cuts_right = p->extra[1] >= 0 && p->extra[1] < p->dims[OPSI_SDPA_SQ];
  return !cuts_left && !cuts_right && !(p->flags & OPSI_F_VARLEN);
}

static const char *sm90_plan(const opsi_problem *p) {
  return opsi_uniform_work(p) ? OPSI_SDPA_SM90_PLAN_PERSISTENT : OPSI_SDPA_SM90_PLAN_TILE;
}

static const char *sm90_pair_plan(const opsi_problem *p) {
  (void)p; /* the row takes uniform calls alone */
  return OPSI_SDPA_SM90_PLAN_PAIR;
}

const opsi_kernel_row opsi_sdpa_rows[] = {
    {
        .id = OPSI_KERNEL_CPU_SDPA,
        .name = "cpu_sdpa_ref",
        .tests = "//tests/kernels:sdpa_test //tests/errors:sdpa_errors_test",
        .workspace_formula = "(max_seqlen_k + head_dim_v) * 8 bytes",
        .op = OPS_OP_SDPA,
        OPSI_CPU_ROW_COMMON,
        .out_dtypes = OPSI_FLOAT_DTYPES,
        .variants = OPSI_ALL_VARIANTS,
        .flags = OPSI_F_CAUSAL | OPSI_F_WINDOW | OPSI_F_GQA | OPSI_F_VARLEN | OPSI_F_LSE |
                 OPSI_F_MASK | OPSI_F_STRIDED | OPSI_F_DV_NE_D,
        .fuses = OPSI_F_MASK,
        .reduction_order = "per query row: exact softmax in double, keys in index order",
        .workspace = opsi_sdpa_cpu_workspace,
        .launch = opsi_sdpa_cpu,
    },
    OPSI_SDPA_MMA_KERNELS(SDPA_MMA_ROW)
    OPSI_SDPA_SM90_KERNELS(SDPA_SM90_ROW)
};
const size_t opsi_sdpa_row_count = sizeof opsi_sdpa_rows / sizeof opsi_sdpa_rows[0];
