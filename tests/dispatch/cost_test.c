/*
 * The cost model: the work counts (attention's visible (query, key) pairs in closed form
 * against a brute-force count, GEMM flops), and the estimate's terms (wave quantization
 * and tile padding on a synthetic tiled row; memory- vs math-bound; ranking order).
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "capabilities/calibration.h"
#include "capabilities/rows.h"
#include "dispatch/cost.h"
#include "opslib/opslib.h"
#include "tests/support/opst.h"

static double brute_pairs(int64_t sq, int64_t sk, int64_t left, int64_t right) {
  double n = 0;
  for (int64_t i = 0; i < sq; ++i) {
    for (int64_t j = 0; j < sk; ++j) {
      const int64_t rel = j - i - (sk - sq);
      if ((left < 0 || -rel <= left) && (right < 0 || rel <= right)) n += 1;
    }
  }
  return n;
}

static void attention_pairs_match_brute_force(void **state) {
  (void)state;
  opst_rng r;
  opst_rng_init(&r, opst_seed("cost"));
  for (int it = 0; it < 2000; ++it) {
    opsi_problem p;
    memset(&p, 0, sizeof p);
    p.op = OPS_OP_SDPA;
    p.dtype = p.out_dtype = OPS_DTYPE_BF16;
    p.dims[OPSI_SDPA_B] = 1, p.dims[OPSI_SDPA_HQ] = 1, p.dims[OPSI_SDPA_HKV] = 1;
    p.dims[OPSI_SDPA_D] = 1, p.dims[OPSI_SDPA_DV] = 1;
    p.dims[OPSI_SDPA_SQ] = opst_int(&r, 0, 40);
    p.dims[OPSI_SDPA_SK] = opst_int(&r, 0, 40);
    p.extra[0] = opst_chance(&r, 0.5) ? -1 : opst_int(&r, 0, 20);
    p.extra[1] = opst_chance(&r, 0.5) ? -1 : opst_int(&r, 0, 20);
    double bytes, flops;
    opsi_work(&p, &bytes, &flops);
    const double want = brute_pairs(p.dims[OPSI_SDPA_SQ], p.dims[OPSI_SDPA_SK], p.extra[0], p.extra[1]);
    if (flops != 4.0 * want) { /* 2 (D + Dv) flops per pair, D = Dv = 1 */
      print_error("Sq=%lld Sk=%lld window=(%lld, %lld): %g pairs, want %g\n", (long long)p.dims[OPSI_SDPA_SQ],
                  (long long)p.dims[OPSI_SDPA_SK], (long long)p.extra[0], (long long)p.extra[1], flops / 4, want);
      fail();
    }
  }
  /* At scale: causal 4096 x 4096 is half the square plus the diagonal. */
  opsi_problem p;
  memset(&p, 0, sizeof p);
  p.op = OPS_OP_SDPA;
  p.dtype = p.out_dtype = OPS_DTYPE_BF16;
  const int64_t dims[7] = {2, 4096, 4096, 16, 4, 128, 128};
  memcpy(p.dims, dims, sizeof dims);
  p.extra[0] = -1, p.extra[1] = 0;
  double bytes, flops;
  opsi_work(&p, &bytes, &flops);
  assert_true(flops == 2.0 * 2 * 16 * (4096.0 * 4097 / 2) * 256);
  assert_true(bytes == 2.0 * (2 * 4096 * 16 * 128 * 2.0 + 2 * 4096 * 4 * 256.0));
}

/* The Hopper forward's padding: a work tile of BM query rows computes BM x BN pairs for each
 * key tile of BN holding a key one of its rows sees (counted here pair by pair), over the
 * visible pairs; so causal tiles of 192 rows pad the diagonal more than tiles of 128. */
static double brute_tile_pairs(int64_t sq, int64_t sk, int64_t left, int64_t right, int bm, int bn) {
  double computed = 0.0;
  for (int64_t i0 = 0; i0 < sq; i0 += bm) {
    for (int64_t j0 = 0; j0 < sk; j0 += bn) {
      int seen = 0;
      for (int64_t i = i0; i < i0 + bm && i < sq && !seen; ++i) {
        for (int64_t j = j0; j < j0 + bn && j < sk && !seen; ++j) {
          const int64_t diag = i + sk - sq;
          seen = (left < 0 || j >= diag - left) && (right < 0 || j <= diag + right);
        }
      }
      computed += seen ? (double)bm * bn : 0.0;
    }
  }
  return computed;
}

