/* opslib._ext: the binding's per-call path in C, for the calls a model makes in a loop.
 *
 * opslib's Python functions (_ops.py) build each call with ctypes: a params struct, a
 * ctypes ops_tensor per operand, a handle lookup, three foreign calls. This module does the
 * same work in C for CUDA torch tensors: it reads each tensor through DLPack (torch's C
 * exchange table where torch has one), reuses the thread's default handle and the params'
 * defaults, asks torch for its current stream, and
 * allocates outputs and workspaces with torch.empty. A call it does not take (another
 * framework, CPU arrays, explain, stream=, an argument it does not know, a value it cannot
 * convert) goes to the Python function unchanged, so the two paths cannot disagree on what
 * a call means; they differ only in what they take fast.
 *
 * It does not link libopslib: opslib/_native.py passes the addresses of the functions that
 * ctypes loaded, so both paths share one library, its handles and its last error. It needs
 * Python's headers and opslib's, nothing else (no torch at build time). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "opslib/opslib.h"

/* ---- the library, as ctypes loaded it ---------------------------------------------- */

#define OPSX_FUNCTIONS(X)                                                                          \
  X(ops_version)                                                                                   \
  X(ops_status_name)                                                                               \
  X(ops_last_error)                                                                                \
  X(ops_handle_set_stream)                                                                         \
  X(ops_sdpa) X(ops_sdpa_workspace_size) X(ops_sdpa_params_init)                                   \
  X(ops_gemm) X(ops_gemm_workspace_size) X(ops_gemm_params_init)                                   \
  X(ops_layernorm) X(ops_layernorm_workspace_size)                                                 \
  X(ops_rmsnorm) X(ops_rmsnorm_workspace_size) X(ops_norm_params_init)                             \
  X(ops_softmax) X(ops_softmax_workspace_size) X(ops_softmax_params_init)                          \
  X(ops_unary) X(ops_unary_workspace_size) X(ops_unary_params_init)                                \
  X(ops_binary) X(ops_binary_workspace_size) X(ops_binary_params_init)

#define OPSX_DECLARE(f) static __typeof__(&f) p_##f;
OPSX_FUNCTIONS(OPSX_DECLARE)
#undef OPSX_DECLARE
/* ops_tensor_from_dlpack, declared here without <dlpack/dlpack.h>: a DLManagedTensor starts
 * with its DLTensor, so a capsule's pointer is the DLTensor's */
static ops_status (*p_ops_tensor_from_dlpack)(const void *dl, ops_tensor *out);

/* DLPack's C exchange API (DLPack 1.2), which torch (2.10 on) puts on torch.Tensor as the
 * capsule __dlpack_c_exchange_api__: a function table whose dltensor_from_py_object_no_sync
 * fills a caller's DLTensor with pointers into the tensor's own sizes and strides (no capsule,
 * no allocation, no Python call), and whose current_work_stream is torch's current stream.
 * Declared here with DLPack's layouts (a DLTensor; a header of a version and the previous
 * table; five function pointers), as the header's ABI promises them for major version 1. */
typedef struct {
  void *data;
  struct { int32_t type, id; } device;
  int32_t ndim;
  struct { uint8_t code, bits; uint16_t lanes; } dtype;
  int64_t *shape, *strides;
  uint64_t byte_offset;
} opsx_dltensor;
typedef struct opsx_exchange_header {
  struct { uint32_t major, minor; } version;
  struct opsx_exchange_header *prev_api;
} opsx_exchange_header;
typedef struct {
  opsx_exchange_header header;
  void *managed_tensor_allocator, *managed_tensor_from_py_object_no_sync, *managed_tensor_to_py_object_no_sync;
  int (*dltensor_from_py_object_no_sync)(void *py_object, opsx_dltensor *out);
  int (*current_work_stream)(int32_t device_type, int32_t device_id, void **out_stream);
} opsx_exchange_api;
enum { OPSX_DL_CUDA = 2 };

/* Each params struct's defaults, filled once by the library's _init. */
static ops_sdpa_params d_sdpa;
static ops_gemm_params d_gemm;
static ops_norm_params d_norm;
static ops_softmax_params d_softmax;
static ops_unary_params d_unary;
static ops_binary_params d_binary;

/* From the Python side (bind): OpsError, the name -> code tables, opslib.handle. */
static PyObject *py_ops_error, *py_acts, *py_binary_ops, *py_handle_fn, *py_tls;
static int bound;

/* Calls taken here and calls passed to Python, for tests and for opslib.extension(). */
static unsigned long long n_fast, n_python;

#define OPSX_MAX_DEVICES 64

/* ---- torch, looked up once it is imported ------------------------------------------- */

static struct {
  PyTypeObject *tensor_type;
  PyObject *dtype[OPS_DTYPE_U8 + 1]; /* torch dtype of an opslib dtype code */
  PyObject *empty;      /* torch.empty */
  PyObject *device_fn;  /* torch.device */
  PyObject *raw_stream; /* torch._C._cuda_getCurrentRawStream, where torch has it */
  PyObject *current_stream;
  PyObject *to_dlpack;  /* torch.utils.dlpack.to_dlpack (torch._C._to_dlpack) */
  PyObject *capturing;  /* torch.cuda.is_current_stream_capturing */
  PyObject *empty_like; /* torch.empty_like */
  PyObject *is_neg;     /* torch.Tensor.is_neg, the method descriptor (no bound method a call) */
  PyObject *expand;     /* the method's name */
  const opsx_exchange_api *exchange; /* torch.Tensor.__dlpack_c_exchange_api__, or NULL */
  PyObject *device[OPSX_MAX_DEVICES];
} T;

/* Interned strings: attribute names, keyword names. */
static PyObject *s_is_neg, *s_data_ptr, *s_virtual, *s_h, *s_value, *s_cuda_stream, *s_workspaces, *kw_alloc;

/* The exchange table torch.Tensor carries, where it is one this module reads (major version
 * 1, the two functions it calls present) and OPSLIB_NO_EXCHANGE_API is not set; else NULL
 * (tensors are then read through DLPack capsules). The table lives as long as the process. */
static const opsx_exchange_api *exchange_api(PyObject *tensor_type) {
  const char *off = getenv("OPSLIB_NO_EXCHANGE_API");
  if (off && *off && strcmp(off, "0") != 0) return NULL;
  PyObject *cap = PyObject_GetAttrString(tensor_type, "__dlpack_c_exchange_api__");
  if (!cap) return PyErr_Clear(), NULL;
  const opsx_exchange_api *api = PyCapsule_IsValid(cap, "dlpack_exchange_api")
                                     ? PyCapsule_GetPointer(cap, "dlpack_exchange_api")
                                     : NULL;
  Py_DECREF(cap);
  PyErr_Clear();
  if (!api || api->header.version.major != 1 || !api->dltensor_from_py_object_no_sync ||
      !api->current_work_stream)
    return NULL;
  return api;
}

/* 1 once torch's objects are known; 0 while torch is not imported (no argument can then be a
 * torch tensor); -1 when torch lacks one of them. */
