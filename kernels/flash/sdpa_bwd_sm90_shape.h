/*
 * The Hopper attention backward's shape (sdpa_bwd_sm90.cuh), in one place for the kernels and
 * the capability rows that state it: a block holds BN keys of one (batch, KV head) and streams
 * query tiles of BM rows through a ring of STAGES; setmaxnreg gives the producer warpgroup
 * LOAD_REGS registers a thread and each consumer MMA_REGS. At DP 64 / 128 each consumer
 * warpgroup takes 64 of the BN = 128 keys; at DP 256 (BN 64) both take the block's 64 keys and
 * split the products between them (one S^T and dV, the other dP^T and dK, each half of dQ's
 * columns). Shared memory, 16-bit tiles of DP columns as boxes of 64 (128-byte swizzle): K and
 * V BN x DP, Q and dout STAGES x BM x DP each, dS 2 x BM x BN, dQ's f32 pieces (a consumer
 * warpgroup's 64 rows x 64 columns, at DP 256 x 128, as boxes of 32 columns), at DP 256 P's
 * f32 exchange (BM x BN), LSE and D 2 x BM floats each, and the mbarriers (K / V full, a full
 * and an empty a stage, 2 turn and 2 added, a full and an empty a dQ piece).
 */
#ifndef OPSLIB_KERNELS_FLASH_SDPA_BWD_SM90_SHAPE_H_
#define OPSLIB_KERNELS_FLASH_SDPA_BWD_SM90_SHAPE_H_

#include <stddef.h>
#include <stdint.h>

#define OPSI_SDPA_BWD_SM90_BN 128
#define OPSI_SDPA_BWD_SM90_BN_64 OPSI_SDPA_BWD_SM90_BN
#define OPSI_SDPA_BWD_SM90_BN_128 OPSI_SDPA_BWD_SM90_BN
#define OPSI_SDPA_BWD_SM90_BN_256 64
#define OPSI_SDPA_BWD_SM90_BN_OF(DP) ((DP) == 256 ? OPSI_SDPA_BWD_SM90_BN_256 : OPSI_SDPA_BWD_SM90_BN)
/* query tile rows by head dim (BM_<DP>): two 64-row halves at DP 64, one wgmma M above */
#define OPSI_SDPA_BWD_SM90_BM_64 128
#define OPSI_SDPA_BWD_SM90_BM_128 64
#define OPSI_SDPA_BWD_SM90_BM_256 64
#define OPSI_SDPA_BWD_SM90_BM_OF(DP)                                                                           \
  ((DP) == 64 ? OPSI_SDPA_BWD_SM90_BM_64 : (DP) == 128 ? OPSI_SDPA_BWD_SM90_BM_128 : OPSI_SDPA_BWD_SM90_BM_256)
/* ring stages by head dim: at DP 256 one stage of Q and dout is what shared memory holds */
#define OPSI_SDPA_BWD_SM90_STAGES_64 2
#define OPSI_SDPA_BWD_SM90_STAGES_128 2
#define OPSI_SDPA_BWD_SM90_STAGES_256 1
#define OPSI_SDPA_BWD_SM90_STAGES_OF(DP)                                                                       \
  ((DP) == 64 ? OPSI_SDPA_BWD_SM90_STAGES_64                                                                   \
              : (DP) == 128 ? OPSI_SDPA_BWD_SM90_STAGES_128 : OPSI_SDPA_BWD_SM90_STAGES_256)
/* a consumer warpgroup's dQ piece a step, f32: 64 x 64, at DP 256 64 x 128 */
#define OPSI_SDPA_BWD_SM90_DQ_BYTES_OF(DP) (64 * ((DP) == 256 ? 128 : 64) * 4)
/* DP 256: P (f32, BM x BN) from the warpgroup that computes it to the one that computes dS */
#define OPSI_SDPA_BWD_SM90_XP_BYTES_OF(DP) ((DP) == 256 ? OPSI_SDPA_BWD_SM90_BM_256 * OPSI_SDPA_BWD_SM90_BN_256 * 4 : 0)
#define OPSI_SDPA_BWD_SM90_LOAD_REGS 24
#define OPSI_SDPA_BWD_SM90_MMA_REGS 240

