/* Capability rows of ops_gemm. */
#include <math.h>

#include "capabilities/cuda_row.h"
#include "capabilities/kernel_ids.h"
#include "kernels/gemm/gemm_cpu.h"
#include "kernels/gemm/gemm_cuda.h"
#include "kernels/gemm/gemm_kernels.h"
#include "kernels/gemm/gemm_shape.h"

#define GEMM_EPILOGUE (OPSI_F_BIAS | OPSI_F_RESIDUAL | OPSI_F_BETA_C)
#define GEMM_EPILOGUE_TEXT "alpha, beta * C, bias (any broadcast: per column, per row), every ops_act, residual"

/* Tiles of M x N spread over the grid (a persistent grid walks the same tiles), times batch. */
#define GEMM_TILING(TM, TN, PER_SM) \
  {{OPSI_GEMM_M, OPSI_GEMM_N, -1}, {TM, TN, 0}, {1, 1, 0}, {OPSI_GEMM_BATCH, -1, -1}, PER_SM}

/* gemm_kernels.h's list entry X(ID, NAME, BN), in gemm_shape.h's shape; SM90_ROW_X expands
 * the shape's macros, SM90_ROW_ prints the numbers. The cost model's efficiency by BN: */
#define SM90_EFF_256 0.80f
#define SM90_EFF_192 0.78f
#define SM90_EFF_128 0.76f
#define SM90_EFF_112 0.75f
#define SM90_EFF_96 0.74f
#define SM90_EFF_64 0.70f
/* The consumers by BN: two of 64 rows a tile, and where a tile's accumulators fit one
 * warpgroup (gemm_shape.h's opsi_gemm_sm90_wide) a tile each on unsplit calls with M over 64;
 * a call without an epilogue runs the row's second instantiation, built without the fused
 * epilogues (gemm_kernels.h), as a call's B layout picks its instantiation */
#define SM90_CONSUMERS_256(MMA_REGS, BN, IN_FLIGHT)                                          \
  "setmaxnreg " #MMA_REGS ": 64 rows, wgmma m64n" #BN "k16 (" #IN_FLIGHT " groups left at a stage's " \
  "hand-back), fused epilogue"
#define SM90_CONSUMERS_192 SM90_CONSUMERS_256
#define SM90_CONSUMERS_128(MMA_REGS, BN, IN_FLIGHT)                                                 \
  "setmaxnreg " #MMA_REGS ": 64 rows (" #IN_FLIGHT " groups left at hand-back) or a tile each (unsplit, " \
  "M > 64); m64n" #BN "k16"
#define SM90_CONSUMERS_112 SM90_CONSUMERS_128
#define SM90_CONSUMERS_96 SM90_CONSUMERS_128
#define SM90_CONSUMERS_64 SM90_CONSUMERS_128
/* B's layouts and D's store by BN (gemm_shape.h's OPSI_GEMM_SM90_BOXED) */
#define SM90_B_FLAGS(BN) (OPSI_GEMM_SM90_BOXED(BN) ? OPSI_F_B_N_MAJOR : 0u)
#define SM90_LAYOUT_BOXED(BN)                                                                          \
  "K-major; N-major B as " #BN "/64 boxes of 64x64), 128-byte swizzle, 1024-byte aligned; per consumer " \
  "warpgroup 16 KB: two 64x64 16-bit TMA store buffers (128-byte swizzle) or the general epilogue's "   \
  "64x32 f32 staging (rows padded to 40)"
#define SM90_LAYOUT_256 SM90_LAYOUT_BOXED(256)
#define SM90_LAYOUT_192 SM90_LAYOUT_BOXED(192)
#define SM90_LAYOUT_128 SM90_LAYOUT_BOXED(128)
#define SM90_LAYOUT_64 SM90_LAYOUT_BOXED(64)
#define SM90_LAYOUT_KMAJOR                                                                              \
  "K-major only), 128-byte swizzle, 1024-byte aligned; per consumer warpgroup 16 KB: the general "    \
  "epilogue's 64x32 f32 staging (rows padded to 40; D stored by the threads)"
