/* Profiling: records per launch, timed by CUDA events (or the host clock on the CPU). */
#include "runtime/profiler.h"

#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/error.h"
#include "runtime/handle_internal.h"
#include "runtime/timing.h"

#define RING 64
#define PROBLEM_BYTES 256

typedef struct {
  cudaEvent_t start, stop;
  int ready; /* the stop event has been recorded */
  ops_profile_record rec;
  char problem[PROBLEM_BYTES];
} pending;

struct opsi_profiler {
  ops_profile_fn fn;
  void *user;
  FILE *file; /* OPSLIB_PROFILE: owned here */
  int cuda;
  pthread_mutex_t lock;
  int head, count;
  pending ring[RING];
};

static void finish_rates(ops_profile_record *r) {
  r->gbps = r->time_us > 0 ? r->bytes / (r->time_us * 1e3) : 0.0;
  r->tflops = r->time_us > 0 ? r->flops / (r->time_us * 1e6) : 0.0;
}

static void deliver(struct opsi_profiler *p, pending *out, int n) {
  for (int i = 0; i < n; ++i) {
    out[i].rec.problem = out[i].problem;
    p->fn(&out[i].rec, p->user);
  }
}

/* Moves completed records from the head of the ring into out (in call order). With
 * wait, waits for them all. Caller holds the lock. */
static int collect(struct opsi_profiler *p, pending *out, int wait) {
  int n = 0;
  while (p->count > 0) {
    pending *e = &p->ring[p->head];
    if (!e->ready) break; /* its launch is still being issued by another thread */
    const cudaError_t q = wait ? cudaEventSynchronize(e->stop) : cudaEventQuery(e->stop);
    if (q == cudaErrorNotReady) break;
    float ms = 0.0f;
    if (q == cudaSuccess) cudaEventElapsedTime(&ms, e->start, e->stop);
    out[n] = *e;
    out[n].rec.time_us = (double)ms * 1e3;
    finish_rates(&out[n].rec);
    ++n;
    e->ready = 0;
    p->head = (p->head + 1) % RING;
    --p->count;
  }
  return n;
}

int opsi_profile_begin(ops_handle h, opsi_profile_token *tok) {
  struct opsi_profiler *p = h->profiler;
  if (p == NULL) return 0;
  if (!p->cuda) {
    tok->host_start = opsi_host_us();
    return 1;
  }
  /* a launch captured into a CUDA graph runs when the graph does; polling the ring's events
   * here would end the capture (an event query is not allowed while the stream captures) */
  if (opsi_stream_capturing(h)) return 0;
  static _Thread_local pending done[RING];
  pthread_mutex_lock(&p->lock);
  int n = collect(p, done, 0);
  if (p->count == RING) { /* full: wait for the oldest records */
    pthread_mutex_unlock(&p->lock);
    deliver(p, done, n);
    pthread_mutex_lock(&p->lock);
    n = collect(p, done, 1);
  }
  tok->slot = (p->head + p->count) % RING;
  ++p->count;
  p->ring[tok->slot].ready = 0;
  cudaEventRecord(p->ring[tok->slot].start, (cudaStream_t)h->stream);
  pthread_mutex_unlock(&p->lock);
  deliver(p, done, n);
  return 1;
}

void opsi_profile_end(ops_handle h, const opsi_profile_token *tok, const ops_profile_record *rec) {
  struct opsi_profiler *p = h->profiler;
  if (!p->cuda) {
    pending e;
    e.rec = *rec;
    snprintf(e.problem, sizeof e.problem, "%s", rec->problem ? rec->problem : "");
    e.rec.time_us = opsi_host_us() - tok->host_start;
    finish_rates(&e.rec);
    deliver(p, &e, 1);
    return;
  }
  pthread_mutex_lock(&p->lock);
  pending *e = &p->ring[tok->slot];
  cudaEventRecord(e->stop, (cudaStream_t)h->stream);
  e->rec = *rec;
  snprintf(e->problem, sizeof e->problem, "%s", rec->problem ? rec->problem : "");
  e->ready = 1;
  pthread_mutex_unlock(&p->lock);
}

static void flush(struct opsi_profiler *p) {
  static _Thread_local pending done[RING];
  pthread_mutex_lock(&p->lock);
  const int n = p->cuda ? collect(p, done, 1) : 0;
  pthread_mutex_unlock(&p->lock);
  deliver(p, done, n);
}

void opsi_profiler_stop(ops_handle h) {
  struct opsi_profiler *p = h->profiler;
  if (p == NULL) return;
  flush(p);
  h->profiler = NULL;
  if (p->cuda) {
    for (int i = 0; i < RING; ++i) {
      cudaEventDestroy(p->ring[i].start);
      cudaEventDestroy(p->ring[i].stop);
    }
  }
  if (p->file != NULL) fclose(p->file);
  pthread_mutex_destroy(&p->lock);
  free(p);
}

