/* gpu_ops_test: autotune, graph capture and launch plans on the device against the CPU reference (tests/support/gpu_call.h). */
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

/* ---- autotune, graph capture and launch plans on the device -------------------------- */

void on_plan(const ops_profile_record *r, void *user) {
  plan_seen *s = (plan_seen *)user;
  ++s->records;
  s->choice = r->choice;
  snprintf(s->kernel, sizeof s->kernel, "%s", r->kernel_name);
  snprintf(s->plan, sizeof s->plan, "%s", r->launch_plan != NULL ? r->launch_plan : "");
}

/* c's inputs on the device in mem (outputs poisoned), its descriptors pointing there. */
static void upload(gcall *c, void **mem) {
  for (int i = 0; i < c->n; ++i) {
    if (c->role[i] != IN) memcpy(c->h[i]->buf, c->h[i]->snap, c->h[i]->bytes);
    if (c->h[i]->bytes > 0) CUDA_OK(cudaMemcpy(mem[i], c->h[i]->buf, c->h[i]->bytes, cudaMemcpyHostToDevice));
    c->v[i] = relocated(c->h[i], mem[i]);
  }
}

/* c's outputs from mem against the CPU's (check_call computed them). */
static void expect_reference(gcall *c, void **mem, const char *what) {
  CUDA_OK(cudaDeviceSynchronize());
  char why[256];
  for (int i = 0; i < c->n; ++i) {
    if (c->role[i] != OUT) continue;
    if (c->h[i]->bytes > 0) CUDA_OK(cudaMemcpy(c->h[i]->buf, mem[i], c->h[i]->bytes, cudaMemcpyDeviceToHost));
    if (!opst_fully_written(c->h[i], why, sizeof why) ||
        !compare(c->h[i], &c->ref[i], c->scale[i], c->scale_floor, !c->no_l2[i], why, sizeof why)) {
      print_error("%s, %s, output %d: %s\n", c->label, what, i, why);
      fail();
    }
  }
  ++g_runs;
}

static void explain_on(ops_handle h, gcall *c, ops_explain *e) {
  e->struct_size = sizeof *e;
  OPST_OK(c->run(h, c, NULL, 0, NULL, e));
  assert_true(e->chosen >= 0);
}

/* The launch variant each Hopper SDPA row reports running is the one explain predicts:
 * pairs for the _pair rows, persistent without a mask, persistent with causal too (by length
 * or head by head, as the call's KV heads and the SMs decide). */
static void launch_plans_are_the_ones_that_ran(gcall *c, void **mem) {
  ops_handle h = NULL;
  OPST_OK(ops_handle_create(&h, ops_device_cuda(0)));
  plan_seen seen;
  memset(&seen, 0, sizeof seen);
  OPST_OK(ops_handle_set_profiler(h, on_plan, &seen));
  static const char *const kRows[3] = {"cuda_sdpa_sm90_d128_pair", "cuda_sdpa_sm90_d128", "cuda_sdpa_sm90_d128"};
  for (int k = 0; k < 3; ++k) {
    c->sdpa.causal = k == 2;
    OPST_OK(ops_handle_pin_kernel(h, kRows[k]));
    upload(c, mem);
    ops_explain e;
    explain_on(h, c, &e);
    OPST_OK(c->run(h, c, NULL, 0, NULL, NULL));
    OPST_OK(ops_handle_flush_profiler(h));
    assert_string_equal(seen.kernel, kRows[k]);
    assert_non_null(e.plan[e.chosen]);
    if (strcmp(seen.plan, e.plan[e.chosen]) != 0) {
      print_error("%s: explain predicts '%s', the launch reports '%s'\n", kRows[k], e.plan[e.chosen], seen.plan);
      fail();
    }
    printf("[ PLAN     ] %s%s: %s\n", kRows[k], k == 2 ? " (causal)" : "", seen.plan);
    if (k < 2) expect_reference(c, mem, kRows[k]);
  }
  c->sdpa.causal = 0;
  ops_handle_destroy(h);
}

/* A new handle on the device, its ops on a new non-blocking stream (*stream), where a graph
 * can be captured. */
static ops_handle handle_on_new_stream(cudaStream_t *stream) {
  ops_handle h = NULL;
  OPST_OK(ops_handle_create(&h, ops_device_cuda(0)));
  CUDA_OK(cudaStreamCreateWithFlags(stream, cudaStreamNonBlocking));
  OPST_OK(ops_handle_set_stream(h, *stream));
  return h;
}

/* With OPS_AUTOTUNE_MEASURE: no timing during stream capture (the graph replays the model's
 * kernel and its result is right), then the first eager run times the candidates, keeps the
 * fastest, and explain and the profiler say so. */