static const opsi_kernel_row *row_named(int32_t op, const char *name) {
  size_t n = 0;
  const opsi_kernel_row *rows = opsi_rows_for_op(op, &n);
  for (size_t i = 0; i < n; ++i) {
    if (strcmp(rows[i].name, name) == 0) return &rows[i];
  }
  return NULL;
}

static void hopper_tiles_pad_the_diagonal(void **state) {
  (void)state;
  ops_device_info dev;
  OPST_OK(ops_device_info_for_sm(90, &dev));
  const struct {
    const char *name;
    int bm, bn;
  } kernels[2] = {{"cuda_sdpa_sm90_d64", 192, 128}, {"cuda_sdpa_sm90_d64_m128", 128, 128}};
  opst_rng r;
  opst_rng_init(&r, opst_seed("cost_tiles"));
  opsi_problem p;
  memset(&p, 0, sizeof p);
  p.op = OPS_OP_SDPA, p.backend = OPS_DEVICE_CUDA, p.sm = 90, p.sm_count = 132;
  p.dtype = p.out_dtype = OPS_DTYPE_BF16;
  p.dims[OPSI_SDPA_B] = 2, p.dims[OPSI_SDPA_HQ] = 4, p.dims[OPSI_SDPA_HKV] = 2;
  p.dims[OPSI_SDPA_D] = 64, p.dims[OPSI_SDPA_DV] = 64;
  for (int it = 0; it < 200; ++it) {
    p.dims[OPSI_SDPA_SQ] = opst_int(&r, 1, 700), p.dims[OPSI_SDPA_SK] = opst_int(&r, 1, 700);
    p.dims[OPSI_SDPA_TQ] = p.dims[OPSI_SDPA_B] * p.dims[OPSI_SDPA_SQ];
    p.extra[0] = opst_chance(&r, 0.6) ? -1 : opst_int(&r, 0, 300);
    p.extra[1] = opst_chance(&r, 0.3) ? -1 : opst_int(&r, 0, 300);
    double bytes, flops;
    opsi_work(&p, &bytes, &flops);
    const double visible = flops / (2.0 * 2 * 4 * 128);
    if (visible <= 0) continue;
    for (int k = 0; k < 2; ++k) {
      const opsi_kernel_row *row = row_named(OPS_OP_SDPA, kernels[k].name);
      assert_non_null(row);
      opsi_cost c;
      opsi_estimate(&p, row, &dev, &c);
      const double computed = brute_tile_pairs(p.dims[OPSI_SDPA_SQ], p.dims[OPSI_SDPA_SK], p.extra[0], p.extra[1],
                                               kernels[k].bm, kernels[k].bn);
      const double want = computed > visible ? computed / visible : 1.0;
      if (fabs(c.pad_factor - want) > 1e-9 * want) {
        print_error("%s Sq=%lld Sk=%lld window=(%lld, %lld): padding %g, want %g\n", kernels[k].name,
                    (long long)p.dims[OPSI_SDPA_SQ], (long long)p.dims[OPSI_SDPA_SK], (long long)p.extra[0],
                    (long long)p.extra[1], c.pad_factor, want);
        fail();
      }
      const double tiles = ceil((double)p.dims[OPSI_SDPA_SQ] / kernels[k].bm);
      assert_true(c.blocks == tiles * 2 * 4);
    }
  }
  /* the tile boundaries exhaustively, small lengths around multiples of 64 */
  const int64_t lens[] = {1, 63, 64, 65, 127, 128, 129, 191, 192, 193, 255, 257};
  const int64_t sides[] = {-1, 0, 5, 200};
  for (size_t a = 0; a < sizeof lens / sizeof lens[0]; ++a) {
    for (size_t b = 0; b < sizeof lens / sizeof lens[0]; ++b) {
      for (size_t l = 0; l < 4; ++l) {
        for (size_t w = 0; w < 4; ++w) {
          p.dims[OPSI_SDPA_SQ] = lens[a], p.dims[OPSI_SDPA_SK] = lens[b], p.dims[OPSI_SDPA_TQ] = 2 * lens[a];
          p.extra[0] = sides[l], p.extra[1] = sides[w];
          double bytes, flops;
          opsi_work(&p, &bytes, &flops);
          const double visible = flops / (2.0 * 2 * 4 * 128);
          for (int k = 0; k < 2; ++k) {
            opsi_cost c;
            opsi_estimate(&p, row_named(OPS_OP_SDPA, kernels[k].name), &dev, &c);
            const double computed =
                brute_tile_pairs(lens[a], lens[b], sides[l], sides[w], kernels[k].bm, kernels[k].bn);
            const double want = visible > 0 && computed > visible ? computed / visible : 1.0;
            if (fabs(c.pad_factor - want) > 1e-9 * want) {
              print_error("%s Sq=%lld Sk=%lld window=(%lld, %lld): padding %g, want %g\n", kernels[k].name,
                          (long long)lens[a], (long long)lens[b], (long long)sides[l], (long long)sides[w],
                          c.pad_factor, want);
              fail();
            }
          }
        }
      }
    }
  }
  /* long heads, closed form against the tiles one by one (the kernel's key range a tile) */
  const int64_t big[3][4] = {{100003, 131072, -1, 0}, {131072, 131072, 4096, 0}, {70001, 65536, 1000, 3000}};
  for (int i = 0; i < 3; ++i) {
    const int64_t sq = big[i][0], sk = big[i][1], left = big[i][2], right = big[i][3], diag = sk - sq;
    p.dims[OPSI_SDPA_SQ] = sq, p.dims[OPSI_SDPA_SK] = sk, p.dims[OPSI_SDPA_TQ] = 2 * sq;
    p.extra[0] = left, p.extra[1] = right;
    double bytes, flops;
    opsi_work(&p, &bytes, &flops);
    const double visible = flops / (2.0 * 2 * 4 * 128);
    for (int k = 0; k < 2; ++k) {
      const int64_t bm = kernels[k].bm, bn = kernels[k].bn;
      double tiles = 0.0;
      for (int64_t lo_row = 0; lo_row < sq; lo_row += bm) {
        const int64_t hi_row = (lo_row + bm < sq ? lo_row + bm : sq) - 1;
        int64_t lo = left >= 0 ? lo_row + diag - left : 0, hi = right >= 0 ? hi_row + diag + right + 1 : sk;
        lo = lo < 0 ? 0 : lo > sk ? sk : lo, hi = hi < 0 ? 0 : hi > sk ? sk : hi;
        if (hi > lo) tiles += (double)((hi + bn - 1) / bn - lo / bn);
      }
      opsi_cost c;
      opsi_estimate(&p, row_named(OPS_OP_SDPA, kernels[k].name), &dev, &c);
      const double want = (double)bm * bn * tiles / visible;
      assert_true(fabs(c.pad_factor - want) < 1e-9 * want);
      assert_true(want > 1.0);
    }
  }
  /* B8 S1024 causal: 192-row tiles compute 786432 pairs a head, 128-row ones 589824, of
   * 524800 visible */
  p.dims[OPSI_SDPA_SQ] = p.dims[OPSI_SDPA_SK] = 1024, p.dims[OPSI_SDPA_TQ] = 2048;
  p.extra[0] = -1, p.extra[1] = 0;
  opsi_cost c;
  opsi_estimate(&p, row_named(OPS_OP_SDPA, "cuda_sdpa_sm90_d64"), &dev, &c);
  assert_true(fabs(c.pad_factor - 786432.0 / 524800.0) < 1e-12);
  opsi_estimate(&p, row_named(OPS_OP_SDPA, "cuda_sdpa_sm90_d64_m128"), &dev, &c);
  assert_true(fabs(c.pad_factor - 589824.0 / 524800.0) < 1e-12);
  /* without the mask, the rows' padding alone: 6 tiles of 192 for 1024 rows */
  p.extra[1] = -1;
  opsi_estimate(&p, row_named(OPS_OP_SDPA, "cuda_sdpa_sm90_d64"), &dev, &c);
  assert_true(fabs(c.pad_factor - 1152.0 / 1024.0) < 1e-12);
}

