"""One op call from Python: handle and stream, operands, outputs, workspace, then either the
op itself or its _explain twin with the very same arguments."""
import ctypes
import threading

from . import _capi
from ._tensors import KDL_CUDA, KDL_CUDA_MANAGED, Operand, TensorSpec, check, current_stream
from ._tensors import empty, framework, order_after_current, stream_pointer, workspace

_tls = threading.local()
_lib = None


def bind(lib):
    global _lib
    _lib = lib


class Handle:
    """An opslib handle for one device: math mode, determinism and kernel pins live here.

    The functions of the module use one default handle per thread and device
    (opslib.handle()); pass handle= to use another, e.g. Handle.virtual(90) to explain a
    call for an H100 on a machine without one."""

    def __init__(self, device="cpu", _raw=None):
        self._h = ctypes.c_void_p()
        if _raw is not None:
            self._h = _raw
        else:
            kind, _, idx = str(device).partition(":")
            dev = (_capi.Device(_capi.DEVICE_CUDA, int(idx or 0)) if kind == "cuda"
                   else _capi.Device(_capi.DEVICE_CPU, 0))
            check(_lib, _lib.ops_handle_create(ctypes.byref(self._h), dev), "ops_handle_create")
        self.virtual = False

    @classmethod
    def virtual(cls, sm, name=None):
        """A handle describing the reference device of an SM family (90: H100 SXM, 80: A100,
        89: L4): explain and workspace queries work, running fails. name: the device's name in
        place of the reference device's (e.g. "NVIDIA H200": explain then uses the calibration
        measured on that device, where there is one)."""
        info = _capi.DeviceInfo()
        info.struct_size = ctypes.sizeof(info)
        check(_lib, _lib.ops_device_info_for_sm(sm, ctypes.byref(info)), "ops_device_info_for_sm")
        if name is not None:
            info.name = name.encode()[: type(info).name.size - 1]
        raw = ctypes.c_void_p()
        check(_lib, _lib.ops_handle_create_virtual(ctypes.byref(raw), ctypes.byref(info)),
              "ops_handle_create_virtual")
        h = cls(_raw=raw)
        h.virtual = True
        return h

    def __del__(self):
        if _lib is not None and self._h:
            _lib.ops_handle_destroy(self._h)
            self._h = ctypes.c_void_p()

    def set_math_mode(self, mode):
        """"strict" (f32 products in f32) or "tf32"."""
        check(_lib, _lib.ops_handle_set_math_mode(self._h, _capi.MATH_MODES[mode]), "set_math_mode")

    def set_deterministic(self, on=True):
        check(_lib, _lib.ops_handle_set_deterministic(self._h, int(bool(on))), "set_deterministic")

    def pin_kernel(self, name):
        """Pins a kernel by name for its op on this handle; None removes every pin."""
        check(_lib, _lib.ops_handle_pin_kernel(self._h, None if name is None else name.encode()),
              "pin_kernel")

    def set_autotune(self, on=True):
        """Times the best candidates on the first run of each shape bucket (ops_handle_set_autotune)."""
        check(_lib, _lib.ops_handle_set_autotune(self._h, int(bool(on))), "set_autotune")

    def set_tune_cache(self, path):
        """Attaches a tune cache file (None detaches); see ops_handle_set_tune_cache."""
        check(_lib, _lib.ops_handle_set_tune_cache(self._h, None if path is None else str(path).encode()),
              "set_tune_cache")

    def save_tune_cache(self):
        check(_lib, _lib.ops_handle_save_tune_cache(self._h), "save_tune_cache")

    def device_info(self):
        info = _capi.DeviceInfo()
        info.struct_size = ctypes.sizeof(info)
        check(_lib, _lib.ops_handle_get_device_info(self._h, ctypes.byref(info)), "device_info")
        return {"name": info.name.decode(), "sm_version": info.sm_version, "code_sm": info.code_sm,
                "sm_count": info.sm_count, "smem_per_block_optin": info.smem_per_block_optin,
                "l2_bytes": info.l2_bytes, "global_mem_bytes": info.global_mem_bytes}


def handle(device="cpu"):
    """This thread's default handle for a device ("cpu", "cuda", "cuda:1")."""
    key = str(device) if str(device) != "cuda" else "cuda:0"
    handles = getattr(_tls, "handles", None)
    if handles is None:
        handles = _tls.handles = {}
    if key not in handles:
        handles[key] = Handle(key)
    return handles[key]