static int torch_lookup(void) {
  if (T.tensor_type) return 1;
  PyObject *torch = PyDict_GetItemString(PyImport_GetModuleDict(), "torch"); /* borrowed */
  if (!torch) return 0;
  static const struct { int code; const char *name; } dt[] = {
      {OPS_DTYPE_F32, "float32"}, {OPS_DTYPE_F16, "float16"}, {OPS_DTYPE_BF16, "bfloat16"},
      {OPS_DTYPE_I32, "int32"},   {OPS_DTYPE_I64, "int64"},   {OPS_DTYPE_U8, "uint8"}};
  for (size_t i = 0; i < sizeof dt / sizeof dt[0]; i++)
    if (!(T.dtype[dt[i].code] = PyObject_GetAttrString(torch, dt[i].name))) return -1;
  if (!(T.empty = PyObject_GetAttrString(torch, "empty"))) return -1;
  if (!(T.empty_like = PyObject_GetAttrString(torch, "empty_like"))) return -1;
  if (!(T.expand = PyUnicode_InternFromString("expand"))) return -1;
  if (!(T.device_fn = PyObject_GetAttrString(torch, "device"))) return -1;
  /* torch._C's getters where torch has them (no Python frame), else the public functions */
  PyObject *c = PyObject_GetAttrString(torch, "_C");
  T.raw_stream = c ? PyObject_GetAttrString(c, "_cuda_getCurrentRawStream") : NULL;
  PyErr_Clear();
  T.to_dlpack = c ? PyObject_GetAttrString(c, "_to_dlpack") : NULL;
  PyErr_Clear();
  T.capturing = c ? PyObject_GetAttrString(c, "_cuda_isCurrentStreamCapturing") : NULL;
  PyErr_Clear();
  Py_XDECREF(c);
  if (!T.to_dlpack) {
    PyObject *m = PyImport_ImportModule("torch.utils.dlpack");
    T.to_dlpack = m ? PyObject_GetAttrString(m, "to_dlpack") : NULL;
    Py_XDECREF(m);
    if (!T.to_dlpack) return -1;
  }
  if (!T.capturing) {
    PyObject *cuda_mod = PyImport_ImportModule("torch.cuda");
    T.capturing = cuda_mod ? PyObject_GetAttrString(cuda_mod, "is_current_stream_capturing") : NULL;
    Py_XDECREF(cuda_mod);
    if (!T.capturing) return -1;
  }
  PyObject *cuda = PyObject_GetAttrString(torch, "cuda");
  if (!cuda) return -1;
  T.current_stream = PyObject_GetAttrString(cuda, "current_stream");
  Py_DECREF(cuda);
  if (!T.current_stream) return -1;
  PyObject *tensor = PyObject_GetAttrString(torch, "Tensor");
  if (!tensor) return -1;
  if (!(T.is_neg = PyObject_GetAttr(tensor, s_is_neg))) {
    Py_DECREF(tensor);
    return -1;
  }
  T.exchange = exchange_api(tensor);
  T.tensor_type = (PyTypeObject *)tensor; /* kept */
  return 1;
}

/* 1 when torch's objects are known; else 0 and the call goes to Python (torch not imported,
 * or imported only in part: looked up again on the next call). */
static int torch_ready(void) {
  if (T.tensor_type) return 1;
  if (torch_lookup() == 1) return 1;
  PyErr_Clear();
  return 0;
}

/* ---- operands ------------------------------------------------------------------------ */

static int dtype_code(PyObject *torch_dtype) {
  for (int c = 1; c <= OPS_DTYPE_U8; c++)
    if (T.dtype[c] == torch_dtype) return c;
  return 0;
}

/* o's view through torch's exchange table, its strides as torch's DLPack export writes them
 * (1 on the axes of one element), so that both readers give the library the same ops_tensor. */
static ops_status read_exchange(PyObject *o, ops_tensor *t) {
  opsx_dltensor dl;
  if (T.exchange->dltensor_from_py_object_no_sync(o, &dl) != 0 || dl.ndim < 0 || dl.ndim > OPS_MAX_DIMS)
    return OPS_ERR_NULL_POINTER;
  int64_t strides[OPS_MAX_DIMS];
  for (int i = 0; i < dl.ndim; i++) strides[i] = dl.shape[i] < 2 ? 1 : dl.strides[i];
  dl.strides = strides;
  return p_ops_tensor_from_dlpack(&dl, t);
}

/* o's view through torch's DLPack export (a capsule, released here). */
static ops_status read_capsule(PyObject *o, ops_tensor *t) {
  PyObject *cap = PyObject_CallOneArg(T.to_dlpack, o);
  if (!cap) return OPS_ERR_NULL_POINTER;
  /* DLPack >= 1.0 (dltensor_versioned): version, manager_ctx, deleter, flags, then the DLTensor */
  const char *name = PyCapsule_GetName(cap);
  unsigned char *dl = name ? PyCapsule_GetPointer(cap, name) : NULL;
  if (dl && strcmp(name, "dltensor_versioned") == 0) dl += 32;
  else if (dl && strcmp(name, "dltensor") != 0) dl = NULL;
  const ops_status st = dl ? p_ops_tensor_from_dlpack(dl, t) : OPS_ERR_NULL_POINTER;
  Py_DECREF(cap); /* its destructor releases torch's export */
  return st;
}

/* Reads a CUDA torch tensor's view into *t through torch's exchange table where it has one,
 * else its DLPack export (one call for data, shape, strides, dtype and device; the library's
 * own converter reads either). A negative view (torch's neg bit: its values are the negated
 * memory) goes to Python, which refuses it. 1: read; 0: not a tensor this path takes (the
 * call goes to Python); -1: an error is set. */
static int read_tensor(PyObject *o, ops_tensor *t) {
  if (!T.tensor_type || !PyObject_TypeCheck(o, T.tensor_type)) return 0;
  PyObject *v = PyObject_CallOneArg(T.is_neg, o);
  if (!v) return -1;
  int ok = v == Py_False;
  Py_DECREF(v);
  if (!ok) return 0;
  const ops_status st = T.exchange ? read_exchange(o, t) : read_capsule(o, t);
  PyErr_Clear();
  return st == OPS_OK && t->device.type == OPS_DEVICE_CUDA && t->device.ordinal < OPSX_MAX_DEVICES;
}

/* An optional operand: NULL / None gives NULL in *ref; else as read_tensor. */
static int read_optional(PyObject *o, ops_tensor *t, const ops_tensor **ref) {
  *ref = NULL;
  if (!o || o == Py_None) return 1;
  const int r = read_tensor(o, t);
  if (r == 1) *ref = t;
  return r;
}

/* ---- scalars: Python's own float(), int(), bool(); 0 when the value does not convert (the
 * call goes to Python, which raises its own error) ------------------------------------- */

static int to_float(PyObject *o, float *out) {
  if (!o) return 1;
  PyObject *f = PyNumber_Float(o);
  if (!f) return PyErr_Clear(), 0;
  *out = (float)PyFloat_AS_DOUBLE(f);
  Py_DECREF(f);
  return 1;
}

