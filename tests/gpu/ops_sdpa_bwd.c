/* gpu_ops_test: the attention backward against the CPU reference (tests/support/gpu_call.h). */
#include <cuda_runtime_api.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "opslib/opslib.h"
#include "tests/gpu/cuda_check.h"
#include "tests/gpu/gpu_ops.h"
#include "tests/support/gpu_call.h"
#include "tests/support/opst.h"

/* tensors: 0 q, 1 k, 2 v, 3 o, 4 lse, 5 dout, optional 6 mask, 7 cu_seqlens_q, 8 cu_seqlens_k,
 * then 9 dq, 10 dk, 11 dv */
static ops_status run_sdpa_bwd(ops_handle h, gcall *c, void *ws, size_t wsb, size_t *q, ops_explain *ex) {
  ops_sdpa_params p = c->sdpa;
  p.attn_mask = c->has[6] ? &c->v[6] : NULL;
  p.cu_seqlens_q = c->has[7] ? &c->v[7] : NULL;
  p.cu_seqlens_k = c->has[8] ? &c->v[8] : NULL;
  const ops_tensor *t = c->v;
  if (ex) return ops_sdpa_backward_explain(h, &p, &t[0], &t[1], &t[2], &t[3], &t[4], &t[5], &t[9], &t[10], &t[11], ex);
  if (q) {
    return ops_sdpa_backward_workspace_size(h, &p, &t[0], &t[1], &t[2], &t[3], &t[4], &t[5], &t[9], &t[10], &t[11],
                                            q);
  }
  return ops_sdpa_backward(h, &p, &t[0], &t[1], &t[2], &t[3], &t[4], &t[5], &t[9], &t[10], &t[11], ws, wsb);
}

/* The forward on the CPU handle: o and lse for the backward's inputs. */
static void forward_on_cpu(const ops_sdpa_params *p, opst_tensor *q, opst_tensor *k, opst_tensor *v, opst_tensor *o,
                           opst_tensor *lse) {
  size_t wsb = 0;
  OPST_OK(ops_sdpa_workspace_size(g_cpu, p, &q->t, &k->t, &v->t, &o->t, &lse->t, &wsb));
  void *ws = opst_workspace(wsb);
  OPST_OK(ops_sdpa(g_cpu, p, &q->t, &k->t, &v->t, &o->t, &lse->t, ws, wsb));
  free(ws);
}

static const int64_t kBwdSeq[] = {1, 17, 63, 64, 100, 129, 200, 333};

/* One backward case: head dims of class cls (0: up to 64, 1: 72 to 128, 2: 136 to 256), GQA 1
 * to 4, causal, windows, masks with whole rows removed now and then, varlen with an empty
 * sequence, Dv != D, layouts (alloc_seq: contiguous, BHSD, padded rows, random strides for the
 * inputs; the gradients padded or BHSD). big_seq > 0: one sequence of that length (over 5 keys
 * fewer for odd iter), one KV head; group > 0: that many query heads a KV head. */
