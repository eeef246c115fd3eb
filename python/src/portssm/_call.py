"""Building an args struct and calling an op, with as little Python per call as possible: the
struct is a zeroed ctypes buffer (every optional tensor absent, every flag default), each
tensor goes in with one struct.pack_into at its field's offset, taken from the ctypes
declarations that _library checked against the library.

FASTCALL is the compiled module portssm._fastcall (python/ext/fastcall.c), which does the same
packing and the call in C for the torch decode ops (and the packing alone for the SSD ops), or
None (FASTCALL_STATUS says why); the
package works the same without it, on the Python path.  It is looked for next to the loaded
libportssm (portssm/lib when installed, the CMake build's library directory in developer
mode), so it always comes from the same build as the library.  PORTSSM_NO_EXTENSION=1 leaves
it unloaded."""

from __future__ import annotations

import ctypes
import importlib.machinery
import importlib.util
import os
import struct

from . import _structs
from ._library import check, lib, library_path

# A portssm_tensor of n dimensions: data, dtype, ndim, shape[4], stride[4] (unused dims zero).
_TENSOR = [None] + [
    struct.Struct("<Qii%dq%dx%dq%dx" % (n, 8 * (4 - n), n, 8 * (4 - n)))
    for n in range(1, _structs.MAX_DIMS + 1)
]
_I32 = struct.Struct("<i")
_I64 = struct.Struct("<q")
_F32 = struct.Struct("<f")
_WORKSPACE = struct.Struct("<QQ")


class OpSpec:
    """Where each field of an op's args struct lives, and the C function."""

    __slots__ = ("name", "size", "offset", "fn", "workspace_fn", "buffer_type")

    def __init__(self, name: str):
        args = _structs.ARGS[name]
        self.name = name
        self.size = ctypes.sizeof(args)
        self.offset = {fname: getattr(args, fname).offset for fname, _ in args._fields_}
        self.fn = getattr(lib, "portssm_" + name)
        self.workspace_fn = getattr(lib, "portssm_%s_workspace_size" % name, None)
        # a zeroed, 8-byte aligned array of the struct's size: instantiating it costs a third
        # of create_string_buffer, and a fresh one per call keeps calls reentrant
        self.buffer_type = ctypes.c_uint64 * ((self.size + 7) // 8)


SPECS = {name: OpSpec(name) for name in _structs.OPS}


def new_args(spec: OpSpec):
    return spec.buffer_type()


def put_tensor(buf, offset: int, ptr: int, dtype: int, shape, stride) -> None:
    n = len(shape)
    if not 1 <= n <= _structs.MAX_DIMS:
        # a tensor every op rejects, with the argument named by the library's validation
        _I32.pack_into(buf, offset + 8, dtype)
        struct.pack_into("<Q", buf, offset, ptr)
        return
    _TENSOR[n].pack_into(buf, offset, ptr, dtype, n, *shape, *stride)


def put_int(buf, offset: int, value: int) -> None:
    _I32.pack_into(buf, offset, value)


def put_i64(buf, offset: int, value: int) -> None:
    _I64.pack_into(buf, offset, value)


def put_float(buf, offset: int, value: float) -> None:
    _F32.pack_into(buf, offset, value)


def put_workspace(buf, offset: int, ptr: int, nbytes: int) -> None:
    _WORKSPACE.pack_into(buf, offset, ptr, nbytes)


def call(spec: OpSpec, ctx, buf) -> None:
    status = spec.fn(ctx.handle, buf)
    if status:
        check(status, ctx.handle, spec.name)


def workspace_size(spec: OpSpec, ctx, buf) -> int:
    nbytes = ctypes.c_size_t()
    check(spec.workspace_fn(ctx.handle, buf, ctypes.byref(nbytes)), ctx.handle, spec.name)
    return nbytes.value


def checkpoint_shape(ctx, buf, op="selective_scan"):
    """The shape of the checkpoints of op's forward ("selective_scan" or "ssd_chunk_scan")
    for the args in buf."""
    shape = (ctypes.c_int64 * 4)()
    name = "%s_checkpoint_shape" % op
    check(getattr(lib, "portssm_" + name)(ctx.handle, buf, shape), ctx.handle, name)
    return tuple(shape)


FASTCALL_FILE = "_fastcall.abi3.so"


def _load_fastcall():
    """(module or None, a line saying which file was loaded or why none was)."""
    if os.environ.get("PORTSSM_NO_EXTENSION", "") not in ("", "0"):
        return None, "not loaded: PORTSSM_NO_EXTENSION is set"
    if ".abi3.so" not in importlib.machinery.EXTENSION_SUFFIXES:
        # PyPy, a free-threaded CPython: no abi3 modules
        return None, "not loaded: this interpreter loads no abi3 extension modules"
    path = os.path.join(os.path.dirname(library_path()), FASTCALL_FILE)
    if not os.path.exists(path):
        return None, "not built: no %s" % path
    try:
        spec = importlib.util.spec_from_file_location("portssm._fastcall", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    except (ImportError, OSError) as exc:
        return None, "not loaded: %s: %s" % (path, exc)
    t = _structs.Tensor
    mine = (ctypes.sizeof(t), t.data.offset, t.dtype.offset, t.ndim.offset, t.shape.offset,
            t.stride.offset, _structs.MAX_DIMS)
    if tuple(module.TENSOR_LAYOUT) != mine:
        return None, ("not used: %s was built with portssm_tensor laid out as %s, the library "
                      "has %s" % (path, tuple(module.TENSOR_LAYOUT), mine))
    return module, "loaded: " + path


FASTCALL, FASTCALL_STATUS = _load_fastcall()


def address_of(fn) -> int:
    """The address of a ctypes function, for FASTCALL."""
    return ctypes.cast(fn, ctypes.c_void_p).value