#define OPSI_SDPA_BWD_SM90_SMEM(DP)                                                                            \
  (1024 +                                                                                                      \
   (2 * OPSI_SDPA_BWD_SM90_BN_OF(DP) + 2 * OPSI_SDPA_BWD_SM90_STAGES_OF(DP) * OPSI_SDPA_BWD_SM90_BM_OF(DP)) *   \
       (DP) * 2 +                                                                                              \
   2 * OPSI_SDPA_BWD_SM90_BM_OF(DP) * OPSI_SDPA_BWD_SM90_BN_OF(DP) * 2 + 2 * OPSI_SDPA_BWD_SM90_DQ_BYTES_OF(DP) + \
   OPSI_SDPA_BWD_SM90_XP_BYTES_OF(DP) + 2 * 2 * OPSI_SDPA_BWD_SM90_BM_OF(DP) * 4 +                             \
   8 * (9 + 2 * OPSI_SDPA_BWD_SM90_STAGES_OF(DP)))

/* The workspace, for the rows and the launcher alike: D of every (query row, head), f32,
 * rounded up to 256 bytes, then dQ's f32 accumulators, DP columns a (query row, head); SIZE_MAX
 * (which no caller has) where that does not fit. dq_offset: where the accumulators start, for
 * a call whose workspace fits. */
static inline size_t opsi_sdpa_bwd_sm90_dq_offset(int64_t tokens_q, int64_t heads_q) {
  return ((size_t)tokens_q * (size_t)heads_q * 4 + 255) / 256 * 256;
}
static inline size_t opsi_sdpa_bwd_sm90_workspace(int64_t tokens_q, int64_t heads_q, int dp) {
  const double need = (double)tokens_q * (double)heads_q * (4.0 * dp + 4.0) + 256.0;
  if (need > 0x1p62 || need > (double)SIZE_MAX) return SIZE_MAX;
  return opsi_sdpa_bwd_sm90_dq_offset(tokens_q, heads_q) + (size_t)tokens_q * (size_t)heads_q * (size_t)dp * 4;
}

/* Key tiles in parts (the default and the deterministic kernels alike): where the blocks of
 * the key tiles (batch x KV heads x key tiles of BN) fill too little of a wave, each key tile's
 * walk over its (query head, query tile) steps is cut into `parts` runs of consecutive steps (in
 * the walk's order), a block each. Every part writes its f32 dK and dV sums to the workspace
 * (its 256 consumer threads' accumulators) and counts itself in on an int32 counter a key tile
 * (zeroed by the launch that computes D); the part that counts last adds the parts' sums in
 * part order and stores dK and dV: the same sum whichever part finishes last. A deterministic
 * part (walking ascending or round: walk_order below) takes dQ's turns at its steps' query
 * tiles (a turn is a key tile's, whichever part has the step). parts: the most of
 * 2, 4 and 8
 * whose blocks fit one wave (a block an SM) with at least SPLIT_MIN_STEPS steps a part on a
 * walk over every query tile (group x query tiles); 1 where none does, and at DP 256, whose
 * consumers hold dK or dV whole (no part's sums in last_part's layout). */
#define OPSI_SDPA_BWD_SM90_SPLIT_MAX 8
#define OPSI_SDPA_BWD_SM90_SPLIT_MIN_STEPS 4
/* key tiles of a call at head dim class dp: 0 for an empty one, INT64_MAX where the count
 * overflows (such a call is never split) */
static inline int64_t opsi_sdpa_bwd_sm90_key_tiles(int64_t batch, int64_t heads_kv, int64_t seqlen_k, int dp) {
  if (batch <= 0 || heads_kv <= 0 || seqlen_k <= 0) return 0;
  const int64_t bn = OPSI_SDPA_BWD_SM90_BN_OF(dp), per = seqlen_k / bn + (seqlen_k % bn != 0);
  int64_t t;
  if (__builtin_mul_overflow(batch, heads_kv, &t) || __builtin_mul_overflow(t, per, &t)) return INT64_MAX;
  return t;
}
static inline int32_t opsi_sdpa_bwd_sm90_parts(int64_t batch, int64_t heads_kv, int64_t seqlen_k, int64_t group,
                                               int64_t seqlen_q, int dp, int64_t sm_count) {
  const int64_t tiles = opsi_sdpa_bwd_sm90_key_tiles(batch, heads_kv, seqlen_k, dp);
  if (dp == 256 || tiles <= 0 || group <= 0 || seqlen_q <= 0 || sm_count <= 0 || tiles > sm_count / 2 ||
      seqlen_q > (1 << 30) || group > (1 << 20)) {
    return 1;
  }
  const int64_t bm = OPSI_SDPA_BWD_SM90_BM_OF(dp), steps = group * ((seqlen_q + bm - 1) / bm);
  int32_t best = 1;
  for (int32_t p = 2; p <= OPSI_SDPA_BWD_SM90_SPLIT_MAX; p *= 2) {
    if (tiles * p > sm_count || steps < (int64_t)p * OPSI_SDPA_BWD_SM90_SPLIT_MIN_STEPS) break;
    best = p;
  }
  return best;
}
/* Whether a causal mask or a window (-1: none; a side at least as wide as the keys or the
 * queries cuts nothing) makes the key tiles' walks differ in length: the main pass then
 * launches its blocks longest walk first (sdpa_bwd_sm90.cuh, order_chunk). */
