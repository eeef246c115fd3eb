"""The package's link to libportssm: the struct layouts, the symbols of every shipped shared
object, backend strings, capability, and the framework-neutral ops on NumPy arrays."""

import ctypes
import os
import shutil
import subprocess

import numpy as np
import pytest

import portssm
from portssm import _call, _library, _structs, errors, ops


def test_layouts_match_the_library():
    _library.check_layouts()  # raises on any difference
    assert ctypes.sizeof(_structs.Tensor) == 80


def test_layout_drift_fails_loudly(monkeypatch):
    class Shifted(ctypes.Structure):  # a field the library does not have
        _fields_ = [("data", ctypes.c_void_p), ("ndim", ctypes.c_int32), ("dtype", ctypes.c_int),
                    ("shape", ctypes.c_int64 * 4), ("stride", ctypes.c_int64 * 4)]

    monkeypatch.setitem(_structs.STRUCTS, "portssm_tensor", Shifted)
    with pytest.raises(_library.LayoutMismatch, match="portssm_tensor field 1 is 'dtype'"):
        _library.check_layouts()


def _shipped_objects():
    lib_dir = os.path.dirname(portssm.library_path())
    return sorted(os.path.join(lib_dir, f) for f in os.listdir(lib_dir)
                  if ".so" in f and not f.endswith(".py"))


@pytest.mark.skipif(shutil.which("nm") is None or shutil.which("readelf") is None,
                    reason="binutils (nm, readelf) not installed")
def test_no_torch_or_cxx_symbols():
    """No shipped .so (libportssm, its GPU modules, the CPython extension) needs torch, c10 or
    the C++ standard library: not as a dependency and not as an undefined symbol."""
    objects = _shipped_objects()
    assert any(os.path.basename(o).startswith("libportssm.so") for o in objects), objects
    if _call.FASTCALL is not None:  # the CPython extension is among them (libpython included
        # in what no object may need: an abi3 module takes its symbols from the interpreter)
        assert os.path.realpath(_call.FASTCALL.__file__) in map(os.path.realpath, objects)
    for path in objects:
        undefined = subprocess.run(["nm", "-D", "--undefined-only", path], check=True,
                                   capture_output=True, text=True).stdout
        for line in undefined.splitlines():
            sym = line.split()[-1]
            name, _, version = sym.partition("@")
            cxx = (name.startswith("_Z") or "GLIBCXX" in version or "CXXABI" in version
                   or (name.startswith(("__cxa_", "__gxx_")) and not version.startswith("GLIBC_")))
            assert not cxx and "c10" not in name and "torch" not in name, (path, sym)
        dynamic = subprocess.run(["readelf", "-d", path], check=True, capture_output=True,
                                 text=True).stdout
        for line in dynamic.splitlines():
            if "(NEEDED)" in line:
                assert not any(k in line for k in ("libstdc++", "libc++", "torch", "c10",
                                                   "libpython")), (path, line)


def test_backend_strings():
    assert portssm.parse_backend("cuda:1") == (_structs.BACKEND_CUDA, 1)
    assert portssm.parse_backend("sim64") == (_structs.BACKEND_SIM, 1)
    assert portssm.parse_backend("cpu") == (_structs.BACKEND_CPU, -1)
    with pytest.raises(errors.InvalidArgumentError, match="expected cpu, cuda"):
        portssm.parse_backend("gpu")
    with pytest.raises(ValueError, match="takes no device suffix"):
        portssm.parse_backend("sim64:1")


def test_capability():
    assert ops.supports("selective_scan_bwd", "cpu")
    assert ops.supports("causal_conv1d_update", "sim32")
    ok, count, reason = portssm.probe("cpu")
    assert ok and count >= 1


def test_error_classes():
    assert issubclass(errors.InvalidArgumentError, ValueError)
    assert issubclass(errors.UnsupportedError, NotImplementedError)
    assert issubclass(errors.OutOfMemoryError, MemoryError)
    for code, cls in errors.BY_CODE.items():
        name = _library.lib.portssm_status_name(code).decode()
        assert cls.status == name


# ---------------------------------------------------------------- portssm.ops on NumPy


def _conv_np(x, w):
    B, D, L = x.shape
    W = w.shape[1]
    xp = np.concatenate([np.zeros((B, D, W - 1)), x.astype(np.float64)], axis=-1)
    return sum(w[None, :, k, None] * xp[:, :, k:k + L] for k in range(W))


@pytest.mark.parametrize("backend", [None, "cpu", "sim32", "sim64"])
def test_ops_conv_numpy(backend):
    rng = np.random.default_rng(int.from_bytes(os.urandom(4), "little"))
    x = rng.standard_normal((2, 5, 17)).astype(np.float32)
    w = rng.standard_normal((5, 4)).astype(np.float32)
    out = np.full_like(x, np.nan)
    ops.causal_conv1d_fwd(x, w, out, backend=backend)
    np.testing.assert_allclose(out, _conv_np(x, w), rtol=6e-4, atol=2e-3)
    # channel-last view, any strides
    xt = np.ascontiguousarray(x.transpose(0, 2, 1)).transpose(0, 2, 1)
    out2 = np.full_like(x, np.nan)
    ops.causal_conv1d_fwd(xt, w, out2, backend=backend)
    np.testing.assert_allclose(out2, out, rtol=1e-5, atol=1e-6)


