/*
 * The attention call as every CUDA attention kernel reads it: one plain C struct, built once
 * by the dispatch layer (dispatch/op_sdpa.c) from the validated call and passed to the kernel
 * by value. Everything the call's normalization decides is settled here, so that no launcher
 * or kernel re-derives it: the 4-D views (varlen as a batch stride of 0), the scale in the
 * log2 domain, window sides clamped to what can cut keys, and whether the rows are aligned
 * for 16-byte copies.
 */
#ifndef OPSLIB_KERNELS_FLASH_SDPA_GEOM_H_
#define OPSLIB_KERNELS_FLASH_SDPA_GEOM_H_

#include <stdint.h>

/* A 4-D [B, S, H, D] operand: element (b, s, h, d) at p + b * sb + s * ss + h * sh + d * sd
 * (varlen: sb = 0 and s counts from the sequence's start in the packed tensor). */
typedef struct opsi_sdpa_view {
  const void *p;
  int64_t sb, ss, sh, sd;
} opsi_sdpa_view;

typedef struct opsi_sdpa_geom {
  opsi_sdpa_view q, k, v, o;
  float *lse;             /* NULL when absent; element (b, h, s) at b * lb + h * lh + s * ls */
  int64_t lb, lh, ls;
  const void *mask;       /* NULL when absent; (b, h, i, j) at b * mb + h * mh + i * mi + j * mj */
  int64_t mb, mh, mi, mj;
  int32_t mask_dtype;
  const int32_t *cu_q;    /* varlen: cu_seqlens on the device (element strides cu_sq, cu_sk) */
  const int32_t *cu_k;
  int64_t cu_sq, cu_sk;
  int32_t batch, heads_q, group; /* group = Hq / Hkv */
  int32_t seqlen_q, seqlen_k;    /* varlen: the max_seqlen bounds */
  int32_t d, dv;
  float scale_log2;              /* scale * log2(e) */
  int32_t window_left, window_right; /* -1: unbounded, also for a side wider than every key
                                        (left >= Sk, right >= Sq), which keeps the kernels'
                                        int sums of window edges in range */
  int32_t aligned; /* q, k, v, o: unit-stride rows, 16-byte aligned base and strides */
  /* KV cache: sequence b sees its first kv_lens[b * kl_s] keys (clamped to seqlen_k, the
   * capacity); NULL otherwise. Paged: k and v views are (page, row in page, h, d), and key j
   * of sequence b is row j % page_size of page pages[b * pg_sb + (j / page_size) * pg_sp]
   * (an id outside [0, num_pages) reads as zeros); pages NULL for a dense cache. */
  const int32_t *kv_lens;
  int64_t kl_s;
  const int32_t *pages;
  int64_t pg_sb, pg_sp, num_pages;
  int32_t page_size, pages_per_seq;
} opsi_sdpa_geom;

/* The backward as its CUDA kernels read it: the forward's call (o and lse read), dout like o,
 * the gradients like q, k and v, and the workspace's D = rowsum(dout * o), f32, element
 * (b, s, h) at (b * dsum_sb + s) * heads_q + h (varlen: dsum_sb = 0, s the packed row); where
 * dQ is summed by atomics (the Hopper kernels), its f32 accumulators, dq_cols a (row, head)
 * in the same order (NULL otherwise); where the atomics take turns (the deterministic Hopper
 * kernels), dq_turns int32 counters (NULL and 0 otherwise), zeroed with the accumulators.
 * Where the Hopper kernels cut each key tile's walk in kv_parts > 1 parts
 * (sdpa_bwd_sm90_shape.h), the parts' f32 dK / dV sums at kv_sums and an int32 counter a key
 * tile of the parts done: dq_turn / dq_turns are those counters (the default kernels), or the
 * counters follow the dq_turns turns (the deterministic ones) (kv_parts 1 and kv_sums NULL
 * otherwise). */
typedef struct opsi_sdpa_bwd_geom {
  opsi_sdpa_geom f;
  opsi_sdpa_view dout, dq, dk, dv;
  float *dsum;
  int64_t dsum_sb;
  float *dq_acc;
  int32_t dq_cols;
  int32_t *dq_turn;
  int64_t dq_turns;
  int32_t order_chunk; /* the Hopper main pass's launch order: groups a chunk (0: the grid's) */
  int32_t walk_order;  /* the deterministic Hopper kernels' order of walks and turns (sdpa_bwd_sm90_shape.h) */
  float *kv_sums;
  int32_t kv_parts;
  int64_t rows;  /* query rows of the call: batch x seqlen_q, varlen the packed rows */
  float scale;   /* the softmax scale (f.scale_log2 / log2(e)) */
  int32_t aligned; /* f.aligned, and dout, dq, dk, dv alike */
  int32_t row_heads; /* the launches around the main passes: heads a warp's unit (fa2bwd::row_heads) */
} opsi_sdpa_bwd_geom;

#endif /* OPSLIB_KERNELS_FLASH_SDPA_GEOM_H_ */
