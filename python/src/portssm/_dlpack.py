"""Any array that speaks DLPack (torch, CuPy, JAX, NumPy >= 1.22...) as (pointer, dtype,
shape, strides, device), read from the producer's capsule with ctypes.  torch tensors take a
shorter road (data_ptr, stride) that needs no capsule.

Read-only arrays (a NumPy array with writeable=False, np.broadcast_to's...) are taken as inputs
and refused as outputs, naming the argument: asked for DLPack 1.0 (max_version), a producer
says so in its capsule's flags; NumPy before 2.1, which knows no max_version and refuses to
export such an array at all (BufferError), is read through __array_interface__ instead."""

from __future__ import annotations

import ctypes
import sys

from . import _structs
from .errors import DtypeError, InvalidArgumentError

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


class _DLManagedTensorVersioned(ctypes.Structure):  # DLPack >= 1.0
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32),
                ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p),
                ("flags", ctypes.c_uint64), ("dl_tensor", _DLTensor)]


_FLAG_READ_ONLY = 1  # DLPACK_FLAG_BITMASK_READ_ONLY
_VERSIONED = b"dltensor_versioned"


_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.restype = ctypes.c_void_p
_capsule_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_capsule_is_valid = ctypes.pythonapi.PyCapsule_IsValid
_capsule_is_valid.restype = ctypes.c_int
_capsule_is_valid.argtypes = [ctypes.py_object, ctypes.c_char_p]

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
        raise DtypeError("'%s' has dtype %s; portssm takes float32, float16, bfloat16 (and int32 "
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
    raise InvalidArgumentError("'%s' is on %s; portssm runs on cpu, cuda and rocm tensors"
                               % (name, dev))


def _read_only(name):
    return InvalidArgumentError("'%s' is read-only, but the op writes into it: give a writable "
                                "array" % name)


def _export(obj, name, stream, writes):
    """(capsule, its DLTensor) of obj; raises naming `name` where obj is read-only and the op
    `writes` into it.  Returns (None, None) for a read-only array that only __array_interface__
    can describe (NumPy < 2.1)."""
    device_type, _ = obj.__dlpack_device__()
    kwargs = {}
    if device_type in (DL_CUDA, DL_ROCM):
        # the producer orders its work before our stream (1: the legacy default stream)
        kwargs["stream"] = stream if stream else 1
    try:
        capsule = obj.__dlpack__(max_version=(1, 0), **kwargs)
    except TypeError:  # a producer before DLPack 1.0: no max_version
        try:
            capsule = obj.__dlpack__(**kwargs)
        except BufferError:
            # NumPy < 2.1 refuses to export a read-only array through the old protocol
            if getattr(obj, "__array_interface__", {}).get("data", (0, False))[1]:
                if writes:
                    raise _read_only(name) from None
                return None, None
            raise
    if _capsule_is_valid(capsule, _VERSIONED):
        managed = _DLManagedTensorVersioned.from_address(_capsule_pointer(capsule, _VERSIONED))
        if writes and managed.flags & _FLAG_READ_ONLY:
            raise _read_only(name)
        return capsule, managed.dl_tensor
    return capsule, _DLManagedTensor.from_address(_capsule_pointer(capsule, b"dltensor")).dl_tensor


_TYPESTRS = {"<f4": _structs.F32, "<f2": _structs.F16, "<i4": _structs.I32}


def _interface_view(obj, name):
    """The View of a read-only host array through __array_interface__ (NumPy < 2.1, whose
    DLPack export refuses read-only arrays)."""
    ai = obj.__array_interface__
    code = _TYPESTRS.get(ai["typestr"])
    if code is None:
        raise DtypeError("'%s' has dtype %s; portssm takes float32, float16, bfloat16 and int32"
                         % (name, ai["typestr"]))
    shape = tuple(ai["shape"])
    size = _structs.DTYPE_SIZES[code]
    if ai.get("strides") is None:
        acc, rev = 1, []
        for s in reversed(shape):
            rev.append(acc)
            acc *= max(s, 1)
        stride = tuple(reversed(rev))
    else:
        stride = tuple(s // size for s in ai["strides"])
    return View(ai["data"][0] or 0, code, shape, stride, DL_CPU, 0, obj)


def view(obj, name: str, stream=None, writes: bool = False) -> View:
    """The View of `obj`, argument `name` of an op (named in every error); `writes`: the op
    writes into it (a read-only array is refused then)."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(obj, torch.Tensor):
        return _torch_view(obj, name)
    if not hasattr(obj, "__dlpack__"):
        raise TypeError("'%s' is a %s, not an array: portssm takes objects with __dlpack__ "
                        "(torch, CuPy, JAX, NumPy...)" % (name, type(obj).__name__))
    capsule, t = _export(obj, name, stream, writes)
    if t is None:
        return _interface_view(obj, name)
    key = (t.dtype.code, t.dtype.bits)
    if t.dtype.lanes != 1 or key not in _DTYPES:
        raise DtypeError("'%s' has DLPack dtype (code %d, %d bits, %d lanes); portssm takes "
                         "float32, float16, bfloat16 and int32"
                         % (name, key[0], key[1], t.dtype.lanes))
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
            raise InvalidArgumentError("'workspace' must be contiguous (one run of bytes), got strides %s"
                             % (tuple(obj.stride()),))
        v = _torch_device(obj, "workspace")
        return View(obj.data_ptr(), None, (obj.numel() * obj.element_size(),), (1,), v[0], v[1],
                    obj)
    if not hasattr(obj, "__dlpack__"):
        raise TypeError("'workspace' is a %s, not an array: portssm takes objects with __dlpack__ "
                        "(torch, CuPy, JAX, NumPy...)" % type(obj).__name__)
    capsule, t = _export(obj, "workspace", stream, True)
    shape = [t.shape[i] for i in range(t.ndim)]
    acc = 1
    for i in reversed(range(t.ndim)):
        if t.strides and shape[i] > 1 and t.strides[i] != acc:
            raise InvalidArgumentError("'workspace' must be contiguous (one run of bytes)")
        acc *= shape[i]
    nbytes = acc * (t.dtype.bits * t.dtype.lanes // 8)
    return View((t.data or 0) + t.byte_offset, None, (nbytes,), (1,), t.device.device_type,
                t.device.device_id, capsule)