def test_ops_scan_roundtrip_numpy():
    """selective_scan_fwd/bwd and the queries through portssm.ops, checkpoints included."""
    rng = np.random.default_rng(int.from_bytes(os.urandom(4), "little"))
    B, D, N, L = 1, 3, 4, 300
    u = rng.standard_normal((B, D, L)).astype(np.float32)
    delta = rng.uniform(0, 0.5, (B, D, L)).astype(np.float32)
    A = -rng.uniform(0.1, 1, (D, N)).astype(np.float32)
    Bm = rng.standard_normal((B, 1, N, L)).astype(np.float32)
    Cm = rng.standard_normal((B, 1, N, L)).astype(np.float32)
    out = np.full_like(u, np.nan)
    shape = ops.selective_scan_checkpoint_shape(u, delta, A, Bm, Cm, out)
    assert shape[:2] == (B, D) and shape[3] == N and shape[2] >= 1
    ckpt = np.full(shape, np.nan, np.float32)
    ops.selective_scan_fwd(u, delta, A, Bm, Cm, out, checkpoints=ckpt)
    assert np.isfinite(out).all() and np.isfinite(ckpt).all()
    dout = rng.standard_normal(u.shape).astype(np.float32)
    grads = [np.full(a.shape, np.nan, np.float32) for a in (u, delta, A, Bm, Cm)]
    nbytes = ops.selective_scan_bwd_workspace_size(u, delta, A, Bm, Cm, dout, *grads)
    ws = np.empty(max(nbytes, 1), np.uint8) if nbytes else None
    ops.selective_scan_bwd(u, delta, A, Bm, Cm, dout, *grads, checkpoints=ckpt, workspace=ws)
    grads2 = [np.full(a.shape, np.nan, np.float32) for a in (u, delta, A, Bm, Cm)]
    ops.selective_scan_bwd(u, delta, A, Bm, Cm, dout, *grads2)
    for g, g2 in zip(grads, grads2):  # with and without checkpoints: the same up to rounding
        np.testing.assert_allclose(g, g2, rtol=1e-4, atol=1e-5)


def test_ops_workspace_is_bytes_of_any_dtype():
    """A workspace is scratch bytes: a uint8 (or any other dtype's) contiguous array of at least
    the queried size, given to an op that needs one (the sim's scan backward does); a strided
    one is refused by name."""
    rng = np.random.default_rng(int.from_bytes(os.urandom(4), "little"))
    B, D, N, L = 1, 2, 4, 40
    u = rng.standard_normal((B, D, L)).astype(np.float32)
    delta = rng.uniform(0, 0.5, (B, D, L)).astype(np.float32)
    A = -rng.uniform(0.1, 1, (D, N)).astype(np.float32)
    Bm, Cm = (rng.standard_normal((B, 1, N, L)).astype(np.float32) for _ in range(2))
    dout = rng.standard_normal(u.shape).astype(np.float32)

    def grads():
        return [np.full(a.shape, np.nan, np.float32) for a in (u, delta, A, Bm, Cm)]

    nbytes = ops.selective_scan_bwd_workspace_size(u, delta, A, Bm, Cm, dout, *grads(),
                                                   backend="sim32")
    assert nbytes > 0
    base = grads()
    ops.selective_scan_bwd(u, delta, A, Bm, Cm, dout, *base, backend="sim32")
    def aligned(n, dtype, shape=None):  # workspaces start on 256 bytes (portssm.h)
        raw = np.empty(n * np.dtype(dtype).itemsize + 256, np.uint8)
        skip = (-raw.ctypes.data) % 256
        arr = raw[skip:skip + n * np.dtype(dtype).itemsize].view(dtype)
        return arr.reshape(shape) if shape else arr

    for ws in (aligned(nbytes, np.uint8), aligned((nbytes + 3) // 4, np.float32),
               aligned(2 * nbytes, np.int8, (2, nbytes))):
        got = grads()
        ops.selective_scan_bwd(u, delta, A, Bm, Cm, dout, *got, workspace=ws, backend="sim32")
        for g, g0 in zip(got, base):
            np.testing.assert_array_equal(g, g0)  # deterministic, whatever scratch it had
    got = grads()
    with pytest.raises(ValueError, match="'workspace' must be contiguous"):
        ops.selective_scan_bwd(u, delta, A, Bm, Cm, dout, *got,
                               workspace=aligned(2 * nbytes, np.uint8, (nbytes, 2))[:, 0],
                               backend="sim32")
    assert all(np.isnan(g).all() for g in got)


def test_ops_errors_name_the_argument_and_write_nothing():
    x = np.random.standard_normal((2, 5, 9)).astype(np.float32)
    w = np.random.standard_normal((4, 4)).astype(np.float32)  # D mismatch
    out = np.full_like(x, 7.0)
    with pytest.raises(errors.InvalidArgumentError, match="'weight'"):
        ops.causal_conv1d_fwd(x, w, out)
    assert (out == 7.0).all()
    with pytest.raises(TypeError, match="'x'"):
        ops.causal_conv1d_fwd(x.astype(np.float64), w, out)
    with pytest.raises(TypeError, match="'weight'"):
        ops.causal_conv1d_fwd(x, [[1.0]], out)
    with pytest.raises(ValueError, match="activation"):
        ops.causal_conv1d_fwd(x, w, out, activation="gelu")
    with pytest.raises(ValueError, match="needs its device's memory"):
        ops.causal_conv1d_fwd(x, w, out, backend="cuda:0")
    with pytest.raises(ValueError, match="not a device"):
        ops.causal_conv1d_fwd(x, w, out, backend="auto")
    assert (out == 7.0).all()
