/*
 * RoPE and the KV cache append on the GPU: one kernel for both ops. A block (rope) or a warp
 * (the append, whose tokens are a few KB) takes one token at a time (grid-stride over tokens):
 * it reads the token's position (and its cache slot), forms the cosine and sine of every
 * frequency once into shared memory, then its threads stream the token's heads, one work item
 * each: V pairs (NeoX: V elements from each half; GPT-J: V interleaved elements) or V
 * passed-through elements; the heads that only move (V, and K without RoPE, into the cache) go
 * several items a thread, loads first. VEC = 16 / sizeof(T) loads and stores 16-byte vectors
 * (unit-stride heads, aligned rows); VEC = 1 reads any strides, one pair or element an item.
 * The append of tokens whose heads are one run in every operand has a kernel of its own
 * (append_rows_kernel, below): whole K and V rows, no head arithmetic.
 */
#ifndef OPSLIB_KERNELS_ROPE_ROPE_GPU_CUH_
#define OPSLIB_KERNELS_ROPE_ROPE_GPU_CUH_

#include <type_traits>

#include "kernels/common/cuda_common.cuh"
#include "kernels/rope/rope_args.h"

namespace opsi {

struct rope_gpu_stream {
  const void *in;
  void *out;
  int64_t in_s[4], out_s[4]; /* strides of [B, S, H, D] (out: [pages, page_size, H, D]) */
  int32_t heads, dim, rotate, to_slots;
};

struct rope_gpu_geom {
  rope_gpu_stream s[2];
  int32_t n_streams, style, rotary_dim, any_rotate;
  int64_t batch, seq, page_size, capacity;
  const void *positions;
  int64_t pos_s[2];
  const void *slots;
  int64_t slot_s;
  int32_t pos_i64, slot_i64;
  int32_t warp_tokens; /* 1: a warp a token (ROPE_THREADS / 32 tokens a block at a time); 0: a block a token */
  double inv_freq[OPSI_ROPE_MAX_FREQS];
};

/* ROPE_MIN_RESIDENT: blocks an SM the registers must allow (a block a token); a warp a token
 * trades two of them for the registers of its deeper copy */
enum { ROPE_THREADS = 128, ROPE_BLOCKS_PER_SM = 16, ROPE_ROWS_BLOCKS_PER_SM = 64, ROPE_MIN_RESIDENT = 8,
       ROPE_MIN_RESIDENT_WARP = 6 };

__device__ __forceinline__ int64_t rope_index(const void *p, int64_t off, int i64) {
  return i64 ? static_cast<const int64_t *>(p)[off] : (int64_t) static_cast<const int32_t *>(p)[off];
}

/* cos and sin of position * f: the angle in double, reduced to [-pi, pi] in double (exact
 * enough for any int64 position of a real context), then the f32 functions. */
__device__ __forceinline__ void rope_cos_sin(double position, double f, float *c, float *s) {
  const double two_pi_hi = 6.283185307179586232, two_pi_lo = 2.4492935982947064e-16;
  const double a = position * f;
  const double k = rint(a * 0.15915494309189535);
  const double r = fma(-k, two_pi_lo, fma(-k, two_pi_hi, a));
  sincosf(static_cast<float>(r), s, c);
}

/* The pair (a, b) rotated by the angle whose cosine and sine are c and s: (a c - b s, b c + a s),
 * the one rotation of both styles (NeoX pairs i and i + rotary_dim / 2, GPT-J 2i and 2i + 1). */
__device__ __forceinline__ float2 rope_pair(float a, float b, float c, float s) {
  return make_float2(a * c - b * s, b * c + a * s);
}

template <typename T, int VEC> struct rope_io {
  static __device__ __forceinline__ void load(const T *p, float (&x)[VEC]) {
    if constexpr (VEC == 1) {
      x[0] = to_f(p[0]);
    } else {
      const vec16<T> v = load16(p);
#pragma unroll
      for (int j = 0; j < VEC; ++j) x[j] = to_f(v.v[j]);
    }
  }
  static __device__ __forceinline__ void store(T *p, const float (&x)[VEC]) {
    if constexpr (VEC == 1) {
      p[0] = from_f<T>(x[0]);
    } else {
      vec16<T> v;
#pragma unroll
      for (int j = 0; j < VEC; ++j) v.v[j] = from_f<T>(x[j]);
      store16(p, v);
    }
  }
};

/* One token of one stream: its heads' pairs and passed-through dims, split over the block. */
template <typename T, int VEC>
__device__ __forceinline__ void rope_token(const rope_gpu_geom &g, const rope_gpu_stream &st, const T *in, T *out,
                                           const float *cs, const float *sn, int tid, int nthr) {
  using io = rope_io<T, VEC>;
  const int64_t isd = st.in_s[3], osd = st.out_s[3];
  const int rot = st.rotate ? g.rotary_dim : 0, half = rot / 2;
  /* NeoX items: VEC pairs (VEC elements of each half); GPT-J: VEC elements, VEC / 2 pairs (a
   * pair an item when VEC == 1). */
  const int gptj = g.style == OPS_ROPE_GPTJ;
  const int rot_items = gptj ? (VEC == 1 ? half : rot / VEC) : half / VEC;
  const int pass_items = (st.dim - rot) / VEC;
  const int items = rot_items + pass_items;
  for (int w = tid; w < st.heads * items; w += nthr) {
    const int h = w / items, k = w - h * items;
    const T *ih = in + h * st.in_s[2];
    T *oh = out + h * st.out_s[2];
    if (k >= rot_items) {
      const int d = rot + (k - rot_items) * VEC;
      float x[VEC];
      io::load(ih + d * isd, x);
      io::store(oh + d * osd, x);
    } else if (!gptj) {
      const int i = k * VEC;
      float x1[VEC], x2[VEC], y1[VEC], y2[VEC];
      io::load(ih + i * isd, x1);
      io::load(ih + (i + half) * isd, x2);
#pragma unroll
      for (int j = 0; j < VEC; ++j) {
        const float2 y = rope_pair(x1[j], x2[j], cs[i + j], sn[i + j]);
        y1[j] = y.x, y2[j] = y.y;
      }
      io::store(oh + i * osd, y1);
      io::store(oh + (i + half) * osd, y2);
    } else {
      if constexpr (VEC == 1) {
        float x1[1], x2[1], y1[1], y2[1];
        io::load(ih + 2 * k * isd, x1);
        io::load(ih + (2 * k + 1) * isd, x2);
        const float2 y = rope_pair(x1[0], x2[0], cs[k], sn[k]);
        y1[0] = y.x, y2[0] = y.y;
        io::store(oh + 2 * k * osd, y1);
        io::store(oh + (2 * k + 1) * osd, y2);
      } else {
        const int d = k * VEC;
        float x[VEC], y[VEC];
        io::load(ih + d, x);
#pragma unroll
        for (int j = 0; j < VEC; j += 2) {
          const float2 r = rope_pair(x[j], x[j + 1], cs[d / 2 + j / 2], sn[d / 2 + j / 2]);
          y[j] = r.x, y[j + 1] = r.y;
        }
        io::store(oh + d, y);
      }
    }
  }
}

/* A stream of one token that is a plain copy (no rotation). */
template <typename T> struct rope_copy {
  const T *in;
  T *out;
  int64_t in_h, in_d, out_h, out_d; /* head and dim strides */
  int per_head, items;              /* VEC-element items a head, and in all */
};

/* Up to two plain-copy streams of a token (a.items 0: none) as one index space of VEC-element
 * items: each thread loads UNROLL items before it stores any, so a token's K and V reads are
 * in flight together (a warp a token: 4, the token's 4 KB of bf16 d128 GQA 8 K and V in one
 * trip of its lanes; a block a token: 2). The data moves as raw 16-byte vectors (VEC > 1) or
 * elements. */
template <bool WARP> struct rope_copy_unroll { static constexpr int value = WARP ? 4 : 2; };
template <typename T, int VEC, int UNROLL>
__device__ __forceinline__ void copy_token(const rope_copy<T> &a, const rope_copy<T> &b, int tid, int nthr) {
  using raw = typename std::conditional<VEC == 1, T, uint4>::type;
  const int total = a.items + b.items;
  for (int base = tid; base < total; base += UNROLL * nthr) {
    raw x[UNROLL];
    T *dst[UNROLL];
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
      const int w = base + u * nthr;
      dst[u] = nullptr;
      if (w < total) {
        const bool second = w >= a.items; /* selects, not a reference: the structs stay in registers */
        const int local = second ? w - a.items : w, per_head = second ? b.per_head : a.per_head;
        const int h = local / per_head, d = (local - h * per_head) * VEC;
        const T *src = second ? b.in + h * b.in_h + d * b.in_d : a.in + h * a.in_h + d * a.in_d;
        x[u] = __ldg(reinterpret_cast<const raw *>(src));
        dst[u] = second ? b.out + h * b.out_h + d * b.out_d : a.out + h * a.out_h + d * a.out_d;
      }
    }
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
      if (dst[u] != nullptr) *reinterpret_cast<raw *>(dst[u]) = x[u];
    }
  }
}

