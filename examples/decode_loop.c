/*
 * decode_loop: the attention side of an LLM decode loop over a paged KV cache, from plain C,
 * the way an inference runtime drives it: ops_rope on the new queries, ops_kv_cache_append
 * (RoPE fused on the keys) into the pages a block table names, then ops_sdpa against the
 * cache with per-sequence lengths. The projections are left out: each step's q, k and v are
 * generated data.
 *
 * Four sequences with prompts of 37, 100, 5 and 64 tokens share a pool of 16-token pages
 * handed out in shuffled order; the prompts are prefilled in one varlen call, then 16 decode
 * steps add a token to each. GQA 8:2, head dim 64, bf16, Llama-3-style RoPE (theta 500000).
 * It runs on the first CUDA device when one is usable, else on the CPU backend; it prints the
 * kernels chosen and the time a decode step takes (its three calls), and checks the last
 * step's outputs against a double-precision reference computed here from the raw tokens.
 * Exit status 0 when the check passes.
 */
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <opslib/opslib.h>

enum { B = 4, HQ = 8, HKV = 2, D = 64, PAGE = 16, PAGES = 64, MAX_PAGES = 16, STEPS = 16, MAX_TOKENS = 400 };
static const int kPrompt[B] = {37, 100, 5, 64};
static const float kTheta = 500000.0f;

static int g_gpu;

