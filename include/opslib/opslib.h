/*
 * opslib.h: the whole public API. Include this one header.
 *
 *   version.h  version macros and ops_version()
 *   status.h   status codes, ops_status_string(), ops_last_error()
 *   tensor.h   dtypes, devices, the tensor descriptor
 *   handle.h   handle, stream, math mode, determinism, device properties
 *   ops.h      the operator catalog
 *   explain.h  why a kernel is chosen: verdicts per candidate, as text or JSON
 *   fusion.h   declarative fusion of short op chains into plans
 * opslib/dlpack.h (not included here: it needs <dlpack/dlpack.h>) converts DLTensors.
 */
#ifndef OPSLIB_OPSLIB_H_
#define OPSLIB_OPSLIB_H_

#include "opslib/version.h"
#include "opslib/status.h"
#include "opslib/tensor.h"
#include "opslib/handle.h"
#include "opslib/ops.h"
#include "opslib/explain.h"
#include "opslib/fusion.h"

#endif /* OPSLIB_OPSLIB_H_ */