static inline int opsi_sdpa_bwd_sm90_uneven(int64_t window_left, int64_t window_right, int64_t seqlen_q,
                                            int64_t seqlen_k) {
  return (window_left >= 0 && window_left < seqlen_k) || (window_right >= 0 && window_right < seqlen_q);
}
/* The plan of a part count and launch order, in static words (explain, the profiler). */
#define OPSI_SDPA_BWD_SM90_PLAN_PARTS(n)                                                                       \
  "each key tile's walk in " #n " parts, the last to finish adds their dK, dV in part order"
#define OPSI_SDPA_BWD_SM90_PLAN_LONGEST "the longest walks launched first"
static inline const char *opsi_sdpa_bwd_sm90_plan(int32_t parts, int uneven) {
  switch (parts * 2 + (uneven != 0)) {
    case 2: return "a block a key tile";
    case 3: return "a block a key tile, " OPSI_SDPA_BWD_SM90_PLAN_LONGEST;
    case 4: return OPSI_SDPA_BWD_SM90_PLAN_PARTS(2);
    case 5: return OPSI_SDPA_BWD_SM90_PLAN_PARTS(2) "; " OPSI_SDPA_BWD_SM90_PLAN_LONGEST;
    case 8: return OPSI_SDPA_BWD_SM90_PLAN_PARTS(4);
    case 9: return OPSI_SDPA_BWD_SM90_PLAN_PARTS(4) "; " OPSI_SDPA_BWD_SM90_PLAN_LONGEST;
    case 16: return OPSI_SDPA_BWD_SM90_PLAN_PARTS(8);
    case 17: return OPSI_SDPA_BWD_SM90_PLAN_PARTS(8) "; " OPSI_SDPA_BWD_SM90_PLAN_LONGEST;
    default: return "each key tile's walk in parts (unlisted count)";
  }
}
/* The parts' room in a workspace whose first `base` bytes the kernels use otherwise (the
 * default kernels' accumulators, workspace above; the deterministic ones' accumulators and
 * turns, det_workspace below): with parts > 1, from base the counters (an int32 a key tile),
 * then, from the next 256 bytes (parts_sums_at), the parts' sums (a key tile's parts x 256
 * threads x DP floats). with_parts: the workspace's size, SIZE_MAX where that does not fit. */
static inline size_t opsi_sdpa_bwd_sm90_parts_sums_at(size_t base, int64_t tiles) {
  return (base + (size_t)tiles * 4 + 255) / 256 * 256;
}
static inline size_t opsi_sdpa_bwd_sm90_with_parts(size_t base, int64_t tiles, int32_t parts, int dp) {
  if (parts <= 1 || base == SIZE_MAX) return base;
  const double sums = (double)tiles * (4.0 + (double)parts * 256.0 * dp * 4.0) + 512.0;
  if ((double)base + sums > 0x1p62 || (double)base + sums > (double)SIZE_MAX) return SIZE_MAX;
  return opsi_sdpa_bwd_sm90_parts_sums_at(base, tiles) + (size_t)tiles * (size_t)parts * 256 * dp * 4;
}
static inline size_t opsi_sdpa_bwd_sm90_split_workspace(int64_t tokens_q, int64_t heads_q, int dp, int64_t tiles,
                                                        int32_t parts) {
  return opsi_sdpa_bwd_sm90_with_parts(opsi_sdpa_bwd_sm90_workspace(tokens_q, heads_q, dp), tiles, parts, dp);
}

