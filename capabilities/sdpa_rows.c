/* Capability rows of ops_sdpa. */
#include <math.h>

#include "capabilities/cpu_row.h"
#include "capabilities/cuda_row.h"
#include "capabilities/kernel_ids.h"
#include "kernels/flash/sdpa_bwd_cpu.h"
#include "kernels/flash/sdpa_bwd_mma_shape.h"
#include "kernels/flash/sdpa_bwd_sm90_shape.h"
#include "kernels/flash/sdpa_cpu.h"
#include "kernels/flash/sdpa_cuda.h"
#include "kernels/flash/sdpa_kernels.h"
#include "kernels/flash/sdpa_mma_shape.h"
#include "kernels/flash/sdpa_sm90_shape.h"
#include "kernels/flash/sdpa_split_shape.h"

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
/* sdpa_kernels.h's list entry X(ID, NAME, SHAPE, DP, CL). The pair kernels (CL 2): every block
 * of a pair must read the same keys, so no causal mask, window or varlen (the features they
 * leave out), and an even count of query tiles (the cluster rule). */
#define SDPA_SM90_ROW(ID, NAME, S, D, CL)                                                                      \
  SDPA_SM90_ROW_X(ID, "cuda_sdpa_sm90_" #NAME, OPSI_SDPA_SM90_##S##_DP, OPSI_SDPA_SM90_##S##_BN,               \
                  OPSI_SDPA_SM90_##S##_BM, OPSI_SDPA_SM90_##S##_NC, OPSI_SDPA_SM90_##S##_LOAD_REGS,            \
                  OPSI_SDPA_SM90_##S##_MMA_REGS, CL, OPSI_SDPA_SM90_##S##_QS, OPSI_SDPA_SM90_##S##_OS,        \
                  SDPA_SM90_UNIFORM_FLAGS | ((CL) > 1 ? 0 : OPSI_F_CAUSAL | OPSI_F_WINDOW | OPSI_F_VARLEN),     \
                  0.45f, opsi_sdpa_cuda_sm90_##NAME, sm90_plan_##S, sm90_grid_##S),
#define SDPA_SM90_UNIFORM_FLAGS (OPSI_F_GQA | OPSI_F_LSE | OPSI_F_DV_NE_D)
/* how O leaves (the shape's OS): from registers, or staged in shared memory and stored by TMA
 * (the consumers' role, and their staging tiles in the layout) */
#define SDPA_SM90_O_0 ""
#define SDPA_SM90_O_1 "; O by TMA"
#define SDPA_SM90_O_SMEM_0(DP)
#define SDPA_SM90_O_SMEM_1(DP) "a staging tile of O a consumer warp (16x" #DP "), "
#define SDPA_SM90_ROW_X(...) SDPA_SM90_ROW_(__VA_ARGS__)
#define SDPA_SM90_ROW_(ID, NAME, DP, BN, BM, NC, LOAD_REGS, MMA_REGS, CLUSTER, QS, OS, FLAGS, EFF, LAUNCH, PLAN,   \
                       GRID)                                                                                 \
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
                                      "softmax, in a ring of turns" SDPA_SM90_O_##OS}},                      \
      .stages = 2,                                                                                           \
      .smem_layout = "Q " #QS " buffer(s) of " #BM "x" #DP ", K and V 2 stages of " #BN "x" #DP " each, "     \
                     SDPA_SM90_O_SMEM_##OS(DP) "as boxes of 64 columns, 128-byte swizzle, 1024-byte "       \
                     "aligned; mbarriers full / empty a Q buffer and a K and a V stage",                     \
      .smem_bytes = OPSI_SDPA_SM90_SMEM(BM, BN, DP, QS, OS), .threads = 128 * (NC + 1), .vector_bytes = 16,   \
      .deterministic = 1,                                                                                    \
      .reduction_order = "per query row: key tiles of " #BN " in order (online softmax), wgmma k16 steps "    \
                         "in order (f32)",                                                                   \
      .unit = OPSI_UNIT_WGMMA_F16, .efficiency = EFF, .bytes_factor = 1.0f,                                  \
      .tiling = SDPA_TILING(BM, DP, 1), .workspace_formula = "0", .launch = LAUNCH,                          \
      .tests = OPSI_GPU_TESTS, .cluster = CLUSTER,                                                         \
      .plan = CLUSTER > 1 ? sm90_pair_plan : PLAN, .grid = GRID,                                             \
  }

int opsi_uniform_work(const opsi_problem *p) {
  if (p->op != OPS_OP_SDPA) return 1;
  const int cuts_left = p->extra[0] >= 0 && p->extra[0] < p->dims[OPSI_SDPA_SK];
  const int cuts_right = p->extra[1] >= 0 && p->extra[1] < p->dims[OPSI_SDPA_SQ];
  return !cuts_left && !cuts_right && !(p->flags & (OPSI_F_VARLEN | OPSI_F_KV_CACHE));
}

int opsi_sdpa_persistent(const opsi_problem *p) {
  return p->op == OPS_OP_SDPA && !(p->flags & (OPSI_F_VARLEN | OPSI_F_KV_CACHE));
}

double opsi_sdpa_rows_per_batch(const opsi_problem *p) {
  const int64_t *d = p->dims;
  if (!(p->flags & OPSI_F_VARLEN) || d[OPSI_SDPA_B] <= 0) return (double)d[OPSI_SDPA_SQ];
  return (double)d[OPSI_SDPA_TQ] / (double)d[OPSI_SDPA_B];
}

/* The math a kernel padding the head dims to DP does per useful flop: DP over the wider of q's
 * and v's head dims (1 for an empty one). */
static double head_dim_pad(const opsi_problem *p, int dp) {
  const int64_t *d = p->dims;
  const int64_t hd = d[OPSI_SDPA_D] > d[OPSI_SDPA_DV] ? d[OPSI_SDPA_D] : d[OPSI_SDPA_DV];
  return hd > 0 ? (double)dp / (double)hd : 1.0;
}

static int64_t clamp64(int64_t x, int64_t lo, int64_t hi) { return x < lo ? lo : x > hi ? hi : x; }

static int64_t add_sat(int64_t a, int64_t b) {
  int64_t r;
  return __builtin_add_overflow(a, b, &r) ? (b > 0 ? INT64_MAX : INT64_MIN) : r;
}