/* WARP: a warp a token (its own cos / sin rows, warp barriers), for the ops whose tokens are
 * small (the cache append: a few KB a token), so that a block has several tokens in flight. */
template <typename T, int VEC, bool WARP>
__global__ void __launch_bounds__(ROPE_THREADS, WARP ? ROPE_MIN_RESIDENT_WARP : ROPE_MIN_RESIDENT)
    rope_kernel(const __grid_constant__ rope_gpu_geom g) {
  constexpr int TOKENS = WARP ? ROPE_THREADS / 32 : 1; /* tokens a block works on at once */
  __shared__ float cs_all[TOKENS][OPSI_ROPE_MAX_FREQS], sn_all[TOKENS][OPSI_ROPE_MAX_FREQS];
  const int sub = WARP ? threadIdx.x / 32 : 0, tid = WARP ? threadIdx.x % 32 : threadIdx.x;
  const int nthr = WARP ? 32 : blockDim.x;
  float *cs = cs_all[sub], *sn = sn_all[sub];
  const int64_t tokens = g.batch * g.seq;
  for (int64_t t = (int64_t)blockIdx.x * TOKENS + sub; t < tokens; t += (int64_t)gridDim.x * TOKENS) {
    const int64_t b = t / g.seq, s = t - b * g.seq;
    int64_t slot = -1;
    if (g.slots != nullptr) slot = rope_index(g.slots, t * g.slot_s, g.slot_i64);
    if (g.any_rotate) {
      const double position = static_cast<double>(rope_index(g.positions, b * g.pos_s[0] + s * g.pos_s[1], g.pos_i64));
      if constexpr (WARP) __syncwarp(); else __syncthreads(); /* the previous token's readers are done */
      for (int i = tid; i < g.rotary_dim / 2; i += nthr) rope_cos_sin(position, g.inv_freq[i], &cs[i], &sn[i]);
      if constexpr (WARP) __syncwarp(); else __syncthreads();
    }
    rope_copy<T> c0 = {}, c1 = {};
    int n_copies = 0;
#pragma unroll
    for (int k = 0; k < 2; ++k) {
      if (k >= g.n_streams) break;
      const rope_gpu_stream &st = g.s[k];
      int64_t out_off = b * st.out_s[0] + s * st.out_s[1];
      if (st.to_slots) {
        if (slot < 0 || slot >= g.capacity) continue;
        const int64_t page = slot / g.page_size;
        out_off = page * st.out_s[0] + (slot - page * g.page_size) * st.out_s[1];
      }
      const T *in = static_cast<const T *>(st.in) + b * st.in_s[0] + s * st.in_s[1];
      T *out = static_cast<T *>(st.out) + out_off;
      if (st.rotate) {
        rope_token<T, VEC>(g, st, in, out, cs, sn, tid, nthr);
      } else {
        const rope_copy<T> c = {in, out, st.in_s[2], st.in_s[3], st.out_s[2], st.out_s[3], st.dim / VEC,
                                st.heads * (st.dim / VEC)};
        if (n_copies++ == 0) c0 = c; else c1 = c;
      }
    }
    if (n_copies > 0) copy_token<T, VEC, rope_copy_unroll<WARP>::value>(c0, c1, tid, nthr);
  }
}

