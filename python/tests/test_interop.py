"""The binding with the other DLPack producers on the GPU: CuPy arrays in and out (CuPy's
current stream), JAX arrays in (immutable: outputs go to an array the caller gives), and an
explicit stream= argument. Each part skips, saying why, where its framework or a CUDA
device is missing."""
import os

import numpy as np
import pytest

import opslib
import reference as ref

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")  # JAX: leave memory to the others

if opslib.cuda_device_count() == 0:
    pytest.skip("no CUDA device", allow_module_level=True)


def test_cupy_in_and_out_on_cupys_stream(rng):
    cupy = pytest.importorskip("cupy", reason="CuPy is not installed on this host")
    x = cupy.asarray(rng.standard_normal((300, 1500)).astype(np.float16))
    w = cupy.asarray(rng.standard_normal(1500).astype(np.float16))
    s = cupy.cuda.Stream(non_blocking=True)
    with s:
        y = opslib.layernorm(x, w)
        t = opslib.sum(x.astype(cupy.float32), axes=0)
    s.synchronize()
    assert isinstance(y, cupy.ndarray) and y.dtype == cupy.float16
    assert ref.rel_err(cupy.asnumpy(y), ref.layernorm(cupy.asnumpy(x), cupy.asnumpy(w))[0]) < 4e-3
    assert ref.rel_err(cupy.asnumpy(t), cupy.asnumpy(x).astype(np.float64).sum(0)) < 1e-5


def test_jax_arrays_as_inputs(rng):
    jax = pytest.importorskip("jax", reason="JAX is not installed on this host")
    torch = pytest.importorskip("torch", reason="the output array comes from torch")
    try:
        gpu = jax.devices("gpu")[0]
    except RuntimeError:
        pytest.skip("JAX has no GPU backend on this host")
    xh = rng.standard_normal((64, 1024)).astype(np.float32)
    x = jax.device_put(xh, gpu)
    out = torch.empty(64, 1024, device="cuda")
    opslib.softmax(x, scale=2.0, out=out)
    torch.cuda.synchronize()
    assert ref.rel_err(out.cpu().numpy(), ref.softmax(xh, 2.0)) < 1e-5
    with pytest.raises(TypeError, match="pass out="):
        opslib.softmax(x)


def test_explicit_stream_argument(rng):
    torch = pytest.importorskip("torch", reason="PyTorch is not installed on this host")
    s = torch.cuda.Stream()
    x = torch.randn(2048, 2048, device="cuda", dtype=torch.bfloat16)
    y = opslib.rmsnorm(x, torch.ones(2048, device="cuda", dtype=torch.bfloat16), stream=s)
    s.synchronize()
    xf = x.float().cpu().numpy()
    assert ref.rel_err(y.float().cpu().numpy(), ref.rmsnorm(xf, np.ones(2048))[0]) < 1e-2