/* sum_{i=0}^{n-1} clamp(c + i, lo, hi), in O(1). */
static double sum_clamp(int64_t c, int64_t n, int64_t lo, int64_t hi) {
  if (n <= 0) return 0.0;
  const int64_t first = c, last = add_sat(c, n - 1);
  double total = 0.0;
  /* below lo */
  const int64_t below = clamp64(lo - first, 0, n);
  total += (double)below * (double)lo;
  /* above hi */
  const int64_t above = clamp64(last - hi, 0, n - below);
  total += (double)above * (double)hi;
  /* in between: an arithmetic series from first + below to last - above */
  const int64_t mid = n - below - above;
  if (mid > 0) {
    const double a = (double)(first + below), b = (double)(last - above);
    total += (a + b) * (double)mid / 2.0;
  }
  return total;
}

double opsi_sdpa_visible_pairs(int64_t sq, int64_t sk, int64_t left, int64_t right) {
  const int64_t big = INT64_MAX / 4;
  const int64_t d = clamp64(sk - sq, -big, big); /* sk, sq >= 0: the difference fits */
  const int64_t r = right < 0 ? big : right, l = left < 0 ? big : left;
  /* upper bound of row i: clamp(i + d + r + 1, 0, sk); lower: clamp(i + d - l, 0, sk) */
  const double hi = sum_clamp(clamp64(d + r + 1, -big, big), sq, 0, sk);
  const double lo = sum_clamp(clamp64(d - l, -big, big), sq, 0, sk);
  return hi - lo;
}

/* sum_{i=0}^{n-1} floor((a i + b) / m) for n, a, b >= 0 and m > 0, in O(log m): the
 * floor-sum recursion (reduce a and b below m, then swap the roles of a and m). */
static double floor_sum(uint64_t n, uint64_t m, uint64_t a, uint64_t b) {
  double sum = 0.0;
  for (;;) {
    if (a >= m) sum += (double)(n * (n - 1) / 2) * (double)(a / m), a %= m;
    if (b >= m) sum += (double)n * (double)(b / m), b %= m;
    const uint64_t y = a * n + b;
    if (y < m) return sum;
    n = y / m, b = y % m;
    const uint64_t t = m;
    m = a, a = t;
  }
}

static int64_t floor_div(int64_t x, int64_t y) { return x / y - (x % y != 0 && (x < 0) != (y < 0)); }

/* sum_{t=0}^{n-1} of x_t = clamp(s t + c, 0, cap) in key tiles of bn, rounded up (up) or
 * down: 0 where s t + c <= 0, cap's tiles where it reaches cap, floor_sum between. s > 0. */
static double clamped_tiles(int64_t n, int64_t s, int64_t c, int64_t cap, int64_t bn, int up) {
  const int64_t t0 = clamp64(floor_div(-c, s) + 1, 0, n);      /* first t with s t + c > 0 */
  const int64_t t1 = clamp64(-floor_div(c - cap, s), t0, n);   /* first t with s t + c >= cap */
  const int64_t adj = up ? bn - 1 : 0;
  const double middle = floor_sum((uint64_t)(t1 - t0), (uint64_t)bn, (uint64_t)s, (uint64_t)(s * t0 + c + adj));
  return middle + (double)(n - t1) * (double)((cap + adj) / bn);
}

/* The Hopper forward for the cost model: a block a work tile (BM query rows of one head), the
 * math padded by what the tiles compute beyond the visible pairs the op's flops count: a tile
 * of rows [i_lo, i_hi] computes BM x BN pairs for each key tile from the one holding its first
 * row's first visible key, lo = clamp(i_lo + d - left, 0, sk), to the one holding its last
 * row's last, hi = clamp(i_hi + d + right + 1, 0, sk) (d = sk - sq; as sdpa_sm90_sched.cuh
 * walks them; hi > lo, or both 0), so that causal tiles of 192 rows compute more of the
 * diagonal than tiles of 128; and the head dim padded to DP. The sums over tiles are
 * closed-form (clamped_tiles), any length. Varlen and cache calls (lengths on the device):
 * the rows' padding (tiles x BM over the rows). */
static void sm90_grid(const opsi_problem *p, int bm, int bn, int dp, opsi_grid_estimate *e) {
  const int64_t *d = p->dims;
  const double rows = ceil(opsi_sdpa_rows_per_batch(p));
  const double tiles = rows > 0 ? ceil(rows / (double)bm) : 0.0;
  e->blocks = tiles * (double)d[OPSI_SDPA_B] * (double)d[OPSI_SDPA_HQ];
  const double head_pad = head_dim_pad(p, dp);
  e->pad_factor = (rows > 0 ? tiles * (double)bm / rows : 1.0) * head_pad;
  const int64_t sq = d[OPSI_SDPA_SQ], sk = d[OPSI_SDPA_SK];
  if (!opsi_sdpa_persistent(p) || sq <= 0 || sk <= 0 || sq > INT32_MAX || sk > INT32_MAX) return;
  const double visible = opsi_sdpa_visible_pairs(sq, sk, p->extra[0], p->extra[1]);
  if (visible <= 0) return;
  /* a window side past both lengths cuts nothing: held there, every sum below fits */
  const int64_t left = p->extra[0] < 0 ? -1 : clamp64(p->extra[0], 0, sq + sk);
  const int64_t right = p->extra[1] < 0 ? -1 : clamp64(p->extra[1], 0, sq + sk);
  const int64_t diag = sk - sq, n = (sq + bm - 1) / bm, full = sq / bm; /* full: tiles of bm real rows */
  double key_tiles = 0.0;
  if (right < 0) {
    key_tiles = (double)n * (double)((sk + bn - 1) / bn);
  } else {
    key_tiles = clamped_tiles(full, bm, bm + diag + right, sk, bn, 1);
    if (full < n) key_tiles += (double)((clamp64(sq + diag + right, 0, sk) + bn - 1) / bn); /* the last, short */
  }
  if (left >= 0) key_tiles -= clamped_tiles(n, bm, diag - left, sk, bn, 0);
  const double computed = (double)bm * (double)bn * key_tiles;
  e->pad_factor = (computed > visible ? computed / visible : 1.0) * head_pad;
}

/* The launcher's plan (sdpa_cuda_launch.cu) for work tiles of BM query rows: persistent on
 * sm_count blocks, by length or head by head (opsi_sdpa_sm90_by_length), or a block a tile. */