/* The backward ops' minimal bytes: dy and x (softmax: y) read and dx written; norms also read
 * the weight (counted as f32) and the saved statistics (layernorm: mean and rstd), and write
 * dweight / dbias (f32) when asked. */
static void backward_bytes_are_the_minimal_ones(void **state) {
  (void)state;
  const double rows = 1000, cols = 256, n = rows * cols;
  const int ops[3] = {OPS_OP_LAYERNORM_BACKWARD, OPS_OP_RMSNORM_BACKWARD, OPS_OP_SOFTMAX_BACKWARD};
  for (int k = 0; k < 3; ++k) {
    for (int flags = 0; flags < 2; ++flags) {
      opsi_problem p;
      memset(&p, 0, sizeof p);
      p.op = ops[k];
      p.dtype = p.out_dtype = OPS_DTYPE_BF16;
      p.dims[OPSI_ROWS_ROWS] = (int64_t)rows, p.dims[OPSI_ROWS_COLS] = (int64_t)cols;
      p.flags = flags ? OPSI_F_DWEIGHT | OPSI_F_BIAS : 0;
      double bytes, flops;
      opsi_work(&p, &bytes, &flops);
      double want = 3 * 2 * n;
      if (ops[k] != OPS_OP_SOFTMAX_BACKWARD) {
        want += 4 * cols + 4 * rows * (ops[k] == OPS_OP_LAYERNORM_BACKWARD ? 2 : 1) + (flags ? 8 * cols : 0);
      }
      assert_true(bytes == want);
      assert_true(flops > 0);
    }
  }
}