/* The deterministic kernels' order of walks and turns (sdpa_bwd_sm90.cuh, DET), by shape:
 *   WALK_ROT (2): where no mask cuts the walks, a (batch, KV head) has more than one key tile
 *     and the walk's steps (group x query tiles of BM) cut into parts of one length, no fewer
 *     steps than key tiles, and the whole grid (key tiles x parts) fits one wave of blocks (at
 *     most sm_count): key tile j's walk starts at its step j, as the default kernels' do, and
 *     the turns at a query tile go in the order the walks' parts reach it, a step apart, so
 *     that a turn's hand-over hides under a step; the turns then go round (a block waits for
 *     blocks launched after it too), so the blocks launch cooperatively (all resident at once,
 *     or the launch falls back to WALK_ASC). A sequence of cu_seqlens whose steps do not
 *     (parts of unequal length, more key tiles than a part's steps) walks ascending.
 *   WALK_DESC (1): walks from the last query tile, turns from the first key tile, where a
 *     causal mask or a window cuts the walks (uneven), the key tiles' walks are whole (parts 1),
 *     and either each key tile's walk is at least DESC_SHRINK steps shorter than the one
 *     before it (group x BN / BM: the query tiles of BM rows its BN keys drop, for each query
 *     head), so that a turn's hand-over hides under those steps, or at least DESC_SHRINK_FEW
 *     steps shorter where the blocks fill at most DESC_WAVES waves (sm_count blocks a wave;
 *     ascending walks launch their shortest first, which leaves the SMs of the first waves
 *     idle), or a (batch, KV head) has at most DESC_TILES key tiles, so that its line of turns
 *     is short.
 *   WALK_ASC (0): else walks from the first query tile, turns from the last key tile, whose
 *     causal turns follow one step apart; without a mask every walk reaches a query tile at the
 *     same step, and a key tile's turns wait for every later one's. Walks in parts go
 *     ascending (or round): a part's first steps are then its own (in order, one query head of
 *     the group after the other), where descending parts would all begin at the last query
 *     tile and take their turns there one after the other. */
#define OPSI_SDPA_BWD_SM90_WALK_ASC 0
#define OPSI_SDPA_BWD_SM90_WALK_DESC 1
#define OPSI_SDPA_BWD_SM90_WALK_ROT 2
#define OPSI_SDPA_BWD_SM90_DESC_SHRINK 4
#define OPSI_SDPA_BWD_SM90_DESC_SHRINK_FEW 2
#define OPSI_SDPA_BWD_SM90_DESC_WAVES 4
#define OPSI_SDPA_BWD_SM90_DESC_TILES 4
/* tiles: the call's key tiles (key_tiles above); the main pass runs tiles x parts blocks (parts
 * > 1 only where tiles are few) */
static inline int32_t opsi_sdpa_bwd_sm90_walk_order(int64_t window_left, int64_t window_right,
                                                    int64_t seqlen_q, int64_t seqlen_k, int64_t group, int dp,
                                                    int32_t parts, int64_t tiles, int64_t sm_count) {
  const int64_t bn = OPSI_SDPA_BWD_SM90_BN_OF(dp), key_tiles = (seqlen_k + bn - 1) / bn;
  if (!opsi_sdpa_bwd_sm90_uneven(window_left, window_right, seqlen_q, seqlen_k)) {
    const int64_t steps =
        group * ((seqlen_q + OPSI_SDPA_BWD_SM90_BM_OF(dp) - 1) / OPSI_SDPA_BWD_SM90_BM_OF(dp));
    const int fits = tiles > 0 && tiles <= sm_count && tiles * parts <= sm_count;
    return key_tiles > 1 && parts > 0 && steps % parts == 0 && key_tiles <= steps / parts && fits
               ? OPSI_SDPA_BWD_SM90_WALK_ROT
               : OPSI_SDPA_BWD_SM90_WALK_ASC;
  }
  if (parts > 1) return OPSI_SDPA_BWD_SM90_WALK_ASC;
  const int64_t shrink = group * (bn / OPSI_SDPA_BWD_SM90_BM_OF(dp));
  const int few_waves = tiles > 0 && sm_count > 0 && tiles <= OPSI_SDPA_BWD_SM90_DESC_WAVES * sm_count;
  return shrink >= OPSI_SDPA_BWD_SM90_DESC_SHRINK || (shrink >= OPSI_SDPA_BWD_SM90_DESC_SHRINK_FEW && few_waves) ||
                 key_tiles <= OPSI_SDPA_BWD_SM90_DESC_TILES
             ? OPSI_SDPA_BWD_SM90_WALK_DESC
             : OPSI_SDPA_BWD_SM90_WALK_ASC;
}
#define OPSI_SDPA_BWD_SM90_PLAN_DET_DESC "walks from the last query tile, turns from the first key tile"
#define OPSI_SDPA_BWD_SM90_PLAN_DET_ASC "walks from the first query tile, turns from the last key tile"
#define OPSI_SDPA_BWD_SM90_PLAN_DET_ROT \
  "walks from a place of their own, turns in the order the walks reach a query tile, every block resident"