static void sdpa_bwd_case_of(int iter, int cls, int64_t big_seq, int64_t group_given) {
  opst_rng *r = &g_rng;
  const int j = iter / 2;
  static const int64_t kD[3][4] = {{64, 32, 40, 17}, {128, 96, 80, 72}, {256, 200, 136, 160}};
  const int32_t dt = j % 2 == 0 ? OPS_DTYPE_BF16 : OPS_DTYPE_F16;
  const int64_t d = j % 3 != 0 ? kD[cls][j % 2] : kD[cls][opst_int(r, 0, 3)];
  const int64_t dv = j % 3 == 2 ? kD[cls][1 - j % 2] : d;
  const int varlen = j % 4 == 2, with_mask = j % 4 == 1 || j % 8 == 4;
  const int layout = j % 5 == 4 ? 3 : (int)(j % 3);
  gcall c;
  memset(&c, 0, sizeof c);
  c.op = OPS_OP_SDPA_BACKWARD;
  c.run = run_sdpa_bwd;
  ops_sdpa_params_init(&c.sdpa);
  c.sdpa.causal = j % 2 == 1 || j % 8 == 6;
  if (j % 3 == 1) {
    c.sdpa.window_left = (int32_t)opst_int(r, 0, 150);
    c.sdpa.window_right = c.sdpa.causal ? (opst_chance(r, 0.5) ? 0 : -1) : (int32_t)opst_int(r, -1, 40);
  }
  if (opst_chance(r, 0.3)) c.sdpa.scale = (float)opst_uniform(r, 0.02, 0.3);
  const int64_t hkv = big_seq > 0 ? 1 : opst_int(r, 1, 2);
  const int64_t group = group_given > 0 ? group_given : j % 2 == 0 ? opst_int(r, 2, 4) : 1, hq = hkv * group;
  int64_t batch = opst_int(r, 1, 2), sq = kBwdSeq[opst_int(r, 0, 7)], sk = kBwdSeq[opst_int(r, 0, 7)];
  if (big_seq > 0) batch = 1, sq = big_seq, sk = big_seq - (iter % 2) * 5;
  /* the CPU reference costs ~2 B Hq Sq Sk (D + Dv): keep a case under ~1.2e8 */
  while (big_seq == 0 && (double)batch * hq * sq * sk * (double)(d + dv) > 6e7) sq = sq / 2 + 1;

  opst_tensor tq, tk, tv, to, tl, tdo, tm, tcq, tck, tdq, tdk, tdv;
  sdpa_varlen vl = {0};
  const int glay = layout == 3 ? 2 : layout; /* the gradients: unit-stride rows */
  if (varlen) {
    sdpa_draw_varlen(&vl, &c.sdpa, sq, sk, 0);
    batch = vl.batch;
    const int64_t tot_q = vl.tot_q, tot_k = vl.tot_k;
    const int64_t qs[3] = {tot_q, hq, d}, ks[3] = {tot_k, hkv, d}, vs[3] = {tot_k, hkv, dv}, os[3] = {tot_q, hq, dv},
                  ls[2] = {hq, tot_q};
    alloc_seq(&tq, dt, 3, qs, layout), alloc_seq(&tdq, dt, 3, qs, glay);
    alloc_seq(&tk, dt, 3, ks, layout), alloc_seq(&tdk, dt, 3, ks, glay);
    alloc_seq(&tv, dt, 3, vs, layout), alloc_seq(&tdv, dt, 3, vs, glay);
    alloc_seq(&to, dt, 3, os, layout % 3), alloc_seq(&tdo, dt, 3, os, layout);
    opst_alloc(&tl, r, OPS_DTYPE_F32, 2, ls, OPST_CONTIGUOUS);
  } else {
    const int64_t qs[4] = {batch, sq, hq, d}, ks[4] = {batch, sk, hkv, d}, vs[4] = {batch, sk, hkv, dv},
                  os[4] = {batch, sq, hq, dv}, ls[3] = {batch, hq, sq};
    alloc_seq(&tq, dt, 4, qs, layout), alloc_seq(&tdq, dt, 4, qs, glay);
    alloc_seq(&tk, dt, 4, ks, layout), alloc_seq(&tdk, dt, 4, ks, glay);
    alloc_seq(&tv, dt, 4, vs, layout), alloc_seq(&tdv, dt, 4, vs, glay);
    alloc_seq(&to, dt, 4, os, layout % 3), alloc_seq(&tdo, dt, 4, os, layout);
    opst_alloc(&tl, r, OPS_DTYPE_F32, 3, ls, OPST_CONTIGUOUS);
  }
  opst_fill_uniform(&tq, r, -1, 1), opst_fill_uniform(&tk, r, -1, 1), opst_fill_uniform(&tv, r, -1, 1);
  opst_fill_uniform(&tdo, r, -1, 1);
  if (with_mask) sdpa_random_mask(&tm, dt, batch, hq, sq, sk);
  if (varlen) sdpa_cu_seqlens(&tcq, &tck, &vl);
  ops_sdpa_params fp = c.sdpa;
  fp.attn_mask = with_mask ? &tm.t : NULL;
  fp.cu_seqlens_q = varlen ? &tcq.t : NULL;
  fp.cu_seqlens_k = varlen ? &tck.t : NULL;
  forward_on_cpu(&fp, &tq, &tk, &tv, &to, &tl);

  opst_tensor *in[6] = {&tq, &tk, &tv, &to, &tl, &tdo};
  for (int i = 0; i < 6; ++i) add_tensor(&c, in[i], IN, -1);
  if (with_mask) add_tensor(&c, &tm, IN, -1);
  else add_absent(&c);
  if (varlen) add_tensor(&c, &tcq, IN, -1), add_tensor(&c, &tck, IN, -1);
  else add_absent(&c), add_absent(&c);
  add_tensor(&c, &tdq, OUT, -1), add_tensor(&c, &tdk, OUT, -1), add_tensor(&c, &tdv, OUT, -1);
  char label[240];
  snprintf(label, sizeof label,
           "sdpa_backward case %d %s batch %lld Sq %lld Sk %lld Hq %lld Hkv %lld D %lld Dv %lld layout %d%s%s "
           "window (%d, %d)%s%s",
           iter, ops_dtype_name((ops_dtype)dt), (long long)batch, (long long)(varlen ? vl.max_q : sq),
           (long long)(varlen ? vl.max_k : sk), (long long)hq, (long long)hkv, (long long)d, (long long)dv, layout,
           varlen ? " varlen" : "", c.sdpa.causal ? " causal" : "", (int)c.sdpa.window_left,
           (int)c.sdpa.window_right, with_mask ? " mask" : "", c.sdpa.scale != 0.0f ? " scaled" : "");
  c.label = label;
  /* where every query sees one key (Sk 1, a causal window of width 0), dS = P (dP - D) = 0
   * exactly and dq, dk are rounding noise around 0: held to 2^-10 (the inputs are O(1)) */
  c.scale_floor = 0x1p-10;
  check_call(&c);
  free_call(&c);
}