static opsi_kernel_row tiled_row(void) {
  opsi_kernel_row r;
  memset(&r, 0, sizeof r);
  r.name = "synthetic_gemm_128x128";
  r.op = OPS_OP_GEMM;
  r.backend = OPS_DEVICE_CUDA;
  r.unit = OPSI_UNIT_WGMMA_F16;
  r.efficiency = 0.8f;
  r.bytes_factor = 1.0f;
  r.tiling = (opsi_tiling){{OPSI_GEMM_M, OPSI_GEMM_N, OPSI_GEMM_K}, {128, 128, 64}, {1, 1, 0}, {OPSI_GEMM_BATCH, -1, -1}, 1};
  return r;
}

static opsi_problem gemm(int64_t m, int64_t n, int64_t k) {
  opsi_problem p;
  memset(&p, 0, sizeof p);
  p.op = OPS_OP_GEMM, p.backend = OPS_DEVICE_CUDA, p.sm = 90;
  p.dtype = p.out_dtype = OPS_DTYPE_BF16;
  p.dims[OPSI_GEMM_BATCH] = 1, p.dims[OPSI_GEMM_M] = m, p.dims[OPSI_GEMM_N] = n, p.dims[OPSI_GEMM_K] = k;
  return p;
}

static void waves_and_padding(void **state) {
  (void)state;
  ops_device_info dev;
  OPST_OK(ops_device_info_for_sm(90, &dev)); /* 132 SMs */
  const opsi_kernel_row r = tiled_row();
  opsi_cost c;
  opsi_problem p = gemm(128 * 12, 128 * 11, 4096); /* 132 tiles: one full wave */
  opsi_estimate(&p, &r, &dev, &c);
  assert_true(fabs(c.wave_factor - 1.0) < 1e-12);
  assert_true(fabs(c.pad_factor - 1.0) < 1e-12);
  assert_true(c.flops == 2.0 * 1536 * 1408 * 4096);
  p = gemm(128 * 12, 128 * 12, 4096); /* 144 tiles: a second, mostly empty wave */
  opsi_estimate(&p, &r, &dev, &c);
  assert_true(fabs(c.wave_factor - 264.0 / 144.0) < 1e-12);
  p = gemm(1537, 1536, 4096); /* one row past a tile: padding */
  opsi_estimate(&p, &r, &dev, &c);
  assert_true(fabs(c.pad_factor - (13.0 * 128) / 1537.0) < 1e-12);
  /* A large square GEMM is math-bound, a GEMV memory-bound. */
  p = gemm(8192, 8192, 8192);
  opsi_estimate(&p, &r, &dev, &c);
  assert_true(c.math_us > c.mem_us);
  assert_true(fabs(c.math_us - 2.0 * 8192 * 8192 * 8192 / (989.0 * 1e6 * 0.8)) < 1e-6 * c.math_us);
  p = gemm(1, 14336, 4096);
  opsi_estimate(&p, &r, &dev, &c);
  assert_true(c.mem_us > c.math_us);
  char text[256];
  opsi_format_cost(&c, text, sizeof text);
  assert_non_null(strstr(text, "memory"));
  assert_non_null(strstr(text, "waves 1 x"));
  assert_non_null(strstr(text, "row efficiency 0.80")); /* a synthetic row has no calibration */
}