#define OPSI_SDPA_BWD_SM90_PLAN_DET(order, n) order "; " OPSI_SDPA_BWD_SM90_PLAN_PARTS(n)
static inline const char *opsi_sdpa_bwd_sm90_det_plan(int32_t order, int32_t parts) {
  switch (parts * 3 + order) {
    case 3: return OPSI_SDPA_BWD_SM90_PLAN_DET_ASC;
    case 4: return OPSI_SDPA_BWD_SM90_PLAN_DET_DESC;
    case 5: return OPSI_SDPA_BWD_SM90_PLAN_DET_ROT;
    case 6: return OPSI_SDPA_BWD_SM90_PLAN_DET(OPSI_SDPA_BWD_SM90_PLAN_DET_ASC, 2);
    case 8: return OPSI_SDPA_BWD_SM90_PLAN_DET(OPSI_SDPA_BWD_SM90_PLAN_DET_ROT, 2);
    case 12: return OPSI_SDPA_BWD_SM90_PLAN_DET(OPSI_SDPA_BWD_SM90_PLAN_DET_ASC, 4);
    case 14: return OPSI_SDPA_BWD_SM90_PLAN_DET(OPSI_SDPA_BWD_SM90_PLAN_DET_ROT, 4);
    case 24: return OPSI_SDPA_BWD_SM90_PLAN_DET(OPSI_SDPA_BWD_SM90_PLAN_DET_ASC, 8);
    case 26: return OPSI_SDPA_BWD_SM90_PLAN_DET(OPSI_SDPA_BWD_SM90_PLAN_DET_ROT, 8);
    default: return "the turns' order, each key tile's walk in parts (unlisted count or order)";
  }
}

/* The deterministic kernels' turn counters, after the accumulators: an int32 a (query tile of
 * BM rows, head); a sequence's tiles are numbered from (its first packed row) / BM plus its
 * index, so that the tiles of neighbouring sequences never share one. With the key tiles in
 * parts, then the parts' room (with_parts; its counters zeroed with the turns). */
static inline int64_t opsi_sdpa_bwd_sm90_turns(int64_t tokens_q, int64_t batch, int64_t heads_q, int dp) {
  return (tokens_q / OPSI_SDPA_BWD_SM90_BM_OF(dp) + batch + 1) * heads_q;
}
static inline size_t opsi_sdpa_bwd_sm90_det_workspace(int64_t tokens_q, int64_t batch, int64_t heads_q, int dp) {
  const size_t base = opsi_sdpa_bwd_sm90_workspace(tokens_q, heads_q, dp);
  const double turns =
      ((double)tokens_q / OPSI_SDPA_BWD_SM90_BM_OF(dp) + (double)batch + 1.0) * (double)heads_q * 4.0;
  if (base == SIZE_MAX || (double)base + turns > 0x1p62 || (double)base + turns > (double)SIZE_MAX) return SIZE_MAX;
  return base + (size_t)opsi_sdpa_bwd_sm90_turns(tokens_q, batch, heads_q, dp) * 4;
}
static inline size_t opsi_sdpa_bwd_sm90_det_split_workspace(int64_t tokens_q, int64_t batch, int64_t heads_q, int dp,
                                                            int64_t tiles, int32_t parts) {
  return opsi_sdpa_bwd_sm90_with_parts(opsi_sdpa_bwd_sm90_det_workspace(tokens_q, batch, heads_q, dp), tiles, parts,
                                       dp);
}

#endif /* OPSLIB_KERNELS_FLASH_SDPA_BWD_SM90_SHAPE_H_ */
