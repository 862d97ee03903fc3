"""The C ABI of libopslib.so, seen through ctypes: the structs of include/opslib/ field for
field, the function prototypes, and the one place that turns a failing status into an
exception.

The structs mirror the public headers exactly (same field order, same C types); each starts
with struct_size, which the library checks, so a layout drift fails loudly with
OPS_ERR_STRUCT_SIZE instead of reading garbage. tests/test_capi.py holds the layout to the
library by round-trips (ops_tensor_init, the params _init functions, the catalog).
"""
import ctypes
import ctypes.util
import os

# ---- enums (values are ABI: include/opslib/*.h) --------------------------------------

DTYPE_F32, DTYPE_F16, DTYPE_BF16, DTYPE_I32, DTYPE_I64, DTYPE_U8 = 1, 2, 3, 4, 5, 6
DEVICE_CPU, DEVICE_CUDA = 1, 2
OK = 0
ERR_UNSUPPORTED = 13
MAX_DIMS = 8
EXPLAIN_MAX_CANDIDATES = 32

ACTS = {"none": 0, "relu": 1, "gelu_tanh": 2, "gelu_erf": 3, "silu": 4, "sigmoid": 5,
        "tanh": 6, "exp": 7, "neg": 8, "abs": 9, "sin": 10}
BINARY_OPS = {"add": 0, "sub": 1, "mul": 2, "div": 3, "max": 4, "min": 5}
REDUCE_OPS = {"sum": 0, "mean": 1, "max": 2, "min": 3}
REDUCE_ALL_AXES = 0xFFFFFFFF
MATH_MODES = {"strict": 0, "tf32": 1}

# ---- structs ------------------------------------------------------------------------


class Device(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int32), ("ordinal", ctypes.c_int32)]


class Tensor(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("dtype", ctypes.c_int32),
        ("device", Device),
        ("ndim", ctypes.c_int32),
        ("reserved", ctypes.c_int32),
        ("data", ctypes.c_void_p),
        ("shape", ctypes.c_int64 * MAX_DIMS),
        ("strides", ctypes.c_int64 * MAX_DIMS),
    ]


TensorP = ctypes.POINTER(Tensor)


class DeviceInfo(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("device", Device),
        ("name", ctypes.c_char * 96),
        ("sm_version", ctypes.c_int32),
        ("code_sm", ctypes.c_int32),
        ("sm_count", ctypes.c_int32),
        ("smem_per_block_optin", ctypes.c_int64),
        ("smem_per_sm", ctypes.c_int64),
        ("l2_bytes", ctypes.c_int64),
        ("global_mem_bytes", ctypes.c_int64),
    ]


class SdpaParams(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("scale", ctypes.c_float),
        ("causal", ctypes.c_int32),
        ("window_left", ctypes.c_int32),
        ("window_right", ctypes.c_int32),
        ("attn_mask", TensorP),
        ("cu_seqlens_q", TensorP),
        ("cu_seqlens_k", TensorP),
        ("max_seqlen_q", ctypes.c_int32),
        ("max_seqlen_k", ctypes.c_int32),
        ("kv_lens", TensorP),
        ("block_table", TensorP),
    ]


class RopeParams(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("style", ctypes.c_int32),
        ("theta", ctypes.c_float),
        ("rotary_dim", ctypes.c_int32),
        ("scaling", ctypes.c_int32),
        ("factor", ctypes.c_float),
        ("low_freq_factor", ctypes.c_float),
        ("high_freq_factor", ctypes.c_float),
        ("original_max_positions", ctypes.c_int32),
        ("k", TensorP),
        ("k_out", TensorP),
    ]


class KvCacheAppendParams(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("rope", ctypes.POINTER(RopeParams)),
        ("positions", TensorP),
    ]


ROPE_STYLES = {"neox": 0, "gptj": 1}
ROPE_SCALINGS = {None: 0, "none": 0, "linear": 1, "llama3": 2}


class GemmParams(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("alpha", ctypes.c_float),
        ("beta", ctypes.c_float),
        ("activation", ctypes.c_int32),
        ("c", TensorP),
        ("bias", TensorP),
        ("residual", TensorP),
    ]


class NormParams(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("eps", ctypes.c_float),
        ("bias", TensorP),
        ("residual", TensorP),
        ("residual_out", TensorP),
        ("mean_out", TensorP),
        ("rstd_out", TensorP),
    ]


class NormBackwardParams(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_uint32), ("dweight", TensorP), ("dbias", TensorP)]


class SoftmaxParams(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_uint32), ("scale", ctypes.c_float)]


class SinAffineParams(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("a", ctypes.c_float),
        ("b", ctypes.c_float),
        ("a_tensor", TensorP),
        ("b_tensor", TensorP),
    ]


class UnaryParams(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_uint32), ("fn", ctypes.c_int32)]


class BinaryParams(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_uint32), ("op", ctypes.c_int32)]


class ScaleParams(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_uint32), ("alpha", ctypes.c_float)]