static void estimates_rank_sensibly(void **state) {
  (void)state;
  ops_device_info dev;
  OPST_OK(ops_device_info_for_sm(90, &dev));
  opsi_kernel_row wgmma = tiled_row(), mma = tiled_row(), cuda_cores = tiled_row();
  mma.unit = OPSI_UNIT_MMA_F16;
  cuda_cores.unit = OPSI_UNIT_FFMA;
  const opsi_problem p = gemm(4096, 4096, 4096);
  opsi_cost a, b, c;
  opsi_estimate(&p, &wgmma, &dev, &a);
  opsi_estimate(&p, &mma, &dev, &b);
  opsi_estimate(&p, &cuda_cores, &dev, &c);
  assert_true(a.us < b.us && b.us < c.us);
  /* A unit the family lacks (wgmma before Hopper) can never win. */
  ops_device_info a100;
  OPST_OK(ops_device_info_for_sm(80, &a100));
  opsi_problem p80 = p;
  p80.sm = 80;
  opsi_estimate(&p80, &wgmma, &a100, &a);
  assert_true(isinf(a.us));
}

static opsi_problem sdpa(int64_t b, int64_t sq, int64_t h, int64_t d) {
  opsi_problem p;
  memset(&p, 0, sizeof p);
  p.op = OPS_OP_SDPA, p.backend = OPS_DEVICE_CUDA, p.sm = 90;
  p.dtype = p.out_dtype = OPS_DTYPE_BF16;
  const int64_t dims[8] = {b, sq, sq, h, h, d, d, b * sq};
  memcpy(p.dims, dims, sizeof dims);
  p.extra[0] = p.extra[1] = -1;
  return p;
}

/* Where the device has a calibration entry for a row, the estimate is the fitted model:
 * launch + waves x wave_us + max(bytes / gbps, flops x padding x quantization / tflops),
 * and its terms say which calibration they come from; on another family, the row's. */
static void calibrated_estimates_use_the_fitted_terms(void **state) {
  (void)state;
  ops_device_info h100, a100;
  OPST_OK(ops_device_info_for_sm(90, &h100));
  OPST_OK(ops_device_info_for_sm(80, &a100));
  const opsi_kernel_row *r = row_named(OPS_OP_SDPA, "cuda_sdpa_sm90_d128");
  assert_non_null(r);
  const opsi_calibration_set *set = NULL;
  const opsi_calibration *cal = opsi_calibration_for(r->id, NULL, 90, h100.name, &set);
  assert_non_null(cal);
  assert_non_null(set);
  const opsi_problem shapes[3] = {sdpa(4, 4096, 32, 128), sdpa(1, 128, 32, 128), sdpa(64, 1, 32, 128)};
  for (int i = 0; i < 3; ++i) {
    opsi_cost c;
    opsi_estimate(&shapes[i], r, &h100, &c);
    assert_ptr_equal(c.calibration, cal);
    const double mem = c.bytes / (cal->gbps * 1e3);
    const double math = c.flops * c.pad_factor * c.wave_factor / (cal->tflops * 1e6);
    const double want = cal->launch_us + c.waves * cal->wave_us + (mem > math ? mem : math);
    assert_true(fabs(c.us - want) < 1e-9 * want);
    char text[256];
    opsi_format_cost(&c, text, sizeof text);
    assert_non_null(strstr(text, "calibrated "));
    assert_non_null(strstr(text, set->name));
  }
  const opsi_kernel_row *mma = row_named(OPS_OP_SDPA, "cuda_sdpa_mma_d128");
  assert_non_null(mma);
  opsi_problem p80 = shapes[0];
  p80.sm = 80;
  opsi_cost c;
  opsi_estimate(&p80, mma, &a100, &c);
  assert_null(c.calibration); /* no A100 measurements: the row's efficiency */
}

