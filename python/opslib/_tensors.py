"""Tensors in, tensors out: DLPack views of the caller's arrays, the stream to run on, and
allocation of outputs and workspaces in the caller's own framework.

Any object with __dlpack__ / __dlpack_device__ (PyTorch, CuPy, JAX, NumPy >= 1.22) is read
through its DLPack capsule without a copy: the capsule's DLTensor goes to the library's own
converter (ops_tensor_from_dlpack), so Python and C agree on dtypes, strides and offsets by
construction. The capsule is not consumed: when it is collected, its deleter releases the
producer's reference, while the caller still holds the array.

Outputs that the caller does not pass are allocated like the first input: torch.empty,
cupy.empty or numpy.empty. Other producers (JAX arrays are immutable) need out=.
"""
import ctypes

from . import _capi

KDL_CPU, KDL_CUDA, KDL_CUDA_HOST, KDL_CUDA_MANAGED = 1, 2, 3, 13

_get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_get_pointer.restype = ctypes.c_void_p
_get_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_get_name = ctypes.pythonapi.PyCapsule_GetName
_get_name.restype = ctypes.c_char_p
_get_name.argtypes = [ctypes.py_object]

# DLManagedTensorVersioned (DLPack >= 1.0): version (2 x u32), manager_ctx, deleter, flags,
# then the DLTensor.
_VERSIONED_DLTENSOR_OFFSET = 8 + 8 + 8 + 8

DTYPE_NAMES = {"f32": _capi.DTYPE_F32, "float32": _capi.DTYPE_F32,
               "f16": _capi.DTYPE_F16, "float16": _capi.DTYPE_F16,
               "bf16": _capi.DTYPE_BF16, "bfloat16": _capi.DTYPE_BF16,
               "i32": _capi.DTYPE_I32, "int32": _capi.DTYPE_I32,
               "i64": _capi.DTYPE_I64, "int64": _capi.DTYPE_I64}


class TensorSpec:
    """A tensor that does not exist yet: shape, dtype and device, for explain() and for
    workspace queries ahead of allocation (its data pointer is NULL)."""

    def __init__(self, shape, dtype="f32", device="cpu", strides=None):
        self.shape = tuple(int(s) for s in shape)
        self.dtype = dtype_code(dtype)
        self.device = device
        self.strides = None if strides is None else tuple(int(s) for s in strides)

    def __repr__(self):
        return f"TensorSpec({list(self.shape)}, {self.dtype}, {self.device!r})"


def dtype_code(dtype):
    """An opslib dtype code from "bf16", a torch / numpy / cupy dtype, or a code."""
    if isinstance(dtype, int):
        return dtype
    name = str(dtype).replace("torch.", "").replace("dtype(", "").strip("')\"")
    if name not in DTYPE_NAMES:
        raise ValueError(f"opslib: dtype: expected f32, f16, bf16, i32 or i64, got {dtype!r}")
    return DTYPE_NAMES[name]


def _device_of(obj):
    if isinstance(obj, TensorSpec):
        d = obj.device
        if isinstance(d, str):
            kind, _, idx = d.partition(":")
            return (KDL_CUDA if kind == "cuda" else KDL_CPU), int(idx or 0)
        return d
    try:
        t, i = obj.__dlpack_device__()
    except AttributeError:
        raise TypeError(f"opslib: expected an array that exports DLPack (torch, CuPy, JAX, "
                        f"NumPy), got {type(obj).__name__}") from None
    return int(t), int(i)


def framework(obj):
    """"torch", "cupy", "numpy", or None for other producers."""
    mod = type(obj).__module__.split(".")[0]
    return mod if mod in ("torch", "cupy", "numpy") else None


def current_stream(obj, device_id):
    """The stream the caller's framework is issuing to: torch's or CuPy's current stream,
    else the legacy default stream (0)."""
    fw = framework(obj)
    if fw == "torch":
        import torch
        return int(torch.cuda.current_stream(device_id).cuda_stream)
    if fw == "cupy":
        import cupy
        with cupy.cuda.Device(device_id):
            return int(cupy.cuda.get_current_stream().ptr)
    return 0


def stream_pointer(stream):
    """A stream argument as an integer: None / 0 (legacy default), an int, a torch.cuda.Stream
    (.cuda_stream) or a cupy Stream (.ptr)."""
    if stream is None:
        return 0
    if isinstance(stream, int):
        return stream
    for attr in ("cuda_stream", "ptr"):
        if hasattr(stream, attr):
            return int(getattr(stream, attr))
    raise TypeError(f"opslib: stream: expected an int, a torch.cuda.Stream or a cupy Stream, "
                    f"got {type(stream).__name__}")