static uint16_t to_bf16(double x) {
  const float f = (float)x;
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return (uint16_t)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

static double from_bf16(uint16_t b) {
  const uint32_t u = (uint32_t)b << 16;
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

static uint64_t g_state = 0x9E3779B97F4A7C15ull;
static double next_uniform(void) { /* xorshift64*, in [-1, 1) */
  g_state ^= g_state >> 12;
  g_state ^= g_state << 25;
  g_state ^= g_state >> 27;
  return (double)((g_state * 0x2545F4914F6CDD1Dull) >> 11) / 4503599627370496.0 - 1.0;
}

static double now_ms(void) {
  struct timespec ts;
  timespec_get(&ts, TIME_UTC);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* Memory on the handle's device (host memory on the CPU backend). */
static void *dev_alloc(size_t bytes) {
  void *p = NULL;
  if (g_gpu) return cudaMalloc(&p, bytes) == cudaSuccess ? p : NULL;
  return calloc(1, bytes);
}
static void to_dev(void *dst, const void *src, size_t bytes) {
  if (g_gpu) cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice); else memcpy(dst, src, bytes);
}
static void from_dev(void *dst, const void *src, size_t bytes) {
  if (g_gpu) cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost); else memcpy(dst, src, bytes);
}
static void dev_free(void *p) {
  if (g_gpu) cudaFree(p); else free(p);
}

static ops_tensor tensor(void *data, ops_dtype dt, int ndim, const int64_t *shape) {
  ops_tensor t;
  ops_tensor_init(&t, data, dt, g_gpu ? ops_device_cuda(0) : ops_device_cpu(), ndim, shape, NULL);
  return t;
}

#define CHECK(call)                                                                         \
  do {                                                                                      \
    const ops_status st_ = (call);                                                          \
    if (st_ != OPS_OK) {                                                                    \
      fprintf(stderr, "%s failed: %s: %s\n", #call, ops_status_name(st_), ops_last_error()); \
      exit(1);                                                                              \
    }                                                                                       \
  } while (0)

/* Every token ever generated, as the model produced it (before RoPE), for the reference. */
static uint16_t g_q[B][MAX_TOKENS][HQ][D], g_k[B][MAX_TOKENS][HKV][D], g_v[B][MAX_TOKENS][HKV][D];

static void rope_params(ops_rope_params *p) {
  ops_rope_params_init(p);
  p->theta = kTheta;
  p->scaling = OPS_ROPE_SCALING_LLAMA3;
  p->factor = 8.0f;
  p->original_max_positions = 64; /* small, so that the scaling matters at these lengths */
}

/* The reference: token i of sequence b, query head h, over its first n keys, all in double. */
static void reference(int b, int i, int h, int n, double *out) {
  ops_rope_params p;
  rope_params(&p);
  double f[D / 2];
  for (int j = 0; j < D / 2; ++j) { /* the header's formula: theta^(-2j/D), Llama-3 scaling */
    double x = pow(kTheta, -2.0 * j / D);
    const double wl = 2 * 3.14159265358979323846 / x, orig = p.original_max_positions;
    if (wl > orig / p.low_freq_factor) {
      x /= p.factor;
    } else if (wl >= orig / p.high_freq_factor) {
      const double s = (orig / wl - p.low_freq_factor) / (p.high_freq_factor - p.low_freq_factor);
      x = (1 - s) * x / p.factor + s * x;
    }
    f[j] = x;
  }
  double q[D], s[MAX_TOKENS], mx = -INFINITY, sum = 0;
  for (int d = 0; d < D; ++d) q[d] = from_bf16(g_q[b][i][h][d]);
  for (int j = 0; j < D / 2; ++j) { /* NeoX pairs (j, j + D/2), rounded to bf16 as the op stores them */
    const double c = cos(i * f[j]), sn = sin(i * f[j]), x1 = q[j], x2 = q[j + D / 2];
    q[j] = from_bf16(to_bf16(x1 * c - x2 * sn)), q[j + D / 2] = from_bf16(to_bf16(x2 * c + x1 * sn));
  }
  const int g = h / (HQ / HKV);
  for (int t = 0; t < n; ++t) {
    double k[D], dot = 0;
    for (int d = 0; d < D; ++d) k[d] = from_bf16(g_k[b][t][g][d]);
    for (int j = 0; j < D / 2; ++j) {
      const double c = cos(t * f[j]), sn = sin(t * f[j]), x1 = k[j], x2 = k[j + D / 2];
      k[j] = from_bf16(to_bf16(x1 * c - x2 * sn)), k[j + D / 2] = from_bf16(to_bf16(x2 * c + x1 * sn));
    }
    for (int d = 0; d < D; ++d) dot += q[d] * k[d];
    s[t] = dot / sqrt((double)D);
    if (s[t] > mx) mx = s[t];
  }
  for (int d = 0; d < D; ++d) out[d] = 0;
  for (int t = 0; t < n; ++t) {
    const double w = exp(s[t] - mx);
    sum += w;
    for (int d = 0; d < D; ++d) out[d] += w * from_bf16(g_v[b][t][g][d]);
  }
  for (int d = 0; d < D; ++d) out[d] /= sum;
}

int main(void) {
  g_gpu = ops_cuda_device_count() > 0;
  ops_handle h = NULL;
  if (!g_gpu || ops_handle_create(&h, ops_device_cuda(0)) != OPS_OK) {
    g_gpu = 0;
    CHECK(ops_handle_create(&h, ops_device_cpu()));
  }
  printf("opslib %s decode loop: %d sequences (prompts %d, %d, %d, %d), Hq=%d Hkv=%d D=%d bf16, pages of %d, on %s\n",
         ops_version_string(), B, kPrompt[0], kPrompt[1], kPrompt[2], kPrompt[3], HQ, HKV, D, PAGE,
         g_gpu ? "cuda:0" : "the CPU backend");

  /* The cache: a pool of pages, handed out from a shuffled free list as sequences grow. */
  const int64_t cache_shape[4] = {PAGES, PAGE, HKV, D};
  void *k_cache = dev_alloc(sizeof(uint16_t) * PAGES * PAGE * HKV * D);
  void *v_cache = dev_alloc(sizeof(uint16_t) * PAGES * PAGE * HKV * D);
  int free_pages[PAGES], n_free = PAGES;
  for (int i = 0; i < PAGES; ++i) free_pages[i] = i;
  for (int i = PAGES - 1; i > 0; --i) {
    const int j = (int)((next_uniform() + 1) / 2 * (i + 1)) % (i + 1), t = free_pages[i];
    free_pages[i] = free_pages[j], free_pages[j] = t;
  }
  int32_t table[B][MAX_PAGES], lens[B] = {0};
  for (int b = 0; b < B; ++b) for (int j = 0; j < MAX_PAGES; ++j) table[b][j] = -1;

  /* Per-call device buffers, sized for the prefill (the largest call). */
  int total = 0;
  for (int b = 0; b < B; ++b) total += kPrompt[b];
  uint16_t *hq = malloc(sizeof(uint16_t) * total * HQ * D), *hk = malloc(sizeof(uint16_t) * total * HKV * D),
           *hv = malloc(sizeof(uint16_t) * total * HKV * D), *ho = malloc(sizeof(uint16_t) * total * HQ * D);
  void *dq = dev_alloc(sizeof(uint16_t) * total * HQ * D), *dk = dev_alloc(sizeof(uint16_t) * total * HKV * D);
  void *dv = dev_alloc(sizeof(uint16_t) * total * HKV * D), *dout = dev_alloc(sizeof(uint16_t) * total * HQ * D);
  void *dpos = dev_alloc(sizeof(int32_t) * total), *dslots = dev_alloc(sizeof(int64_t) * total);
  void *dlens = dev_alloc(sizeof lens), *dtable = dev_alloc(sizeof table), *dcu = dev_alloc(sizeof(int32_t) * (B + 1));
  int32_t *pos = malloc(sizeof(int32_t) * total), cu[B + 1];
  int64_t *slots = malloc(sizeof(int64_t) * total);
  size_t ws_bytes = 0;
  void *ws = NULL;
  double step_ms = 0;

  for (int step = 0; step <= STEPS; ++step) {
    /* step 0: every prompt (varlen); then one new token per sequence */
    int n = 0;
    cu[0] = 0;
    for (int b = 0; b < B; ++b) {
      const int add = step == 0 ? kPrompt[b] : 1;
      for (int a = 0; a < add; ++a, ++n) {
        const int i = lens[b] + a;
        if (i % PAGE == 0) table[b][i / PAGE] = free_pages[--n_free]; /* a new page */
        pos[n] = i;
        slots[n] = (int64_t)table[b][i / PAGE] * PAGE + i % PAGE;
        for (int x = 0; x < HQ * D; ++x) g_q[b][i][x / D][x % D] = hq[n * HQ * D + x] = to_bf16(next_uniform());
        for (int x = 0; x < HKV * D; ++x) g_k[b][i][x / D][x % D] = hk[n * HKV * D + x] = to_bf16(next_uniform());
        for (int x = 0; x < HKV * D; ++x) g_v[b][i][x / D][x % D] = hv[n * HKV * D + x] = to_bf16(next_uniform());
      }
      lens[b] += add;
      cu[b + 1] = n;
    }
    to_dev(dq, hq, sizeof(uint16_t) * n * HQ * D);
    to_dev(dk, hk, sizeof(uint16_t) * n * HKV * D);
    to_dev(dv, hv, sizeof(uint16_t) * n * HKV * D);
    to_dev(dpos, pos, sizeof(int32_t) * n);
    to_dev(dslots, slots, sizeof(int64_t) * n);
    to_dev(dlens, lens, sizeof lens);
    to_dev(dtable, table, sizeof table);
    to_dev(dcu, cu, sizeof cu);

    const int64_t qs[3] = {n, HQ, D}, kvs[3] = {n, HKV, D}, ts[1] = {n}, bs[1] = {B}, tabs[2] = {B, MAX_PAGES},
                  cus[1] = {B + 1};
    ops_tensor tq = tensor(dq, OPS_DTYPE_BF16, 3, qs), tk = tensor(dk, OPS_DTYPE_BF16, 3, kvs);
    ops_tensor tv = tensor(dv, OPS_DTYPE_BF16, 3, kvs), to = tensor(dout, OPS_DTYPE_BF16, 3, qs);
    ops_tensor tpos = tensor(dpos, OPS_DTYPE_I32, 1, ts), tslots = tensor(dslots, OPS_DTYPE_I64, 1, ts);
    ops_tensor tkc = tensor(k_cache, OPS_DTYPE_BF16, 4, cache_shape), tvc = tensor(v_cache, OPS_DTYPE_BF16, 4, cache_shape);
    ops_tensor tlens = tensor(dlens, OPS_DTYPE_I32, 1, bs), ttable = tensor(dtable, OPS_DTYPE_I32, 2, tabs);
    ops_tensor tcu = tensor(dcu, OPS_DTYPE_I32, 1, cus);

    ops_rope_params rp;
    rope_params(&rp);
    ops_kv_cache_append_params ap;
    ops_kv_cache_append_params_init(&ap);
    ap.rope = &rp;
    ap.positions = &tpos;
    ops_sdpa_params sp;
    ops_sdpa_params_init(&sp);
    sp.causal = 1;
    sp.kv_lens = &tlens;
    sp.block_table = &ttable;
    sp.cu_seqlens_q = &tcu;
    sp.max_seqlen_q = step == 0 ? 100 : 1;
    size_t need = 0;
    CHECK(ops_sdpa_workspace_size(h, &sp, &tq, &tkc, &tvc, &to, NULL, &need));
    if (need > ws_bytes) {
      if (ws != NULL) dev_free(ws);
      ws_bytes = need;
      ws = g_gpu ? dev_alloc(need) : aligned_alloc(16, (need + 15) / 16 * 16);
    }
    if (step == 0 || step == STEPS) {
      ops_explain e;
      e.struct_size = sizeof e;
      CHECK(ops_rope_explain(h, &rp, &tpos, &tq, &tq, &e));
      printf("%s: rope -> %s, ", step ? "decode" : "prefill", e.verdicts[e.chosen].kernel_name);
      CHECK(ops_kv_cache_append_explain(h, &ap, &tk, &tv, &tslots, &tkc, &tvc, &e));
      printf("append -> %s, ", e.verdicts[e.chosen].kernel_name);
      CHECK(ops_sdpa_explain(h, &sp, &tq, &tkc, &tvc, &to, NULL, &e));
      printf("sdpa -> %s%s%s\n", e.verdicts[e.chosen].kernel_name, e.plan[e.chosen] ? ": " : "",
             e.plan[e.chosen] ? e.plan[e.chosen] : "");
    }
    const double t0 = now_ms();
    CHECK(ops_rope(h, &rp, &tpos, &tq, &tq, NULL, 0)); /* in place */
    CHECK(ops_kv_cache_append(h, &ap, &tk, &tv, &tslots, &tkc, &tvc, NULL, 0));
    CHECK(ops_sdpa(h, &sp, &tq, &tkc, &tvc, &to, NULL, ws, ws_bytes));
    if (g_gpu) cudaDeviceSynchronize();
    if (step > 1) step_ms += now_ms() - t0; /* steps 2..: warm */
  }
  printf("decode step (rope + append + sdpa, host wall time with a sync): %.3f ms, mean of %d steps\n",
         step_ms / (STEPS - 1), STEPS - 1);

  /* The last step's outputs: one token per sequence, every head. */
  from_dev(ho, dout, sizeof(uint16_t) * B * HQ * D);
  double worst = 0;
  for (int b = 0; b < B; ++b) {
    for (int hh = 0; hh < HQ; ++hh) {
      double ref[D], num = 0, den = 0;
      reference(b, lens[b] - 1, hh, lens[b], ref);
      for (int d = 0; d < D; ++d) {
        const double got = from_bf16(ho[(b * HQ + hh) * D + d]);
        num += (got - ref[d]) * (got - ref[d]);
        den += ref[d] * ref[d];
      }
      const double rel = sqrt(num / (den > 0 ? den : 1));
      if (rel > worst || rel != rel) worst = rel;
    }
  }
  const int ok = worst < 1e-2;
  printf("check: the last step's %d rows against a double-precision reference, worst relative error %.2e: %s\n",
         B * HQ, worst, ok ? "OK" : "FAILED");
  dev_free(k_cache), dev_free(v_cache), dev_free(dq), dev_free(dk), dev_free(dv), dev_free(dout);
  dev_free(dpos), dev_free(dslots), dev_free(dlens), dev_free(dtable), dev_free(dcu);
  dev_free(ws);
  free(hq), free(hk), free(hv), free(ho), free(pos), free(slots);
  ops_handle_destroy(h);
  return ok ? 0 : 1;
}