/* The append where every operand's heads of a token are one unit-stride run
 * (cuda_kv_cache_append_rows): a token's K and V are two rows of heads x dim elements (the
 * append's tokens are [T, H, D], batch 1), moved in 16-byte vectors by a warp. Each trip, a
 * lane issues its loads of both rows (and, rotating NeoX pairs, the K vectors its own pair
 * with) beside the token's slot and position reads and before any store; the cos and sin of
 * the token's frequencies go to the warp's shared row while those loads are in flight. */
template <typename T>
__device__ __forceinline__ uint4 rotate_vec(const rope_gpu_geom &g, uint4 raw, uint4 other, int v, const float *cs,
                                            const float *sn) {
  constexpr int VEC = 16 / sizeof(T);
  const int d = v * VEC, half = g.rotary_dim / 2;
  if (d >= g.rotary_dim) return raw; /* a passed-through dim */
  vec16<T> x, o, y;
  *reinterpret_cast<uint4 *>(&x) = raw;
  *reinterpret_cast<uint4 *>(&o) = other;
  if (g.style == OPS_ROPE_GPTJ) {
#pragma unroll
    for (int j = 0; j < VEC; j += 2) {
      const float2 r = rope_pair(to_f(x.v[j]), to_f(x.v[j + 1]), cs[d / 2 + j / 2], sn[d / 2 + j / 2]);
      y.v[j] = from_f<T>(r.x), y.v[j + 1] = from_f<T>(r.y);
    }
  } else {
    const bool first = d < half; /* x is the pair's first element, o its second; or the other way */
    const int i0 = first ? d : d - half;
#pragma unroll
    for (int j = 0; j < VEC; ++j) {
      const float a = to_f(x.v[j]), b = to_f(o.v[j]);
      y.v[j] = from_f<T>(first ? rope_pair(a, b, cs[i0 + j], sn[i0 + j]).x : rope_pair(b, a, cs[i0 + j], sn[i0 + j]).y);
    }
  }
  return *reinterpret_cast<uint4 *>(&y);
}