class Operand:
    """One argument as the library sees it: its ops_tensor, plus the DLPack capsule that
    keeps the view valid for the duration of the call."""

    def __init__(self, lib, obj, stream):
        self.obj = obj
        self.t = _capi.Tensor()
        self._capsule = None
        if isinstance(obj, TensorSpec):
            self._init_spec(lib, obj)
            return
        if framework(obj) == "torch" and self._init_torch(lib, obj):
            return
        kind, _ = _device_of(obj)
        if kind in (KDL_CUDA, KDL_CUDA_MANAGED):
            # the producer makes the data ready on our stream (1: the legacy default stream)
            self._capsule = obj.__dlpack__(stream=stream if stream else 1)
        else:
            self._capsule = obj.__dlpack__()
        name = _get_name(self._capsule)
        ptr = _get_pointer(self._capsule, name)
        if name == b"dltensor_versioned":
            ptr += _VERSIONED_DLTENSOR_OFFSET
        check(lib, lib.ops_tensor_from_dlpack(ptr, ctypes.byref(self.t)), "ops_tensor_from_dlpack")

    def _init_torch(self, lib, obj):
        """torch tensors, read from their own attributes: the same view DLPack would give, in
        a tenth of the time (torch's __dlpack__ with a stream costs ~28 us a tensor, measured
        on the H100 host). Anything unusual takes the DLPack path, which says what is wrong."""
        if obj.is_neg() or obj.is_conj():  # DLPack would hand over the stored values, unnegated
            raise ValueError("opslib: a tensor with torch's negative or conjugate bit (a lazy view such "
                             "as z.conj().imag) reads as its stored values; pass t.resolve_neg() or "
                             "t.resolve_conj()")
        code = _torch_codes().get(obj.dtype)
        dev = obj.device
        if code is None or dev.type not in ("cuda", "cpu") or obj.layout is not _torch_codes()["strided"]:
            return False
        n = obj.dim()
        if n > _capi.MAX_DIMS:
            return False
        # filled in place (torch has checked extents and strides); the op validates the rest
        t = self.t
        t.struct_size = _TENSOR_SIZE
        t.dtype = code
        if dev.type == "cuda":
            t.device.type, t.device.ordinal = _capi.DEVICE_CUDA, dev.index
        else:
            t.device.type = _capi.DEVICE_CPU
        t.ndim = n
        t.data = obj.data_ptr() or None
        t.shape[:n] = obj.shape
        t.strides[:n] = obj.stride()
        return True

    def _init_spec(self, lib, spec):
        kind, ordinal = _device_of(spec)
        dev = _capi.Device(_capi.DEVICE_CUDA if kind == KDL_CUDA else _capi.DEVICE_CPU,
                           ordinal if kind == KDL_CUDA else 0)
        n = len(spec.shape)
        shape = (ctypes.c_int64 * max(n, 1))(*spec.shape)
        strides = None if spec.strides is None else (ctypes.c_int64 * max(n, 1))(*spec.strides)
        check(lib, lib.ops_tensor_init(ctypes.byref(self.t), None, spec.dtype, dev, n, shape, strides),
              "ops_tensor_init")

    @property
    def ptr(self):
        return ctypes.byref(self.t)


_TORCH = {}
_TENSOR_SIZE = ctypes.sizeof(_capi.Tensor)


def _torch_codes():
    if not _TORCH:
        import torch
        _TORCH.update({torch.float32: _capi.DTYPE_F32, torch.float16: _capi.DTYPE_F16,
                       torch.bfloat16: _capi.DTYPE_BF16, torch.int32: _capi.DTYPE_I32,
                       torch.int64: _capi.DTYPE_I64, torch.uint8: _capi.DTYPE_U8,
                       "strided": torch.strided})
    return _TORCH


def order_after_current(obj, device_id, stream):
    """Makes `stream` wait for the work torch has queued on its current stream (what
    __dlpack__(stream=) does for the DLPack path), when the two differ."""
    import torch
    cur = torch.cuda.current_stream(device_id)
    if int(cur.cuda_stream) != stream:
        ev = torch.cuda.Event()
        ev.record(cur)
        torch.cuda.ExternalStream(stream, device=device_id).wait_event(ev)


# ---- allocation in the caller's framework ---------------------------------------------

_TORCH_DTYPES = {_capi.DTYPE_F32: "float32", _capi.DTYPE_F16: "float16",
                 _capi.DTYPE_BF16: "bfloat16", _capi.DTYPE_I32: "int32", _capi.DTYPE_U8: "uint8"}
_NUMPY_DTYPES = {_capi.DTYPE_F32: "float32", _capi.DTYPE_F16: "float16",
                 _capi.DTYPE_I32: "int32", _capi.DTYPE_U8: "uint8"}


def empty(like, shape, dtype):
    """An uninitialized array of `shape` and opslib `dtype` on `like`'s device and framework;
    a TensorSpec when `like` is one (explain)."""
    if isinstance(like, TensorSpec):
        return TensorSpec(shape, dtype, like.device)
    fw = framework(like)
    if fw == "torch":
        import torch
        return torch.empty(tuple(shape), dtype=getattr(torch, _TORCH_DTYPES[dtype]), device=like.device)
    if fw in ("numpy", "cupy"):
        mod = __import__(fw)
        if dtype not in _NUMPY_DTYPES:
            raise TypeError(f"opslib: {fw} has no {dtype_name(dtype)} dtype; pass out=")
        if fw == "cupy":
            with mod.cuda.Device(like.device.id):
                return mod.empty(tuple(shape), dtype=_NUMPY_DTYPES[dtype])
        return mod.empty(tuple(shape), dtype=_NUMPY_DTYPES[dtype])
    raise TypeError(f"opslib: cannot allocate an output like a {type(like).__module__}."
                    f"{type(like).__name__}; pass out= (an array this library can write)")


def workspace(like, nbytes):
    """(keepalive, 16-byte-aligned pointer) of at least nbytes on like's device, or (None, None)."""
    if nbytes == 0 or isinstance(like, TensorSpec):
        return None, None
    buf = empty(like, (nbytes + 16,), _capi.DTYPE_U8)
    fw = framework(buf)
    if fw == "torch":
        base = buf.data_ptr()
    elif fw == "cupy":
        base = buf.data.ptr
    else:
        base = buf.ctypes.data
    return buf, base + (-base) % 16


def dtype_name(code):
    """"f32", "bf16", ... for an opslib dtype code (the library's own names)."""
    from . import _lib
    return _lib.ops_dtype_name(code).decode()


def check(lib, status, what):
    if status != _capi.OK:
        from . import OpsError
        raise OpsError(status, lib.ops_status_name(status).decode(),
                       lib.ops_last_error().decode(errors="replace") or what)