/* Every calibration entry names a CUDA row of its id, on an SM its set covers, with
 * positive coefficients fitted to at least two shapes. */
static void calibration_entries_name_their_rows(void **state) {
  (void)state;
  int sets = 0;
  const opsi_calibration_set *const *all = opsi_calibration_sets(&sets);
  assert_true(sets >= 1);
  size_t nrows = 0;
  const opsi_kernel_row *const *rows = opsi_all_rows(&nrows);
  for (int s = 0; s < sets; ++s) {
    assert_true(all[s]->count > 0);
    assert_non_null(all[s]->source);
    for (int32_t i = 0; i < all[s]->count; ++i) {
      const opsi_calibration *e = &all[s]->entries[i];
      const opsi_kernel_row *r = NULL;
      for (size_t j = 0; j < nrows; ++j) {
        if (rows[j]->id == e->kernel_id) r = rows[j];
      }
      if (r == NULL || strcmp(r->name, e->kernel_name) != 0 || r->backend != OPS_DEVICE_CUDA ||
          r->sm_max < all[s]->sm_min || r->sm_min > all[s]->sm_max) {
        print_error("%s: entry %s (id %d) does not match its row\n", all[s]->name, e->kernel_name,
                    (int)e->kernel_id);
        fail();
      }
      assert_true(e->gbps > 0 && e->launch_us >= 0 && e->wave_us >= 0 && e->tflops >= 0 && e->shapes >= 2);
      assert_ptr_equal(opsi_calibration_for(e->kernel_id, e->plan, all[s]->sm_min, all[s]->device, NULL), e);
    }
  }
}

/* A device that a set was measured on takes that set's entries where it has the kernel, and the
 * SM family's first set's elsewhere; a device no set names (the described reference device)
 * takes the family's, and no entry for a kernel only another device's set has. The estimate's
 * terms name the set used. */
static void calibration_follows_the_measured_device(void **state) {
  (void)state;
  int sets = 0;
  const opsi_calibration_set *const *all = opsi_calibration_sets(&sets);
  ops_device_info ref;
  OPST_OK(ops_device_info_for_sm(90, &ref));
  const opsi_kernel_row *row = row_named(OPS_OP_GEMM, "cuda_gemm_sm90_128x128");
  assert_non_null(row);
  const opsi_calibration_set *family = NULL;
  assert_non_null(opsi_calibration_for(row->id, NULL, 90, ref.name, &family));
  assert_ptr_equal(family, all[0]);
  for (int s = 1; s < sets; ++s) {
    if (all[s]->sm_min > 90 || all[s]->sm_max < 90) continue;
    ops_device_info dev = ref;
    snprintf(dev.name, sizeof dev.name, "%s", all[s]->device);
    for (int32_t i = 0; i < all[s]->count; ++i) { /* its own entries */
      const opsi_calibration_set *got = NULL;
      assert_ptr_equal(opsi_calibration_for(all[s]->entries[i].kernel_id, all[s]->entries[i].plan, 90, dev.name, &got),
                       &all[s]->entries[i]);
      assert_ptr_equal(got, all[s]);
    }
    for (int32_t i = 0; i < all[0]->count; ++i) { /* the family's, where it has none */
      const opsi_calibration_set *got = NULL;
      const opsi_calibration *e =
          opsi_calibration_for(all[0]->entries[i].kernel_id, all[0]->entries[i].plan, 90, dev.name, &got);
      assert_non_null(e);
      if (got != all[s]) assert_ptr_equal(e, &all[0]->entries[i]);
    }
    for (int32_t i = 0; i < all[s]->count; ++i) { /* its kernels the family lacks: none elsewhere */
      const int32_t id = all[s]->entries[i].kernel_id;
      const opsi_calibration_set *fam = NULL;
      const opsi_calibration *e = opsi_calibration_for(id, all[s]->entries[i].plan, 90, ref.name, &fam);
      int in_family = 0;
      for (int32_t j = 0; j < all[0]->count; ++j) in_family |= all[0]->entries[j].kernel_id == id;
      if (in_family) {
        assert_ptr_equal(fam, all[0]);
      } else {
        assert_null(e);
      }
    }
    const opsi_calibration_set *want = NULL;
    opsi_problem p = gemm(256, 4096, 4096);
    const opsi_calibration *cal = opsi_calibration_for(row->id, row->plan(&p), 90, dev.name, &want);
    opsi_cost c;
    opsi_estimate(&p, row, &dev, &c);
    assert_ptr_equal(c.calibration, cal);
    assert_ptr_equal(c.calibration_set, want);
    char text[256];
    opsi_format_cost(&c, text, sizeof text);
    assert_non_null(strstr(text, want->name));
  }
}

