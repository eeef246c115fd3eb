"""Finding and loading libportssm, the prototypes of the C functions the package calls, and the
check of the ctypes struct declarations against the loaded library.

Where the library comes from, first match wins:
  1. PORTSSM_LIBRARY_DIR: a directory holding libportssm.so and its GPU modules, e.g. a CMake
     build tree's build/src (developer mode: PYTHONPATH=python/src PORTSSM_LIBRARY_DIR=build/src);
  2. the copy installed inside this package (portssm/lib, put there by `pip install .` from the
     repository).
The GPU modules are loaded by libportssm itself from its own directory, so they follow it.
"""

from __future__ import annotations

import ctypes
import os
import sys

from . import _structs
from .errors import error_for

_LIB_NAMES = ("libportssm.so", "libportssm.so.0", "libportssm.dylib")


def _candidates():
    env = os.environ.get("PORTSSM_LIBRARY_DIR")
    if env:
        return [("PORTSSM_LIBRARY_DIR", env)]
    here = os.path.dirname(os.path.abspath(__file__))
    return [("the package", os.path.join(here, "lib"))]


def library_path() -> str:
    """The file of libportssm this process uses (or would use)."""
    tried = []
    for origin, directory in _candidates():
        for name in _LIB_NAMES:
            path = os.path.join(directory, name)
            if os.path.exists(path):
                return path
            tried.append(path)
    where = ", ".join(tried)
    raise ImportError(
        "portssm: libportssm not found (looked for %s). Install the package with "
        "`pip install .` from the repository, or point PORTSSM_LIBRARY_DIR at a CMake "
        "build's library directory (e.g. build/src)." % where
    )


def _load():
    path = library_path()
    try:
        return ctypes.CDLL(path)
    except OSError as exc:  # pragma: no cover - a broken installation
        raise ImportError("portssm: cannot load %s: %s" % (path, exc)) from exc


lib = _load()

c_status = ctypes.c_int
_vp = ctypes.c_void_p

_PROTOTYPES = {
    "portssm_version_string": (ctypes.c_char_p, []),
    "portssm_version": (ctypes.c_int32, []),
    "portssm_status_name": (ctypes.c_char_p, [ctypes.c_int]),
    "portssm_last_error": (ctypes.c_char_p, [_vp]),
    "portssm_backend_name": (ctypes.c_char_p, [ctypes.c_int]),
    "portssm_backend_parse": (c_status, [ctypes.c_char_p, ctypes.POINTER(ctypes.c_int),
                                         ctypes.POINTER(ctypes.c_int32)]),
    "portssm_backend_probe": (c_status, [ctypes.c_int, ctypes.POINTER(ctypes.c_int32),
                                         ctypes.POINTER(ctypes.c_char_p)]),
    "portssm_device_get_info": (c_status, [ctypes.c_int, ctypes.c_int32,
                                           ctypes.POINTER(_structs.DeviceInfo)]),
    "portssm_create": (c_status, [ctypes.POINTER(_vp), ctypes.c_int, ctypes.c_int32]),
    "portssm_destroy": (None, [_vp]),
    "portssm_get_backend": (ctypes.c_int, [_vp]),
    "portssm_get_device": (ctypes.c_int32, [_vp]),
    "portssm_selection_report": (ctypes.c_char_p, [_vp]),
    "portssm_set_stream": (c_status, [_vp, _vp]),
    "portssm_get_stream": (_vp, [_vp]),
    "portssm_synchronize": (c_status, [_vp]),
    "portssm_op_name": (ctypes.c_char_p, [ctypes.c_int]),
    "portssm_op_supported": (c_status, [_vp, ctypes.c_int]),
    "portssm_struct_layout": (c_status, [ctypes.c_char_p, ctypes.POINTER(ctypes.c_size_t),
                                         ctypes.POINTER(ctypes.c_int32)]),
    "portssm_struct_field": (c_status, [ctypes.c_char_p, ctypes.c_int32,
                                        ctypes.POINTER(ctypes.c_char_p),
                                        ctypes.POINTER(ctypes.c_size_t),
                                        ctypes.POINTER(ctypes.c_size_t)]),
    "portssm_selective_scan_checkpoint_shape": (c_status, [_vp, _vp, ctypes.POINTER(ctypes.c_int64)]),
    "portssm_ssd_chunk_scan_checkpoint_shape": (c_status, [_vp, _vp, ctypes.POINTER(ctypes.c_int64)]),
}
for _op in _structs.OPS:
    # args are passed as the address of a buffer holding the struct (see _call.new_args)
    _PROTOTYPES["portssm_" + _op] = (c_status, [_vp, _vp])
    if "workspace" in dict(_structs.ARGS[_op]._fields_):  # an op with scratch has its query
        _PROTOTYPES["portssm_%s_workspace_size" % _op] = (
            c_status, [_vp, _vp, ctypes.POINTER(ctypes.c_size_t)])

