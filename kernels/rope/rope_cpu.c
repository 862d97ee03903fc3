/*
 * RoPE and the cache append on the CPU, in double: each pair is read whole before either of
 * its elements is written, so in place is exact; the angle positions * f_i is formed in
 * double before its cosine and sine.
 */
#include "kernels/rope/rope_cpu.h"

#include <math.h>

#include "kernels/common/cpu_elem.h"
#include "kernels/rope/rope_args.h"
#include "opslib/ops.h"

/* The element offsets (in a head) of pair i's two elements. */
static void pair_dims(int32_t style, int32_t rotary_dim, int64_t i, int64_t *d1, int64_t *d2) {
  if (style == OPS_ROPE_GPTJ) {
    *d1 = 2 * i;
    *d2 = 2 * i + 1;
  } else {
    *d1 = i;
    *d2 = i + rotary_dim / 2;
  }
}

static void copy_token(const opsi_rope_args *a, const opsi_rope_stream *st, int64_t in_off, int64_t out_off,
                       double position) {
  const ops_tensor *in = &st->in, *out = &st->out;
  const int64_t heads = in->shape[2], dim = in->shape[3];
  const int64_t rot = st->rotate ? a->rotary_dim : 0;
  for (int64_t h = 0; h < heads; ++h) {
    const int64_t ih = in_off + h * in->strides[2], oh = out_off + h * out->strides[2];
    for (int64_t i = 0; i < rot / 2; ++i) {
      int64_t d1, d2;
      pair_dims(a->style, a->rotary_dim, i, &d1, &d2);
      const double x1 = opsi_load(in->data, ih + d1 * in->strides[3], in->dtype);
      const double x2 = opsi_load(in->data, ih + d2 * in->strides[3], in->dtype);
      const double angle = position * a->inv_freq[i];
      const double c = cos(angle), s = sin(angle);
      opsi_store(out->data, oh + d1 * out->strides[3], out->dtype, x1 * c - x2 * s);
      opsi_store(out->data, oh + d2 * out->strides[3], out->dtype, x2 * c + x1 * s);
    }
    for (int64_t d = rot; d < dim; ++d) {
      opsi_store(out->data, oh + d * out->strides[3], out->dtype, opsi_load(in->data, ih + d * in->strides[3], in->dtype));
    }
  }
}

ops_status opsi_rope_cpu(const opsi_launch *ctx, const void *argp) {
  (void)ctx;
  const opsi_rope_args *a = (const opsi_rope_args *)argp;
  for (int64_t b = 0; b < a->batch; ++b) {
    for (int64_t s = 0; s < a->seq; ++s) {
      const double position =
          a->rotary_dim > 0
              ? (double)opsi_index_at(&a->positions, b * a->positions.strides[0] + s * a->positions.strides[1])
              : 0.0;
      int64_t slot = -1;
      if (a->slots.dtype != 0) slot = opsi_index_at(&a->slots, (b * a->seq + s) * a->slots.strides[0]);
      for (int k = 0; k < a->n_streams; ++k) {
        const opsi_rope_stream *st = &a->s[k];
        const int64_t in_off = b * st->in.strides[0] + s * st->in.strides[1];
        int64_t out_off;
        if (st->to_slots) { /* the cache's axes are pages and rows, not the tokens' */
          if (slot < 0 || slot >= a->capacity) continue;
          out_off = slot / a->page_size * st->out.strides[0] + slot % a->page_size * st->out.strides[1];
        } else {
          out_off = b * st->out.strides[0] + s * st->out.strides[1];
        }
        copy_token(a, st, in_off, out_off, position);
      }
    }
  }
  return OPS_OK;
}
