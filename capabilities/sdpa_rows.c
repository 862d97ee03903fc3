/* Capability rows of ops_sdpa. */
#include "capabilities/cpu_row.h"
#include "capabilities/cuda_row.h"
#include "capabilities/kernel_ids.h"
#include "kernels/flash/sdpa_cpu.h"
#include "kernels/flash/sdpa_cuda.h"
#include "kernels/flash/sdpa_sm90_shape.h"

#define SDPA_GPU_FLAGS                                                                                       \
  (OPSI_F_CAUSAL | OPSI_F_WINDOW | OPSI_F_GQA | OPSI_F_VARLEN | OPSI_F_LSE | OPSI_F_MASK | OPSI_F_STRIDED | \
   OPSI_F_DV_NE_D)

/* Query tiles of BM rows over the grid, times batch and heads; the head dim padded to DP. */
#define SDPA_TILING(BM, DP, PER_SM) \
  {{OPSI_SDPA_SQ, OPSI_SDPA_D, -1}, {BM, DP, 0}, {1, 0, 0}, {OPSI_SDPA_B, OPSI_SDPA_HQ, -1}, PER_SM}

/* The sm_80-class kernels (sdpa_mma.cuh), one per padded head dim DP. */
#define SDPA_MMA_ROW(ID, NAME, DP, BM, BN, WARPS, PER_SM, LAUNCH)                                                   \
  {                                                                                                          \
      .id = ID, .name = NAME, .op = OPS_OP_SDPA, .backend = OPS_DEVICE_CUDA, .sm_min = 80, .sm_max = 90,    \
      .dtypes = OPSI_DTYPE_BIT(OPS_DTYPE_F16) | OPSI_DTYPE_BIT(OPS_DTYPE_BF16),                              \
      .out_dtypes = OPSI_DTYPE_BIT(OPS_DTYPE_F16) | OPSI_DTYPE_BIT(OPS_DTYPE_BF16),                          \
      .variants = OPSI_ALL_VARIANTS, .flags = SDPA_GPU_FLAGS, .fuses = OPSI_F_MASK, .align = 1,              \
      .dim_min = {[OPSI_SDPA_D] = 1, [OPSI_SDPA_DV] = 1},                                                    \
      .dim_max = {[OPSI_SDPA_B] = 65535, [OPSI_SDPA_HQ] = 65535, [OPSI_SDPA_SQ] = 2147483647,               \
                  [OPSI_SDPA_SK] = 2147483647, [OPSI_SDPA_D] = DP, [OPSI_SDPA_DV] = DP},                      \
      .roles = {{"mma warps", WARPS, "16 query rows each: S = Q K^T and O += P V by mma.sync m16n8k16 "      \
                                     "(ldmatrix; P from the score registers), online softmax in registers " \
                                     "(exp2, scale folded in); all threads issue the cp.async copies of "    \
                                     "the next K and V tiles"}},                                             \
      .stages = 2,                                                                                           \
      .smem_layout = "Q " #BM "x" #DP ", K and V 2 x " #BN "x" #DP " each, 16-byte chunks XOR-swizzled by "  \
                     "row % 8 (ldmatrix conflict-free); O staged through each warp's Q rows",              \
      .smem_bytes = (BM + 4 * BN) * DP * 2, .threads = WARPS * 32, .vector_bytes = 16,                 \
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
#define SDPA_SM90_ROW(ID, NAME, D, EFF, LAUNCH)                                                                \
  SDPA_SM90_ROW_X(ID, NAME, D, OPSI_SDPA_SM90_D##D##_BN, OPSI_SDPA_SM90_D##D##_BM, OPSI_SDPA_SM90_D##D##_NC, \
                  OPSI_SDPA_SM90_D##D##_LOAD_REGS, OPSI_SDPA_SM90_D##D##_MMA_REGS, 1,                       \
                  OPSI_F_CAUSAL | OPSI_F_WINDOW | OPSI_F_VARLEN | SDPA_SM90_UNIFORM_FLAGS, EFF, LAUNCH)
/* The pair kernels: every block of a pair must read the same keys, so no causal mask, window
 * or varlen (the features they leave out), and an even count of query tiles (the cluster
 * rule). */
#define SDPA_SM90_PAIR_ROW(ID, NAME, D, EFF, LAUNCH)                                                           \
  SDPA_SM90_ROW_X(ID, NAME, D, OPSI_SDPA_SM90_D##D##_BN, OPSI_SDPA_SM90_D##D##_BM, OPSI_SDPA_SM90_D##D##_NC, \
                  OPSI_SDPA_SM90_D##D##_LOAD_REGS, OPSI_SDPA_SM90_D##D##_MMA_REGS, OPSI_SDPA_SM90_D##D##_CLUSTER, \
                  SDPA_SM90_UNIFORM_FLAGS, EFF, LAUNCH)
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
      .roles = {{"producer", 4, "warpgroup 0 (setmaxnreg " #LOAD_REGS "): one thread issues the TMA loads "  \
                                "of the Q tile and of each key tile's K and V into a 2-stage ring, K and V "  \
                                "on their own full and empty mbarriers, K a key tile ahead of V, waiting "    \
                                "suspended (no polling); work tiles (query tile, head, batch; query "         \
                                "tiles last-first) in a loop: a grid of one block an SM when every tile "     \
                                "reads the same keys (no window that cuts them, no varlen), the next "        \
                                "tile's Q and K / V loading under the current one's last P V and "           \
                                "epilogue, else a block a tile, longest first; clusters of " #CLUSTER        \
                                " block(s) (2: neighbouring query tiles of a head, each block loading half " \
                                "of every K / V tile into both by TMA multicast, a stage refilled once "     \
                                "both blocks' consumers have released it)"},                                 \
                {"consumers", 4 * NC,                                                                         \
                 "warpgroups 1 to " #NC " (setmaxnreg " #MMA_REGS "), 64 query rows each: S = Q K^T by "        \
                 "wgmma m64n" #BN "k16 from shared memory, online softmax in registers (exp2, the scale in "   \
                 "its FFMA; -inf outside each row's visible keys where a tile crosses a sequence end or a "    \
                 "window edge), O += P V by wgmma m64n" #DP "k16 with P from registers; a tile's S is issued " \
                 "with the previous tile's P V, whose wgmma runs under the softmax, and O is rescaled under "  \
                 "the next S (skipped where no row max of the warp moved); they take turns issuing, in a "     \
                 "ring (named barriers), so one's softmax overlaps the others' wgmma"}},                      \
      .stages = 2,                                                                                           \
      .smem_layout = "Q " #BM "x" #DP ", K and V 2 stages of " #BN "x" #DP " each, as boxes of 64 columns, "  \
                     "128-byte swizzle, 1024-byte aligned; 10 mbarriers (Q full / empty, K and V "          \
                     "full / empty a stage)",                                                              \
      .smem_bytes = 1024 + (BM + 4 * BN) * DP * 2 + 80, .threads = 128 * (NC + 1), .vector_bytes = 16,       \
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
    SDPA_MMA_ROW(OPSI_KERNEL_CUDA_SDPA_MMA_D64, "cuda_sdpa_mma_d64", 64, 128, 64, 8, 2, opsi_sdpa_cuda_mma_d64),
    SDPA_MMA_ROW(OPSI_KERNEL_CUDA_SDPA_MMA_D128, "cuda_sdpa_mma_d128", 128, 128, 64, 8, 1, opsi_sdpa_cuda_mma_d128),
    SDPA_MMA_ROW(OPSI_KERNEL_CUDA_SDPA_MMA_D256, "cuda_sdpa_mma_d256", 256, 64, 32, 4, 1, opsi_sdpa_cuda_mma_d256),
    SDPA_SM90_PAIR_ROW(OPSI_KERNEL_CUDA_SDPA_SM90_D64_PAIR, "cuda_sdpa_sm90_d64_pair", 64, 0.45f,
                       opsi_sdpa_cuda_sm90_d64_pair),
    SDPA_SM90_PAIR_ROW(OPSI_KERNEL_CUDA_SDPA_SM90_D128_PAIR, "cuda_sdpa_sm90_d128_pair", 128, 0.45f,
                       opsi_sdpa_cuda_sm90_d128_pair),
    SDPA_SM90_ROW(OPSI_KERNEL_CUDA_SDPA_SM90_D64, "cuda_sdpa_sm90_d64", 64, 0.45f, opsi_sdpa_cuda_sm90_d64),
    SDPA_SM90_ROW(OPSI_KERNEL_CUDA_SDPA_SM90_D128, "cuda_sdpa_sm90_d128", 128, 0.45f, opsi_sdpa_cuda_sm90_d128),
    SDPA_SM90_ROW(OPSI_KERNEL_CUDA_SDPA_SM90_D256, "cuda_sdpa_sm90_d256", 256, 0.45f, opsi_sdpa_cuda_sm90_d256),
};
const size_t opsi_sdpa_row_count = sizeof opsi_sdpa_rows / sizeof opsi_sdpa_rows[0];
