"""The per-call path in C (opslib._ext) on the host alone: it loads and binds where it was
built, and a call it does not take (NumPy arrays here) reaches the Python function
unchanged, with the same result or the same error. Without the compiled module the tests
skip, saying why, unless OPSLIB_REQUIRE_EXT=1 (set by the Bazel test and the GPU bundle,
which build it), where its absence fails. test_native_torch.py covers CUDA tensors."""
import os

import numpy as np
import pytest

import opslib
from opslib import _ops

EXT = opslib.extension()
REQUIRED = os.environ.get("OPSLIB_REQUIRE_EXT", "") not in ("", "0")


def test_the_extension_is_loaded_where_it_was_built():
    if not REQUIRED and not EXT["loaded"]:
        pytest.skip(f"opslib._ext not in use: {EXT['reason']}")
    assert EXT["loaded"], EXT["reason"]
    assert opslib.rmsnorm is not _ops.rmsnorm  # the C function stands in front


if not EXT["loaded"]:
    pytest.skip(f"opslib._ext not in use: {EXT['reason']}", allow_module_level=True)


def counts():
    e = opslib.extension()
    return e["fast_calls"], e["python_calls"]


def test_numpy_calls_go_to_python_unchanged():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((5, 33)).astype(np.float32)
    w = rng.standard_normal(33).astype(np.float32)
    fast, slow = counts()
    assert np.array_equal(opslib.rmsnorm(x, w, eps=1e-6), _ops.rmsnorm(x, w, eps=1e-6))
    assert counts() == (fast, slow + 1)
    with pytest.raises(opslib.OpsError) as c_err:
        opslib.softmax(x.astype(np.int32))
    with pytest.raises(opslib.OpsError) as py_err:
        _ops.softmax(x.astype(np.int32))
    assert str(c_err.value) == str(py_err.value)
    with pytest.raises(TypeError, match="unexpected keyword"):
        opslib.gemm(x, x.T, bogus=1)
    # explain is the Python function's, whatever the call
    assert opslib.explain("rmsnorm", x, w).chosen