template <typename T, bool ROTATE>
__global__ void __launch_bounds__(ROPE_THREADS) append_rows_kernel(const __grid_constant__ rope_gpu_geom g) {
  constexpr int VEC = 16 / sizeof(T), TOKENS = ROPE_THREADS / 32, UNROLL = 4;
  __shared__ float cs_all[ROTATE ? TOKENS : 1][ROTATE ? OPSI_ROPE_MAX_FREQS : 1];
  __shared__ float sn_all[ROTATE ? TOKENS : 1][ROTATE ? OPSI_ROPE_MAX_FREQS : 1];
  const int lane = threadIdx.x % 32, sub = threadIdx.x / 32;
  float *cs = cs_all[ROTATE ? sub : 0], *sn = sn_all[ROTATE ? sub : 0];
  const int per0 = g.s[0].dim / VEC, n0 = g.s[0].heads * per0, n1 = g.s[1].heads * g.s[1].dim / VEC;
  const int items = max(n0, n1), half_vecs = g.rotary_dim / 2 / VEC;
  const bool narrow = g.capacity <= INT32_MAX; /* slot / page_size in 32 bits */
#pragma unroll 1
  for (int64_t t = (int64_t)blockIdx.x * TOKENS + sub; t < g.seq; t += (int64_t)gridDim.x * TOKENS) {
    const int64_t slot = rope_index(g.slots, t * g.slot_s, g.slot_i64);
    const double position = ROTATE ? static_cast<double>(rope_index(g.positions, t * g.pos_s[1], g.pos_i64)) : 0.0;
    const uint4 *in0 = reinterpret_cast<const uint4 *>(static_cast<const T *>(g.s[0].in) + t * g.s[0].in_s[1]);
    const uint4 *in1 = reinterpret_cast<const uint4 *>(static_cast<const T *>(g.s[1].in) + t * g.s[1].in_s[1]);
#pragma unroll 1
    for (int base0 = 0; base0 < items; base0 += UNROLL * 32) { /* the same trips for every lane */
      const int base = base0 + lane;
      uint4 x0[UNROLL], x1[UNROLL], o0[ROTATE ? UNROLL : 1];
#pragma unroll
      for (int u = 0; u < UNROLL; ++u) {
        const int w = base + u * 32;
        if (w < n0) x0[u] = __ldg(in0 + w);
        if (w < n1) x1[u] = __ldg(in1 + w);
        if constexpr (ROTATE) {
          const int v = w % per0; /* NeoX: the vector this one pairs with */
          const int pv = v < half_vecs ? v + half_vecs : v < 2 * half_vecs ? v - half_vecs : v;
          if (w < n0 && g.style != OPS_ROPE_GPTJ) o0[u] = __ldg(in0 + (w - v + pv));
        }
      }
      if constexpr (ROTATE) {
        if (base0 == 0) {
          __syncwarp(); /* the previous token's readers are done */
          for (int i = lane; i < g.rotary_dim / 2; i += 32) rope_cos_sin(position, g.inv_freq[i], &cs[i], &sn[i]);
          __syncwarp();
        }
      }
      if (slot < 0 || slot >= g.capacity) continue;
      const int64_t page = narrow ? (int64_t)((uint32_t)slot / (uint32_t)g.page_size) : slot / g.page_size;
      const int64_t row = slot - page * g.page_size;
      T *k_row = static_cast<T *>(g.s[0].out) + page * g.s[0].out_s[0] + row * g.s[0].out_s[1];
      T *v_row = static_cast<T *>(g.s[1].out) + page * g.s[1].out_s[0] + row * g.s[1].out_s[1];
      uint4 *q0 = reinterpret_cast<uint4 *>(k_row), *q1 = reinterpret_cast<uint4 *>(v_row);
#pragma unroll
      for (int u = 0; u < UNROLL; ++u) {
        const int w = base + u * 32;
        if constexpr (ROTATE) {
          if (w < n0) q0[w] = rotate_vec<T>(g, x0[u], g.style != OPS_ROPE_GPTJ ? o0[u] : x0[u], w % per0, cs, sn);
        } else {
          if (w < n0) q0[w] = x0[u];
        }
        if (w < n1) q1[w] = x1[u];
      }
    }
  }
}