static int to_int32(PyObject *o, int32_t *out) {
  if (!o) return 1;
  PyObject *l = PyNumber_Long(o);
  if (!l) return PyErr_Clear(), 0;
  const long long v = PyLong_AsLongLong(l);
  Py_DECREF(l);
  if (v == -1 && PyErr_Occurred()) return PyErr_Clear(), 0;
  *out = (int32_t)v; /* as ctypes stores an int into a c_int32 field */
  return 1;
}

static int to_bool(PyObject *o, int32_t *out) {
  if (!o) return 1;
  const int b = PyObject_IsTrue(o);
  if (b < 0) return PyErr_Clear(), 0;
  *out = b;
  return 1;
}

/* A name looked up in one of _capi's tables (ACTS, BINARY_OPS). */
static int to_code(PyObject *table, PyObject *o, int32_t *out) {
  if (!o) return 1;
  PyObject *v = PyDict_GetItemWithError(table, o);
  if (!v) return PyErr_Clear(), 0;
  return to_int32(v, out);
}

/* ---- arguments ---------------------------------------------------------------------- */

/* An op's parameter names, in its Python signature's order: the first npos may be passed by
 * position. Interned at module init, so a call's keywords compare by pointer. */
typedef struct {
  const char *const *names;
  int npos, n;
  PyObject *keys[24];
} signature;

/* The call's arguments by parameter index (NULL where not given). 1: parsed; 0: an
 * argument this path does not take (more positionals, an unknown or repeated keyword). */
static int parse(const signature *s, PyObject *const *args, size_t nargsf, PyObject *kwnames,
                 PyObject **out) {
  const Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
  if (nargs > s->npos) return 0;
  for (int i = 0; i < s->n; i++) out[i] = i < nargs ? args[i] : NULL;
  const Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
  for (Py_ssize_t j = 0; j < nkw; j++) {
    PyObject *key = PyTuple_GET_ITEM(kwnames, j);
    int found = -1;
    for (int i = 0; i < s->n && found < 0; i++)
      if (s->keys[i] == key) found = i;
    for (int i = 0; i < s->n && found < 0; i++)
      if (PyUnicode_Compare(s->keys[i], key) == 0) found = i;
    if (found < 0 || out[found]) return 0;
    out[found] = args[nargs + j];
  }
  return 1;
}

/* ---- one call ----------------------------------------------------------------------- */

static PyObject *raise_status(ops_status s, const char *what) {
  const char *msg = p_ops_last_error();
  PyObject *m = PyUnicode_DecodeUTF8(msg && *msg ? msg : what, (Py_ssize_t)strlen(msg && *msg ? msg : what),
                                     "replace");
  if (!m) return NULL;
  PyObject *e = PyObject_CallFunction(py_ops_error, "isN", (int)s, p_ops_status_name(s), m);
  if (e) {
    PyErr_SetObject((PyObject *)Py_TYPE(e), e);
    Py_DECREF(e);
  }
  return NULL;
}

/* The thread's default handle per device: opslib.handle("cuda:N"), whose Handle object
 * lives in the Python side's thread-local dict as long as the thread does. */
static _Thread_local ops_handle tls_handle[OPSX_MAX_DEVICES];

typedef struct {
  ops_handle h;
  int ordinal;
  void *stream; /* torch's current stream on the device */
} call_ctx;

static int handle_pointer(PyObject *handle, ops_handle *h) {
  PyObject *raw = PyObject_GetAttr(handle, s_h); /* a ctypes c_void_p */
  if (!raw) return -1;
  PyObject *v = PyObject_GetAttr(raw, s_value);
  Py_DECREF(raw);
  if (!v) return -1;
  *h = v == Py_None ? NULL : (ops_handle)PyLong_AsVoidPtr(v);
  Py_DECREF(v);
  return PyErr_Occurred() ? -1 : 1;
}

/* torch's current stream on the device through torch's Python-level getter. */
static int stream_by_call(call_ctx *c, int ordinal) {
  PyObject *dev = PyLong_FromLong(ordinal);
  if (!dev) return -1;
  PyObject *s = NULL;
  if (T.raw_stream) {
    s = PyObject_CallOneArg(T.raw_stream, dev);
  } else {
    PyObject *st = PyObject_CallOneArg(T.current_stream, dev);
    if (st) s = PyObject_GetAttr(st, s_cuda_stream);
    Py_XDECREF(st);
  }
  Py_DECREF(dev);
  if (!s) return -1;
  c->stream = PyLong_AsVoidPtr(s);
  Py_DECREF(s);
  return PyErr_Occurred() ? -1 : 1;
}

/* The handle (handle= or the thread's default for the device) and torch's current stream
 * on it. 1: ready; 0: the call goes to Python (a virtual handle); -1: an error is set. */
static int begin(call_ctx *c, PyObject *handle, int ordinal) {
  c->ordinal = ordinal;
  if (handle && handle != Py_None) {
    PyObject *v = PyObject_GetAttr(handle, s_virtual);
    if (!v) return -1;
    const int virt = PyObject_IsTrue(v);
    Py_DECREF(v);
    if (virt) return virt < 0 ? -1 : 0;
    if (handle_pointer(handle, &c->h) < 0) return -1;
  } else if (!(c->h = tls_handle[ordinal])) {
    char key[32];
    snprintf(key, sizeof key, "cuda:%d", ordinal);
    PyObject *h = PyObject_CallFunction(py_handle_fn, "s", key);
    if (!h) return -1;
    const int r = handle_pointer(h, &c->h);
    Py_DECREF(h);
    if (r < 0) return -1;
    tls_handle[ordinal] = c->h;
  }
  if (T.exchange) {
    if (T.exchange->current_work_stream(OPSX_DL_CUDA, ordinal, &c->stream) != 0) return -1;
  } else if (stream_by_call(c, ordinal) < 0) {
    return -1;
  }
  const ops_status st = p_ops_handle_set_stream(c->h, c->stream);
  if (st != OPS_OK) return raise_status(st, "ops_handle_set_stream"), -1;
  return 1;
}

static PyObject *device_object(int ordinal) {
  if (!T.device[ordinal] && !(T.device[ordinal] = PyObject_CallFunction(T.device_fn, "si", "cuda", ordinal)))
    return NULL;
  return T.device[ordinal];
}

/* Shape templates for allocation: torch.empty_like costs a fraction of torch.empty or
 * new_empty (whose size argument torch parses slowly), and an input rarely has the output's
 * shape. So each (device, dtype, shape) gets a template, one element expanded to the shape
 * (stride 0): empty_like of it is a new contiguous tensor of that shape, since empty_like
 * keeps only a dense input's strides. Shared by all threads (under the GIL); cleared when it
 * reaches OPSX_TEMPLATES entries. */
#define OPSX_TEMPLATES 256
static PyObject *templates; /* (ordinal, dtype, shape) -> template */

