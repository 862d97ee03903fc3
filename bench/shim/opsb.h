/*
 * opsb: Google Benchmark for C. Benchmarks are C functions registered with a name and an
 * argument; the one C++ file (opsb.cc) adapts them to the framework, so every benchmark of
 * opslib calls the C ABI exactly as a C user would.
 *
 *   static void bm(opsb_state *s, const void *arg) {
 *     while (opsb_keep_running(s)) { ... }
 *   }
 *   int main(int argc, char **argv) { opsb_register("name", bm, NULL, 0); return opsb_main(argc, argv); }
 */
#ifndef OPSLIB_BENCH_SHIM_OPSB_H_
#define OPSLIB_BENCH_SHIM_OPSB_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct opsb_state opsb_state;
typedef void (*opsb_fn)(opsb_state *state, const void *arg);

/* manual_time != 0: the benchmark reports each iteration's time (device events) itself. */
void opsb_register(const char *name, opsb_fn fn, const void *arg, int manual_time);
int opsb_main(int argc, char **argv);

int opsb_keep_running(opsb_state *state);
void opsb_pause(opsb_state *state);
void opsb_resume(opsb_state *state);
void opsb_set_iteration_time(opsb_state *state, double seconds);
void opsb_set_bytes_per_iteration(opsb_state *state, double bytes);
/* A counter shown beside the timing; per_second != 0 divides it by the measured time. */
void opsb_counter(opsb_state *state, const char *name, double value, int per_second);
void opsb_label(opsb_state *state, const char *label);
void opsb_skip(opsb_state *state, const char *why);
int64_t opsb_iterations(opsb_state *state);

#ifdef __cplusplus
}
#endif

#endif /* OPSLIB_BENCH_SHIM_OPSB_H_ */