static void autotune_times_eagerly_and_never_in_capture(gcall *c, void **mem) {
  cudaStream_t stream;
  ops_handle h = handle_on_new_stream(&stream);
  OPST_OK(ops_handle_set_autotune(h, OPS_AUTOTUNE_MEASURE));
  plan_seen seen;
  memset(&seen, 0, sizeof seen);
  upload(c, mem);
  CUDA_OK(cudaDeviceSynchronize());
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CUDA_OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  ops_explain e;
  explain_on(h, c, &e);
  assert_int_equal(e.choice, OPS_CHOICE_MODEL);
  assert_non_null(strstr(e.choice_note, "capturing a CUDA graph"));
  OPST_OK(c->run(h, c, NULL, 0, NULL, NULL));
  CUDA_OK(cudaStreamEndCapture(stream, &graph));
  CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
  CUDA_OK(cudaGraphLaunch(exec, stream));
  CUDA_OK(cudaStreamSynchronize(stream));
  expect_reference(c, mem, "autotune on, in a CUDA graph");
  explain_on(h, c, &e);
  assert_int_equal(e.choice, OPS_CHOICE_MODEL);
  assert_int_equal(e.measured, 0);
  assert_non_null(strstr(e.choice_note, "until the first run times the best"));

  OPST_OK(ops_handle_set_profiler(h, on_plan, &seen));
  upload(c, mem);
  OPST_OK(c->run(h, c, NULL, 0, NULL, NULL));
  CUDA_OK(cudaStreamSynchronize(stream));
  expect_reference(c, mem, "autotune's first eager run");
  OPST_OK(ops_handle_flush_profiler(h));
  assert_int_equal(seen.records, 1);
  assert_int_equal(seen.choice, OPS_CHOICE_MEASURED);
  explain_on(h, c, &e);
  assert_int_equal(e.choice, OPS_CHOICE_MEASURED);
  assert_true(e.measured >= 2);
  int best = -1;
  for (int i = 0; i < e.count; ++i) {
    if (e.measured_us[i] > 0 && (best < 0 || e.measured_us[i] < e.measured_us[best])) best = i;
  }
  assert_int_equal(e.chosen, best);
  assert_string_equal(seen.kernel, e.verdicts[best].kernel_name);
  printf("[ AUTOTUNE ] %s: %s\n", c->label, e.choice_note);
  CUDA_OK(cudaGraphExecDestroy(exec));
  CUDA_OK(cudaGraphDestroy(graph));
  ops_handle_destroy(h);
  CUDA_OK(cudaStreamDestroy(stream));
}

/* A handle with a profiler, a call on it still pending in the profiler's ring, then the same
 * call captured into a CUDA graph: the capture holds (the profiler leaves a captured call
 * unrecorded instead of polling its ring's events, which would end the capture), the replays
 * are right, and only the eager call is recorded. */
static void profiler_leaves_captured_calls_unrecorded(gcall *c, void **mem) {
  cudaStream_t stream;
  ops_handle h = handle_on_new_stream(&stream);
  plan_seen seen;
  memset(&seen, 0, sizeof seen);
  OPST_OK(ops_handle_set_profiler(h, on_plan, &seen));
  upload(c, mem);
  OPST_OK(c->run(h, c, NULL, 0, NULL, NULL)); /* recorded once its events complete */
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CUDA_OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  OPST_OK(c->run(h, c, NULL, 0, NULL, NULL));
  CUDA_OK(cudaStreamEndCapture(stream, &graph));
  CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
  for (int replay = 0; replay < 2; ++replay) {
    upload(c, mem);
    CUDA_OK(cudaGraphLaunch(exec, stream));
    CUDA_OK(cudaStreamSynchronize(stream));
    expect_reference(c, mem, "captured with a profiler on the handle");
  }
  OPST_OK(ops_handle_flush_profiler(h));
  assert_int_equal(seen.records, 1);
  printf("[ PROFILER ] %s: captured beside a pending record; 2 replays right, 1 record (the eager call)\n",
         c->label);
  CUDA_OK(cudaGraphExecDestroy(exec));
  CUDA_OK(cudaGraphDestroy(graph));
  ops_handle_destroy(h);
  CUDA_OK(cudaStreamDestroy(stream));
}

void autotune_and_launch_plans(void **state) {
  (void)state;
  if (!g_have_cuda) {
    printf("[ SKIPPED  ] autotune_and_launch_plans: no CUDA device (it times kernels and reads what ran)\n");
    skip();
  }
  gcall c;
  opst_tensor t[5];
  /* 2 x 1024 rows x 8 heads (GQA 2), d 128: 8 query tiles of 128 a head, even */
  sdpa_dense_call(&c, t, OPS_DTYPE_BF16, 2, 1024, 1024, 8, 4, 128, 128, 0);
  c.label = "sdpa bf16 2 x 8 heads (GQA 2) x 1024 x 1024, d 128, lse";
  check_call(&c); /* the CPU reference, every kernel pinned, the dispatcher's choice */
  void *mem[MAXT] = {0};
  for (int i = 0; i < c.n; ++i) {
    if (c.h[i]->bytes > 0) CUDA_OK(cudaMalloc(&mem[i], c.h[i]->bytes));
  }
  launch_plans_are_the_ones_that_ran(&c, mem);
  autotune_times_eagerly_and_never_in_capture(&c, mem);
  profiler_leaves_captured_calls_unrecorded(&c, mem);
  for (int i = 0; i < c.n; ++i) cudaFree(mem[i]);
  free_call(&c);
}