static const char *sm90_plan(const opsi_problem *p, int64_t bm) {
  if (!opsi_sdpa_persistent(p)) return OPSI_SDPA_SM90_PLAN_TILE;
  const int64_t *d = p->dims;
  const double tiles =
      ceil((double)d[OPSI_SDPA_SQ] / (double)bm) * (double)d[OPSI_SDPA_HQ] * (double)d[OPSI_SDPA_B];
  const int64_t grid = p->sm_count > 0 ? p->sm_count : 1;
  const int64_t t = tiles < 0x1p62 ? (int64_t)tiles : INT64_MAX;
  const int by_length =
      opsi_sdpa_sm90_by_length(!opsi_uniform_work(p), t, grid, d[OPSI_SDPA_B], d[OPSI_SDPA_HKV]);
  return by_length ? OPSI_SDPA_SM90_PLAN_BY_LENGTH : OPSI_SDPA_SM90_PLAN_PERSISTENT;
}
/* A shape's estimate and plan (sm90_grid_<SHAPE>, sm90_plan_<SHAPE>), for its rows */
#define SM90_SHAPE_FNS(S)                                                                        \
  static void sm90_grid_##S(const opsi_problem *p, opsi_grid_estimate *e) {                      \
    sm90_grid(p, OPSI_SDPA_SM90_##S##_BM, OPSI_SDPA_SM90_##S##_BN, OPSI_SDPA_SM90_##S##_DP, e); \
  }                                                                                              \
  static const char *sm90_plan_##S(const opsi_problem *p) { return sm90_plan(p, OPSI_SDPA_SM90_##S##_BM); }
SM90_SHAPE_FNS(D64)
SM90_SHAPE_FNS(D64_M128)
SM90_SHAPE_FNS(D128)
SM90_SHAPE_FNS(D256)
#undef SM90_SHAPE_FNS

static const char *sm90_pair_plan(const opsi_problem *p) {
  (void)p; /* the row takes uniform calls alone */
  return OPSI_SDPA_SM90_PLAN_PAIR;
}

/* The split-KV kernels (sdpa_split.cuh): a block is BM packed rows (query rows x the query
 * heads of one KV head) over one part of the keys; the part count comes from the shape and the
 * device (sdpa_split_shape.h), as the launcher takes it. */
/* Empty operands may carry extents near 2^63, where the shape functions' products would
 * overflow. A call with an empty q (no batch, rows, heads or head dims) has no tiles and one
 * part; a count of blocks or keys too large for them takes one part too (more than fill any
 * device). A call the split kernels run has non-empty q and k, whose element counts bound
 * the rest. */
static int64_t split_row_tiles(const opsi_problem *p, int bm) {
  const int64_t *d = p->dims;
  if (d[OPSI_SDPA_B] <= 0 || d[OPSI_SDPA_SQ] <= 0 || d[OPSI_SDPA_HQ] <= 0 || d[OPSI_SDPA_D] <= 0 ||
      d[OPSI_SDPA_HKV] <= 0)
    return 0;
  return opsi_sdpa_split_row_tiles(d[OPSI_SDPA_SQ], d[OPSI_SDPA_HQ] / d[OPSI_SDPA_HKV], bm);
}

/* The call's parts, and the wave's count in *wave (opsi_sdpa_split_parts) where not NULL */
static int32_t split_parts(const opsi_problem *p, int bm, int per_sm, int32_t *wave) {
  const int64_t tiles = split_row_tiles(p, bm);
  int64_t units;
  if (wave != NULL) *wave = 1;
  if (tiles == 0 || __builtin_mul_overflow(p->dims[OPSI_SDPA_B], p->dims[OPSI_SDPA_HKV], &units) ||
      __builtin_mul_overflow(units, tiles, &units) || units > INT64_MAX / 256 ||
      p->dims[OPSI_SDPA_SK] > INT64_MAX / 2)
    return 1;
  return opsi_sdpa_split_parts(p->sm, p->dims[OPSI_SDPA_B], p->dims[OPSI_SDPA_HKV], tiles, p->dims[OPSI_SDPA_SK],
                               p->sm_count, per_sm, wave);
}

/* Whether a cluster merges the parts (one launch, no workspace); split_parts gave one part
 * where the units would overflow */
static int split_clustered(const opsi_problem *p, int bm, int per_sm, int32_t parts) {
  if (parts <= 1) return 0;
  const int64_t units = opsi_sdpa_split_units(p->dims[OPSI_SDPA_B], p->dims[OPSI_SDPA_HKV], split_row_tiles(p, bm));
  return opsi_sdpa_split_clustered(p->sm, units, parts, p->sm_count, per_sm);
}

/* The parts' workspace (none where a cluster merges them); SIZE_MAX (which no caller has)
 * where it would not fit. */
static size_t split_workspace(const opsi_problem *p, int32_t parts, int clustered) {
  const int64_t *d = p->dims;
  if (clustered) return 0;
  const double need = (double)parts * (double)d[OPSI_SDPA_TQ] * (double)d[OPSI_SDPA_HQ] *
                      (4.0 * (double)((d[OPSI_SDPA_DV] + 3) / 4 * 4) + 4.0);
  if (need > 0x1p62) return SIZE_MAX;
  return opsi_sdpa_split_workspace(parts, 0, d[OPSI_SDPA_TQ], d[OPSI_SDPA_HQ], d[OPSI_SDPA_DV]);
}

static void split_grid(const opsi_problem *p, int dp, int bm, int per_sm, opsi_grid_estimate *e) {
  const int64_t tiles = split_row_tiles(p, bm), hkv = p->dims[OPSI_SDPA_HKV] > 0 ? p->dims[OPSI_SDPA_HKV] : 1;
  const int32_t parts = split_parts(p, bm, per_sm, NULL);
  const double rows = (double)p->dims[OPSI_SDPA_SQ] * (double)(p->dims[OPSI_SDPA_HQ] / hkv);
  e->blocks = (double)p->dims[OPSI_SDPA_B] * (double)hkv * (double)tiles * (double)parts;
  const double head_pad = head_dim_pad(p, dp);
  e->pad_factor = (rows > 0 ? (double)(tiles * bm) / rows : 1.0) * head_pad;
  /* a KV head's second to fourth row tile reads its keys again, mostly from L2 */
  e->bytes_factor = 1.0 + 0.25 * (double)((tiles < 4 ? tiles : 4) - 1);
  /* a kernel wider than the head dim holds fewer blocks an SM: less of the stream in flight */
  if (head_pad > 1.0) e->bytes_factor *= head_pad;
  e->launches = parts > 1 && !split_clustered(p, bm, per_sm, parts) ? 2 : 1;
}