/* sdpa_bwd_case_of with the class alternating: head dims up to 64, then up to 128 */
static void sdpa_bwd_case(int iter, int64_t big_seq, int64_t group_given) {
  sdpa_bwd_case_of(iter, iter % 2, big_seq, group_given);
}

void sdpa_backward(void **state) {
  (void)state;
  for (int i = 0; i < 40; ++i) sdpa_bwd_case(i, 0, 0);
  /* head dims 136 to 256 (the sm_80-class d256 kernel: a warp pair's column halves; the Hopper
   * d256 kernels: key tiles of 64 whose consumer warpgroups split the products), every feature
   * of the draws above; one longer sequence (300 queries over 295 keys: 10 key tiles of the
   * sm_80-class kernel, 19 query tiles it streams; 5 and 5 tiles of 64 on Hopper) */
  for (int i = 0; i < 24; ++i) sdpa_bwd_case_of(i, 2, 0, 0);
  sdpa_bwd_case_of(3, 2, 300, 0);
  sdpa_bwd_case(1, 600, 0); /* d 128, ten query and key tiles, a partial last one */
  sdpa_bwd_case(2, 450, 0);
  sdpa_bwd_case(3, 1000, 0); /* d 96, 1000 queries over 995 keys, causal, a window and a mask */
  sdpa_bwd_case(6, 4097, 0); /* d <= 64, causal, 4097 x 4097: 33 key tiles of 128, a partial last */
  /* 8 query heads over 1, 200 or 256 rows: 2 key tiles whose walks the Hopper kernels cut in
   * parts (sdpa_bwd_sm90_shape.h; at 256 rows 32 steps of 64 in 8 parts at d >= 72, 16 steps
   * of 128 in 4 at d <= 64): d <= 64 and d 128 plain, d >= 72 causal, causal with a window
   * (parts of no step at the last key tile), varlen with Dv != D */
  sdpa_bwd_case(0, 256, 8);
  sdpa_bwd_case(1, 200, 8);
  sdpa_bwd_case(7, 200, 8);
  sdpa_bwd_case(15, 200, 8);
  sdpa_bwd_case(5, 200, 8);
  /* 16 and 32 query heads over 195 / 200 rows, d 128 and d 64 (bf16): too few rows to fill the
   * SMs, so the launches around the main pass cut each row's heads into runs of 8 / 16 (a warp
   * a row's run: sdpa_bwd_mma.cuh's row_heads) */
  sdpa_bwd_case(9, 200, 16);
  sdpa_bwd_case(8, 200, 32);
}

/* One call of the deterministic promise: pinned to each CUDA kernel whose row says
 * deterministic and that takes it, ten runs over poisoned gradients give bitwise the same dq,
 * dk and dv; then (`explain`) the same call on a deterministic handle, unpinned, runs one of
 * those kernels. Returns the kernels run. */