static PyObject *shape_template(int ordinal, int code, PyObject *dims) {
  if (!templates && !(templates = PyDict_New())) return NULL;
  PyObject *key = Py_BuildValue("(iiO)", ordinal, code, dims);
  if (!key) return NULL;
  PyObject *t = PyDict_GetItemWithError(templates, key);
  if (t) {
    Py_DECREF(key);
    Py_INCREF(t);
    return t;
  }
  if (PyErr_Occurred()) return Py_DECREF(key), NULL;
  PyObject *scalar_shape = PyTuple_New(0), *one = NULL;
  if (scalar_shape) {
    PyObject *argv[] = {scalar_shape, T.dtype[code], T.device[ordinal]};
    one = PyObject_Vectorcall(T.empty, argv, 1, kw_alloc);
    Py_DECREF(scalar_shape);
  }
  if (one) {
    PyObject *argv[] = {one, dims};
    t = PyObject_VectorcallMethod(T.expand, argv, 2, NULL);
    Py_DECREF(one);
  }
  if (t) {
    if (PyDict_GET_SIZE(templates) >= OPSX_TEMPLATES) PyDict_Clear(templates);
    if (PyDict_SetItem(templates, key, t) < 0) Py_CLEAR(t);
  }
  Py_DECREF(key);
  return t;
}

/* A tensor's data pointer: from the exchange table, else its data_ptr(). 1, or -1 with an
 * error set. */
static int data_pointer(PyObject *x, void **data) {
  if (T.exchange) {
    opsx_dltensor dl;
    if (T.exchange->dltensor_from_py_object_no_sync(x, &dl) != 0) return -1;
    *data = dl.data;
    return 1;
  }
  PyObject *p = PyObject_CallMethodNoArgs(x, s_data_ptr);
  if (!p) return -1;
  *data = PyLong_AsVoidPtr(p);
  Py_DECREF(p);
  return PyErr_Occurred() ? -1 : 1;
}

/* A new contiguous tensor of shape and dtype on the call's device, its view in *t. */
static PyObject *new_output(const call_ctx *c, const int64_t *shape, int n, int code, ops_tensor *t) {
  PyObject *dev = device_object(c->ordinal);
  if (!dev || !T.dtype[code]) {
    if (dev) PyErr_Format(PyExc_TypeError, "opslib: no torch dtype for opslib dtype %d", code);
    return NULL;
  }
  PyObject *dims = PyTuple_New(n);
  if (!dims) return NULL;
  for (int i = 0; i < n; i++) {
    PyObject *d = PyLong_FromLongLong(shape[i]);
    if (!d) return Py_DECREF(dims), NULL;
    PyTuple_SET_ITEM(dims, i, d);
  }
  PyObject *tmpl = shape_template(c->ordinal, code, dims);
  Py_DECREF(dims);
  if (!tmpl) return NULL;
  PyObject *out = PyObject_CallOneArg(T.empty_like, tmpl);
  Py_DECREF(tmpl);
  if (!out) return NULL;
  void *data;
  if (data_pointer(out, &data) < 0) return Py_DECREF(out), NULL;
  memset(t, 0, sizeof *t);
  t->struct_size = sizeof *t;
  t->dtype = code;
  t->device.type = OPS_DEVICE_CUDA;
  t->device.ordinal = c->ordinal;
  t->ndim = n;
  t->data = data;
  int64_t stride = 1;
  for (int i = n - 1; i >= 0; i--) {
    t->shape[i] = shape[i];
    t->strides[i] = stride;
    stride *= shape[i] > 1 ? shape[i] : 1;
  }
  return out;
}

static int contiguous(const ops_tensor *t) {
  int64_t stride = 1;
  for (int i = t->ndim - 1; i >= 0; i--) {
    if (t->shape[i] != 1 && t->strides[i] != stride) return 0;
    stride *= t->shape[i];
  }
  return 1;
}

/* torch.empty_like(x) for a contiguous x of the output's shape and dtype (torch's cheaper
 * allocation call); else as new_output. */
static PyObject *new_output_like(const call_ctx *c, PyObject *x, const ops_tensor *tx, const int64_t *shape,
                                 int n, int code, ops_tensor *t) {
  if (!x || tx->dtype != code || tx->ndim != n || memcmp(tx->shape, shape, (size_t)n * sizeof *shape) != 0 ||
      !contiguous(tx))
    return new_output(c, shape, n, code, t);
  PyObject *out = PyObject_CallOneArg(T.empty_like, x);
  if (!out) return NULL;
  void *data;
  if (data_pointer(out, &data) < 0) return Py_DECREF(out), NULL;
  *t = *tx;
  t->data = data;
  return out;
}

/* The caller's output (read with the inputs) or a new one, like x where x allows; a new
 * reference either way. */
static PyObject *output(const call_ctx *c, PyObject *given, PyObject *x, const ops_tensor *tx,
                        const int64_t *shape, int n, int code, ops_tensor *t) {
  if (given && given != Py_None) {
    Py_INCREF(given);
    return given;
  }
  return new_output_like(c, x, tx, shape, n, code, t);
}

/* The workspaces a thread keeps: one buffer per (device, stream) in its opslib thread-local
 * state (_native's `workspaces`: key -> (tensor, aligned address, bytes)), grown as calls
 * ask. Calls on one stream run in order, so each may reuse its stream's buffer. Under CUDA
 * graph capture nothing is kept: each call gets its own, from torch's graph pool, which the
 * graph keeps. kept_cache: 1 with *cache and *key set (new references); 0 under capture;
 * -1 with an error set. */
static int kept_cache(const call_ctx *c, PyObject **cache, PyObject **key) {
  PyObject *v = PyObject_CallNoArgs(T.capturing);
  if (!v) return -1;
  const int capturing = PyObject_IsTrue(v);
  Py_DECREF(v);
  if (capturing) return capturing < 0 ? -1 : 0;
  if (!(*cache = PyObject_GetAttr(py_tls, s_workspaces))) {
    if (!PyErr_ExceptionMatches(PyExc_AttributeError)) return -1;
    PyErr_Clear();
    if (!(*cache = PyDict_New())) return -1;
    if (PyObject_SetAttr(py_tls, s_workspaces, *cache) < 0) {
      Py_CLEAR(*cache);
      return -1;
    }
  }
  if (!(*key = Py_BuildValue("(iN)", c->ordinal, PyLong_FromVoidPtr(c->stream)))) {
    Py_CLEAR(*cache);
    return -1;
  }
  return 1;
}

/* The buffer this thread keeps for the call's stream (a new reference; its aligned address
 * and size in *ptr and *bytes), or NULL: none kept, under capture, or an error (set). */
static PyObject *kept_workspace(const call_ctx *c, void **ptr, size_t *bytes) {
  PyObject *cache = NULL, *key = NULL, *buf = NULL;
  if (kept_cache(c, &cache, &key) != 1) return NULL;
  PyObject *entry = PyDict_GetItemWithError(cache, key);
  if (entry && PyTuple_Check(entry) && PyTuple_GET_SIZE(entry) == 3) {
    *ptr = PyLong_AsVoidPtr(PyTuple_GET_ITEM(entry, 1));
    *bytes = PyLong_AsSize_t(PyTuple_GET_ITEM(entry, 2));
    if (!PyErr_Occurred()) {
      buf = PyTuple_GET_ITEM(entry, 0);
      Py_INCREF(buf);
    }
  }
  Py_DECREF(key);
  Py_DECREF(cache);
  return buf;
}

