"""opslib from Python: a binding over libopslib.so, through ctypes, with a per-call path in C
(opslib._ext) for CUDA torch tensors where that module was built (opslib.extension()).

    import torch, opslib
    y = opslib.rmsnorm(x, w)                      # any DLPack array: torch, CuPy, JAX, NumPy
    print(opslib.explain("rmsnorm", x, w))        # which kernel, and why not the others
    opslib.kernels()                              # the catalog with its capability metadata

Arrays are passed without a copy; CUDA work goes on the caller framework's current stream
(or stream=), asynchronously; outputs not given are allocated in the caller's framework.
A failing call raises OpsError with the library's status and message, having written nothing.
The library is found through OPSLIB_LIBRARY, next to this package, or in bazel-bin/.
"""
import ctypes as _ctypes

from . import _call, _capi, _native
from ._ops import (OPS as _OPS, add, amax, amin, binary, div, dropout, gemm, layernorm,  # noqa: F401
                   kv_cache_append, layernorm_backward, maximum, mean, minimum, mul, reduce, rmsnorm,
                   rmsnorm_backward, rope, scale, sdpa, sdpa_backward, sin_affine, softmax, softmax_backward,
                   sub, sum, unary)
from ._call import Explanation, Handle, handle  # noqa: F401
from ._tensors import TensorSpec  # noqa: F401

__all__ = ["OpsError", "Handle", "Explanation", "TensorSpec", "handle", "explain", "kernels",
           "kernel_info", "version", "cuda_device_count", "extension", "release_workspaces", "ACTIVATIONS", "BINARY_OPS", "REDUCE_OPS",
           "sdpa", "gemm", "layernorm", "rmsnorm", "layernorm_backward", "rmsnorm_backward", "softmax",
           "softmax_backward", "sin_affine", "unary", "binary", "add", "sub", "mul", "div", "maximum",
           "minimum", "scale", "dropout", "reduce", "sum", "mean", "amax", "amin", "rope",
           "kv_cache_append", "sdpa_backward"]


class OpsError(RuntimeError):
    """A failing opslib call: .status (the ops_status value), .status_name
    ("OPS_ERR_SHAPE_MISMATCH"), .message (names the argument, expected and given)."""

    def __init__(self, status, status_name, message):
        super().__init__(f"{status_name}: {message}")
        self.status = status
        self.status_name = status_name
        self.message = message


_lib, library_path = _capi.load()
_call.bind(_lib)
_native.install(_lib, globals())
extension = _native.extension
release_workspaces = _native.release_workspaces

ACTIVATIONS = tuple(_capi.ACTS)
BINARY_OPS = tuple(_capi.BINARY_OPS)
REDUCE_OPS = tuple(_capi.REDUCE_OPS)


def version():
    """The linked library's version string, e.g. "0.1.0"."""
    return _lib.ops_version_string().decode()


def cuda_device_count():
    """CUDA devices the library's runtime sees (0 without a GPU or driver)."""
    return _lib.ops_cuda_device_count()


def explain(op, *args, **kwargs):
    """What opslib.<op>(*args, **kwargs) would run, and why: an Explanation. Nothing runs and
    nothing is allocated; TensorSpec stands in for arrays that do not exist, and
    handle=Handle.virtual(90) asks about a device that is not here."""
    if op not in _OPS:
        raise ValueError(f"opslib.explain: op: expected one of {sorted(_OPS)}, got {op!r}")
    return _OPS[op](*args, _explain=True, **kwargs)


_BACKENDS = {_capi.DEVICE_CPU: "cpu", _capi.DEVICE_CUDA: "cuda"}


def _info_dict(k):
    def s(b):
        return b.decode() if b is not None else ""

    def dtypes(mask):
        return [_lib.ops_dtype_name(d).decode() for d in range(1, 9) if mask & (1 << d)]

    roles = []
    for i in range(max(_lib.ops_kernel_role_count(k.name), 0)):
        r = _capi.WarpRole()
        r.struct_size = _ctypes.sizeof(r)
        _check(_lib.ops_kernel_role(k.name, i, _ctypes.byref(r)), "ops_kernel_role")
        roles.append({"name": s(r.name), "warps": r.warps, "work": s(r.work)})

    return {"kernel_id": k.kernel_id, "name": s(k.name), "op": _lib.ops_op_name(k.op).decode(),
            "backend": _BACKENDS.get(k.backend, str(k.backend)), "sm_min": k.sm_min,
            "sm_max": k.sm_max, "dtypes": dtypes(k.dtypes), "out_dtypes": dtypes(k.out_dtypes),
            "features": s(k.features), "fuses": s(k.fuses), "limits": s(k.limits),
            "roles": s(k.roles), "warp_roles": roles, "stages": k.stages, "smem_layout": s(k.smem_layout),
            "smem_bytes": k.smem_bytes, "threads": k.threads, "deterministic": bool(k.deterministic),
            "reduction_order": s(k.reduction_order), "workspace_formula": s(k.workspace_formula),
            "unit": s(k.unit), "efficiency": k.efficiency, "tests": s(k.tests),
            "vector_bytes": k.vector_bytes}


def kernels(op=None):
    """The kernel catalog: one dict of capability metadata per kernel (of one op if given)."""
    out = []
    for i in range(_lib.ops_kernel_count()):
        k = _capi.KernelInfo()
        k.struct_size = _ctypes.sizeof(k)
        _check(_lib.ops_kernel_info_at(i, _ctypes.byref(k)), "ops_kernel_info_at")
        d = _info_dict(k)
        if op is None or d["op"] == op:
            out.append(d)
    return out


def kernel_info(name):
    """One kernel's capability metadata by name."""
    k = _capi.KernelInfo()
    k.struct_size = _ctypes.sizeof(k)
    _check(_lib.ops_kernel_info_by_name(name.encode(), _ctypes.byref(k)), "ops_kernel_info_by_name")
    return _info_dict(k)


def _check(status, what):
    from ._tensors import check
    check(_lib, status, what)
