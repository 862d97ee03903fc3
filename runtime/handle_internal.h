/*
 * The handle's contents, visible to the dispatcher and the launchers (never to users).
 */
#ifndef OPSLIB_RUNTIME_HANDLE_INTERNAL_H_
#define OPSLIB_RUNTIME_HANDLE_INTERNAL_H_

#include <stdint.h>

#include "opslib/handle.h"

struct ops_handle_s {
  ops_device device;
  ops_device_info info; /* read once at creation */
  void *stream;         /* cudaStream_t; NULL = legacy default stream */
  int32_t math_mode;    /* ops_math_mode */
  int32_t deterministic;
};

#endif /* OPSLIB_RUNTIME_HANDLE_INTERNAL_H_ */