/* A new workspace of at least `bytes`, 16-byte aligned in *ptr (its size in *size), kept
 * for the call's stream outside capture (replacing a smaller one, which torch's allocator
 * frees in stream order); a new reference. */
static PyObject *workspace(const call_ctx *c, size_t bytes, void **ptr, size_t *size) {
  PyObject *cache = NULL, *key = NULL;
  const int keep_it = kept_cache(c, &cache, &key);
  if (keep_it < 0) return NULL;
  /* a kept buffer grows in steps of 1 MiB: slowly growing calls reallocate rarely */
  *size = keep_it ? (bytes + ((size_t)1 << 20) - 1) & ~(((size_t)1 << 20) - 1) : bytes;
  const int64_t n = (int64_t)*size + 16;
  ops_tensor t;
  PyObject *buf = new_output(c, &n, 1, OPS_DTYPE_U8, &t);
  if (buf) {
    const uintptr_t base = (uintptr_t)t.data;
    *ptr = (void *)(base + ((16 - base % 16) % 16));
    if (keep_it) {
      PyObject *entry = Py_BuildValue("(ONn)", buf, PyLong_FromVoidPtr(*ptr), (Py_ssize_t)*size);
      if (!entry || PyDict_SetItem(cache, key, entry) < 0) Py_CLEAR(buf);
      Py_XDECREF(entry);
    }
  }
  Py_XDECREF(key);
  Py_XDECREF(cache);
  return buf;
}

/* Runs ops_<op>: (handle, params, operands..., workspace, bytes). A call runs first with
 * the workspace its stream keeps, or none while no call of this site has needed one; when
 * that is too small the library fails having written nothing (OPS_ERR_WORKSPACE_TOO_SMALL),
 * and the call runs again with a workspace of the size the library asks for. */