for _name, (_restype, _argtypes) in _PROTOTYPES.items():
    try:
        _fn = getattr(lib, _name)
    except AttributeError:
        raise ImportError(
            "portssm: %s lacks %s: the library is older than this Python package (rebuild it "
            "from the same source tree)" % (library_path(), _name)
        ) from None
    _fn.restype = _restype
    _fn.argtypes = _argtypes


def last_error(ctx=None) -> str:
    msg = lib.portssm_last_error(ctx)
    return msg.decode("utf-8", "replace") if msg else ""


def check(status: int, ctx=None, what: str = "") -> None:
    """Raises the exception of a failing status with the library's message."""
    if status != 0:
        msg = last_error(ctx) or (what + ": " + (lib.portssm_status_name(status) or b"").decode())
        raise error_for(status, msg)


class LayoutMismatch(ImportError):
    pass


def check_layouts() -> None:
    """Every ctypes struct of _structs against the library's own layout: same size, same fields
    in the same order at the same offsets with the same sizes."""
    for cname, struct in _structs.STRUCTS.items():
        size = ctypes.c_size_t()
        count = ctypes.c_int32()
        status = lib.portssm_struct_layout(cname.encode(), ctypes.byref(size), ctypes.byref(count))
        if status != 0:
            raise LayoutMismatch("portssm: the library does not describe %s: %s"
                                 % (cname, last_error()))
        fields = struct._fields_
        if count.value != len(fields):
            raise LayoutMismatch(
                "portssm: %s has %d fields in the library, %d in portssm/_structs.py: the "
                "Python declarations must follow portssm.h" % (cname, count.value, len(fields)))
        for index, (fname, _ctype) in enumerate(fields):
            name = ctypes.c_char_p()
            offset = ctypes.c_size_t()
            fsize = ctypes.c_size_t()
            check(lib.portssm_struct_field(cname.encode(), index, ctypes.byref(name),
                                           ctypes.byref(offset), ctypes.byref(fsize)))
            mine = getattr(struct, fname)
            cfield = name.value.decode()
            if cfield != fname or offset.value != mine.offset or fsize.value != mine.size:
                raise LayoutMismatch(
                    "portssm: %s field %d is '%s' at offset %d (%d bytes) in the library, '%s' at "
                    "%d (%d bytes) in portssm/_structs.py" % (
                        cname, index, cfield, offset.value, fsize.value, fname, mine.offset,
                        mine.size))
        if size.value != ctypes.sizeof(struct):
            raise LayoutMismatch("portssm: sizeof(%s) is %d in the library, %d in ctypes"
                                 % (cname, size.value, ctypes.sizeof(struct)))


check_layouts()

if sys.byteorder != "little" or ctypes.sizeof(ctypes.c_void_p) != 8:  # pragma: no cover
    raise ImportError("portssm: the argument packing (_call.py) assumes a little-endian 64-bit host")
