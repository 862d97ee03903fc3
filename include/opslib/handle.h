/*
 * opslib/handle.h: the handle, one per device, carrying a stream and call defaults.
 *
 * A handle is created for the CPU or for one CUDA device; creation reads the device's
 * properties once (SM version and count, shared-memory limits) so that no op queries
 * them again. Every op takes a handle and runs on its stream: asynchronously, with no
 * host synchronization and no allocation, so ops can be captured into a CUDA graph.
 * On the CPU, ops run synchronously on the calling thread.
 *
 * Thread-safety: ops, their workspace queries and explain, ops_fuse and ops_plan_execute
 * may be called with one handle from several threads at once (its plan cache and profiler
 * are shared safely); separate handles share nothing. Everything that changes a handle must
 * not race with ops on it: the setters (stream, math mode, determinism, autotune, tune
 * cache, profiler), ops_handle_pin_kernel and ops_handle_destroy. A profiler callback runs
 * on the thread of the op that recorded it (or of ops_handle_flush_profiler), possibly on
 * several threads at once. A plan may be executed from several threads at once only when
 * their calls write different memory, as for any op. ops_last_error() is per thread.
 * (tests/soak/thread_soak_test holds the library to this under ThreadSanitizer.)
 */
#ifndef OPSLIB_HANDLE_H_
#define OPSLIB_HANDLE_H_

#include <stddef.h>
#include <stdint.h>

#include "opslib/status.h"
#include "opslib/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ops_handle_s *ops_handle;

/* How f32 matrix products may be computed. Half-precision inputs always accumulate in f32. */
typedef enum ops_math_mode {
  OPS_MATH_STRICT = 0,    /* f32 products in f32 arithmetic (the default) */
  OPS_MATH_ALLOW_TF32 = 1 /* f32 products may round their inputs to tf32 (10-bit mantissa) */
} ops_math_mode;

/* What the handle knows of its device, read once at creation. */
typedef struct ops_device_info {
  uint32_t struct_size; /* set by the caller to sizeof(ops_device_info) */
  ops_device device;
  char name[96];                /* "NVIDIA H100 80GB HBM3", or "cpu" */
  int32_t sm_version;           /* 10 * major + minor, e.g. 90; 0 for the CPU */
  int32_t code_sm;              /* SM of the machine code this build runs there: 90 when its
                                   sm_90a code is present on an sm_90 device, 80 when sm_80
                                   code runs by compatibility; 0 for the CPU */
  int32_t sm_count;             /* multiprocessors; 0 for the CPU */
  int64_t smem_per_block_optin; /* bytes a block may use after opting in */
  int64_t smem_per_sm;          /* bytes */
  int64_t l2_bytes;
  int64_t global_mem_bytes;
} ops_device_info;

/* Creates a handle for `device` into *out. For CUDA, the device must exist and be usable
 * (the CUDA driver is loaded); the handle's stream starts as the legacy default stream (NULL).
 * Errors: OPS_ERR_NULL_POINTER (out), OPS_ERR_UNSUPPORTED_DEVICE (unknown type, no such
 * ordinal, no CUDA driver), OPS_ERR_CUDA, OPS_ERR_OUT_OF_MEMORY. On failure *out is NULL. */
OPS_API ops_status ops_handle_create(ops_handle *out, ops_device device);

/* Destroys a handle (NULL is a no-op). The caller must have finished using it; work already
 * queued on its stream is not waited for and is unaffected. */
OPS_API ops_status ops_handle_destroy(ops_handle handle);

/* Sets the CUDA stream (a cudaStream_t, passed as void*) on which ops run. NULL means the
 * legacy default stream. opslib does not take ownership. On a CPU handle only NULL is valid.
 * Errors: OPS_ERR_NULL_POINTER (handle), OPS_ERR_INVALID_ARGUMENT. */
OPS_API ops_status ops_handle_set_stream(ops_handle handle, void *stream);
OPS_API ops_status ops_handle_get_stream(ops_handle handle, void **stream);

OPS_API ops_status ops_handle_set_math_mode(ops_handle handle, ops_math_mode mode);
OPS_API ops_status ops_handle_get_math_mode(ops_handle handle, ops_math_mode *mode);

/* deterministic != 0 restricts every op to kernels whose results are bitwise identical
 * from run to run (a fixed reduction order, no atomics). Off by default. */