#define OPSX_RUN(op, c, params, ...)                                                              \
  do {                                                                                             \
    static int wanted_ws_; /* under the GIL */                                                     \
    size_t ws_bytes_ = 0, need_ = 0;                                                               \
    void *ws_ = NULL;                                                                              \
    PyObject *ws_buf_ = wanted_ws_ ? kept_workspace(c, &ws_, &ws_bytes_) : NULL;                   \
    if (!ws_buf_ && PyErr_Occurred()) goto fail;                                                   \
    ops_status st_ = p_ops_##op((c)->h, params, __VA_ARGS__, ws_buf_ ? ws_ : NULL, ws_bytes_);     \
    Py_XDECREF(ws_buf_);                                                                           \
    if (st_ == OPS_ERR_WORKSPACE_TOO_SMALL) {                                                      \
      wanted_ws_ = 1;                                                                              \
      st_ = p_ops_##op##_workspace_size((c)->h, params, __VA_ARGS__, &need_);                     \
      if (st_ == OPS_OK) {                                                                         \
        if (!(ws_buf_ = workspace(c, need_, &ws_, &ws_bytes_))) goto fail;                         \
        st_ = p_ops_##op((c)->h, params, __VA_ARGS__, ws_, ws_bytes_);                             \
        Py_DECREF(ws_buf_);                                                                        \
      }                                                                                            \
    }                                                                                              \
    if (st_ != OPS_OK) {                                                                           \
      raise_status(st_, "ops_" #op);                                                               \
      goto fail;                                                                                   \
    }                                                                                              \
  } while (0)

static PyObject *to_python(PyObject *fn, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
  if (!fn) return PyErr_Format(PyExc_RuntimeError, "opslib._ext: not bound to the library (import opslib)");
  n_python++;
  return PyObject_Vectorcall(fn, args, nargsf, kwnames);
}

/* The functions' Python twins, by op; set by bind. */
enum { F_SDPA, F_GEMM, F_LAYERNORM, F_RMSNORM, F_SOFTMAX, F_UNARY, F_BINARY, F_ADD, F_SUB, F_MUL,
       F_DIV, F_MAXIMUM, F_MINIMUM, F_COUNT };
static const char *const function_names[F_COUNT] = {"sdpa", "gemm", "layernorm", "rmsnorm", "softmax",
                                                    "unary", "binary", "add", "sub", "mul", "div",
                                                    "maximum", "minimum"};
static PyObject *python_fn[F_COUNT];

/* Begins a call: 1 ready, 0 to Python, -1 error; r is the worst of the operand reads. */
#define OPSX_TAKE(expr)                                                                            \
  do {                                                                                             \
    const int take_ = (expr);                                                                      \
    if (take_ < 0) return NULL;                                                                    \
    if (take_ == 0) return to_python(python_fn[fn_index], args, nargsf, kwnames);                  \
  } while (0)

static int worst(int a, int b) { return a < b ? a : b; }

/* ---- sdpa --------------------------------------------------------------------------- */

static const char *const sdpa_names[] = {"q", "k", "v", "causal", "scale", "window", "attn_mask",
                                         "cu_seqlens_q", "cu_seqlens_k", "max_seqlen_q", "max_seqlen_k",
                                         "kv_lens", "block_table", "out", "lse", "return_lse", "handle"};
enum { A_Q, A_K, A_V, A_CAUSAL, A_SCALE, A_WINDOW, A_MASK, A_CUQ, A_CUK, A_MAXQ, A_MAXK, A_KVLENS,
       A_BLOCKS, A_OUT, A_LSE, A_RETURN_LSE, A_HANDLE, A_SDPA_N };
static signature sig_sdpa = {sdpa_names, 3, A_SDPA_N, {0}};

static PyObject *x_sdpa(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
  (void)self;
  const int fn_index = F_SDPA;
  PyObject *a[A_SDPA_N];
  int r = bound && torch_ready() == 1 && parse(&sig_sdpa, args, nargsf, kwnames, a) && a[A_Q] && a[A_K] &&
          a[A_V];
  OPSX_TAKE(r);
  ops_tensor tq, tk, tv, to, tl, tm, tcq, tck, tkl, tbt;
  const ops_tensor *out_ref = NULL, *lse_ref = NULL;
  ops_sdpa_params p = d_sdpa;
  r = read_tensor(a[A_Q], &tq);
  if (r == 1) r = worst(read_tensor(a[A_K], &tk), read_tensor(a[A_V], &tv));
  if (r == 1) r = worst(read_optional(a[A_MASK], &tm, &p.attn_mask), read_optional(a[A_CUQ], &tcq, &p.cu_seqlens_q));
  if (r == 1) r = worst(read_optional(a[A_CUK], &tck, &p.cu_seqlens_k), read_optional(a[A_KVLENS], &tkl, &p.kv_lens));
  if (r == 1) r = worst(read_optional(a[A_BLOCKS], &tbt, &p.block_table), read_optional(a[A_OUT], &to, &out_ref));
  if (r == 1) r = read_optional(a[A_LSE], &tl, &lse_ref);
  int32_t ret_lse = 0;
  if (r == 1 && a[A_SCALE] && a[A_SCALE] != Py_None) r = to_float(a[A_SCALE], &p.scale);
  if (r == 1) r = to_bool(a[A_CAUSAL], &p.causal) && to_bool(a[A_RETURN_LSE], &ret_lse);
  if (r == 1) r = to_int32(a[A_MAXQ], &p.max_seqlen_q) && to_int32(a[A_MAXK], &p.max_seqlen_k);
  if (r == 1 && a[A_WINDOW]) {
    r = PyTuple_Check(a[A_WINDOW]) && PyTuple_GET_SIZE(a[A_WINDOW]) == 2 &&
        to_int32(PyTuple_GET_ITEM(a[A_WINDOW], 0), &p.window_left) &&
        to_int32(PyTuple_GET_ITEM(a[A_WINDOW], 1), &p.window_right);
  }
  /* o is q's shape with v's head dim; lse [H, T] (varlen) or [B, H, S] */
  if (r == 1) r = tq.ndim >= 3 && tq.ndim <= 4 && tv.ndim >= 1;
  OPSX_TAKE(r);
  call_ctx c;
  OPSX_TAKE(begin(&c, a[A_HANDLE], tq.device.ordinal));
  int64_t oshape[OPS_MAX_DIMS];
  memcpy(oshape, tq.shape, sizeof oshape);
  oshape[tq.ndim - 1] = tv.shape[tv.ndim - 1];
  PyObject *o = output(&c, a[A_OUT], a[A_Q], &tq, oshape, tq.ndim, tq.dtype, &to), *lse = NULL;
  if (!o) return NULL;
  if (ret_lse || lse_ref) {
    const int64_t *s = tq.shape;
    const int64_t lshape[3] = {tq.ndim == 3 ? s[1] : s[0], tq.ndim == 3 ? s[0] : s[2], s[1]};
    if (!(lse = output(&c, a[A_LSE], NULL, NULL, lshape, tq.ndim == 3 ? 2 : 3, OPS_DTYPE_F32, &tl))) goto fail;
  }
  OPSX_RUN(sdpa, &c, &p, &tq, &tk, &tv, &to, lse ? &tl : NULL);
  n_fast++;
  if (!ret_lse) {
    Py_XDECREF(lse);
    return o;
  }
  return Py_BuildValue("(NN)", o, lse);
fail:
  Py_XDECREF(o);
  Py_XDECREF(lse);
  return NULL;
}

/* ---- gemm --------------------------------------------------------------------------- */

static const char *const gemm_names[] = {"a",        "b",   "alpha",     "beta",   "c", "bias", "activation",
                                         "residual", "out", "out_dtype", "handle"};
enum { G_A, G_B, G_ALPHA, G_BETA, G_C, G_BIAS, G_ACT, G_RES, G_OUT, G_OUT_DTYPE, G_HANDLE, G_N };
static signature sig_gemm = {gemm_names, 2, G_N, {0}};

static PyObject *x_gemm(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
  (void)self;
  const int fn_index = F_GEMM;
  PyObject *a[G_N];
  int r = bound && torch_ready() == 1 && parse(&sig_gemm, args, nargsf, kwnames, a) && a[G_A] && a[G_B];
  OPSX_TAKE(r);
  ops_tensor ta, tb, td, tc, tbias, tres;
  const ops_tensor *out_ref;
  ops_gemm_params p = d_gemm;
  r = worst(read_tensor(a[G_A], &ta), read_tensor(a[G_B], &tb));
  if (r == 1) r = worst(read_optional(a[G_C], &tc, &p.c), read_optional(a[G_BIAS], &tbias, &p.bias));
  if (r == 1) r = worst(read_optional(a[G_RES], &tres, &p.residual), read_optional(a[G_OUT], &td, &out_ref));
  if (r == 1) r = to_float(a[G_ALPHA], &p.alpha) && to_float(a[G_BETA], &p.beta);
  if (r == 1) r = to_code(py_acts, a[G_ACT], &p.activation);
  int code = ta.dtype;
  if (r == 1 && a[G_OUT_DTYPE] && a[G_OUT_DTYPE] != Py_None) r = (code = dtype_code(a[G_OUT_DTYPE])) != 0;
  if (r == 1) r = ta.ndim >= 2 && tb.ndim >= 2;
  OPSX_TAKE(r);
  call_ctx c;
  OPSX_TAKE(begin(&c, a[G_HANDLE], ta.device.ordinal));
  /* [batch,] M, N: the batch is the larger of the operands' (1 for a 2-D one) when either is 3-D */
  int64_t shape[3];
  int n = 0;
  if (ta.ndim == 3 || tb.ndim == 3) {
    const int64_t ba = ta.ndim == 3 ? ta.shape[0] : 1, bb = tb.ndim == 3 ? tb.shape[0] : 1;
    if (ta.ndim <= 3 && tb.ndim <= 3) shape[n++] = ba > bb ? ba : bb;
  }
  shape[n++] = ta.shape[ta.ndim - 2];
  shape[n++] = tb.shape[tb.ndim - 1];
  PyObject *d = output(&c, a[G_OUT], NULL, NULL, shape, n, code, &td);
  if (!d) return NULL;
  OPSX_RUN(gemm, &c, &p, &ta, &tb, &td);
  n_fast++;
  return d;
fail:
  Py_DECREF(d);
  return NULL;
}

/* ---- layernorm, rmsnorm ------------------------------------------------------------- */

static const char *const layernorm_names[] = {"x",        "weight",   "bias", "eps",    "residual",
                                              "residual_out", "mean_out", "rstd_out", "out", "handle"};
static const char *const rmsnorm_names[] = {"x",        "weight",       "bias",     "eps", "residual",
                                            "residual_out", "rstd_out", "out",      "handle"};
enum { N_X, N_W, N_BIAS, N_EPS, N_RES, N_RES_OUT, N_MEAN, N_RSTD, N_OUT, N_HANDLE, N_N };
static signature sig_layernorm = {layernorm_names, 3, N_N, {0}};
static signature sig_rmsnorm = {rmsnorm_names, 3, N_N - 1, {0}};

static PyObject *norm(int fn_index, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
  PyObject *a[N_N] = {0}, *got[N_N];
  const int layer = fn_index == F_LAYERNORM;
  int r = bound && torch_ready() == 1 &&
          parse(layer ? &sig_layernorm : &sig_rmsnorm, args, nargsf, kwnames, got);
  if (r == 1) { /* rmsnorm has no mean_out: its names skip N_MEAN */
    for (int i = 0, j = 0; i < N_N; i++)
      if (layer || i != N_MEAN) a[i] = got[j++];
    r = a[N_X] && a[N_W];
  }
  OPSX_TAKE(r);
  ops_tensor tx, tw, ty, tb, tr, tro, tm, ts;
  const ops_tensor *out_ref;
  ops_norm_params p = d_norm;
  r = worst(read_tensor(a[N_X], &tx), read_tensor(a[N_W], &tw));
  if (r == 1) r = worst(read_optional(a[N_BIAS], &tb, &p.bias), read_optional(a[N_RES], &tr, &p.residual));
  if (r == 1) r = worst(read_optional(a[N_RES_OUT], &tro, &p.residual_out), read_optional(a[N_MEAN], &tm, &p.mean_out));
  if (r == 1) r = worst(read_optional(a[N_RSTD], &ts, &p.rstd_out), read_optional(a[N_OUT], &ty, &out_ref));
  if (r == 1) r = to_float(a[N_EPS], &p.eps);
  OPSX_TAKE(r);
  call_ctx c;
  OPSX_TAKE(begin(&c, a[N_HANDLE], tx.device.ordinal));
  PyObject *y = output(&c, a[N_OUT], a[N_X], &tx, tx.shape, tx.ndim, tx.dtype, &ty);
  if (!y) return NULL;
  if (layer)
    OPSX_RUN(layernorm, &c, &p, &tx, &tw, &ty);
  else
    OPSX_RUN(rmsnorm, &c, &p, &tx, &tw, &ty);
  n_fast++;
  return y;
fail:
  Py_DECREF(y);
  return NULL;
}

static PyObject *x_layernorm(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
  (void)self;
  return norm(F_LAYERNORM, args, nargsf, kwnames);
}

static PyObject *x_rmsnorm(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
  (void)self;
  return norm(F_RMSNORM, args, nargsf, kwnames);
}

/* ---- softmax, unary ----------------------------------------------------------------- */

static const char *const softmax_names[] = {"x", "scale", "out", "handle"};
static signature sig_softmax = {softmax_names, 1, 4, {0}};
static const char *const unary_names[] = {"x", "fn", "out", "handle"};
static signature sig_unary = {unary_names, 2, 4, {0}};

/* x, a scalar or a name (slot 1), out, handle: y has x's shape and dtype. */
static PyObject *one_input(int fn_index, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
  PyObject *a[4];
  const int soft = fn_index == F_SOFTMAX;
  int r = bound && torch_ready() == 1 && parse(soft ? &sig_softmax : &sig_unary, args, nargsf, kwnames, a) &&
          a[0] && (soft || a[1]);
  OPSX_TAKE(r);
  ops_tensor tx, ty;
  const ops_tensor *out_ref;
  ops_softmax_params ps = d_softmax;
  ops_unary_params pu = d_unary;
  r = worst(read_tensor(a[0], &tx), read_optional(a[2], &ty, &out_ref));
  if (r == 1) r = soft ? to_float(a[1], &ps.scale) : to_code(py_acts, a[1], &pu.fn);
  OPSX_TAKE(r);
  call_ctx c;
  OPSX_TAKE(begin(&c, a[3], tx.device.ordinal));
  PyObject *y = output(&c, a[2], a[0], &tx, tx.shape, tx.ndim, tx.dtype, &ty);
  if (!y) return NULL;
  if (soft)
    OPSX_RUN(softmax, &c, &ps, &tx, &ty);
  else
    OPSX_RUN(unary, &c, &pu, &tx, &ty);
  n_fast++;
  return y;
fail:
  Py_DECREF(y);
  return NULL;
}

static PyObject *x_softmax(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
  (void)self;
  return one_input(F_SOFTMAX, args, nargsf, kwnames);
}

static PyObject *x_unary(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
  (void)self;
  return one_input(F_UNARY, args, nargsf, kwnames);
}

/* ---- binary and its named forms ----------------------------------------------------- */

static const char *const binary_names[] = {"a", "b", "op", "out", "handle"};
static signature sig_binary = {binary_names, 3, 5, {0}};
static const char *const named_binary_names[] = {"a", "b", "out", "handle"};
static signature sig_named_binary = {named_binary_names, 2, 4, {0}};

/* NumPy broadcasting of two shapes; 0 when they do not broadcast. */
static int broadcast(const ops_tensor *x, const ops_tensor *y, int64_t *shape, int *n) {
  *n = x->ndim > y->ndim ? x->ndim : y->ndim;
  for (int i = 0; i < *n; i++) {
    const int ix = x->ndim - *n + i, iy = y->ndim - *n + i;
    const int64_t ex = ix >= 0 ? x->shape[ix] : 1, ey = iy >= 0 ? y->shape[iy] : 1;
    if (ex != 1 && ey != 1 && ex != ey) return 0;
    shape[i] = ex != 1 ? ex : ey;
  }
  return 1;
}

static PyObject *binary(int fn_index, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
  PyObject *a[5] = {0}, *got[5];
  const int named = fn_index != F_BINARY;
  int r = bound && torch_ready() == 1 && parse(named ? &sig_named_binary : &sig_binary, args, nargsf, kwnames, got);
  ops_binary_params p = d_binary;
  if (r == 1) {
    if (named) { /* a, b, out, handle: op from the name */
      a[0] = got[0], a[1] = got[1], a[3] = got[2], a[4] = got[3];
      p.op = fn_index - F_ADD; /* add, sub, mul, div, max, min in ops_binary_op's order */
    } else {
      memcpy(a, got, sizeof a);
      r = a[2] && to_code(py_binary_ops, a[2], &p.op);
    }
    r = r && a[0] && a[1];
  }
  OPSX_TAKE(r);
  ops_tensor ta, tb, ty;
  const ops_tensor *out_ref;
  r = worst(read_tensor(a[0], &ta), read_tensor(a[1], &tb));
  if (r == 1) r = read_optional(a[3], &ty, &out_ref);
  int64_t shape[OPS_MAX_DIMS];
  int n = 0;
  if (r == 1) r = broadcast(&ta, &tb, shape, &n);
  OPSX_TAKE(r);
  call_ctx c;
  OPSX_TAKE(begin(&c, a[4], ta.device.ordinal));
  PyObject *y = output(&c, a[3], a[0], &ta, shape, n, ta.dtype, &ty);
  if (!y) return NULL;
  OPSX_RUN(binary, &c, &p, &ta, &tb, &ty);
  n_fast++;
  return y;
fail:
  Py_DECREF(y);
  return NULL;
}

#define OPSX_BINARY(name, index)                                                                   \
  static PyObject *x_##name(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames) { \
    (void)self;                                                                                    \
    return binary(index, args, nargsf, kwnames);                                                   \
  }
