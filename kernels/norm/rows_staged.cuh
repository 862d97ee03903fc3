/*
 * The row kernels' staged backward (sm_80 and later; chosen on sm_90): rows streamed through
 * shared memory by cp.async, several batches ahead.
 */
#ifndef OPSLIB_KERNELS_NORM_ROWS_STAGED_CUH_
#define OPSLIB_KERNELS_NORM_ROWS_STAGED_CUH_

#include "kernels/norm/rows_common.cuh"

namespace opsi {

/* Staged variant (LayerNorm / RMSNorm backward, 16-bit rows of 16-byte vectors, up to
 * OPSI_ROWS_STAGED_MAX_COLS): at most one block of 1024 threads an SM walks row batches
 * b, b + gridDim.x, ... (rpb rows of tpr threads each). Each thread copies its own vectors of
 * dy and x into its own slots of STAGES shared-memory stages by cp.async, STAGES batches
 * ahead (the row's statistics one batch ahead into registers; the weight row once a block into
 * shared memory when it fits), so DRAM keeps streaming the next rows while a row reduces
 * (the register variant has nothing of its block in flight across its barriers). No thread
 * reads another's slots: the stages need no barrier. A row is read from shared memory twice
 * (sums, then dx), holding only dweight / dbias partials (32 floats) in registers. Partials:
 * the block's groups fold theirs through shared memory in group order into one partial row a
 * block (ws[b * cols + c], dbias after the dweight rows), folded by row_partials_kernel. */
template <typename T, int STAGES>
__global__ void __launch_bounds__(OPSI_ROWS_STAGED_THREADS, 1) row_backward_staged_kernel(const row_geom g) {
  constexpr int VEC = 8, MAXV = OPSI_ROWS_STAGED_HELD / VEC;
  extern __shared__ __align__(16) unsigned char staged[];
  __shared__ float smem[128];
  const int tpr = g.cfg.tpr, vpt = g.cfg.vpt, lane = threadIdx.x % tpr;
  const int nthr = OPSI_ROWS_STAGED_THREADS;
  const int nvec = (int)(g.cols / VEC);
  const uint32_t step = gridDim.x * (uint32_t)g.cfg.rpb, nrows = (uint32_t)g.rows; /* rows < 2^31 */
  const float inv_n = 1.0f / (float)g.cols;
  const bool ln = g.op == ROW_LN;
  /* slot q of stage s: q < MAXV dy vectors, then MAXV x vectors (compile-time offsets:
     runtime ones cost the registers the partials need) */
  auto vslot = [&](int s, int q) {
    return reinterpret_cast<uint4 *>(staged + s * OPSI_ROWS_STAGED_STAGE_BYTES) + q * nthr + threadIdx.x;
  };
  /* The weight row, read twice a row by every group: copied once into shared memory when it
     fits (from L1 it missed: the stages leave L1 ~28 KB, and a 16384-wide bf16 row is 32 KB,
     its loads the kernel's long-scoreboard stalls). */
  const int wsize = g.w_dtype == OPS_DTYPE_F32 ? 4 : 2;
  const bool w_staged = g.cols * wsize <= OPSI_ROWS_STAGED_W_BYTES;
  unsigned char *wsm = staged + STAGES * OPSI_ROWS_STAGED_STAGE_BYTES;
  if (w_staged) {
    for (int i = threadIdx.x; i < (int)(g.cols * wsize / 16); i += nthr) {
      reinterpret_cast<uint4 *>(wsm)[i] = __ldg(static_cast<const uint4 *>(g.w) + i);
    }
    __syncthreads();
  }
  auto weight = [&](int vi, float *w) {
    if (!w_staged) {
      load_param<T, VEC>(g.w, vi, 1, g.w_dtype, w);
    } else if (wsize == 4) {
      const float4 *q = reinterpret_cast<const float4 *>(wsm) + 2 * vi;
      const float4 a = q[0], b = q[1];
      w[0] = a.x, w[1] = a.y, w[2] = a.z, w[3] = a.w, w[4] = b.x, w[5] = b.y, w[6] = b.z, w[7] = b.w;
    } else {
      vec16<T> v;
      *reinterpret_cast<uint4 *>(&v) = reinterpret_cast<const uint4 *>(wsm)[vi];
#pragma unroll
      for (int j = 0; j < VEC; ++j) w[j] = to_f(v.v[j]);
    }
  };
  /* the row's statistics, loaded one batch ahead into registers */
  auto stats = [&](uint32_t row0, float &mean, float &rstd) {
    const uint32_t row = row0 + threadIdx.x / tpr;
    mean = row < nrows && ln ? __ldg(g.mean + row_off<uint32_t>(g, row, T_MEAN)) : 0.0f;
    rstd = row < nrows ? __ldg(g.rstd + row_off<uint32_t>(g, row, T_RSTD)) : 0.0f;
  };
  auto issue = [&](uint32_t row0, int s) {
    const uint32_t row = row0 + threadIdx.x / tpr;
    if (row < nrows) {
      const T *dy = static_cast<const T *>(g.dy) + row_off<uint32_t>(g, row, T_DY);
      const T *x = static_cast<const T *>(g.x) + row_off<uint32_t>(g, row, T_X);
#pragma unroll
      for (int k = 0; k < MAXV; ++k) {
        const int vi = lane + k * tpr;
        if (k >= vpt || vi >= nvec) continue;
        cp_async16(vslot(s, k), dy + (int64_t)vi * VEC, 16);
        cp_async16(vslot(s, MAXV + k), x + (int64_t)vi * VEC, 16);
      }
    }
    cp_commit(); /* empty groups too: one group per batch keeps wait_group's count */
  };
  /* one 16-byte shared load a vector (element-wise reads compiled to 8 loads of 2 bytes) */
  auto held = [&](int s, int q) {
    vec16<T> v;
    *reinterpret_cast<uint4 *>(&v) = *vslot(s, q);
    return v;
  };
  float pdw[MAXV][VEC], pdb[MAXV][VEC];
#pragma unroll
  for (int k = 0; k < MAXV; ++k) {
#pragma unroll
    for (int j = 0; j < VEC; ++j) pdw[k][j] = pdb[k][j] = 0.0f;
  }
  const uint32_t first = blockIdx.x * (uint32_t)g.cfg.rpb;
#pragma unroll 1
  for (int s = 0; s < STAGES; ++s) issue(first + s * step, s);
  int s = 0, parity = 0;
  float mean, rstd;
  stats(first, mean, rstd);
  for (uint32_t row0 = first; row0 < nrows; row0 += step) {
    float next_mean, next_rstd;
    stats(row0 + step, next_mean, next_rstd);
    cp_wait<STAGES - 1>(); /* this thread's copies of batch row0 have landed */
    const uint32_t row = row0 + threadIdx.x / tpr;
    const bool active = row < nrows;
    auto valid = [&](int k) { return active && k < vpt && lane + k * tpr < nvec; };
    float s1 = 0.0f, s2 = 0.0f;
#pragma unroll
    for (int k = 0; k < MAXV; ++k) {
      if (!valid(k)) continue;
      float w[VEC];
      weight(lane + k * tpr, w);
      const vec16<T> dyv = held(s, k), xv = held(s, MAXV + k);
#pragma unroll
      for (int j = 0; j < VEC; ++j) {
        const float dy = to_f(dyv.v[j]), xhat = (to_f(xv.v[j]) - mean) * rstd, gj = dy * w[j];
        pdw[k][j] += dy * xhat, pdb[k][j] += dy;
        s1 += gj, s2 += gj * xhat;
      }
    }
    group_sum2_tree(s1, s2, tpr, smem, parity); /* RMSNorm: s1 unused */
    if (active) {
      const float m1 = ln ? s1 * inv_n : 0.0f, m2 = s2 * inv_n;
      T *dx = static_cast<T *>(g.y) + row_off<uint32_t>(g, row, T_Y);
#pragma unroll
      for (int k = 0; k < MAXV; ++k) {
        if (!valid(k)) continue;
        float w[VEC], out[VEC];
        weight(lane + k * tpr, w);
        const vec16<T> dyv = held(s, k), xv = held(s, MAXV + k);
#pragma unroll
        for (int j = 0; j < VEC; ++j) {
          const float xhat = (to_f(xv.v[j]) - mean) * rstd;
          out[j] = rstd * (to_f(dyv.v[j]) * w[j] - m1 - xhat * m2);
        }
        store_vec<T, VEC>(dx, lane + k * tpr, 1, out);
      }
    }
    issue(row0 + STAGES * step, s); /* this thread's reads of stage s are done (their values stored) */
    s = s + 1 == STAGES ? 0 : s + 1;
    mean = next_mean, rstd = next_rstd;
  }
  cp_wait<0>();
  if (g.ws == nullptr || (g.dw == nullptr && g.db == nullptr)) return;
  /* one partial row a block: its groups' partials folded in group order (stage 0 reused) */
  const int rpb = g.cfg.rpb, gib = threadIdx.x / tpr;
  float *fold = reinterpret_cast<float *>(staged);
  for (int out = 0; out < 2; ++out) {
    if ((out == 0 ? g.dw : g.db) == nullptr) continue;
    float *part = g.ws + ((out == 1 && g.dw != nullptr ? gridDim.x : 0) + blockIdx.x) * g.cols;
    if (rpb == 1) {
#pragma unroll
      for (int k = 0; k < MAXV; ++k) {
        if (k < vpt && lane + k * tpr < nvec) store_f32<VEC>(part, lane + k * tpr, out == 0 ? pdw[k] : pdb[k]);
      }
      continue;
    }
    __syncthreads(); /* every thread is past its last read of the stages (or the previous fold) */
#pragma unroll
    for (int k = 0; k < MAXV; ++k) {
      if (k < vpt && lane + k * tpr < nvec) store_f32<VEC>(fold + gib * g.cols, lane + k * tpr, out == 0 ? pdw[k] : pdb[k]);
    }
    __syncthreads();
    for (int64_t c = threadIdx.x; c < g.cols; c += nthr) {
      float acc = fold[c];
      for (int q = 1; q < rpb; ++q) acc += fold[q * g.cols + c];
      part[c] = acc;
    }
  }
}

}  // namespace opsi

#endif /* OPSLIB_KERNELS_NORM_ROWS_STAGED_CUH_ */
