/*
 * The handle's contents, visible to the dispatcher and the launchers (never to users).
 */
#ifndef OPSLIB_RUNTIME_HANDLE_INTERNAL_H_
#define OPSLIB_RUNTIME_HANDLE_INTERNAL_H_

#include <stdint.h>

#include "opslib/handle.h"
#include "runtime/plan_cache.h"
#include "runtime/tuner.h"

#define OPSI_OP_SLOTS 32 /* op ids 1..31 */

struct opsi_profiler;

struct ops_handle_s {
  ops_device device;
  ops_device_info info; /* read once at creation */
  void *stream;         /* cudaStream_t; NULL = legacy default stream */
  int32_t math_mode;    /* ops_math_mode */
  int32_t deterministic;
  int32_t is_virtual;   /* described device: explain and queries only */
  int32_t pinned[OPSI_OP_SLOTS]; /* kernel id pinned per op id; 0: none */
  struct opsi_profiler *profiler; /* NULL: off */
  int32_t autotune;              /* ops_autotune_mode */
  opsi_tuner tuner;              /* measured choices, and the tune cache file */
  opsi_plan_cache cache;
};

/* Allocates a handle for a present device and reads its properties (runtime/handle.c). */
ops_status opsi_handle_new(ops_device device, ops_handle *out);

/* Allocates a handle for a described device (runtime/handle.c). */
ops_status opsi_handle_new_virtual(const ops_device_info *target, ops_handle *out);

#endif /* OPSLIB_RUNTIME_HANDLE_INTERNAL_H_ */
