"""Any array that speaks DLPack (torch, CuPy, JAX, NumPy >= 1.22...) as (pointer, dtype,
shape, strides, device), read from the producer's capsule with ctypes.  torch tensors take a
shorter road (data_ptr, stride) that needs no capsule."""

from __future__ import annotations

import ctypes
import sys

from . import _structs

# DLDeviceType values this package maps to a backend
DL_CPU, DL_CUDA, DL_CUDA_HOST, DL_ROCM = 1, 2, 3, 10
DEVICE_NAMES = {DL_CPU: "cpu", DL_CUDA: "cuda", DL_CUDA_HOST: "cpu", DL_ROCM: "rocm"}


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int), ("device_id", ctypes.c_int)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", _DLDevice),
        ("ndim", ctypes.c_int),
        ("dtype", _DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


class _DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p),
                ("deleter", ctypes.c_void_p)]


_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.restype = ctypes.c_void_p
_capsule_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]

# (DLDataTypeCode, bits) -> portssm_dtype
_DTYPES = {(2, 32): _structs.F32, (2, 16): _structs.F16, (4, 16): _structs.BF16,
           (0, 32): _structs.I32}


class View:
    """What an op needs of one array.  ``keep`` holds the producer's capsule (and with it the
    memory) for as long as the view lives."""

    __slots__ = ("ptr", "dtype", "shape", "stride", "device_type", "device_id", "keep")

    def __init__(self, ptr, dtype, shape, stride, device_type, device_id, keep=None):
        self.ptr, self.dtype, self.shape, self.stride = ptr, dtype, shape, stride
        self.device_type, self.device_id, self.keep = device_type, device_id, keep

    @property
    def nbytes(self) -> int:
        n = _structs.DTYPE_SIZES.get(self.dtype, 1)
        for s in self.shape:
            n *= s
        return n

    def device_label(self) -> str:
        return "%s:%d" % (DEVICE_NAMES.get(self.device_type, "device type %d" % self.device_type),
                          self.device_id)


def _torch_view(t, name):
    torch = sys.modules["torch"]
    from .torch_dtypes import code_of  # noqa: WPS433 - only when torch is present

    code = code_of(t.dtype)
    if code is None:
        raise TypeError("'%s' has dtype %s; portssm takes float32, float16, bfloat16 (and int32 "
                        "for index tensors)" % (name, t.dtype))
    dtype_, did = _torch_device(t, name)
    return View(t.data_ptr(), code, tuple(t.shape), tuple(t.stride()), dtype_, did, t)


def _torch_device(t, name):
    """(DLPack device type, device id) of a torch tensor portssm can run on."""
    torch = sys.modules["torch"]
    dev = t.device
    if dev.type == "cpu":
        return DL_CPU, 0
    if dev.type == "cuda":
        return (DL_ROCM if torch.version.hip else DL_CUDA), dev.index or 0
    raise ValueError("'%s' is on %s; portssm runs on cpu, cuda and rocm tensors" % (name, dev))


def view(obj, name: str, stream=None) -> View:
    """The View of `obj`, argument `name` of an op (named in every error)."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(obj, torch.Tensor):
        return _torch_view(obj, name)
    if not hasattr(obj, "__dlpack__"):
        raise TypeError("'%s' is a %s, not an array: portssm takes objects with __dlpack__ "
                        "(torch, CuPy, JAX, NumPy...)" % (name, type(obj).__name__))
    device_type, device_id = obj.__dlpack_device__()
    if device_type in (DL_CUDA, DL_ROCM):
        # the producer orders its work before our stream (1: the legacy default stream)
        capsule = obj.__dlpack__(stream=stream if stream else 1)
    else:
        capsule = obj.__dlpack__()
    managed = _DLManagedTensor.from_address(_capsule_pointer(capsule, b"dltensor"))
    t = managed.dl_tensor
    key = (t.dtype.code, t.dtype.bits)
    if t.dtype.lanes != 1 or key not in _DTYPES:
        raise TypeError("'%s' has DLPack dtype (code %d, %d bits, %d lanes); portssm takes float32, "
                        "float16, bfloat16 and int32" % (name, key[0], key[1], t.dtype.lanes))
    ndim = t.ndim
    shape = tuple(t.shape[i] for i in range(ndim))
    if t.strides:
        stride = tuple(t.strides[i] for i in range(ndim))
    else:  # compact row-major
        acc, rev = 1, []
        for s in reversed(shape):
            rev.append(acc)
            acc *= max(s, 1)
        stride = tuple(reversed(rev))
    ptr = (t.data or 0) + t.byte_offset
    return View(ptr, _DTYPES[key], shape, stride, t.device.device_type, t.device.device_id, capsule)


def workspace_view(obj, stream=None) -> View:
    """An op's scratch memory: any array of any element type (a uint8 buffer is the natural one)
    whose elements are dense, as one run of bytes (View.dtype None, shape (bytes,))."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(obj, torch.Tensor):
        if not obj.is_contiguous():
            raise ValueError("'workspace' must be contiguous (one run of bytes), got strides %s"
                             % (tuple(obj.stride()),))
        v = _torch_device(obj, "workspace")
        return View(obj.data_ptr(), None, (obj.numel() * obj.element_size(),), (1,), v[0], v[1],
                    obj)
    if not hasattr(obj, "__dlpack__"):
        raise TypeError("'workspace' is a %s, not an array: portssm takes objects with __dlpack__ "
                        "(torch, CuPy, JAX, NumPy...)" % type(obj).__name__)
    device_type, _ = obj.__dlpack_device__()
    capsule = obj.__dlpack__(stream=stream if stream else 1) if device_type in (
        DL_CUDA, DL_ROCM) else obj.__dlpack__()
    t = _DLManagedTensor.from_address(_capsule_pointer(capsule, b"dltensor")).dl_tensor
    shape = [t.shape[i] for i in range(t.ndim)]
    acc = 1
    for i in reversed(range(t.ndim)):
        if t.strides and shape[i] > 1 and t.strides[i] != acc:
            raise ValueError("'workspace' must be contiguous (one run of bytes)")
        acc *= shape[i]
    nbytes = acc * (t.dtype.bits * t.dtype.lanes // 8)
    return View((t.data or 0) + t.byte_offset, None, (nbytes,), (1,), t.device.device_type,
                t.device.device_id, capsule)