#define SM90_LAYOUT_112 SM90_LAYOUT_KMAJOR
#define SM90_LAYOUT_96 SM90_LAYOUT_KMAJOR
#define SM90_ROW(ID, NAME, BN)                                                                                 \
  SM90_ROW_X(ID, "cuda_gemm_sm90_" #NAME, BN, OPSI_GEMM_SM90_STAGES_##BN, OPSI_GEMM_SM90_LOAD_REGS,                      \
             OPSI_GEMM_SM90_MMA_REGS, SM90_EFF_##BN, opsi_gemm_cuda_sm90_##NAME, OPSI_GEMM_SM90_IN_FLIGHT_##BN),
#define SM90_ROW_X(...) SM90_ROW_(__VA_ARGS__)
/* What every row of the Hopper kernel shares, split or not: the calls it takes, its block,
 * its cost unit and tiling. */
#define SM90_KERNEL_FIELDS(ID, NAME, BN, EFF, LAUNCH)                                                        \
  .id = ID, .name = NAME, .op = OPS_OP_GEMM, .backend = OPS_DEVICE_CUDA, .sm_min = 90, .sm_max = 90,        \
  .dtypes = OPSI_DTYPE_BIT(OPS_DTYPE_F16) | OPSI_DTYPE_BIT(OPS_DTYPE_BF16), .out_dtypes = OPSI_FLOAT_DTYPES,  \
  .variants = OPSI_ALL_VARIANTS, .flags = GEMM_EPILOGUE | OPSI_F_BATCHED | SM90_B_FLAGS(BN),                \
  .fuses = GEMM_EPILOGUE, .align = 16, .dim_min = {[OPSI_GEMM_K] = 1},                                      \
  .dim_max = {[OPSI_GEMM_BATCH] = 2147483647}, .smem_bytes = OPSI_GEMM_SM90_SMEM(BN),                       \
  .threads = OPSI_GEMM_SM90_THREADS, .vector_bytes = 16, .deterministic = 1, .unit = OPSI_UNIT_WGMMA_F16,    \
  .efficiency = EFF, .bytes_factor = 1.0f, .tiling = GEMM_TILING(128, BN, 1), .launch = LAUNCH,              \
  .tests = OPSI_GPU_TESTS
#define SM90_ROW_(ID, NAME, BN, STAGES, LOAD_REGS, MMA_REGS, EFF, LAUNCH, IN_FLIGHT)                          \
  {                                                                                                          \
      SM90_KERNEL_FIELDS(ID, NAME, BN, EFF, LAUNCH),                                                         \
      .roles = {{"producer", 4, "setmaxnreg " #LOAD_REGS ": one thread, TMA loads of A / B K blocks into a " \
                                #STAGES "-stage ring"},                                                     \
                {"consumers", 8, SM90_CONSUMERS_##BN(MMA_REGS, BN, IN_FLIGHT)}},                              \
      .stages = STAGES,                                                                                      \
      .smem_layout = #STAGES " stages of A 128x64 + B " #BN "x64 bf16/f16 (" SM90_LAYOUT_##BN ", and " #BN    \
                     " 16-bit column-bias values; full/empty mbarrier a stage",                              \
      .reduction_order = "per output: K blocks of 64 in order, wgmma k16 steps in order (f32)",              \
      .workspace_formula = "0", .plan = sm90_plan_##BN,                                                      \
  }

/* How D is stored (by TMA where the width is whole 64-column boxes and the problem's extra[0],
 * opsi_gemm_sm90_d_tma, says D can be) and whether a warpgroup takes a whole tile
 * (opsi_gemm_sm90_wide; parts: the call's K split, 1 for the unsplit rows) or, M at most 64,
 * the one tile row's live half. */
static const char *sm90_plan(const opsi_problem *p, int32_t bn, int32_t parts) {
  const int64_t *d = p->dims;
  const int64_t tiles = opsi_gemm_sm90_tiles(d[OPSI_GEMM_BATCH], d[OPSI_GEMM_M], d[OPSI_GEMM_N], bn);
  const int64_t grid = opsi_gemm_sm90_grid(tiles * parts, parts, p->sm_count);
  return opsi_gemm_sm90_unsplit_plan(opsi_gemm_sm90_wide(bn, d[OPSI_GEMM_M], parts), d[OPSI_GEMM_M],
                                     OPSI_GEMM_SM90_BOXED(bn) && p->extra[0] != 0,
                                     opsi_gemm_sm90_spread_cluster(grid, parts, p->sm_count));
}
#define SM90_FNS(ID, NAME, BN) \
  static const char *sm90_plan_##BN(const opsi_problem *p) { return sm90_plan(p, BN, 1); }
OPSI_GEMM_SM90_KERNELS(SM90_FNS)
OPSI_GEMM_SM90_KMAJOR_KERNELS(SM90_FNS)
#undef SM90_FNS

/* The split-K rows (gemm_kernels.h's OPSI_GEMM_SM90_SPLITK_KERNELS): the same kernel, its K
 * split where the tiles fill too few SMs (gemm_shape.h), as the launcher takes it: the
 * parts of a tile are a cluster whose blocks reduce them (no workspace). */
static int32_t splitk_parts(const opsi_problem *p, int32_t bn) {
  const int64_t *d = p->dims;
  return opsi_gemm_splitk_parts(d[OPSI_GEMM_BATCH], d[OPSI_GEMM_M], d[OPSI_GEMM_N], d[OPSI_GEMM_K], bn, p->sm_count);
}

static const char *splitk_plan(const opsi_problem *p, int32_t bn) {
  const int32_t parts = splitk_parts(p, bn);
  return parts > 1 ? opsi_gemm_splitk_plan(parts) : sm90_plan(p, bn, parts);
}

/* Units (tiles x parts) on the grid, one launch. */
static void splitk_grid(const opsi_problem *p, int32_t bn, opsi_grid_estimate *e) {
  const int64_t *d = p->dims;
  const int32_t parts = splitk_parts(p, bn);
  const double b = (double)d[OPSI_GEMM_BATCH], m = (double)d[OPSI_GEMM_M], n = (double)d[OPSI_GEMM_N];
  const double tm = ceil(m / OPSI_GEMM_SM90_BM), tn = ceil(n / bn);
  e->blocks = b * tm * tn * parts;
  e->pad_factor = m > 0 && n > 0 ? tm * OPSI_GEMM_SM90_BM * tn * bn / (m * n) : 1.0;
  e->bytes_factor = 1.0;
  e->launches = 1;
}

#define SPLITK_FNS(ID, NAME, BN)                                                                                 \
  static int32_t splitk_parts_##BN(const opsi_problem *p) { return splitk_parts(p, BN); }                      \
  static const char *splitk_plan_##BN(const opsi_problem *p) { return splitk_plan(p, BN); }                      \
  static void splitk_grid_##BN(const opsi_problem *p, opsi_grid_estimate *e) { splitk_grid(p, BN, e); }
OPSI_GEMM_SM90_SPLITK_KERNELS(SPLITK_FNS)
#undef SPLITK_FNS

#define SPLITK_ROW(ID, NAME, BN)                                                                              \
  SPLITK_ROW_X(ID, "cuda_gemm_sm90_" #NAME, BN, OPSI_GEMM_SM90_STAGES_##BN, OPSI_GEMM_SM90_LOAD_REGS,          \
               OPSI_GEMM_SM90_MMA_REGS, SM90_EFF_##BN, opsi_gemm_cuda_sm90_##NAME, OPSI_GEMM_SM90_IN_FLIGHT_SPLIT),
#define SPLITK_ROW_X(...) SPLITK_ROW_(__VA_ARGS__)
#define SPLITK_ROW_(ID, NAME, BN, STAGES, LOAD_REGS, MMA_REGS, EFF, LAUNCH, IN_FLIGHT)                       \
  {                                                                                                          \
      SM90_KERNEL_FIELDS(ID, NAME, BN, EFF, LAUNCH),                                                         \
      .roles = {{"producer", 4, "setmaxnreg " #LOAD_REGS ": one thread, TMA loads of a unit's K range into a " \
                                #STAGES "-stage ring"},                                                     \
                {"consumers", 8, "setmaxnreg " #MMA_REGS ": 64 rows, wgmma m64n" #BN "k16 (" #IN_FLIGHT             \
                                 " groups left at a stage's hand-back); rank cw % n sums"}},                 \
      .stages = STAGES,                                                                                      \
      .smem_layout = "as cuda_gemm_sm90_128x" #BN "; with n > 1 the ring then holds a block's partial "      \
                     "tile, f32, [warpgroup][" #BN " / 8][128 threads] float4, which the block owning "  \
                     "consumer cw's rows (rank cw % n) reads over distributed shared memory",               \
      .reduction_order = "per output: each part's K blocks of 64 in order (wgmma k16 steps in order, f32), " \
                         "then the parts in rank order (f32; the owner's own first: the same sums)",      \
      .workspace_formula = "0 (K split in n = 2, 4 or 8 parts: the most whose clusters are resident at "    \
                           "once, n x tiles <= sm_count, or 0.9 sm_count for n >= 4; 4 K blocks a part)",     \
      .plan = splitk_plan_##BN, .grid = splitk_grid_##BN, .parts = splitk_parts_##BN,                        \
  }

/* The cp.async pipelined kernels (gemm_pipelined.cuh): 4 stages of 64 bytes of K a row. */
#define CP_ROW(ID, NAME, DTYPES, UNIT, TF32, MMA, EFF)                                                         \
  {                                                                                                          \
      .id = ID, .name = NAME, .op = OPS_OP_GEMM, .backend = OPS_DEVICE_CUDA, .sm_min = 80, .sm_max = 90,    \
      .dtypes = DTYPES, .out_dtypes = OPSI_FLOAT_DTYPES, .variants = OPSI_ALL_VARIANTS,       \
      .flags = GEMM_EPILOGUE | OPSI_F_BATCHED | OPSI_F_B_N_MAJOR, .fuses = GEMM_EPILOGUE, .align = 16,       \
      .dim_max = {[OPSI_GEMM_BATCH] = 65535, [OPSI_GEMM_N] = 65535LL * 128},                                  \
      .roles = {{"mma warps", 8, "2 x 4 warps of 64 x 32 outputs, ldmatrix + " MMA "; cp.async 3 steps ahead"}}, \
      .stages = 4,                                                                                           \
      .smem_layout = "4 x (A 128 rows + B^T 128 rows of 64 bytes of K, padded to 80 bytes; an N-major B "    \
                     "as K rows of 128 elements padded by 8), ldmatrix conflict-free",                       \
      .smem_bytes = OPSI_GEMM_CP_SMEM, .threads = OPSI_GEMM_CP_THREADS, .vector_bytes = 16, .deterministic = 1, .requires_tf32 = TF32,     \
      .reduction_order = "per output: K steps of 64 bytes in order, mma k steps in order (f32)",              \
      .unit = UNIT, .efficiency = EFF, .bytes_factor = 1.0f, .tiling = GEMM_TILING(128, 128, 2),              \
      .workspace_formula = "0", .launch = opsi_gemm_cuda_pipelined, .tests = OPSI_GPU_TESTS,                   \
  }

#define GEMV_ROW(ID, NAME, DIM1, FLAGS, ROLE, LAUNCH)                                                         \
  {                                                                                                          \
      .id = ID, .name = NAME, .op = OPS_OP_GEMM, OPSI_CUDA_ROW_COMMON, .variants = OPSI_ALL_VARIANTS,         \
      .flags = GEMM_EPILOGUE | OPSI_F_BATCHED | (FLAGS), .fuses = GEMM_EPILOGUE, .align = 1,                  \
      .dim_max = {[OPSI_GEMM_BATCH] = 65535, [DIM1] = 1}, .roles = {{"row warps", 8, ROLE}}, .stages = 0,      \
      .smem_layout = "none: the vector is read through L1", .smem_bytes = 0, .threads = 256,                 \
      .vector_bytes = 16, .deterministic = 1,                                                                \
      .reduction_order = "per output: lane-strided 16-byte chunks of K in order, then a butterfly",         \
      .unit = OPSI_UNIT_FFMA, .efficiency = 0.85f, .bytes_factor = 1.0f, .tiling = OPSI_NO_TILING,            \
      .workspace_formula = "0", .launch = LAUNCH, .tests = OPSI_GPU_TESTS,                                   \
  }

/* The CPU kernels: the reference's arithmetic in one of two loop orders. */
#define GEMM_CPU_ROW(ID, NAME, TESTS, ORDER, LAUNCH)                                                         \
  {                                                                                                          \
      .id = ID, .name = NAME, .tests = TESTS, .workspace_formula = "0", .op = OPS_OP_GEMM,                   \
      OPSI_CPU_ROW_COMMON, .out_dtypes = OPSI_FLOAT_DTYPES, .variants = OPSI_ALL_VARIANTS,                   \
      .flags = GEMM_EPILOGUE | OPSI_F_BATCHED | OPSI_F_STRIDED | OPSI_F_A_M_MAJOR | OPSI_F_B_N_MAJOR,        \
      .fuses = GEMM_EPILOGUE, .reduction_order = ORDER, .launch = LAUNCH,                                     \
  }

const opsi_kernel_row opsi_gemm_rows[] = {
    GEMM_CPU_ROW(OPSI_KERNEL_CPU_GEMM, "cpu_gemm_ref", "//tests/kernels:gemm_test //tests/errors:gemm_errors_test",
                 "per output: double-precision dot product over K in index order", opsi_gemm_cpu),
    GEMM_CPU_ROW(OPSI_KERNEL_CPU_GEMM_PANEL, "cpu_gemm_panel", "//tests/kernels:gemm_test //tests/dispatch:autotune_test",
                 "per output: double-precision sum over K in index order (the reference's), accumulated for a "
                 "panel of 64 columns of a row at once",
                 opsi_gemm_cpu_panel),
    OPSI_GEMM_SM90_KERNELS(SM90_ROW)
    OPSI_GEMM_SM90_KMAJOR_KERNELS(SM90_ROW)
    OPSI_GEMM_SM90_SPLITK_KERNELS(SPLITK_ROW)
    {
        .id = OPSI_KERNEL_CUDA_GEMM_MMA, .name = "cuda_gemm_mma", .op = OPS_OP_GEMM, .backend = OPS_DEVICE_CUDA,
        .sm_min = 80, .sm_max = 90, .dtypes = OPSI_DTYPE_BIT(OPS_DTYPE_F16) | OPSI_DTYPE_BIT(OPS_DTYPE_BF16),
        .out_dtypes = OPSI_FLOAT_DTYPES, .variants = OPSI_ALL_VARIANTS,
        .flags = GEMM_EPILOGUE | OPSI_F_BATCHED | OPSI_F_STRIDED | OPSI_F_A_M_MAJOR | OPSI_F_B_N_MAJOR,
        .fuses = GEMM_EPILOGUE, .align = 1,
        .dim_max = {[OPSI_GEMM_BATCH] = 65535, [OPSI_GEMM_N] = 65535LL * 128},
        .roles = {{"mma warps", 8, "2 x 4 warps of 64 x 32 outputs, mma.sync m16n8k16; next K tile via registers"}},
        .stages = 2,
        .smem_layout = "2 x (A 128x32 + B^T 128x32) f16/bf16, K-major rows padded to 40 elements "
                       "(ldmatrix conflict-free)",
        .smem_bytes = OPSI_GEMM_MMA_SMEM, .threads = OPSI_GEMM_MMA_THREADS, .vector_bytes = 16, .deterministic = 1,
        .reduction_order = "per output: K tiles of 32 in order, mma k16 steps in order (f32)",
        .unit = OPSI_UNIT_MMA_F16, .efficiency = 0.35f, .bytes_factor = 1.0f, .tiling = GEMM_TILING(128, 128, 1),
        .workspace_formula = "0", .launch = opsi_gemm_cuda_tiled, .tests = OPSI_GPU_TESTS,
    },
    {
        .id = OPSI_KERNEL_CUDA_GEMM_FFMA, .name = "cuda_gemm_ffma", .op = OPS_OP_GEMM, .backend = OPS_DEVICE_CUDA,
        .sm_min = 80, .sm_max = 90, .dtypes = OPSI_DTYPE_BIT(OPS_DTYPE_F32), .out_dtypes = OPSI_FLOAT_DTYPES,
        .variants = OPSI_ALL_VARIANTS,
        .flags = GEMM_EPILOGUE | OPSI_F_BATCHED | OPSI_F_STRIDED | OPSI_F_A_M_MAJOR | OPSI_F_B_N_MAJOR,
        .fuses = GEMM_EPILOGUE, .align = 1,
        .dim_max = {[OPSI_GEMM_BATCH] = 65535, [OPSI_GEMM_N] = 65535LL * 64},
        .roles = {{"fma threads", 8, "16 x 16 threads of 4 x 4 outputs, strict f32 FMA; next K tile via registers"}},
        .stages = 2, .smem_layout = "2 x (A 64x16 + B^T 64x16) f32, rows padded to 17 words",
        .smem_bytes = OPSI_GEMM_FFMA_SMEM, .threads = OPSI_GEMM_FFMA_THREADS, .vector_bytes = 4, .deterministic = 1,
        .reduction_order = "per output: K in index order (f32 fma)",
        .unit = OPSI_UNIT_FFMA, .efficiency = 0.45f, .bytes_factor = 1.0f, .tiling = GEMM_TILING(64, 64, 2),
        .workspace_formula = "0", .launch = opsi_gemm_cuda_tiled, .tests = OPSI_GPU_TESTS,
    },
    GEMV_ROW(OPSI_KERNEL_CUDA_GEMV_N1, "cuda_gemv_n1", OPSI_GEMM_N, OPSI_F_B_N_MAJOR,
             "N == 1: a warp per row of A (K unit-stride), 16-byte loads 4 deep; B's column at any stride",
             opsi_gemm_cuda_gemv_n1),
    GEMV_ROW(OPSI_KERNEL_CUDA_GEMV_M1, "cuda_gemv_m1", OPSI_GEMM_M, OPSI_F_A_M_MAJOR,
             "M == 1: a warp per column of B (K unit-stride), 16-byte loads 4 deep; A's row at any stride",
             opsi_gemm_cuda_gemv_m1),
    CP_ROW(OPSI_KERNEL_CUDA_GEMM_MMA_CP, "cuda_gemm_mma_cp",
           OPSI_DTYPE_BIT(OPS_DTYPE_F16) | OPSI_DTYPE_BIT(OPS_DTYPE_BF16), OPSI_UNIT_MMA_F16, 0,
           "mma.sync m16n8k16", 0.55f),
    CP_ROW(OPSI_KERNEL_CUDA_GEMM_TF32, "cuda_gemm_tf32", OPSI_DTYPE_BIT(OPS_DTYPE_F32), OPSI_UNIT_MMA_TF32, 1,
           "mma.sync m16n8k8 tf32", 0.55f),
};
const size_t opsi_gemm_row_count = sizeof opsi_gemm_rows / sizeof opsi_gemm_rows[0];
