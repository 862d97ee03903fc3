// The C shim over Google Benchmark (opsb.h): the only C++ in the benchmarks.
#include "bench/shim/opsb.h"

#include <benchmark/benchmark.h>

struct opsb_state {
  benchmark::State *state;
  double bytes_per_iteration;
};

extern "C" void opsb_register(const char *name, opsb_fn fn, const void *arg, int manual_time) {
  auto *b = benchmark::RegisterBenchmark(name, [fn, arg](benchmark::State &st) {
    opsb_state s{&st, 0.0};
    fn(&s, arg);
    if (s.bytes_per_iteration > 0) {
      st.SetBytesProcessed(static_cast<int64_t>(s.bytes_per_iteration * static_cast<double>(st.iterations())));
    }
  });
  if (manual_time) b->UseManualTime();
}

extern "C" int opsb_main(int argc, char **argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

extern "C" int opsb_keep_running(opsb_state *s) { return s->state->KeepRunning() ? 1 : 0; }
extern "C" void opsb_pause(opsb_state *s) { s->state->PauseTiming(); }
extern "C" void opsb_resume(opsb_state *s) { s->state->ResumeTiming(); }
extern "C" void opsb_set_iteration_time(opsb_state *s, double seconds) { s->state->SetIterationTime(seconds); }
extern "C" void opsb_set_bytes_per_iteration(opsb_state *s, double bytes) { s->bytes_per_iteration = bytes; }
extern "C" void opsb_counter(opsb_state *s, const char *name, double value, int per_second) {
  s->state->counters[name] = benchmark::Counter(value, per_second ? benchmark::Counter::kIsRate
                                                                   : benchmark::Counter::kDefaults);
}
extern "C" void opsb_label(opsb_state *s, const char *label) { s->state->SetLabel(label); }
extern "C" void opsb_skip(opsb_state *s, const char *why) { s->state->SkipWithError(why); }
extern "C" int64_t opsb_iterations(opsb_state *s) { return static_cast<int64_t>(s->state->iterations()); }
