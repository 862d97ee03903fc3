/*
 * The validated operands of one ops_sdpa call, normalized by the dispatcher so that every
 * kernel sees one shape of problem:
 *   q, k, v, o are 4-D [B, S, H, D] views. Varlen calls become B = batch views whose batch
 *   stride is 0 over the packed [T, H, D] tensors; row i of sequence b is at S index
 *   seq_start(b) + i. A paged cache's k and v are [num_pages, page_size, H, D] views.
 *   lse is a 3-D [B, Hq, Sq] view (varlen: batch stride 0, S index seq_start(b) + i).
 *   mask is a 4-D view broadcast to [B, Hq, Sq, Sk] (strides 0 on broadcast axes).
 * The CPU reference reads the tensors; the CUDA launchers read geom and keep only the TMA
 * encoding (from the tensors) and the grid.
 */
#ifndef OPSLIB_KERNELS_FLASH_SDPA_ARGS_H_
#define OPSLIB_KERNELS_FLASH_SDPA_ARGS_H_

#include <stdint.h>

#include "kernels/flash/sdpa_geom.h"
#include "opslib/tensor.h"

typedef struct opsi_sdpa_args {
  ops_tensor q, k, v, o;
  ops_tensor lse;  /* valid when has_lse */
  ops_tensor mask; /* valid when has_mask */
  int has_lse;
  int has_mask;
  int varlen;
  const int32_t *cu_seqlens_q; /* varlen: [batch + 1] on the handle's device */
  const int32_t *cu_seqlens_k;
  int64_t cu_stride_q; /* element stride of cu_seqlens_q */
  int64_t cu_stride_k;
  /* KV cache (kv_lens): sequence b sees keys [0, kv_lens[b]) of k / v, which are [batch,
   * capacity, Hkv, D] views, or with a block table [num_pages, page_size, Hkv, D] pools. */
  int cache;
  int paged;
  const int32_t *kv_lens; /* [batch], element stride kv_lens_stride */
  int64_t kv_lens_stride;
  const int32_t *block_table; /* [batch, pages_per_seq] at b * bt_sb + page * bt_sp */
  int64_t bt_sb, bt_sp;
  int64_t pages_per_seq, num_pages, page_size;
  int64_t batch;
  int64_t seqlen_q; /* varlen: max_seqlen_q */
  int64_t seqlen_k; /* varlen: max_seqlen_k; a KV cache: its capacity a sequence */
  int64_t heads_q;
  int64_t heads_kv;
  int64_t head_dim;
  int64_t head_dim_v;
  double scale;
  int64_t window_left;  /* -1: unbounded */
  int64_t window_right; /* -1: unbounded; 0 when causal */
  opsi_sdpa_geom geom;  /* the same call as the CUDA kernels read it (CUDA runs; else 0) */
  int uniform;          /* every work tile reads the same keys (opsi_uniform_work): the
                           launchers' pair plans, as the rows predict them */
  int persistent;       /* the work tiles come from one [B, S, H, D] layout
                           (opsi_sdpa_persistent): the Hopper launcher's persistent plan */
} opsi_sdpa_args;

/* The CPU references' element offset of (b, s, h, d) in a 4-D view. */
static inline int64_t opsi_sdpa_off4(const ops_tensor *t, int64_t b, int64_t s, int64_t h, int64_t d) {
  return b * t->strides[0] + s * t->strides[1] + h * t->strides[2] + d * t->strides[3];
}

/* Key j is visible to query i when it lies in the (causal / sliding) window whose diagonal is
 * aligned to the bottom-right corner: j - i == diag == sk - sq on the diagonal. */
static inline int opsi_sdpa_key_visible(const opsi_sdpa_args *a, int64_t i, int64_t j, int64_t diag) {
  if (a->window_left >= 0 && j < i + diag - a->window_left) return 0;
  if (a->window_right >= 0 && j > i + diag + a->window_right) return 0;
  return 1;
}

#endif /* OPSLIB_KERNELS_FLASH_SDPA_ARGS_H_ */