OPS_API ops_status ops_handle_set_deterministic(ops_handle handle, int deterministic);
OPS_API ops_status ops_handle_get_deterministic(ops_handle handle, int *deterministic);

/* Copies the handle's device properties into *info; info->struct_size must be set.
 * Errors: OPS_ERR_NULL_POINTER, OPS_ERR_STRUCT_SIZE. */
OPS_API ops_status ops_handle_get_device_info(ops_handle handle, ops_device_info *info);

/* Number of CUDA devices the runtime sees: 0 when there is no GPU or no driver. Never fails. */
OPS_API int ops_cuda_device_count(void);

/* A handle for a described device, not a present one: explain and workspace queries work
 * as for that device (its SM, SM count, shared memory), running fails with
 * OPS_ERR_UNSUPPORTED_DEVICE. For planning ahead of time and for `opsctl` on a machine
 * without the GPU. target->struct_size must be set; target->code_sm = 0 means the device's
 * own SM (this build's code for it is assumed present). target->name picks the cost model's
 * calibration as a present device's name does (a set measured on a device of that name, e.g.
 * "NVIDIA H200", else the SM family's); it is cut to 95 characters.
 * Errors: OPS_ERR_NULL_POINTER, OPS_ERR_STRUCT_SIZE, OPS_ERR_INVALID_ARGUMENT (device
 * type, SM or SM count out of range), OPS_ERR_OUT_OF_MEMORY. */
OPS_API ops_status ops_handle_create_virtual(ops_handle *out, const ops_device_info *target);

/* The reference device of an SM family (90: H100 SXM, 80: A100, 89: L4), for
 * ops_handle_create_virtual; sm 0 describes the CPU. Errors: OPS_ERR_NULL_POINTER. */
OPS_API ops_status ops_device_info_for_sm(int sm, ops_device_info *out);

/* Pins a kernel by name (as `opsctl list` prints it) for the calls of its op on this
 * handle: the dispatcher then considers that kernel alone, and a call it cannot serve fails
 * with OPS_ERR_UNSUPPORTED and the kernel's reasons; it never runs another kernel instead.
 * A later pin for the same op replaces the earlier one; NULL or "" removes every pin. The
 * environment variable OPSLIB_FORCE_KERNEL=<name>[,<name>...] pins at handle creation.
 * Not to be called while ops run on the handle. Errors: OPS_ERR_NULL_POINTER (handle),
 * OPS_ERR_INVALID_ARGUMENT (no kernel of that name). */
OPS_API ops_status ops_handle_pin_kernel(ops_handle handle, const char *kernel_name);

/* ---- measured autotuning and the tune cache ------------------------------------------- */

/* How a handle chooses among the eligible kernels of a call. */
typedef enum ops_autotune_mode {
  OPS_AUTOTUNE_OFF = 0,    /* the cost model decides (the default) */
  OPS_AUTOTUNE_MEASURE = 1 /* the first run of a problem times the model's best candidates */
} ops_autotune_mode;

/* With OPS_AUTOTUNE_MEASURE, the first run of a problem whose shape bucket has no measured
 * choice yet (each shape extent rounded up to the next 2^k or 3 * 2^(k-1)) times the up to
 * OPS_AUTOTUNE_TOP_K eligible kernels of lowest estimate on the handle's stream (one untimed
 * run each, then the best of three timed runs; the host waits for them) and keeps the
 * fastest for the bucket; the call's outputs are then written by that kernel. Explain reports
 * the times. It does not measure, and the model decides, when fewer than two kernels are
 * eligible, when the handle's stream is capturing a CUDA graph, when an output is written in
 * place of an input (a repeated run would change it), and for candidates that need more
 * workspace than the call passes; a workspace query of a problem not yet measured returns the
 * largest need among the candidates. OPSLIB_AUTOTUNE=1 at handle creation turns it on.
 * Not to be called while ops run on the handle. Errors: OPS_ERR_NULL_POINTER (handle),
 * OPS_ERR_INVALID_ARGUMENT (mode). */
#define OPS_AUTOTUNE_TOP_K 4
OPS_API ops_status ops_handle_set_autotune(ops_handle handle, ops_autotune_mode mode);
OPS_API ops_status ops_handle_get_autotune(ops_handle handle, ops_autotune_mode *mode);