/* Launches the kernel (vec: the 16-byte form; g.warp_tokens: a warp a token; rows: the
 * append's whole rows, append_rows_kernel) over at most ROPE_BLOCKS_PER_SM blocks an SM
 * (the whole rows: ROPE_ROWS_BLOCKS_PER_SM, a warp a token up to 33792 tokens on 132 SMs). */
template <typename T>
void launch_rope(const rope_gpu_geom &g, int vec, int rows, cudaStream_t stream, int sm_count, int32_t *grid,
                 int32_t *block) {
  const int64_t per_block = g.warp_tokens ? ROPE_THREADS / 32 : 1;
  const int64_t want = (g.batch * g.seq + per_block - 1) / per_block;
  const int64_t cap = (int64_t)(sm_count > 0 ? sm_count : 132) * (rows ? ROPE_ROWS_BLOCKS_PER_SM : ROPE_BLOCKS_PER_SM);
  grid[0] = (int32_t)(want < cap ? want : cap);
  block[0] = ROPE_THREADS;
  if (rows) {
    if (g.any_rotate) append_rows_kernel<T, true><<<grid[0], block[0], 0, stream>>>(g);
    else append_rows_kernel<T, false><<<grid[0], block[0], 0, stream>>>(g);
  } else if (g.warp_tokens) {
    if (vec) rope_kernel<T, 16 / sizeof(T), true><<<grid[0], block[0], 0, stream>>>(g);
    else rope_kernel<T, 1, true><<<grid[0], block[0], 0, stream>>>(g);
  } else {
    if (vec) rope_kernel<T, 16 / sizeof(T), false><<<grid[0], block[0], 0, stream>>>(g);
    else rope_kernel<T, 1, false><<<grid[0], block[0], 0, stream>>>(g);
  }
}

}  // namespace opsi

#endif /* OPSLIB_KERNELS_ROPE_ROPE_GPU_CUH_ */