#define SDPA_SPLIT_FNS(ID, NAME, D, BM)                                                                      \
  static size_t split_workspace_##NAME(const opsi_problem *p) {                                            \
    const int32_t parts = split_parts(p, BM, OPSI_SDPA_SPLIT_D##D##_M##BM##_PER_SM, NULL);                  \
    return split_workspace(p, parts, split_clustered(p, BM, OPSI_SDPA_SPLIT_D##D##_M##BM##_PER_SM, parts));  \
  }                                                                                                          \
  static const char *split_plan_##NAME(const opsi_problem *p) {                                            \
    int32_t wave = 1;                                                                                        \
    const int32_t parts = split_parts(p, BM, OPSI_SDPA_SPLIT_D##D##_M##BM##_PER_SM, &wave);                 \
    return opsi_sdpa_split_plan(parts, split_clustered(p, BM, OPSI_SDPA_SPLIT_D##D##_M##BM##_PER_SM, parts), \
                                wave);                                                                       \
  }                                                                                                          \
  static void split_grid_##NAME(const opsi_problem *p, opsi_grid_estimate *e) {                            \
    split_grid(p, D, BM, OPSI_SDPA_SPLIT_D##D##_M##BM##_PER_SM, e);                                                     \
  }
OPSI_SDPA_SPLIT_KERNELS(SDPA_SPLIT_FNS)
#undef SDPA_SPLIT_FNS

/* Without a KV cache the split kernels take query rows up to their largest packed tile (64
 * rows): decode and speculative decoding. Longer queries are prefill, which the prefill
 * kernels stream once a query tile; the split rows' cost, fitted on decode calls, does not
 * reach there (bench/RESULTS.md: S128 and S256 calls 3-6x slower on them). */
#define OPSI_SDPA_SPLIT_DECODE_SQ_MAX 64
/* math: 16 rows over 16 keys a warp and a tile (_m16), 16 rows over 64 (_m64), against the
 * FlashAttention-2 kernels' 0.5; memory: _m16 streams K / V near the copy bandwidth, _m64
 * (four times the math a tile) about half of it (bench/RESULTS.md) */
#define SDPA_SPLIT_EFF_16 0.25f
#define SDPA_SPLIT_EFF_64 0.4f
#define SDPA_SPLIT_MEM_EFF_16 0.85f
#define SDPA_SPLIT_MEM_EFF_64 0.5f
#define SDPA_SPLIT_ROLE_16 "the block's 16 packed rows over a quarter of each key tile; cp.async ring; merge"
#define SDPA_SPLIT_ROLE_64 "16 packed rows each over every key (mma.sync; _d128 on sm_90a: wgmma, TMA); " \
                           "online softmax; merge"
/* how the tiles are laid out (OPSI_SDPA_SPLIT_WGMMA) */
#define SDPA_SPLIT_LAYOUT_MMA "16-byte chunks XOR-swizzled by row % 8"
#define SDPA_SPLIT_LAYOUT_WG                                                                            \
  "on sm_90a wgmma's 128-byte swizzle atoms (64 columns, 16-byte chunks XOR row % 8, the atoms of a " \
  "tile rows x 128 bytes apart) as TMA writes them, a stage's K and V barriers in place of the paged rows' " \
  "offsets (K / V by TMA unless the page size is not a multiple of 8), else 16-byte chunks "        \
  "XOR-swizzled by row % 8"
#define SDPA_SPLIT_LAYOUT_64_16 SDPA_SPLIT_LAYOUT_MMA
#define SDPA_SPLIT_LAYOUT_64_64 SDPA_SPLIT_LAYOUT_MMA
#define SDPA_SPLIT_LAYOUT_128_16 SDPA_SPLIT_LAYOUT_MMA
#define SDPA_SPLIT_LAYOUT_128_64 SDPA_SPLIT_LAYOUT_WG
#define SDPA_SPLIT_LAYOUT_256_16 SDPA_SPLIT_LAYOUT_MMA
#define SDPA_SPLIT_LAYOUT_256_64 SDPA_SPLIT_LAYOUT_MMA
#define SDPA_SPLIT_ROW(ID, NAME, D, BM)                                                                      \
  SDPA_SPLIT_ROW_X(ID, "cuda_sdpa_split_" #NAME, D, BM, OPSI_SDPA_SPLIT_BN, OPSI_SDPA_SPLIT_D##D##_M##BM##_STAGES,  \
                   OPSI_SDPA_SPLIT_D##D##_M##BM##_PER_SM, OPSI_SDPA_SPLIT_D##D##_SM_MIN, SDPA_SPLIT_ROLE_##BM, NAME, \
                   SDPA_SPLIT_LAYOUT_##D##_##BM),
#define SDPA_SPLIT_ROW_X(...) SDPA_SPLIT_ROW_(__VA_ARGS__)
#define SDPA_SPLIT_ROW_(ID, NAME, DP, BM, BN, STAGES, PER_SM, SM_MIN, ROLE, SUFFIX, LAYOUT)                   \
  {                                                                                                          \
      .id = ID, .name = NAME, .op = OPS_OP_SDPA, .backend = OPS_DEVICE_CUDA, .sm_min = SM_MIN, .sm_max = 90, \
      .dtypes = OPSI_DTYPE_BIT(OPS_DTYPE_F16) | OPSI_DTYPE_BIT(OPS_DTYPE_BF16),                              \
      .out_dtypes = OPSI_DTYPE_BIT(OPS_DTYPE_F16) | OPSI_DTYPE_BIT(OPS_DTYPE_BF16),                          \
      .variants = OPSI_ALL_VARIANTS,                                                                         \
      .flags = OPSI_F_CAUSAL | OPSI_F_WINDOW | OPSI_F_GQA | OPSI_F_VARLEN | OPSI_F_LSE | OPSI_F_DV_NE_D |      \
               OPSI_F_KV_CACHE | OPSI_F_PAGED,                                                               \
      .align = 16, .dim_min = {[OPSI_SDPA_D] = 1, [OPSI_SDPA_DV] = 1},                                       \
      .dim_max = {[OPSI_SDPA_B] = 65535, [OPSI_SDPA_HQ] = 65535, [OPSI_SDPA_SQ] = 2147483647,               \
                  [OPSI_SDPA_SK] = 2147483647, [OPSI_SDPA_D] = DP, [OPSI_SDPA_DV] = DP},                      \
      .roles = {{"mma warps", 4, ROLE}},                                                                     \
      .stages = STAGES,                                                                                      \
      .smem_layout = "K and V " #STAGES " stages of " #BN "x" #DP " each (every stage in flight from the "  \
                     "start), then Q " #BM " packed rows x " #DP ", " LAYOUT "; the paged rows' K and "    \
                     "V offsets of the next two tiles 2 x 2 x " #BN " int64; the merge's f32 rows of " #DP    \
                     " + 8 over the ring (merged in a cluster: the part's normalized rows, LSE in column " \
                     #DP ", which the cluster's blocks read); "                                              \
                     "row max / sum 2 x 64 floats",                                                          \
      .smem_bytes = OPSI_SDPA_SPLIT_SMEM(BM, BN, DP, STAGES), .threads = 128, .vector_bytes = 16,            \
      .deterministic = 1,                                                                                    \
      .reduction_order = "per packed row: a part's key tiles in order (online softmax), the warps' partial " \
                         "rows in warp order, the parts in part order (f32)",                                \
      .unit = OPSI_UNIT_MMA_F16, .efficiency = SDPA_SPLIT_EFF_##BM, .mem_efficiency = SDPA_SPLIT_MEM_EFF_##BM,                 \
      .bytes_factor = 1.0f,                                                                                  \
      .tiling = {{OPSI_SDPA_SQ, OPSI_SDPA_D, -1}, {BM, DP, 0}, {1, 0, 0}, {OPSI_SDPA_B, OPSI_SDPA_HKV, -1},  \
                 PER_SM},                                                                                    \
      .workspace_formula = "keys split in n > 1 parts (n fills a wave: sm_count x " #PER_SM " blocks): "      \
                           "none where a cluster merges them (sm_90, n <= 8), else n x tokens_q x heads_q x " \
                           "(round_up(head_dim_v, 4) + 1) x 4 bytes",                                        \
      .decode_sq_max = OPSI_SDPA_SPLIT_DECODE_SQ_MAX,                                                       \
      .workspace = split_workspace_##SUFFIX, .plan = split_plan_##SUFFIX, .grid = split_grid_##SUFFIX,       \
      .launch = opsi_sdpa_cuda_split_##SUFFIX, .tests = OPSI_GPU_TESTS,                                      \
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
                 OPSI_F_MASK | OPSI_F_STRIDED | OPSI_F_DV_NE_D | OPSI_F_KV_CACHE | OPSI_F_PAGED,
        .fuses = OPSI_F_MASK,
        .reduction_order = "per query row: exact softmax in double, keys in index order",
        .workspace = opsi_sdpa_cpu_workspace,
        .launch = opsi_sdpa_cpu,
    },
    OPSI_SDPA_MMA_KERNELS(SDPA_MMA_ROW)
    OPSI_SDPA_SM90_KERNELS(SDPA_SM90_ROW)
    OPSI_SDPA_SPLIT_KERNELS(SDPA_SPLIT_ROW)
};
const size_t opsi_sdpa_row_count = sizeof opsi_sdpa_rows / sizeof opsi_sdpa_rows[0];

/* ops_sdpa_backward's sm_80-class kernels (sdpa_bwd_mma.cuh): D = rowsum(dout * o) into the
 * workspace, a dK / dV pass (a block a key tile of a KV head) and a dQ pass (a block a query
 * tile of a head). For the cost model: both passes' blocks, seven products where the op's work
 * counts five, the head dim padded to DP, Q and dout read again by each key tile's block. */
static void bwd_mma_grid(const opsi_problem *p, int dp, opsi_grid_estimate *e) {
  const int64_t *d = p->dims;
  const double rows = OPSI_SDPA_BWD_MMA_ROWS(dp);
  const double key_tiles = ceil((double)d[OPSI_SDPA_SK] / rows), query_tiles = ceil((double)d[OPSI_SDPA_SQ] / rows);
  e->blocks = (double)d[OPSI_SDPA_B] * ((double)d[OPSI_SDPA_HKV] * key_tiles + (double)d[OPSI_SDPA_HQ] * query_tiles);
  e->pad_factor = 7.0 / 5.0 * head_dim_pad(p, dp);
  e->bytes_factor = 2.0;
  e->launches = 3;
}
static size_t bwd_mma_workspace(const opsi_problem *p) {
  return opsi_sdpa_bwd_mma_workspace(p->dims[OPSI_SDPA_TQ], p->dims[OPSI_SDPA_HQ]);
}
#define SDPA_BWD_MMA_FNS(ID, NAME, D) \
  static void bwd_mma_grid_##NAME(const opsi_problem *p, opsi_grid_estimate *e) { bwd_mma_grid(p, D, e); }
OPSI_SDPA_BWD_MMA_KERNELS(SDPA_BWD_MMA_FNS)
#undef SDPA_BWD_MMA_FNS

/* The warps by head dim (sdpa_bwd_mma_shape.h's SPLIT): a warp 16 rows of a block, or at d256 a
 * pair of warps 16 rows, each half of the gradient's columns */
#define SDPA_BWD_MMA_WARPS_ONE "16 keys each (dK, dV pass) or 16 query rows each (dQ pass); mma.sync, cp.async"
#define SDPA_BWD_MMA_WARPS_d64 SDPA_BWD_MMA_WARPS_ONE
#define SDPA_BWD_MMA_WARPS_d128 SDPA_BWD_MMA_WARPS_ONE
#define SDPA_BWD_MMA_WARPS_d256 "pairs a 16 keys / query rows, 128 columns each, S and dP halves traded; mma.sync, cp.async"
#define SDPA_BWD_MMA_PARTIALS_d64 ""
#define SDPA_BWD_MMA_PARTIALS_d128 ""
#define SDPA_BWD_MMA_PARTIALS_d256 "; each warp's two 16x16 f32 score partials (S, dP)"
#define SDPA_BWD_MMA_ORDER_d64 ""
#define SDPA_BWD_MMA_ORDER_d128 ""
#define SDPA_BWD_MMA_ORDER_d256 "; S and dP: each column half's k16 steps in order, then the halves added"
/* The fraction of mma.sync's peak the passes reach where no calibration says better (memory:
 * 0.35 of the bandwidth at every head dim): at d256 the warp pairs' traded partials and narrow
 * tiles keep the math far lower */
#define SDPA_BWD_MMA_EFFICIENCY_d64 0.35f
#define SDPA_BWD_MMA_EFFICIENCY_d128 0.35f
#define SDPA_BWD_MMA_EFFICIENCY_d256 0.14f
#define SDPA_BWD_MMA_ROW(ID, NAME, D)                                                                          \
  SDPA_BWD_MMA_ROW_X(ID, "cuda_sdpa_backward_mma_" #NAME, D, OPSI_SDPA_BWD_MMA_D##D##_ROWS,                     \
                     OPSI_SDPA_BWD_MMA_D##D##_STEP,                                                          \
                     OPSI_SDPA_BWD_MMA_D##D##_PER_SM, NAME),
#define SDPA_BWD_MMA_ROW_X(...) SDPA_BWD_MMA_ROW_(__VA_ARGS__)
#define SDPA_BWD_MMA_ROW_(ID, NAME, DP, ROWS, STEP, PER_SM, SUFFIX)                                               \
  {                                                                                                          \
      .id = ID, .name = NAME, .op = OPS_OP_SDPA_BACKWARD, .backend = OPS_DEVICE_CUDA, .sm_min = 80,         \
      .sm_max = 90, .dtypes = OPSI_DTYPE_BIT(OPS_DTYPE_F16) | OPSI_DTYPE_BIT(OPS_DTYPE_BF16),               \
      .out_dtypes = OPSI_DTYPE_BIT(OPS_DTYPE_F16) | OPSI_DTYPE_BIT(OPS_DTYPE_BF16),                          \
      .variants = OPSI_ALL_VARIANTS, .flags = SDPA_GPU_FLAGS, .fuses = OPSI_F_MASK, .align = 1,              \
      .dim_min = {[OPSI_SDPA_D] = 1, [OPSI_SDPA_DV] = 1},                                                    \
      .dim_max = {[OPSI_SDPA_B] = 65535, [OPSI_SDPA_HQ] = 65535, [OPSI_SDPA_SQ] = 2147483647,               \
                  [OPSI_SDPA_SK] = 2147483647, [OPSI_SDPA_D] = DP, [OPSI_SDPA_DV] = DP},                      \
      .roles = {{"mma warps", OPSI_SDPA_BWD_MMA_THREADS(DP) / 32, SDPA_BWD_MMA_WARPS_##SUFFIX}},             \
      .stages = 2,                                                                                           \
      .smem_layout = "dK / dV: K and V " #ROWS "x" #DP ", Q and dout 2 x " #STEP "x" #DP " each, LSE and D " \
                     "2 x " #STEP " floats each; dQ: Q and dout " #ROWS "x" #DP ", K and V 2 x " #STEP "x" #DP   \
                     " each; 16-byte chunks XOR-swizzled by row % 8; results staged through each warp's own "\
                     "rows" SDPA_BWD_MMA_PARTIALS_##SUFFIX,                                                    \
      .smem_bytes = OPSI_SDPA_BWD_MMA_KV_SMEM(DP), .threads = OPSI_SDPA_BWD_MMA_THREADS(DP), .vector_bytes = 16,  \
      .deterministic = 1,                                                                                    \
      .reduction_order = "no atomics: dK, dV per key over the group's query heads, then query tiles of "      \
                         #STEP ", in order; dQ per query row over key tiles of " #STEP " in order; mma k16 "   \
                         "steps in order (f32)" SDPA_BWD_MMA_ORDER_##SUFFIX,                                  \
      .unit = OPSI_UNIT_MMA_F16, .efficiency = SDPA_BWD_MMA_EFFICIENCY_##SUFFIX, .mem_efficiency = 0.35f,    \
      .bytes_factor = 1.0f,                                                                                  \
      .tiling = {{OPSI_SDPA_SK, OPSI_SDPA_D, -1}, {ROWS, DP, 0}, {1, 0, 0}, {OPSI_SDPA_B, OPSI_SDPA_HKV, -1}, \
                 PER_SM},                                                                                    \
      .workspace_formula = "D = rowsum(dout * o): tokens_q x heads_q x 4 bytes",                            \
      .workspace = bwd_mma_workspace, .grid = bwd_mma_grid_##SUFFIX, .launch = opsi_sdpa_bwd_cuda_mma_##SUFFIX, \
      .tests = OPSI_GPU_TESTS,                                                                               \
  }

/* ops_sdpa_backward's Hopper kernels (sdpa_bwd_sm90.cuh): D and the zeroed dQ accumulators,
 * one pass over key tiles of BN (a block each, or the key tiles in parts where they fill too
 * little of a wave; five products, dQ added to f32 accumulators by TMA
 * reductions: in whatever order they land, or (_det_) in turns, a fixed order), dQ's
 * conversion. For the cost model:
 * the blocks, the head dim padded to DP, Q and dout read by each key tile's block and dQ's f32
 * partial sums written back as often. */
static int64_t bwd_sm90_group(const opsi_problem *p) {
  const int64_t *d = p->dims;
  return d[OPSI_SDPA_HKV] > 0 ? d[OPSI_SDPA_HQ] / d[OPSI_SDPA_HKV] : 1;
}
static int32_t bwd_sm90_parts(const opsi_problem *p, int dp) {
  const int64_t *d = p->dims;
  return opsi_sdpa_bwd_sm90_parts(d[OPSI_SDPA_B], d[OPSI_SDPA_HKV], d[OPSI_SDPA_SK], bwd_sm90_group(p),
                                  d[OPSI_SDPA_SQ], dp, p->sm_count);
}
static void bwd_sm90_grid(const opsi_problem *p, int dp, opsi_grid_estimate *e) {
  const int64_t *d = p->dims;
  e->blocks = (double)d[OPSI_SDPA_B] * (double)d[OPSI_SDPA_HKV] *
              ceil((double)d[OPSI_SDPA_SK] / OPSI_SDPA_BWD_SM90_BN_OF(dp)) * (double)bwd_sm90_parts(p, dp);
  e->pad_factor = head_dim_pad(p, dp);
  e->bytes_factor = 3.0;
  e->launches = 3;
}
static size_t bwd_sm90_workspace(const opsi_problem *p, int dp) {
  const int64_t *d = p->dims;
  return opsi_sdpa_bwd_sm90_split_workspace(d[OPSI_SDPA_TQ], d[OPSI_SDPA_HQ], dp,
                                            opsi_sdpa_bwd_sm90_key_tiles(d[OPSI_SDPA_B], d[OPSI_SDPA_HKV],
                                                                         d[OPSI_SDPA_SK], dp),
                                            bwd_sm90_parts(p, dp));
}
static size_t bwd_sm90_det_workspace(const opsi_problem *p, int dp) {
  const int64_t *d = p->dims;
  return opsi_sdpa_bwd_sm90_det_split_workspace(
      d[OPSI_SDPA_TQ], d[OPSI_SDPA_B], d[OPSI_SDPA_HQ], dp,
      opsi_sdpa_bwd_sm90_key_tiles(d[OPSI_SDPA_B], d[OPSI_SDPA_HKV], d[OPSI_SDPA_SK], dp), bwd_sm90_parts(p, dp));
}
/* The deterministic rows' order of walks and turns and their parts (sdpa_bwd_sm90_shape.h) */
static const char *bwd_sm90_det_plan(const opsi_problem *p, int dp) {
  const int64_t *d = p->dims;
  const int32_t parts = bwd_sm90_parts(p, dp);
  const int64_t tiles = opsi_sdpa_bwd_sm90_key_tiles(d[OPSI_SDPA_B], d[OPSI_SDPA_HKV], d[OPSI_SDPA_SK], dp);
  return opsi_sdpa_bwd_sm90_det_plan(
      opsi_sdpa_bwd_sm90_walk_order(p->extra[0], p->extra[1], d[OPSI_SDPA_SQ], d[OPSI_SDPA_SK],
                                    bwd_sm90_group(p), dp, parts, tiles, p->sm_count),
      parts);
}
#define SDPA_BWD_SM90_FNS(ID, NAME, D)                                                                         \
  static void bwd_sm90_grid_##NAME(const opsi_problem *p, opsi_grid_estimate *e) { bwd_sm90_grid(p, D, e); }    \
  static size_t bwd_sm90_workspace_##NAME(const opsi_problem *p) { return bwd_sm90_workspace(p, D); }         \
  static size_t bwd_sm90_det_workspace_##NAME(const opsi_problem *p) { return bwd_sm90_det_workspace(p, D); } \
  static const char *bwd_sm90_plan_##NAME(const opsi_problem *p) {                                          \
    return opsi_sdpa_bwd_sm90_plan(bwd_sm90_parts(p, D),                                                    \
                                   opsi_sdpa_bwd_sm90_uneven(p->extra[0], p->extra[1], p->dims[OPSI_SDPA_SQ], \
                                                             p->dims[OPSI_SDPA_SK]));                        \
  }                                                                                                           \
  static const char *bwd_sm90_det_plan_##NAME(const opsi_problem *p) { return bwd_sm90_det_plan(p, D); }
OPSI_SDPA_BWD_SM90_KERNELS(SDPA_BWD_SM90_FNS)
#undef SDPA_BWD_SM90_FNS

/* How dQ is summed (DQ(BM)) and the workspace after D (DQ_WORKSPACE(DP, BM)), by list */
#define SDPA_BWD_SM90_DQ_ANY(BM)                                                                              \
  .deterministic = 0,                                                                                        \
  .reduction_order = "dK, dV per key over the group's query heads, then query tiles of " #BM " (in order, "  \
                     "from a place of the key tile's own; a walk in parts: each part's steps in order, the "  \
                     "parts' sums added in part order); dQ: f32 TMA reduce-adds across key tiles, in whatever " \
                     "order they land"
#define SDPA_BWD_SM90_DQ_TURNS(BM)                                                                            \
  .deterministic = 1,                                                                                        \
  .reduction_order = "dK, dV per key over the group's query heads, then query tiles of " #BM " in order, "  \
                     "or (where the plan walks from the last query tile) over query tiles of " #BM " from the " \
                     "last, the group's query heads within each; dQ: f32 TMA reduce-adds across key tiles "     \
                     "taking turns, from the last key tile that sees the query tile to the first, or (walks "   \
                     "from the last query tile) from the first to the last (an int32 counter a query tile and " \
                     "head); a walk in parts: each part's steps in the walk's order, the parts' dK, dV sums "  \
                     "added in part order"
#define SDPA_BWD_SM90_WS_ANY(DP, BM)                                                                          \
  "f32 accumulators: tokens_q x heads_q x " #DP " x 4 bytes; with the key tiles in p parts (p = the most of 2, " \
  "4, 8 with key tiles x p <= sm_count and group x query tiles of " #BM " >= 4 p), then an int32 a key tile "  \
  "rounded up to 256 bytes and the parts' dK, dV sums: key tiles x p x 256 x " #DP " x 4 bytes"
#define SDPA_BWD_SM90_KEEPER_ANY ""
#define SDPA_BWD_SM90_KEEPER_TURNS "; one takes dQ's turns"
#define SDPA_BWD_SM90_WS_TURNS(DP, BM)                                                                        \
  "f32 accumulators: tokens_q x heads_q x " #DP " x 4 bytes, then the turn counters: (tokens_q / " #BM        \
  " + batch + 1) x heads_q x 4 bytes; with the key tiles in p parts (as the default row), then an int32 a " \
  "key tile rounded up to 256 bytes and the parts' dK, dV sums: key tiles x p x 256 x " #DP " x 4 bytes"
/* The consumers' work and dQ's pieces by head dim: 64 keys a warpgroup, or at DP 256 the
 * block's 64 keys with the products split between the two warpgroups */
#define SDPA_BWD_SM90_CONSUMERS_64 "64 keys each: wgmma S^T, dP^T, dV, dK, half of dQ; dQ to shared; LSE / D"
#define SDPA_BWD_SM90_CONSUMERS_128 SDPA_BWD_SM90_CONSUMERS_64
#define SDPA_BWD_SM90_CONSUMERS_256 "the 64 keys: one S^T, P, dV, the other dP^T, dS, dK; each half of dQ; LSE / D"
#define SDPA_BWD_SM90_PIECES_64 "dQ pieces 2 x 64x64 f32 as boxes of 32 columns"
#define SDPA_BWD_SM90_PIECES_128 SDPA_BWD_SM90_PIECES_64
#define SDPA_BWD_SM90_PIECES_256                                                                               \
  "dQ pieces 2 x 64x128 f32 as boxes of 32 columns, P 64x64 f32 (thread-major, from one warpgroup to the other)"
#define SDPA_BWD_SM90_ROW(ID, NAME, D)                                                                         \
  SDPA_BWD_SM90_ROW_X(ID, "cuda_sdpa_backward_sm90_" #NAME, D, OPSI_SDPA_BWD_SM90_BN_##D,                    \
                      OPSI_SDPA_BWD_SM90_BM_##D,                                                              \
                      OPSI_SDPA_BWD_SM90_STAGES_##D, OPSI_SDPA_BWD_SM90_LOAD_REGS, OPSI_SDPA_BWD_SM90_MMA_REGS, \
                      bwd_sm90_workspace_##NAME, opsi_sdpa_bwd_cuda_sm90_##NAME, bwd_sm90_grid_##NAME,         \
                      bwd_sm90_plan_##NAME, SDPA_BWD_SM90_DQ_ANY, SDPA_BWD_SM90_WS_ANY,                      \
                      SDPA_BWD_SM90_KEEPER_ANY, 0, SDPA_BWD_SM90_CONSUMERS_##D, SDPA_BWD_SM90_PIECES_##D),
#define SDPA_BWD_SM90_DET_ROW(ID, NAME, D)                                                                     \
  SDPA_BWD_SM90_ROW_X(ID, "cuda_sdpa_backward_sm90_det_" #NAME, D, OPSI_SDPA_BWD_SM90_BN_##D,                \
                      OPSI_SDPA_BWD_SM90_BM_##D,                                                              \
                      OPSI_SDPA_BWD_SM90_STAGES_##D, OPSI_SDPA_BWD_SM90_LOAD_REGS, OPSI_SDPA_BWD_SM90_MMA_REGS, \
                      bwd_sm90_det_workspace_##NAME, opsi_sdpa_bwd_cuda_sm90_det_##NAME,                       \
                      bwd_sm90_grid_##NAME, bwd_sm90_det_plan_##NAME, SDPA_BWD_SM90_DQ_TURNS,                   \
                      SDPA_BWD_SM90_WS_TURNS,                                                                  \
                      SDPA_BWD_SM90_KEEPER_TURNS, OPSI_KERNEL_CUDA_SDPA_BACKWARD_SM90_D##D,                    \
                      SDPA_BWD_SM90_CONSUMERS_##D, SDPA_BWD_SM90_PIECES_##D),
#define SDPA_BWD_SM90_ROW_X(...) SDPA_BWD_SM90_ROW_(__VA_ARGS__)
#define SDPA_BWD_SM90_ROW_(ID, NAME, DP, BN, BM, STAGES, LOAD_REGS, MMA_REGS, WORKSPACE, LAUNCH, GRID, PLAN, \
                           DQ, DQ_WORKSPACE, KEEPER, TWIN, CONSUMERS, PIECES)                                \
  {                                                                                                          \
      .id = ID, .name = NAME, .op = OPS_OP_SDPA_BACKWARD, .backend = OPS_DEVICE_CUDA, .sm_min = 90,         \
      .sm_max = 90, .dtypes = OPSI_DTYPE_BIT(OPS_DTYPE_F16) | OPSI_DTYPE_BIT(OPS_DTYPE_BF16),               \
      .out_dtypes = OPSI_DTYPE_BIT(OPS_DTYPE_F16) | OPSI_DTYPE_BIT(OPS_DTYPE_BF16),                          \
      .variants = OPSI_ALL_VARIANTS,                                                                         \
      .flags = OPSI_F_CAUSAL | OPSI_F_WINDOW | OPSI_F_GQA | OPSI_F_VARLEN | OPSI_F_LSE | OPSI_F_DV_NE_D,     \
      .align = 16, .dim_min = {[OPSI_SDPA_D] = 1, [OPSI_SDPA_DV] = 1},                                       \
      .dim_max = {[OPSI_SDPA_B] = 65535, [OPSI_SDPA_HQ] = 65535, [OPSI_SDPA_SQ] = 2147483647,               \
                  [OPSI_SDPA_SK] = 2147483647, [OPSI_SDPA_D] = DP, [OPSI_SDPA_DV] = DP},                      \
      .roles = {{"producer", 4, "setmaxnreg " #LOAD_REGS ": TMA of K / V once, Q / dout (" #STAGES           \
                                " stages); TMA reduce-add of dQ" KEEPER},                                    \
                {"consumers", 8, "setmaxnreg " #MMA_REGS ": " CONSUMERS}},                                  \
      .stages = STAGES,                                                                                      \
      .smem_layout = "K and V " #BN "x" #DP ", Q and dout " #STAGES " stages of " #BM "x" #DP " each, dS 2 x " \
                     #BM "x" #BN " (stmatrix, transposed), as boxes of 64 columns, 128-byte swizzle, "      \
                     "1024-byte aligned; " PIECES "; LSE and D 2 x "                                       \
                     #BM " floats each; 13 mbarriers (2 turn, 2 added: _det_'s)",                        \
      .smem_bytes = OPSI_SDPA_BWD_SM90_SMEM(DP), .threads = 384, .vector_bytes = 16, DQ(BM), .twin = TWIN, \
      .unit = OPSI_UNIT_WGMMA_F16, .efficiency = 0.35f, .bytes_factor = 1.0f,                               \
      .tiling = {{OPSI_SDPA_SK, OPSI_SDPA_D, -1}, {BN, DP, 0}, {1, 0, 0}, {OPSI_SDPA_B, OPSI_SDPA_HKV, -1},   \
                 1},                                                                                         \
      .workspace_formula = "D = rowsum(dout * o): tokens_q x heads_q x 4 bytes rounded up to 256, then dQ's " \
                           DQ_WORKSPACE(DP, BM),                                                             \
      .workspace = WORKSPACE, .grid = GRID, .plan = PLAN, .launch = LAUNCH, .tests = OPSI_GPU_TESTS,          \
  }

/* ops_sdpa_backward: the CPU reference, the Hopper kernels, the sm_80-class kernels */
const opsi_kernel_row opsi_sdpa_backward_rows[] = {
    {
        .id = OPSI_KERNEL_CPU_SDPA_BWD,
        .name = "cpu_sdpa_backward_ref",
        .tests = "//tests/kernels:sdpa_backward_test //tests/errors:sdpa_errors_test",
        .workspace_formula = "((head_dim + head_dim_v + 1) * max_seqlen_k + head_dim) * 8 bytes",
        .op = OPS_OP_SDPA_BACKWARD,
        OPSI_CPU_ROW_COMMON,
        .out_dtypes = OPSI_FLOAT_DTYPES,
        .variants = OPSI_ALL_VARIANTS,
        .flags = OPSI_F_CAUSAL | OPSI_F_WINDOW | OPSI_F_GQA | OPSI_F_VARLEN | OPSI_F_LSE | OPSI_F_MASK |
                 OPSI_F_STRIDED | OPSI_F_DV_NE_D,
        .fuses = OPSI_F_MASK,
        .reduction_order = "per sequence and KV head: dk, dv over the group's query heads, then rows, in "
                           "index order, in double; dq over keys in index order",
        .workspace = opsi_sdpa_bwd_cpu_workspace,
        .launch = opsi_sdpa_bwd_cpu,
    },
    OPSI_SDPA_BWD_SM90_KERNELS(SDPA_BWD_SM90_ROW)
    OPSI_SDPA_BWD_SM90_DET_KERNELS(SDPA_BWD_SM90_DET_ROW)
    OPSI_SDPA_BWD_MMA_KERNELS(SDPA_BWD_MMA_ROW)
};
const size_t opsi_sdpa_backward_row_count = sizeof opsi_sdpa_backward_rows / sizeof opsi_sdpa_backward_rows[0];
