"""Contexts: one per (backend, device) and per thread (a portssm context is used by one thread at
a time), created on first use and destroyed with the thread.  Each remembers the stream last
given to portssm_set_stream, so that a call on the same stream costs nothing extra."""

from __future__ import annotations

import ctypes
import threading

from . import _structs
from ._library import check, last_error, lib
from .errors import InvalidArgumentError

_BACKEND_CODES = {"auto": 0, "cpu": 1, "cuda": 2, "hip": 3, "sim": 4}
_BACKEND_NAMES = {v: k for k, v in _BACKEND_CODES.items()}


def parse_backend(text: str):
    """'cuda:1' -> (2, 1); 'sim64' -> (4, 1); 'cpu' -> (1, -1) (no device named), by the library's
    own parser (portssm_backend_parse)."""
    backend = ctypes.c_int()
    device = ctypes.c_int32()
    status = lib.portssm_backend_parse(str(text).encode(), ctypes.byref(backend), ctypes.byref(device))
    if status != 0:
        raise InvalidArgumentError("backend: " + last_error())
    return backend.value, device.value


def backend_name(code: int) -> str:
    return _BACKEND_NAMES.get(code, "backend %d" % code)


class Context:
    """A portssm_context of one thread.  ``handle`` is the C pointer (an int)."""

    __slots__ = ("handle", "backend", "device", "stream", "__weakref__")

    def __init__(self, backend: int, device: int):
        handle = ctypes.c_void_p()
        check(lib.portssm_create(ctypes.byref(handle), backend, max(device, 0)), None)
        self.handle = handle.value
        self.backend = lib.portssm_get_backend(self.handle)
        self.device = lib.portssm_get_device(self.handle)
        self.stream = 0

    def set_stream(self, stream: int) -> None:
        if stream != self.stream:
            check(lib.portssm_set_stream(self.handle, stream or None), self.handle)
            self.stream = stream

    def synchronize(self) -> None:
        check(lib.portssm_synchronize(self.handle), self.handle)

    def supports(self, op: str) -> bool:
        return lib.portssm_op_supported(self.handle, _structs.OPS.index(op)) == 0

    def require(self, op: str) -> None:
        """UnsupportedError (a NotImplementedError) with the library's message when the backend
        lacks op: callers refuse before allocating anything."""
        check(lib.portssm_op_supported(self.handle, _structs.OPS.index(op)), self.handle)

    @property
    def label(self) -> str:
        name = backend_name(self.backend)
        return "%s:%d" % (name, self.device)

    def selection_report(self) -> str:
        return lib.portssm_selection_report(self.handle).decode("utf-8", "replace")

    def __del__(self):
        handle, self.handle = getattr(self, "handle", None), None
        if handle and lib is not None:
            lib.portssm_destroy(handle)

    def __repr__(self):
        return "<portssm context %s>" % self.label


_local = threading.local()


def get_context(backend: int, device: int) -> Context:
    """The calling thread's context for (backend, device); device -1 means 0."""
    cache = getattr(_local, "contexts", None)
    if cache is None:
        cache = _local.contexts = {}
    key = (backend, device if device >= 0 else 0)
    ctx = cache.get(key)
    if ctx is None:
        ctx = cache[key] = Context(backend, key[1])
    return ctx