static int reproducible_case(const char *what, int64_t batch, int64_t sq, int64_t sk, int64_t hq, int64_t hkv,
                             int64_t d, int causal, int32_t window_left, int explain) {
  opst_tensor t[5], tdo, tg[3];
  gcall fwd;
  sdpa_dense_call(&fwd, t, OPS_DTYPE_BF16, batch, sq, sk, hq, hkv, d, d, 0);
  fwd.sdpa.causal = causal;
  fwd.sdpa.window_left = window_left;
  forward_on_cpu(&fwd.sdpa, &t[0], &t[1], &t[2], &t[3], &t[4]);
  const int64_t os[4] = {batch, sq, hq, d}, ks[4] = {batch, sk, hkv, d};
  opst_alloc(&tdo, &g_rng, OPS_DTYPE_BF16, 4, os, OPST_CONTIGUOUS);
  opst_fill_uniform(&tdo, &g_rng, -1, 1);
  opst_alloc(&tg[0], &g_rng, OPS_DTYPE_BF16, 4, os, OPST_CONTIGUOUS);
  opst_alloc(&tg[1], &g_rng, OPS_DTYPE_BF16, 4, ks, OPST_CONTIGUOUS);
  opst_alloc(&tg[2], &g_rng, OPS_DTYPE_BF16, 4, ks, OPST_CONTIGUOUS);
  opst_tensor *host[9] = {&t[0], &t[1], &t[2], &t[3], &t[4], &tdo, &tg[0], &tg[1], &tg[2]};
  void *mem[9];
  ops_tensor dev[9];
  for (int i = 0; i < 9; ++i) {
    CUDA_OK(cudaMalloc(&mem[i], host[i]->bytes));
    CUDA_OK(cudaMemcpy(mem[i], host[i]->buf, host[i]->bytes, cudaMemcpyHostToDevice));
    dev[i] = relocated(host[i], mem[i]);
  }
  ops_sdpa_params p;
  ops_sdpa_params_init(&p);
  p.causal = causal;
  p.window_left = window_left;
  int pinned = 0;
  for (int k = 0; k < ops_kernel_count(); ++k) {
    ops_kernel_info info;
    info.struct_size = sizeof info;
    OPST_OK(ops_kernel_info_at(k, &info));
    if (info.op != OPS_OP_SDPA_BACKWARD || info.backend != OPS_DEVICE_CUDA) continue;
    if (!info.deterministic) {
      printf("[ DETERM   ] %s: not deterministic by its row (dQ by atomics); not held to it\n", info.name);
      continue;
    }
    OPST_OK(ops_handle_pin_kernel(g_gpu, info.name));
    size_t wsb = 0;
    if (ops_sdpa_backward_workspace_size(g_gpu, &p, &dev[0], &dev[1], &dev[2], &dev[3], &dev[4], &dev[5], &dev[6],
                                         &dev[7], &dev[8], &wsb) != OPS_OK) {
      continue; /* this kernel does not take the call (its head dim, this device) */
    }
    void *ws = NULL;
    if (wsb > 0) CUDA_OK(cudaMalloc(&ws, wsb));
    unsigned char *first[3], *again = malloc(tg[1].bytes > tg[0].bytes ? tg[1].bytes : tg[0].bytes);
    for (int g = 0; g < 3; ++g) first[g] = malloc(tg[g].bytes);
    for (int run = 0; run < 10; ++run) {
      for (int g = 0; g < 3; ++g) CUDA_OK(cudaMemset(mem[6 + g], run % 2 ? 0x7f : 0xff, tg[g].bytes));
      if (ws != NULL) CUDA_OK(cudaMemset(ws, run % 2 ? 0x7f : 0xff, wsb)); /* the counters start from garbage */
      OPST_OK(ops_sdpa_backward(g_gpu, &p, &dev[0], &dev[1], &dev[2], &dev[3], &dev[4], &dev[5], &dev[6], &dev[7],
                                &dev[8], ws, wsb));
      for (int g = 0; g < 3; ++g) {
        CUDA_OK(cudaMemcpy(run == 0 ? first[g] : again, mem[6 + g], tg[g].bytes, cudaMemcpyDeviceToHost));
        if (run > 0 && memcmp(first[g], again, tg[g].bytes) != 0) {
          print_error("%s, %s: run %d's %s differs from run 0's\n", info.name, what, run,
                      g == 0 ? "dq" : g == 1 ? "dk" : "dv");
          fail();
        }
      }
    }
    printf("[ DETERM   ] %s: 10 runs of %s bitwise identical\n", info.name, what);
    ++pinned;
    for (int g = 0; g < 3; ++g) free(first[g]);
    free(again);
    cudaFree(ws);
  }
  OPST_OK(ops_handle_pin_kernel(g_gpu, NULL));
  if (explain) {
    OPST_OK(ops_handle_set_deterministic(g_gpu, 1));
    ops_explain ex;
    memset(&ex, 0, sizeof ex);
    ex.struct_size = sizeof ex;
    OPST_OK(ops_sdpa_backward_explain(g_gpu, &p, &dev[0], &dev[1], &dev[2], &dev[3], &dev[4], &dev[5], &dev[6],
                                      &dev[7], &dev[8], &ex));
    OPST_OK(ops_handle_set_deterministic(g_gpu, 0));
    assert_true(ex.chosen >= 0);
    ops_kernel_info chosen;
    chosen.struct_size = sizeof chosen;
    OPST_OK(ops_kernel_info_by_name(ex.verdicts[ex.chosen].kernel_name, &chosen));
    printf("[ DETERM   ] a deterministic handle runs %s on %s\n", chosen.name, what);
    assert_true(chosen.deterministic);
  }
  for (int i = 0; i < 9; ++i) cudaFree(mem[i]);
  opst_free(&tdo);
  for (int g = 0; g < 3; ++g) opst_free(&tg[g]);
  free_call(&fwd);
  return pinned;
}

