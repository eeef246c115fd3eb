"""torch tensors into portssm calls, on the short road: data_ptr(), shape and stride() packed
straight into the args buffer (no DLPack capsule), the context of the tensor's device cached
per thread, and the stream that torch.cuda.current_stream() names set only when it changed.

PORTSSM_TORCH_CPU_BACKEND (default "cpu") picks the backend for cpu tensors: "sim64" runs the
GPU kernels on the SIMT simulator, which is how the GPU code paths are tested without a GPU.
"""

from __future__ import annotations

import os

import torch

from .. import _call, _structs
from .._context import get_context, parse_backend
from ..torch_dtypes import CODES

_HIP = bool(getattr(torch.version, "hip", None))
_GPU_BACKEND = _structs.BACKEND_HIP if _HIP else _structs.BACKEND_CUDA
_CPU_BACKEND = parse_backend(os.environ.get("PORTSSM_TORCH_CPU_BACKEND", "cpu"))
if _CPU_BACKEND[0] not in (_structs.BACKEND_CPU, _structs.BACKEND_SIM):
    raise ImportError("PORTSSM_TORCH_CPU_BACKEND=%s: cpu tensors run on the cpu or sim backend"
                      % os.environ.get("PORTSSM_TORCH_CPU_BACKEND"))

_raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None)

_TENSOR = _call._TENSOR  # per-ndim struct.Struct of a portssm_tensor
SPECS = _call.SPECS


def _current_stream(index: int) -> int:
    if _raw_stream is not None:
        return _raw_stream(index)
    return torch.cuda.current_stream(index).cuda_stream


def context_of(t: torch.Tensor):
    """The calling thread's context for t's device, on torch's current stream there."""
    dev = t.device
    kind = dev.type
    if kind == "cpu":
        return get_context(_CPU_BACKEND[0], _CPU_BACKEND[1])
    if kind == "cuda":
        index = dev.index if dev.index is not None else torch.cuda.current_device()
        ctx = get_context(_GPU_BACKEND, index)
        stream = _current_stream(index)
        if stream != ctx.stream:
            ctx.set_stream(stream)
        return ctx
    raise ValueError("portssm runs on cpu and cuda tensors, got a tensor on %s" % dev)


def put(buf, offset: int, t: torch.Tensor, name: str, device) -> None:
    """t as the portssm_tensor at `offset`; `name` is the argument named in errors."""
    if t.device != device:
        raise ValueError("'%s' is on %s, but the other tensors of the call are on %s"
                         % (name, t.device, device))
    code = CODES.get(t.dtype)
    if code is None:
        raise TypeError("'%s' has dtype %s; portssm takes float32, float16, bfloat16 (and int32 "
                        "for index tensors)" % (name, t.dtype))
    n = t.dim()
    if not 1 <= n <= 4:
        raise ValueError("'%s' has %d dimensions; portssm tensors have 1 to 4" % (name, n))
    _TENSOR[n].pack_into(buf, offset, t.data_ptr(), code, n, *t.shape, *t.stride())


def put_workspace(buf, spec, ctx, device):
    """Asks the op how much scratch it needs and hands it a buffer of torch's caching allocator
    (so that a CUDA graph captures it like any tensor); returns the buffer to keep alive."""
    nbytes = _call.workspace_size(spec, ctx, buf)
    if nbytes == 0:
        return None
    ws = torch.empty(nbytes + 256, dtype=torch.uint8, device=device)
    ptr = ws.data_ptr()
    aligned = (ptr + 255) & ~255  # the caching allocator aligns to 512; cpu tensors may not
    _call.put_workspace(buf, spec.offset["workspace"], aligned, nbytes)
    return ws


def is_compiling() -> bool:
    fn = getattr(getattr(torch, "compiler", None), "is_compiling", None)
    if fn is None:  # torch < 2.3
        return torch._dynamo.is_compiling()
    return fn()
