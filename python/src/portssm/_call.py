"""Building an args struct and calling an op, with as little Python per call as possible: the
struct is a zeroed ctypes buffer (every optional tensor absent, every flag default), each
tensor goes in with one struct.pack_into at its field's offset, taken from the ctypes
declarations that _library checked against the library."""

from __future__ import annotations

import ctypes
import struct

from . import _structs
from ._library import check, lib

# A portssm_tensor of n dimensions: data, dtype, ndim, shape[4], stride[4] (unused dims zero).
_TENSOR = [None] + [
    struct.Struct("<Qii%dq%dx%dq%dx" % (n, 8 * (4 - n), n, 8 * (4 - n)))
    for n in range(1, _structs.MAX_DIMS + 1)
]
_I32 = struct.Struct("<i")
_WORKSPACE = struct.Struct("<QQ")


class OpSpec:
    """Where each field of an op's args struct lives, and the C function."""

    __slots__ = ("name", "size", "offset", "fn", "workspace_fn")

    def __init__(self, name: str):
        args = _structs.ARGS[name]
        self.name = name
        self.size = ctypes.sizeof(args)
        self.offset = {fname: getattr(args, fname).offset for fname, _ in args._fields_}
        self.fn = getattr(lib, "portssm_" + name)
        self.workspace_fn = getattr(lib, "portssm_%s_workspace_size" % name, None)


SPECS = {name: OpSpec(name) for name in _structs.OPS}


def new_args(spec: OpSpec):
    return ctypes.create_string_buffer(spec.size)


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


def checkpoint_shape(ctx, buf):
    shape = (ctypes.c_int64 * 4)()
    check(lib.portssm_selective_scan_checkpoint_shape(ctx.handle, buf, shape), ctx.handle,
          "selective_scan_checkpoint_shape")
    return tuple(shape)
