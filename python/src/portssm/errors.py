"""Exceptions raised for a failing portssm call: one class per portssm_status, each carrying the
library's message (portssm_last_error) and the status, and each also a subclass of the built-in
exception a Python caller would expect (ValueError for a bad argument, NotImplementedError for
an op or case a backend does not have, MemoryError for out of memory).

One class per kind of mistake, whichever layer finds it (the library's validation, the Python
checks before a call, the compiled module portssm._fastcall): a tensor of a dtype its argument
does not take is a DtypeError (an InvalidArgumentError that is also a TypeError, so code that
caught either before still does); any other bad argument (shape, rank, device, a read-only
output, an out-of-range value) is an InvalidArgumentError."""

from __future__ import annotations

import re


class PortssmError(RuntimeError):
    """A failing portssm call.  ``status`` is the portssm_status name, ``code`` its value."""

    status = "PORTSSM_ERR_INTERNAL"
    code = 8

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


class InvalidArgumentError(PortssmError, ValueError):
    status, code = "PORTSSM_ERR_INVALID_ARGUMENT", 1


class DtypeError(InvalidArgumentError, TypeError):
    """A tensor of a dtype its argument does not take; the message names the argument, the
    dtype given and the dtypes accepted."""


class UnsupportedError(PortssmError, NotImplementedError):
    status, code = "PORTSSM_ERR_UNSUPPORTED", 2


class NoBackendError(PortssmError):
    status, code = "PORTSSM_ERR_NO_BACKEND", 3


class NoDeviceError(PortssmError):
    status, code = "PORTSSM_ERR_NO_DEVICE", 4


class NoKernelImageError(PortssmError):
    status, code = "PORTSSM_ERR_NO_KERNEL_IMAGE", 5


class OutOfMemoryError(PortssmError, MemoryError):
    status, code = "PORTSSM_ERR_OUT_OF_MEMORY", 6


class DeviceError(PortssmError):
    status, code = "PORTSSM_ERR_DEVICE", 7


class InternalError(PortssmError):
    status, code = "PORTSSM_ERR_INTERNAL", 8


BY_CODE = {
    cls.code: cls
    for cls in (
        InvalidArgumentError,
        UnsupportedError,
        NoBackendError,
        NoDeviceError,
        NoKernelImageError,
        OutOfMemoryError,
        DeviceError,
        InternalError,
    )
}


# The library's messages of a refused dtype (src/validate.c, check_one and check_dtype):
# "<op>: '<arg>' dtype must be ..., got ..." and "<op>: '<arg>' dtype <n> is not a portssm_dtype"
_DTYPE_MESSAGE = re.compile(r"^[\w.]+: '[^']+' dtype ")


def error_for(code: int, message: str) -> PortssmError:
    if code == InvalidArgumentError.code and _DTYPE_MESSAGE.match(message):
        return DtypeError(message)
    cls = BY_CODE.get(code)
    if cls is None:
        return PortssmError("unknown portssm status %d: %s" % (code, message))
    return cls(message)