OPSX_BINARY(binary, F_BINARY)
OPSX_BINARY(add, F_ADD)
OPSX_BINARY(sub, F_SUB)
OPSX_BINARY(mul, F_MUL)
OPSX_BINARY(div, F_DIV)
OPSX_BINARY(maximum, F_MAXIMUM)
OPSX_BINARY(minimum, F_MINIMUM)

/* ---- binding ------------------------------------------------------------------------ */

/* A params struct's defaults from the library's _init. The library is of this header's
 * major and minor version (checked in bind), so the struct it fills is this one; the
 * buffer's slack keeps a patch release that appended a field from writing past it. */
#define OPSX_DEFAULTS(dst, init)                                                                   \
  do {                                                                                             \
    union {                                                                                        \
      __typeof__(dst) p;                                                                           \
      unsigned char slack[512];                                                                    \
    } u_;                                                                                          \
    memset(&u_, 0, sizeof u_);                                                                     \
    init(&u_.p);                                                                                   \
    (dst) = u_.p;                                                                                  \
  } while (0)

static void keep(PyObject **slot, PyObject *v) {
  Py_INCREF(v);
  Py_XDECREF(*slot);
  *slot = v;
}

static PyObject *x_bind(PyObject *self, PyObject *args) {
  (void)self;
  PyObject *addresses, *functions, *ops_error, *acts, *binary_ops, *handle_fn, *tls;
  if (!PyArg_ParseTuple(args, "O!O!OO!O!OO", &PyDict_Type, &addresses, &PyDict_Type, &functions, &ops_error,
                        &PyDict_Type, &acts, &PyDict_Type, &binary_ops, &handle_fn, &tls))
    return NULL;
#define OPSX_RESOLVE(f)                                                                            \
  {                                                                                                \
    PyObject *v = PyDict_GetItemString(addresses, #f);                                             \
    if (!v) return PyErr_Format(PyExc_KeyError, "opslib._ext.bind: no address for %s", #f);       \
    p_##f = (__typeof__(p_##f))PyLong_AsVoidPtr(v);                                                \
    if (PyErr_Occurred()) return NULL;                                                             \
  }
  OPSX_FUNCTIONS(OPSX_RESOLVE)
  OPSX_RESOLVE(ops_tensor_from_dlpack)
#undef OPSX_RESOLVE
  const unsigned lib_version = p_ops_version();
  if (lib_version / 100 != OPS_VERSION_NUMBER / 100)
    return PyErr_Format(PyExc_ImportError,
                        "opslib._ext was built for opslib %s; the loaded library is %u.%u (rebuild it: "
                        "python3 -m opslib._build)",
                        OPS_VERSION_STRING, lib_version / 10000, lib_version / 100 % 100);
  for (int i = 0; i < F_COUNT; i++) {
    PyObject *fn = PyDict_GetItemString(functions, function_names[i]);
    if (!fn) return PyErr_Format(PyExc_KeyError, "opslib._ext.bind: no Python function %s", function_names[i]);
    keep(&python_fn[i], fn);
  }
  keep(&py_ops_error, ops_error);
  keep(&py_acts, acts);
  keep(&py_binary_ops, binary_ops);
  keep(&py_handle_fn, handle_fn);
  keep(&py_tls, tls);
  OPSX_DEFAULTS(d_sdpa, p_ops_sdpa_params_init);
  OPSX_DEFAULTS(d_gemm, p_ops_gemm_params_init);
  OPSX_DEFAULTS(d_norm, p_ops_norm_params_init);
  OPSX_DEFAULTS(d_softmax, p_ops_softmax_params_init);
  OPSX_DEFAULTS(d_unary, p_ops_unary_params_init);
  OPSX_DEFAULTS(d_binary, p_ops_binary_params_init);
  bound = 1;
  Py_RETURN_NONE;
}

static PyObject *x_stats(PyObject *self, PyObject *unused) {
  (void)self, (void)unused;
  return Py_BuildValue("{s:K,s:K,s:s}", "fast", n_fast, "python", n_python, "tensor_reads",
                       !T.tensor_type ? "torch not seen yet" : T.exchange ? "exchange api" : "dlpack capsules");
}

#define OPSX_FASTCALL(name, doc) {#name, (PyCFunction)(void (*)(void))x_##name, METH_FASTCALL | METH_KEYWORDS, doc}

static PyMethodDef methods[] = {
    {"bind", x_bind, METH_VARARGS,
     "bind(addresses, python_functions, OpsError, ACTS, BINARY_OPS, handle, thread_local): the library's "
     "function addresses (name -> int) as ctypes loaded them, the Python functions each call falls back to, "
     "and a threading.local for the per-thread workspaces."},
    {"stats", x_stats, METH_NOARGS,
     "{'fast': calls taken in C, 'python': calls passed to Python, 'tensor_reads': how tensors are read}"},
    OPSX_FASTCALL(sdpa, "opslib.sdpa, in C for CUDA torch tensors"),
    OPSX_FASTCALL(gemm, "opslib.gemm, in C for CUDA torch tensors"),
    OPSX_FASTCALL(layernorm, "opslib.layernorm, in C for CUDA torch tensors"),
    OPSX_FASTCALL(rmsnorm, "opslib.rmsnorm, in C for CUDA torch tensors"),
    OPSX_FASTCALL(softmax, "opslib.softmax, in C for CUDA torch tensors"),
    OPSX_FASTCALL(unary, "opslib.unary, in C for CUDA torch tensors"),
    OPSX_FASTCALL(binary, "opslib.binary, in C for CUDA torch tensors"),
    OPSX_FASTCALL(add, "opslib.add, in C for CUDA torch tensors"),
    OPSX_FASTCALL(sub, "opslib.sub, in C for CUDA torch tensors"),
    OPSX_FASTCALL(mul, "opslib.mul, in C for CUDA torch tensors"),
    OPSX_FASTCALL(div, "opslib.div, in C for CUDA torch tensors"),
    OPSX_FASTCALL(maximum, "opslib.maximum, in C for CUDA torch tensors"),
    OPSX_FASTCALL(minimum, "opslib.minimum, in C for CUDA torch tensors"),
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_ext",
                                    "opslib's per-call path in C (see opslib/_native.py)", -1, methods,
                                    NULL, NULL, NULL, NULL};

static int intern_signature(signature *s) {
  for (int i = 0; i < s->n; i++)
    if (!(s->keys[i] = PyUnicode_InternFromString(s->names[i]))) return 0;
  return 1;
}

PyMODINIT_FUNC PyInit__ext(void) {
  struct { PyObject **slot; const char *name; } strings[] = {
      {&s_is_neg, "is_neg"}, {&s_data_ptr, "data_ptr"},       {&s_virtual, "virtual"},
      {&s_h, "_h"},          {&s_value, "value"},             {&s_cuda_stream, "cuda_stream"},
      {&s_workspaces, "workspaces"}};
  for (size_t i = 0; i < sizeof strings / sizeof strings[0]; i++)
    if (!(*strings[i].slot = PyUnicode_InternFromString(strings[i].name))) return NULL;
  if (!(kw_alloc = Py_BuildValue("(ss)", "dtype", "device"))) return NULL;
  signature *sigs[] = {&sig_sdpa,    &sig_gemm,  &sig_layernorm, &sig_rmsnorm,
                       &sig_softmax, &sig_unary, &sig_binary,    &sig_named_binary};
  for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
    if (!intern_signature(sigs[i])) return NULL;
  PyObject *m = PyModule_Create(&module);
  if (!m) return NULL;
  /* the functions bind() wants addresses of, in the order they are resolved */
#define OPSX_NAME(f) #f,
  static const char *const library_functions[] = {OPSX_FUNCTIONS(OPSX_NAME) "ops_tensor_from_dlpack"};
#undef OPSX_NAME
  const Py_ssize_t n = (Py_ssize_t)(sizeof library_functions / sizeof library_functions[0]);
  PyObject *names = PyTuple_New(n);
  for (Py_ssize_t i = 0; names && i < n; i++) {
    PyObject *name = PyUnicode_FromString(library_functions[i]);
    if (!name) Py_CLEAR(names);
    else PyTuple_SET_ITEM(names, i, name);
  }
  if (!names || PyModule_AddObject(m, "LIBRARY_FUNCTIONS", names) < 0) {
    Py_XDECREF(names);
    Py_DECREF(m);
    return NULL;
  }
  return m;
}
