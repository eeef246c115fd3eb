"""portssm: portable kernels for Mamba-style state-space models (causal depthwise conv1d,
selective scan, their decode steps and backward passes) on libportssm's C ABI.

    portssm.ops     every op on any DLPack array (torch, CuPy, JAX, NumPy), framework-neutral
    portssm.torch   drop-ins for causal-conv1d and mamba-ssm (autograd, torch.compile,
                    CUDA graphs) and patch_transformers()  -- imported on request, needs torch

Installed, portssm also answers to `import causal_conv1d` and `import mamba_ssm` where those
packages are not installed (see _portssm_aliases; PORTSSM_NO_ALIAS=1 turns it off); from a
build tree, enable_import_aliases() does that.
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


def build_info() -> dict:
    """What the build of the loaded library made of each GPU module:
    {"version": "0.1.0", "modules": {"cuda": "<targets it was built for>" or "skipped: <why>",
    "hip": ...}}, from portssm_build_info.json beside the library (written by CMake); {} for a
    library built before that file existed."""
    import json
    import os

    path = os.path.join(os.path.dirname(library_path()), "portssm_build_info.json")
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except FileNotFoundError:
        return {}


def probe(backend: str):
    """(usable, number of devices, reason) for a backend name ("cpu", "cuda", "hip", "sim").
    For a GPU module the build skipped, the reason ends with the build's own (e.g. "nvcc not
    found ...")."""
    import ctypes

    code, _ = parse_backend(backend)
    count = ctypes.c_int32()
    reason = ctypes.c_char_p()
    status = _lib.portssm_backend_probe(code, ctypes.byref(count), ctypes.byref(reason))
    text = reason.value.decode("utf-8", "replace") if reason.value else ""
    from ._context import backend_name

    built = build_info().get("modules", {}).get(backend_name(code), "")
    if status != 0 and built.startswith("skipped: "):
        text += "; the build of this library skipped the module: " + built[len("skipped: "):]
    return status == 0, count.value, text


def enable_import_aliases() -> bool:
    """Makes `import causal_conv1d` / `import mamba_ssm` resolve to portssm's shims where no
    real package of that name is installed (what the wheel's .pth does at interpreter start;
    needed only from a build tree or after disable_import_aliases()).  Returns whether the
    aliases are active: False where PORTSSM_NO_ALIAS is set.  Call it before importing code
    that looks the packages up (transformers binds its kernels when a modeling file is
    imported)."""
    import _portssm_aliases

    return _portssm_aliases.install()


def disable_import_aliases() -> None:
    """Removes the import aliases; modules already imported through them stay imported."""
    import _portssm_aliases

    _portssm_aliases.uninstall()


__all__ = ["enable_import_aliases", "disable_import_aliases", "ops", "errors", "PortssmError", "Context", "get_context", "parse_backend",
           "library_path", "library_version", "probe", "build_info", "__version__"]