static ops_status start(ops_handle h, ops_profile_fn fn, void *user, FILE *file) {
  struct opsi_profiler *p = (struct opsi_profiler *)calloc(1, sizeof *p);
  if (p == NULL) {
    return opsi_fail(OPS_ERR_OUT_OF_MEMORY, "ops_handle_set_profiler: calloc(%zu) failed", sizeof *p);
  }
  p->fn = fn;
  p->user = user;
  p->file = file;
  p->cuda = h->device.type == OPS_DEVICE_CUDA && !h->is_virtual;
  pthread_mutex_init(&p->lock, NULL);
  for (int i = 0; p->cuda && i < RING; ++i) {
    if (cudaEventCreate(&p->ring[i].start) != cudaSuccess || cudaEventCreate(&p->ring[i].stop) != cudaSuccess) {
      const cudaError_t err = cudaGetLastError();
      for (int j = 0; j <= i; ++j) {
        cudaEventDestroy(p->ring[j].start);
        cudaEventDestroy(p->ring[j].stop);
      }
      free(p);
      return opsi_fail(OPS_ERR_CUDA, "ops_handle_set_profiler: cudaEventCreate failed: %s", cudaGetErrorString(err));
    }
  }
  h->profiler = p;
  return OPS_OK;
}

ops_status ops_handle_set_profiler(ops_handle handle, ops_profile_fn fn, void *user) {
  opsi_clear_error();
  if (handle == NULL) {
    return opsi_fail(OPS_ERR_NULL_POINTER, "ops_handle_set_profiler: handle is NULL");
  }
  opsi_profiler_stop(handle);
  return fn == NULL ? OPS_OK : start(handle, fn, user, NULL);
}

ops_status ops_handle_flush_profiler(ops_handle handle) {
  opsi_clear_error();
  if (handle == NULL) {
    return opsi_fail(OPS_ERR_NULL_POINTER, "ops_handle_flush_profiler: handle is NULL");
  }
  if (handle->profiler != NULL) flush(handle->profiler);
  return OPS_OK;
}

static void put_json_string(FILE *f, const char *s) {
  fputc('"', f);
  for (; s != NULL && *s; ++s) {
    if (*s == '"' || *s == '\\') fprintf(f, "\\%c", *s);
    else if ((unsigned char)*s < 0x20) fprintf(f, "\\u%04x", (unsigned char)*s);
    else fputc(*s, f);
  }
  fputc('"', f);
}

/* One JSON object per line. */
static void write_json_line(const ops_profile_record *r, void *user) {
  FILE *f = (FILE *)user;
  fprintf(f, "{\"op\":");
  put_json_string(f, r->op_name);
  fprintf(f, ",\"kernel\":");
  put_json_string(f, r->kernel_name);
  fprintf(f,
          ",\"kernel_id\":%d,\"device\":\"%s:%d\",\"grid\":[%d,%d,%d],\"block\":[%d,%d,%d],\"smem\":%d,"
          "\"time_us\":%.3f,\"bytes\":%.0f,\"flops\":%.0f,\"gbps\":%.3f,\"tflops\":%.4f,\"plan_cache_hit\":%s,"
          "\"problem\":",
          r->kernel_id, r->device.type == OPS_DEVICE_CUDA ? "cuda" : "cpu", (int)r->device.ordinal, r->grid[0],
          r->grid[1], r->grid[2], r->block[0], r->block[1], r->block[2], r->smem_bytes, r->time_us, r->bytes,
          r->flops, r->gbps, r->tflops, r->plan_cache_hit ? "true" : "false");
  put_json_string(f, r->problem);
  fprintf(f, ",\"choice\":\"%s\",\"cluster\":%d", ops_choice_name((ops_choice)r->choice), (int)r->cluster_blocks);
  if (r->launch_plan != NULL) {
    fprintf(f, ",\"plan\":");
    put_json_string(f, r->launch_plan);
  }
  fprintf(f, "}\n");
  fflush(f);
}

ops_status opsi_profiler_start_file(ops_handle h, const char *path) {
  FILE *f = fopen(path, "a");
  if (f == NULL) {
    return opsi_fail(OPS_ERR_INVALID_ARGUMENT, "ops_handle_create: OPSLIB_PROFILE: cannot open '%s' for appending",
                     path);
  }
  const ops_status st = start(h, write_json_line, f, f);
  if (st != OPS_OK) fclose(f);
  return st;
}