/* The deterministic promise of the backward rows, bf16: a causal GQA call (2 x 8 heads over 2
 * KV heads, 300 x 333, d 128: 12 key tiles, their walks in 4 parts on Hopper; and 4 heads over
 * 2, d 256); 512 x 512, 32 heads over 8, causal (32 key tiles in 4 parts); 1500 queries over
 * 2100 keys (17 key tiles of 128 a head, each seeing every query tile; on Hopper in 4 parts of
 * 12 steps, ascending), 4 heads over 1, d 64, no mask; the same with a window of 700 keys on the
 * left (the key tiles that see a query tile, a moving run); 100 queries over 1000 keys, 4 heads
 * over 2, d 128, no mask (on Hopper 8 key tiles over 4 steps: ascending, their blocks a wave);
 * 2 x 600 x 600, 8 heads over 2, d 128, no mask (5 key tiles a KV head walking round, in 4
 * parts of 10 steps; at d 256 10 key tiles over 40 steps); 512 x 512, 16 heads, d 64, no mask
 * (4 key tiles a head walking round over 4 steps, whole). */
void sdpa_backward_is_reproducible(void **state) {
  (void)state;
  if (!g_have_cuda) {
    printf("[ SKIPPED  ] no CUDA device: bitwise reproducibility of the backward needs one\n");
    return;
  }
  assert_true(reproducible_case("a causal GQA backward", 2, 300, 333, 8, 2, 128, 1, -1, 1) > 0);
  assert_true(reproducible_case("a causal GQA backward at d 256", 1, 300, 333, 4, 2, 256, 1, -1, 1) > 0);
  assert_true(reproducible_case("a 512 x 512 causal GQA 32:8 backward", 1, 512, 512, 32, 8, 128, 1, -1, 1) > 0);
  assert_true(reproducible_case("a 1500 x 2100 backward", 1, 1500, 2100, 4, 1, 64, 0, -1, 1) > 0);
  assert_true(reproducible_case("a 1500 x 2100 backward, window 700", 1, 1500, 2100, 4, 1, 64, 0, 700, 0) >
              0);
  assert_true(reproducible_case("a 100 x 1000 GQA backward", 1, 100, 1000, 4, 2, 128, 0, -1, 1) > 0);
  assert_true(reproducible_case("a 600 x 600 GQA backward", 2, 600, 600, 8, 2, 128, 0, -1, 1) > 0);
  assert_true(reproducible_case("a 512 x 512 backward, 16 heads", 1, 512, 512, 16, 16, 64, 0, -1, 1) > 0);
}