class DropoutParams(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("p", ctypes.c_float),
        ("seed", ctypes.c_uint64),
        ("offset", ctypes.c_uint64),
    ]


class ReduceParams(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("op", ctypes.c_int32),
        ("axes", ctypes.c_uint32),
        ("keepdim", ctypes.c_int32),
    ]


class Verdict(ctypes.Structure):
    _fields_ = [
        ("kernel_id", ctypes.c_int32),
        ("reason", ctypes.c_int32),
        ("kernel_name", ctypes.c_char_p),
        ("est_us", ctypes.c_double),
        ("message", ctypes.c_char * 192),
    ]


class Explain(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("op", ctypes.c_int32),
        ("chosen", ctypes.c_int32),
        ("count", ctypes.c_int32),
        ("empty", ctypes.c_int32),
        ("problem", ctypes.c_char * 256),
        ("verdicts", Verdict * EXPLAIN_MAX_CANDIDATES),
        ("choice", ctypes.c_int32),
        ("measured", ctypes.c_int32),
        ("measured_us", ctypes.c_double * EXPLAIN_MAX_CANDIDATES),
        ("plan", ctypes.c_char_p * EXPLAIN_MAX_CANDIDATES),
        ("choice_note", ctypes.c_char * 192),
    ]


class KernelInfo(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("kernel_id", ctypes.c_int32),
        ("name", ctypes.c_char_p),
        ("op", ctypes.c_int32),
        ("backend", ctypes.c_int32),
        ("sm_min", ctypes.c_int32),
        ("sm_max", ctypes.c_int32),
        ("dtypes", ctypes.c_uint32),
        ("out_dtypes", ctypes.c_uint32),
        ("features", ctypes.c_char * 160),
        ("fuses", ctypes.c_char * 160),
        ("limits", ctypes.c_char * 192),
        ("roles", ctypes.c_char * 192),
        ("stages", ctypes.c_int32),
        ("smem_layout", ctypes.c_char_p),
        ("smem_bytes", ctypes.c_int32),
        ("threads", ctypes.c_int32),
        ("deterministic", ctypes.c_int32),
        ("reduction_order", ctypes.c_char_p),
        ("workspace_formula", ctypes.c_char_p),
        ("unit", ctypes.c_char_p),
        ("efficiency", ctypes.c_double),
        ("tests", ctypes.c_char_p),
        ("vector_bytes", ctypes.c_int32),
    ]


class WarpRole(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("warps", ctypes.c_int32),
        ("name", ctypes.c_char_p),
        ("work", ctypes.c_char_p),
    ]


# ---- the library ----------------------------------------------------------------------


def _candidates():
    env = os.environ.get("OPSLIB_LIBRARY")
    if env:
        return [env]
    here = os.path.dirname(os.path.abspath(__file__))
    found = [os.path.join(here, "libopslib.so"),                       # a wheel-like install
             os.path.join(here, "..", "..", "bazel-bin", "libopslib.so"),  # a source checkout
             os.path.join(here, "..", "..", "lib", "libopslib.so")]     # the GPU bundle
    system = ctypes.util.find_library("opslib")
    if system:
        found.append(system)
    return found


def load():
    tried = []
    for path in _candidates():
        if os.path.exists(path) or not os.path.dirname(path):
            try:
                return _declare(ctypes.CDLL(path)), os.path.realpath(path)
            except OSError as e:
                tried.append(f"{path}: {e}")
        else:
            tried.append(f"{path}: no such file")
    raise ImportError("opslib: cannot load libopslib.so (build it with `bazel build "
                      "//:libopslib.so`, or set OPSLIB_LIBRARY); tried: " + "; ".join(tried))


_P = ctypes.c_void_p
_T = TensorP
_S = ctypes.c_int  # ops_status
_SZ = ctypes.c_size_t
_SZP = ctypes.POINTER(ctypes.c_size_t)


def _op(lib, name, params_type, n_tensors):
    """Declares ops_<name>, its _workspace_size and _explain: (handle, params, tensors...),
    and the params' _init."""
    pp = ctypes.POINTER(params_type)
    head = [_P, pp] + [_T] * n_tensors
    for suffix, tail in (("", [_P, _SZ]), ("_workspace_size", [_SZP]), ("_explain", [ctypes.POINTER(Explain)])):
        fn = getattr(lib, f"ops_{name}{suffix}")
        fn.argtypes = head + tail
        fn.restype = _S
    getattr(lib, PARAMS_INIT.get(name, f"ops_{name}_params_init")).argtypes = [pp]


# ops whose params struct is shared (and so is its _init)
PARAMS_INIT = {
    "layernorm": "ops_norm_params_init",
    "rmsnorm": "ops_norm_params_init",
    "layernorm_backward": "ops_norm_backward_params_init",
    "rmsnorm_backward": "ops_norm_backward_params_init",
    "softmax_backward": "ops_softmax_params_init",
    "sdpa_backward": "ops_sdpa_params_init",
}

