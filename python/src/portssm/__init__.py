"""portssm: portable kernels for Mamba-style state-space models (causal depthwise conv1d,
selective scan, their decode steps and backward passes) on libportssm's C ABI.

    portssm.ops     every op on any DLPack array (torch, CuPy, JAX, NumPy), framework-neutral
    portssm.torch   drop-ins for causal-conv1d and mamba-ssm (autograd, torch.compile,
                    CUDA graphs) and patch_transformers()  -- imported on request, needs torch
"""

from __future__ import annotations

from . import errors, ops
from ._context import Context, get_context, parse_backend
from ._library import lib as _lib
from ._library import library_path
from .errors import PortssmError

__version__ = "0.1.0"


def library_version() -> str:
    """The version of the loaded libportssm, e.g. "0.1.0"."""
    return _lib.portssm_version_string().decode()


def probe(backend: str):
    """(usable, number of devices, reason) for a backend name ("cpu", "cuda", "hip", "sim")."""
    import ctypes

    code, _ = parse_backend(backend)
    count = ctypes.c_int32()
    reason = ctypes.c_char_p()
    status = _lib.portssm_backend_probe(code, ctypes.byref(count), ctypes.byref(reason))
    text = reason.value.decode("utf-8", "replace") if reason.value else ""
    return status == 0, count.value, text


__all__ = ["ops", "errors", "PortssmError", "Context", "get_context", "parse_backend",
           "library_path", "library_version", "probe", "__version__"]