/* An entry fitted to a launch plan (the H200's 128 x 64 and 128 x 96 GEMM rows: one consumer
 * warpgroup a tile above M 64) is the one calls of that plan take, the kernel's other entry the
 * rest; the estimate's terms say which. */
static void calibration_entries_follow_the_plan(void **state) {
  (void)state;
  int sets = 0, seen_plan = 0, seen_other = 0;
  const opsi_calibration_set *const *all = opsi_calibration_sets(&sets);
  ops_device_info dev;
  OPST_OK(ops_device_info_for_sm(90, &dev));
  for (int s = 0; s < sets; ++s) {
    snprintf(dev.name, sizeof dev.name, "%s", all[s]->device);
    for (int32_t i = 0; i < all[s]->count; ++i) {
      const opsi_calibration *e = &all[s]->entries[i];
      if (e->plan == NULL) continue;
      const opsi_kernel_row *row = row_named(OPS_OP_GEMM, e->kernel_name);
      assert_non_null(row); /* plan entries are the GEMM rows' so far */
      assert_non_null(row->plan);
      const int64_t ms[2] = {16, 256};
      for (int k = 0; k < 2; ++k) {
        opsi_problem p = gemm(ms[k], 4096, 4096);
        p.sm_count = dev.sm_count;
        opsi_cost c;
        opsi_estimate(&p, row, &dev, &c);
        assert_non_null(c.calibration);
        char text[512];
        opsi_format_cost(&c, text, sizeof text);
        if (strstr(row->plan(&p), e->plan) != NULL) {
          assert_ptr_equal(c.calibration, e);
          assert_non_null(strstr(text, "of this plan"));
          ++seen_plan;
        } else {
          assert_null(c.calibration->plan);
          assert_null(strstr(text, "of this plan"));
          ++seen_other;
        }
      }
    }
  }
  assert_true(seen_plan > 0 && seen_other > 0);
}

/* Varlen: the sequences' lengths live on the device, so the work counts tokens_q / batch
 * query rows a sequence of the longest length: B sequences of T / B rows together cost
 * what one sequence of the longest length costs at T rows, never B longest sequences. */
static void varlen_work_counts_the_packed_tokens(void **state) {
  (void)state;
  opsi_problem dense = sdpa(1, 1000, 8, 128), varlen = sdpa(4, 1000, 8, 128);
  varlen.dims[OPSI_SDPA_TQ] = 1000;
  varlen.flags |= OPSI_F_VARLEN;
  double db, df, vb, vf;
  opsi_work(&dense, &db, &df);
  opsi_work(&varlen, &vb, &vf);
  assert_true(fabs(vf - df) < 1e-9 * df);
  assert_true(fabs(opsi_tiled_extent(&varlen, OPSI_SDPA_SQ) - 250.0) < 1e-12);
  assert_true(fabs(opsi_tiled_extent(&dense, OPSI_SDPA_SQ) - 1000.0) < 1e-12);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(calibrated_estimates_use_the_fitted_terms),
      cmocka_unit_test(calibration_entries_name_their_rows),
      cmocka_unit_test(calibration_follows_the_measured_device),
      cmocka_unit_test(calibration_entries_follow_the_plan),
      cmocka_unit_test(varlen_work_counts_the_packed_tokens),
      cmocka_unit_test(attention_pairs_match_brute_force),
      cmocka_unit_test(backward_bytes_are_the_minimal_ones),
      cmocka_unit_test(hopper_tiles_pad_the_diagonal),
      cmocka_unit_test(waves_and_padding),
      cmocka_unit_test(estimates_rank_sensibly),
  };
  return cmocka_run_group_tests_name("cost", tests, NULL, NULL);
}