class Explanation:
    """Why the dispatcher would choose a kernel: .chosen (a kernel name or None), .choice
    ("model", "measured", "tune_cache", "pinned") and .choice_note, .problem, .verdicts
    (kernel, reason, est_us, measured_us, plan, message), str() the text rendering, .json()."""

    def __init__(self, e):
        self._e = e
        self.op = _lib.ops_op_name(e.op).decode()
        self.problem = e.problem.decode()
        self.empty = bool(e.empty)
        self.verdicts = [
            {"kernel": v.kernel_name.decode(), "kernel_id": v.kernel_id,
             "reason": _lib.ops_reason_name(v.reason).decode(), "est_us": v.est_us,
             "measured_us": e.measured_us[i] or None,
             "plan": e.plan[i].decode() if e.plan[i] else None,
             "message": v.message.decode(errors="replace")}
            for i, v in enumerate(e.verdicts[: e.count])]
        self.choice = _lib.ops_choice_name(e.choice).decode()
        self.choice_note = e.choice_note.decode(errors="replace")
        self.chosen = self.verdicts[e.chosen]["kernel"] if e.chosen >= 0 else None

    def _render(self, fn):
        n = fn(ctypes.byref(self._e), None, 0)
        buf = ctypes.create_string_buffer(n + 1)
        fn(ctypes.byref(self._e), buf, n + 1)
        return buf.value.decode(errors="replace")

    def __str__(self):
        return self._render(_lib.ops_explain_to_text)

    def json(self):
        import json
        return json.loads(self._render(_lib.ops_explain_to_json))

    def __repr__(self):
        return f"<opslib.Explanation {self.op}: {self.chosen or 'no eligible kernel'}>"


class Call:
    """Gathers one call's operands; run() either runs the op or explains it."""

    def __init__(self, explain=False, handle=None, stream=None):
        self.explain = explain
        self._handle = handle
        self._stream_arg = stream
        self.stream = None
        self.device = None   # (dlpack device type, ordinal) of the first operand
        self.like = None     # the first operand: outputs are allocated like it
        self.keep = []

    def tensor(self, obj):
        """An Operand for obj (None stays None). The first one fixes device and stream."""
        if obj is None:
            return None
        if self.like is None:
            self.like = obj
            self.device = _device(obj)
            if self.device[0] in (KDL_CUDA, KDL_CUDA_MANAGED):
                self.stream = (stream_pointer(self._stream_arg) if self._stream_arg is not None
                               else current_stream(obj, self.device[1]))
                if self._stream_arg is not None and framework(obj) == "torch":
                    order_after_current(obj, self.device[1], self.stream)
            else:
                self.stream = 0
        op = Operand(_lib, obj, self.stream)
        self.keep.append(op)
        return op

    def output(self, given, shape, dtype):
        """The caller's output (an Operand), or a new one of shape and dtype."""
        if given is None:
            like = self.like
            if self.explain and not isinstance(like, TensorSpec):
                like = TensorSpec((), dtype, _spec_device(self.device))
            given = empty(like, shape, dtype)
        return self.tensor(given), given

    def handle(self):
        if self._handle is not None:
            return self._handle
        kind, ordinal = self.device
        return handle(f"cuda:{ordinal}" if kind in (KDL_CUDA, KDL_CUDA_MANAGED) else "cpu")

    def run(self, name, params, *operands):
        h = self.handle()
        if not h.virtual and self.device[0] in (KDL_CUDA, KDL_CUDA_MANAGED):
            check(_lib, _lib.ops_handle_set_stream(h._h, self.stream), "ops_handle_set_stream")
        args = [None if o is None else o.ptr for o in operands]
        pp = ctypes.byref(params)
        if self.explain:
            e = _capi.Explain()
            e.struct_size = ctypes.sizeof(e)
            check(_lib, getattr(_lib, f"ops_{name}_explain")(h._h, pp, *args, ctypes.byref(e)),
                  f"ops_{name}_explain")
            return Explanation(e)
        n = ctypes.c_size_t()
        check(_lib, getattr(_lib, f"ops_{name}_workspace_size")(h._h, pp, *args, ctypes.byref(n)),
              f"ops_{name}_workspace_size")
        buf, ptr = workspace(self.like, n.value)
        self.keep.append(buf)
        check(_lib, getattr(_lib, f"ops_{name}")(h._h, pp, *args, ptr, n.value), f"ops_{name}")
        return None


def _device(obj):
    from ._tensors import _device_of
    return _device_of(obj)


def _spec_device(device):
    kind, ordinal = device
    return f"cuda:{ordinal}" if kind in (KDL_CUDA, KDL_CUDA_MANAGED) else "cpu"


def params(name):
    """A params struct of op `name`, filled with the library's defaults by its _init."""
    struct = _capi.OPS[name][0]()
    init = _capi.PARAMS_INIT.get(name, f"ops_{name}_params_init")
    getattr(_lib, init)(ctypes.byref(struct))
    return struct


def ref(operand):
    """A params field's value for an optional operand."""
    return None if operand is None else ctypes.pointer(operand.t)
