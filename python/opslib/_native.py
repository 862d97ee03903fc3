"""The per-call path in C (opslib._ext, built by `python3 python/opslib/_build.py` or by Bazel
beside libopslib.so) in front of the Python functions of _ops.py.

Where the module is there and matches the loaded library, opslib.sdpa, gemm, layernorm,
rmsnorm, softmax, unary, binary and its named forms become its C functions: a call on CUDA
torch tensors is read, checked by the library and launched in C; any other call (CPU
arrays, CuPy, explain, stream=, an unknown argument) goes to the Python function with its
arguments untouched. OPSLIB_NO_EXT=1 keeps the pure ctypes path."""
import ctypes
import importlib.util
import os
import threading

from . import _call, _capi

FUNCTIONS = ("sdpa", "gemm", "layernorm", "rmsnorm", "softmax", "unary", "binary", "add", "sub", "mul",
             "div", "maximum", "minimum")

_state = {"loaded": False, "path": None, "reason": "not tried", "module": None}
# Per thread: `workspaces`, {(device, stream): (tensor, address, bytes)}, the workspace each
# stream's calls reuse (kept until the thread ends, or release_workspaces()).
_tls = threading.local()


def install(lib, namespace):
    """Binds the extension to `lib` and replaces FUNCTIONS in `namespace` (opslib's globals)."""
    if os.environ.get("OPSLIB_NO_EXT", "") not in ("", "0"):
        _state["reason"] = "OPSLIB_NO_EXT is set"
        return
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_build.py")
    if importlib.util.find_spec(f"{__package__}._ext") is None:
        _state["reason"] = f"opslib._ext is not built (build it with `python3 {script}`)"
        return
    try:
        from . import _ext
    except ImportError as e:  # built for another Python, or not loadable
        _state["reason"] = f"opslib._ext does not load ({e}); rebuild it with `python3 {script}`"
        return
    try:
        addresses = {name: ctypes.cast(getattr(lib, name), ctypes.c_void_p).value
                     for name in _ext.LIBRARY_FUNCTIONS}
        _ext.bind(addresses, {name: namespace[name] for name in FUNCTIONS}, namespace["OpsError"],
                  dict(_capi.ACTS), dict(_capi.BINARY_OPS), _call.handle, _tls)
    except (ImportError, AttributeError, KeyError) as e:
        _state["reason"] = f"opslib._ext does not match the loaded library: {e}"
        return
    for name in FUNCTIONS:
        namespace[name] = getattr(_ext, name)
    _state.update(loaded=True, path=_ext.__file__, reason="loaded", module=_ext)


def release_workspaces():
    """Drops this thread's kept workspaces (torch's allocator reuses them in stream order)."""
    _tls.__dict__.pop("workspaces", None)


def extension():
    """Which path opslib's calls take: {"loaded", "path", "reason", "fast_calls", "python_calls",
    "tensor_reads", "workspace_bytes"} (calls the C path ran, calls it passed to the Python
    functions, how it reads torch tensors: "exchange api" (torch's DLPack C exchange table) or
    "dlpack capsules" (OPSLIB_NO_EXCHANGE_API=1, or a torch without the table), and the
    workspace this thread keeps for its streams)."""
    stats = _state["module"].stats() if _state["module"] else {"fast": 0, "python": 0, "tensor_reads": "-"}
    kept = getattr(_tls, "workspaces", {})
    return {"loaded": _state["loaded"], "path": _state["path"], "reason": _state["reason"],
            "fast_calls": stats["fast"], "python_calls": stats["python"],
            "tensor_reads": stats["tensor_reads"],
            "workspace_bytes": sum(entry[2] for entry in kept.values())}
