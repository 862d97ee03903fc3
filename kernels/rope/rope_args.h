/*
 * The validated operands of one ops_rope or ops_kv_cache_append call, as one or two streams
 * of heads that are copied token by token, rotated or not, to their output. Inputs are seen
 * as [B, S, H, D] (a [T, H, D] input as B = 1, S = T); an output is the same, or a cache
 * [pages, page_size, H, D] that token t reaches through slots[t].
 */
#ifndef OPSLIB_KERNELS_ROPE_ROPE_ARGS_H_
#define OPSLIB_KERNELS_ROPE_ROPE_ARGS_H_

#include <stdint.h>

#include "opslib/tensor.h"

#define OPSI_ROPE_MAX_FREQS 256 /* rotary dims up to 512 */

typedef struct opsi_rope_stream {
  ops_tensor in;    /* [B, S, H, D] */
  ops_tensor out;   /* [B, S, H, D], or with to_slots [pages, page_size, H, D] */
  int32_t rotate;   /* 1: the first rotary_dim dims of each head rotate */
  int32_t to_slots; /* 1: token t is written at slot slots[t] of out */
} opsi_rope_stream;

typedef struct opsi_rope_args {
  int32_t n_streams;
  opsi_rope_stream s[2];
  int64_t batch, seq;          /* tokens = batch * seq; token t is (t / seq, t % seq) */
  ops_tensor positions;        /* [B, S], int32 or int64; dtype 0 when nothing rotates */
  ops_tensor slots;            /* [B * S], int32 or int64; dtype 0 without a cache */
  int64_t page_size, capacity; /* a cache's rows a page and pages * page_size */
  int32_t style;               /* ops_rope_style */
  int32_t rotary_dim;          /* even; 0 when nothing rotates */
  double inv_freq[OPSI_ROPE_MAX_FREQS]; /* frequency i < rotary_dim / 2, after scaling */
} opsi_rope_args;

/* Element i of an int32 or int64 index tensor (on the host). */
static inline int64_t opsi_index_at(const ops_tensor *t, int64_t offset) {
  return t->dtype == OPS_DTYPE_I64 ? ((const int64_t *)t->data)[offset] : ((const int32_t *)t->data)[offset];
}

#endif /* OPSLIB_KERNELS_ROPE_ROPE_ARGS_H_ */