/* Attaches a tune cache file: its measured choices are read now and used by this handle
 * (whatever the autotune mode; explain says "tune_cache"), and each new measurement rewrites
 * the file, merged with the entries other processes wrote there meanwhile, through a
 * temporary file renamed over it (concurrent writers never leave a torn file). The file holds
 * the choices of one device name, SM, library version and kernel set: a file that is missing,
 * unreadable, corrupt, written for another device or by another build is ignored with one
 * line on stderr ("opslib: tune cache PATH: ...") and is replaced on the next write. NULL or
 * "" detaches the file (choices already read stay). OPSLIB_TUNE_CACHE=<path> at handle
 * creation attaches one. Not to be called while ops run on the handle.
 * Errors: OPS_ERR_NULL_POINTER (handle), OPS_ERR_INVALID_ARGUMENT (path longer than 4095). */
OPS_API ops_status ops_handle_set_tune_cache(ops_handle handle, const char *path);

/* Writes the attached tune cache now (as after a measurement). Errors: OPS_ERR_NULL_POINTER,
 * OPS_ERR_INVALID_ARGUMENT (no file attached), OPS_ERR_IO (it cannot be written). */
OPS_API ops_status ops_handle_save_tune_cache(ops_handle handle);

/* How a kernel choice was made (ops_explain.choice, ops_profile_record.choice). */
typedef enum ops_choice {
  OPS_CHOICE_MODEL = 0,      /* the cost model's lowest estimate */
  OPS_CHOICE_MEASURED = 1,   /* timed on this handle (OPS_AUTOTUNE_MEASURE) */
  OPS_CHOICE_TUNE_CACHE = 2, /* timed earlier, read from the attached tune cache */
  OPS_CHOICE_PINNED = 3      /* the kernel pinned for the op (ops_handle_pin_kernel) */
} ops_choice;

/* "model", "measured", "tune_cache", "pinned"; "unknown" otherwise. */
OPS_API const char *ops_choice_name(ops_choice choice);

/* ---- profiling ------------------------------------------------------------------------ */

/* One record per op call that ran a kernel (see ops_handle_set_profiler). */
typedef struct ops_profile_record {
  uint32_t struct_size;
  int32_t op;              /* ops_op */
  const char *op_name;
  int32_t kernel_id;
  const char *kernel_name;
  ops_device device;
  int32_t grid[3];         /* 0 on the CPU */
  int32_t block[3];
  int32_t smem_bytes;
  int32_t plan_cache_hit;  /* 1: the kernel choice came from the plan cache */
  double time_us;          /* device time between CUDA events around the launch; host time on the CPU */
  double bytes;            /* the op's minimal bytes, as the op counts them */
  double flops;
  double gbps;             /* bytes / time */
  double tflops;           /* flops / time */
  const char *problem;     /* the call as the dispatcher sees it (valid during the callback) */
  /* appended after 0.1.0's first layout: */
  int32_t choice;          /* ops_choice of kernel_id */
  const char *launch_plan; /* the launch variant the kernel took (static); NULL: it has one */
  int32_t cluster_blocks;  /* blocks a cluster of the launch (1: none; 0 on the CPU) */
} ops_profile_record;

typedef void (*ops_profile_fn)(const ops_profile_record *record, void *user);

/* Calls fn once per op call that runs a kernel, with its device time. On CUDA the time
 * comes from events recorded around the launch; records are delivered when the events
 * have completed (checked, without waiting, at later op calls on the handle, and waited
 * for by ops_handle_flush_profiler and ops_handle_destroy), so profiling never makes an op
 * synchronize the host. A call issued while the handle's stream captures a CUDA graph is not
 * recorded (it runs when the graph is launched). fn == NULL turns profiling off. OPSLIB_PROFILE=<file> at handle
 * creation installs a profiler that appends one JSON object per line to <file>.
 * Each launch is also named by an NVTX range (the kernel's name) for Nsight.
 * Errors: OPS_ERR_NULL_POINTER (handle), OPS_ERR_CUDA. */
OPS_API ops_status ops_handle_set_profiler(ops_handle handle, ops_profile_fn fn, void *user);

/* Delivers every pending profile record, waiting for their events. */
OPS_API ops_status ops_handle_flush_profiler(ops_handle handle);

#ifdef __cplusplus
}
#endif

#endif /* OPSLIB_HANDLE_H_ */