# op name -> (params struct, number of tensor arguments)
OPS = {
    "sdpa": (SdpaParams, 5),
    "gemm": (GemmParams, 3),
    "layernorm": (NormParams, 3),
    "rmsnorm": (NormParams, 3),
    "layernorm_backward": (NormBackwardParams, 6),
    "rmsnorm_backward": (NormBackwardParams, 5),
    "softmax": (SoftmaxParams, 2),
    "softmax_backward": (SoftmaxParams, 3),
    "sin_affine": (SinAffineParams, 2),
    "unary": (UnaryParams, 2),
    "binary": (BinaryParams, 3),
    "scale": (ScaleParams, 2),
    "dropout": (DropoutParams, 2),
    "reduce": (ReduceParams, 2),
    "rope": (RopeParams, 3),
    "kv_cache_append": (KvCacheAppendParams, 5),
    "sdpa_backward": (SdpaParams, 9),
}


def _declare(lib):
    cs = ctypes.c_char_p
    lib.ops_version.restype = ctypes.c_uint
    lib.ops_version_string.restype = cs
    lib.ops_status_name.restype = cs
    lib.ops_status_name.argtypes = [_S]
    lib.ops_last_error.restype = cs
    lib.ops_dtype_name.restype = cs
    lib.ops_dtype_name.argtypes = [ctypes.c_int]
    lib.ops_tensor_init.restype = _S
    lib.ops_tensor_init.argtypes = [_T, _P, ctypes.c_int, Device, ctypes.c_int,
                                    ctypes.POINTER(ctypes.c_int64), ctypes.POINTER(ctypes.c_int64)]
    lib.ops_tensor_from_dlpack.restype = _S
    lib.ops_tensor_from_dlpack.argtypes = [_P, _T]
    lib.ops_handle_create.restype = _S
    lib.ops_handle_create.argtypes = [ctypes.POINTER(_P), Device]
    lib.ops_handle_create_virtual.restype = _S
    lib.ops_handle_create_virtual.argtypes = [ctypes.POINTER(_P), ctypes.POINTER(DeviceInfo)]
    lib.ops_device_info_for_sm.restype = _S
    lib.ops_device_info_for_sm.argtypes = [ctypes.c_int, ctypes.POINTER(DeviceInfo)]
    lib.ops_handle_destroy.restype = _S
    lib.ops_handle_destroy.argtypes = [_P]
    lib.ops_handle_set_stream.restype = _S
    lib.ops_handle_set_stream.argtypes = [_P, _P]
    lib.ops_handle_set_math_mode.restype = _S
    lib.ops_handle_set_math_mode.argtypes = [_P, ctypes.c_int]
    lib.ops_handle_set_deterministic.restype = _S
    lib.ops_handle_set_deterministic.argtypes = [_P, ctypes.c_int]
    lib.ops_handle_pin_kernel.restype = _S
    lib.ops_handle_pin_kernel.argtypes = [_P, cs]
    lib.ops_handle_set_autotune.restype = _S
    lib.ops_handle_set_autotune.argtypes = [_P, ctypes.c_int]
    lib.ops_handle_set_tune_cache.restype = _S
    lib.ops_handle_set_tune_cache.argtypes = [_P, cs]
    lib.ops_handle_save_tune_cache.restype = _S
    lib.ops_handle_save_tune_cache.argtypes = [_P]
    lib.ops_choice_name.restype = cs
    lib.ops_choice_name.argtypes = [ctypes.c_int]
    lib.ops_handle_get_device_info.restype = _S
    lib.ops_handle_get_device_info.argtypes = [_P, ctypes.POINTER(DeviceInfo)]
    lib.ops_cuda_device_count.restype = ctypes.c_int
    lib.ops_kernel_count.restype = ctypes.c_int
    lib.ops_kernel_info_at.restype = _S
    lib.ops_kernel_info_at.argtypes = [ctypes.c_int, ctypes.POINTER(KernelInfo)]
    lib.ops_kernel_info_by_name.restype = _S
    lib.ops_kernel_info_by_name.argtypes = [cs, ctypes.POINTER(KernelInfo)]
    lib.ops_kernel_role_count.restype = ctypes.c_int
    lib.ops_kernel_role_count.argtypes = [cs]
    lib.ops_kernel_role.restype = _S
    lib.ops_kernel_role.argtypes = [cs, ctypes.c_int, ctypes.POINTER(WarpRole)]
    lib.ops_op_name.restype = cs
    lib.ops_op_name.argtypes = [ctypes.c_int]
    lib.ops_reason_name.restype = cs
    lib.ops_reason_name.argtypes = [ctypes.c_int]
    for fn in (lib.ops_explain_to_text, lib.ops_explain_to_json):
        fn.restype = _SZ
        fn.argtypes = [ctypes.POINTER(Explain), ctypes.c_char_p, _SZ]
    for name, (params, n) in OPS.items():
        _op(lib, name, params, n)
    return lib
