"""torch tensors into portssm calls, on the short road: data_ptr(), shape and stride() packed
straight into the args buffer (no DLPack capsule), the context of the tensor's device cached
per thread, and the stream that torch.cuda.current_stream() names set only when it changed.
The decode ops go through a Plan: packed and called in C by the compiled module
portssm._fastcall where it is there (reading torch.Tensor/nn.Parameter objects through DLPack's
C exchange API where torch has it), else by run_python, the same checks in Python; the SSD ops'
Plans only pack their tensors that way (Plan.pack), their workspace going in after.

PORTSSM_TORCH_CPU_BACKEND (default "cpu") picks the backend for cpu tensors: "sim64" runs the
GPU kernels on the SIMT simulator, which is how the GPU code paths are tested without a GPU.
"""

from __future__ import annotations

import ctypes
import functools
import os
import threading

import torch

from .. import _call, _structs
from .._context import get_context, parse_backend
from .._library import check
from ..errors import DtypeError, InvalidArgumentError
from ..torch_dtypes import CODES

_HIP = bool(getattr(torch.version, "hip", None))
_GPU_BACKEND = _structs.BACKEND_HIP if _HIP else _structs.BACKEND_CUDA
_CPU_BACKEND = parse_backend(os.environ.get("PORTSSM_TORCH_CPU_BACKEND", "cpu"))
if _CPU_BACKEND[0] not in (_structs.BACKEND_CPU, _structs.BACKEND_SIM):
    raise ImportError("PORTSSM_TORCH_CPU_BACKEND=%s: cpu tensors run on the cpu or sim backend"
                      % os.environ.get("PORTSSM_TORCH_CPU_BACKEND"))

_raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None)

_TENSOR = _call._TENSOR  # per-ndim struct.Struct of a portssm_tensor
_PACK = [None] + [s.pack_into for s in _TENSOR[1:]]  # by ndim: pack_into of that struct
SPECS = _call.SPECS
_code_of = CODES.get


def _current_stream(index: int) -> int:
    if _raw_stream is not None:
        return _raw_stream(index)
    return torch.cuda.current_stream(index).cuda_stream


# This thread's contexts as context_where finds them, by torch.device: (context, `where` (see
# run_python), CUDA device index or None).  Each context is the one get_context caches for the
# thread (looked up there once per device).
_local = threading.local()
_WHERE_CPU, _WHERE_ONLY_GPU = -2, -1
_gpu_count = None


def _new_entry(t):
    global _gpu_count
    if t.is_cuda:  # a ROCm torch's tensors are "cuda" too
        index = t.get_device()
        if _gpu_count is None:
            _gpu_count = torch.cuda.device_count()
        # with one device, is_cuda alone says a tensor is on it
        entry = (get_context(_GPU_BACKEND, index), _WHERE_ONLY_GPU if _gpu_count == 1 else index,
                 index)
    elif t.is_cpu:
        entry = (get_context(_CPU_BACKEND[0], _CPU_BACKEND[1]), _WHERE_CPU, None)
    else:
        raise InvalidArgumentError("portssm runs on cpu and cuda tensors, got a tensor on %s"
                                   % t.device)
    try:
        by_device = _local.by_device
    except AttributeError:
        by_device = _local.by_device = {}
    by_device[t.device] = entry
    return entry


def context_where(t: torch.Tensor):
    """(the calling thread's context for t's device, on torch's current stream there; `where`,
    t's device as run_python and the compiled module test it)."""
    try:
        ctx, where, index = _local.by_device[t.device]
    except (AttributeError, KeyError):
        ctx, where, index = _new_entry(t)
    if index is not None:
        stream = _current_stream(index)
        if stream != ctx.stream:
            ctx.set_stream(stream)
    return ctx, where


def context_of(t: torch.Tensor):
    """The calling thread's context for t's device, on torch's current stream there."""
    return context_where(t)[0]


# The errors of a tensor refused before the call (the compiled module _fastcall words them the
# same way and raises the same classes; a test compares the two): a wrong dtype is a DtypeError,
# a wrong device or rank an InvalidArgumentError, as the library's own refusals are.
def wrong_device(name, t, device):
    return InvalidArgumentError("'%s' is on %s, but the other tensors of the call are on %s"
                      % (name, t.device, device))


def not_a_tensor(name, t):
    return TypeError("'%s' must be a tensor, got %s" % (name, type(t).__name__))


def wrong_dtype(name, t):
    return DtypeError("'%s' has dtype %s; portssm takes float32, float16, bfloat16 (and int32 "
                      "for index tensors)" % (name, t.dtype))


def wrong_float_dtype(name, t):
    """The error of a tensor used in float32 (converted from float16/bfloat16) of another
    dtype."""
    return DtypeError("'%s' has dtype %s; it takes float32, float16 or bfloat16 (used in "
                      "float32)" % (name, t.dtype))


def wrong_ndim(name, n):
    return InvalidArgumentError("'%s' has %d dimensions; portssm tensors have 1 to 4" % (name, n))


# put() and run_python (below) pack through this one helper, so that the ranks they accept, the
# message of a refused one and the struct they write cannot drift apart.  The dtype code stays
# with the callers, whose checks differ: run_python converts a 16-bit f32 field rather than
# refuse its dtype, and gives a field made like an earlier one that one's code without reading
# its dtype.
def _pack_tensor(buf, offset: int, t: torch.Tensor, code: int, name: str) -> None:
    """t as the portssm_tensor at `offset` with dtype code `code`; raises, naming `name`, when t
    has fewer than 1 or more than 4 dimensions (nothing is written then)."""
    shape = t.shape
    n = len(shape)
    if not 0 < n <= 4:
        raise wrong_ndim(name, n)
    _PACK[n](buf, offset, t.data_ptr(), code, n, *shape, *t.stride())


def put(buf, offset: int, t: torch.Tensor, name: str, device) -> None:
    """t as the portssm_tensor at `offset`; `name` is the argument named in errors."""
    if t.device != device:
        raise wrong_device(name, t, device)
    code = _code_of(t.dtype)
    if code is None:
        raise wrong_dtype(name, t)
    _pack_tensor(buf, offset, t, code, name)


_OP_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)
_FAST = _call.FASTCALL
_DTYPES = tuple(CODES)
_DTYPE_CODES = tuple(CODES[d] for d in _DTYPES)
_F32_CODE = _structs.F32
_HALF_CODES = (_structs.F16, _structs.BF16)
if _FAST is not None:
    _FAST.set_errors(InvalidArgumentError, DtypeError)


def use_exchange_api(on: bool = True) -> bool:
    """Whether the compiled module reads torch.Tensor and nn.Parameter objects through DLPack's C
    exchange API (torch >= 2.10: torch.Tensor.__dlpack_c_exchange_api__, one C call per tensor
    for its data, device, dtype, shape and strides) rather than through five getters; returns
    whether it now does.  On by default where torch has the API, unless PORTSSM_NO_DLPACK_API
    is set; tensor subclasses always take the getters (their __torch_function__ sees them)."""
    if _FAST is None:
        return False
    capsule = getattr(torch.Tensor, "__dlpack_c_exchange_api__", None) if on else None
    try:
        return _FAST.set_exchange_api(capsule, (torch.Tensor, torch.nn.Parameter))
    except (TypeError, ValueError):  # not the capsule fastcall.c knows
        return _FAST.set_exchange_api(None, ())


EXCHANGE_API = use_exchange_api(os.environ.get("PORTSSM_NO_DLPACK_API", "") in ("", "0"))


PLANS = []  # every Plan made (the decode ops'), for bind_all


def bind_all(address=None, path=None) -> None:
    """Plan.bind(address, path) for every plan: bench/python_overhead.py and the tests switch
    paths with it; bind_all() puts every plan back on its op and the default path."""
    for plan in PLANS:
        plan.bind(address, path)


class Plan:
    """What run() needs of one op: its tensor fields in struct order (the order in which they are
    checked, so the first bad argument is the one named); `like`, the fields whose tensor the
    caller made with torch.empty_like of an earlier one (its device and dtype are that one's,
    not read again); `f32`, the fields used in float32 (float16/bfloat16 converted with
    .float(), exact; any other dtype refused); the int32 fields after them; and the C function.  Made once per op at
    import.  plan.run(handle, where, ref, tensors, ints) calls the op: on the compiled module
    (run_fast) when it is there, else run_python.  plan.pack(buf, where, ref, tensors, ints)
    only packs them into the args buffer buf (a fresh spec.buffer_type()), for ops whose
    Python code completes it before the call (the SSD's workspace and float fields), and
    returns what must stay alive until the call."""

    __slots__ = ("spec", "names", "offsets", "like", "f32", "int_offsets", "fn", "fast", "run",
                 "pack")

    def __init__(self, op: str, tensors, ints, like=None, f32=()):
        spec = self.spec = SPECS[op]
        self.names = tuple(tensors)
        self.offsets = tuple(spec.offset[n] for n in tensors)
        like = like or {}
        self.like = tuple(self.names.index(like[n]) if n in like else -1 for n in tensors)
        assert all(k < i for i, k in enumerate(self.like))
        self.f32 = tuple(int(n in f32) for n in tensors)
        self.int_offsets = tuple(spec.offset[n] for n in ints)
        self.bind()
        PLANS.append(self)

    def bind(self, address=None, path=None) -> None:
        """Points both paths at the C function at `address` (an int; None: the op itself) and
        plan.run at `path` ("fast", "python"; None: fast when the module is there).
        bench/python_overhead.py puts a function that does nothing at `address`, to time the
        host side alone; the tests switch paths."""
        if address is None:
            self.fn = self.spec.fn
            address = _call.address_of(self.fn)
        else:
            self.fn = _OP_FN(address)
        name = self.spec.name

        def on_error(status, handle):
            _check(status, handle, name)

        self.fast = None if _FAST is None else _FAST.plan(
            address, self.spec.size, self.names, self.offsets, self.like, self.f32,
            self.int_offsets, _DTYPES, _DTYPE_CODES, on_error)
        if path is None:
            path = "python" if self.fast is None else "fast"
        if path == "fast":
            if self.fast is None:
                raise RuntimeError("portssm._fastcall " + _call.FASTCALL_STATUS)
            self.run = functools.partial(_FAST.call, self.fast)
            self.pack = functools.partial(pack_fast, self.fast)
        else:
            self.run = functools.partial(run_python, self)
            self.pack = functools.partial(pack_python, self)


_put_i32 = _call._I32.pack_into
_check = check


def run_python(plan: Plan, handle: int, where, ref, tensors, ints) -> None:
    """Calls plan's op on context `handle` with `tensors` (one per field, None for an absent
    one) and `ints`, packing the args in Python.  Every tensor must be on ref's device (`where`
    is that device as the compiled module tests it: see fastcall.c); raises before the call,
    naming the argument, when one is on another device or of a dtype or rank portssm has no
    code for (nothing is written then); raises the library's error after it.  This is the
    decode ops' whole host path when the compiled module is absent, and its reference."""
    buf = plan.spec.buffer_type()
    keep = pack_python(plan, buf, where, ref, tensors, ints)
    status = plan.fn(handle, buf)
    del keep
    if status:
        _check(status, handle, plan.spec.name)


def pack_fast(fast, buf, where, ref, tensors, ints):
    """pack_python() in one call of the compiled module, into buf in place."""
    return _FAST.pack(fast, ctypes.addressof(buf), where, ref, tensors, ints)


def pack_python(plan: Plan, buf, where, ref, tensors, ints):
    """run_python's checks and packing alone, into buf (plan.spec.buffer_type(), fresh);
    returns the tensors converted here, which must stay alive until the op has been called.
    Raises as run_python does (buf half-written then: the caller drops it)."""
    device = ref.device
    codes = []
    keep = []  # tensors converted here, alive until the op has been called
    for name, offset, like, f32, t in zip(plan.names, plan.offsets, plan.like, plan.f32,
                                          tensors):
        code = None
        if t is not None:
            if like >= 0:
                code = codes[like]
            else:
                if t is not ref:
                    try:
                        t_device = t.device
                    except AttributeError:
                        raise not_a_tensor(name, t) from None
                    if t_device != device:
                        raise wrong_device(name, t, device)
                code = _code_of(t.dtype)
                if f32 and code != _F32_CODE:
                    if code not in _HALF_CODES:
                        raise wrong_float_dtype(name, t)
                    t = t.float()
                    keep.append(t)
                    code = _F32_CODE
                elif code is None:
                    raise wrong_dtype(name, t)
            _pack_tensor(buf, offset, t, code, name)
        codes.append(code)
    for offset, value in zip(plan.int_offsets, ints):
        _put_i32(buf, offset, value)
    return keep


def run_fast(plan: Plan, handle: int, where, ref, tensors, ints) -> None:
    """run_python() in one call of the compiled module (python/ext/fastcall.c): the same checks
    in the same order, the same messages, the same struct."""
    _FAST.call(plan.fast, handle, where, ref, tensors, ints)


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


def _is_compiling_fn():
    fn = getattr(getattr(torch, "compiler", None), "is_compiling", None)
    if fn is None:  # torch < 2.3
        from torch import _dynamo

        fn = _dynamo.is_compiling
    return fn


# torch.compiler.is_compiling itself (not a wrapper around it: one call less per eager op);
# dynamo folds it to True while tracing.
is_compiling = _is_compiling_fn()

# Each op is a torch.library.custom_op with a fake implementation where torch has custom_op
# (>= 2.4), which is what lets torch.compile trace it; PORTSSM_TORCH_NO_CUSTOM_OP=1 takes the
# road of older torch (plain autograd.Function classes) on any torch, for the tests.
USES_CUSTOM_OP = hasattr(torch.library, "custom_op") and not os.environ.get(
    "PORTSSM_TORCH_NO_CUSTOM_OP")


def compile_boundary(fn):
    """A public op as torch.compile sees it.  With custom ops: fn itself, traced whole
    (fullgraph=True works).  Without (torch < 2.4): torch._dynamo.disable(fn), so that
    torch.compile runs the op eagerly between two graphs; dynamo 2.1-2.3 cannot trace the
    autograd.Function road (it stops with "is_complex", "name 'L' is not defined" or
    save_for_backward), and fullgraph=True there stops at the op with torch's message about a
    torch._dynamo.disable()'d function.  inspect.unwrap() gives fn back."""
    if USES_CUSTOM_OP:
        return fn
    from torch import _dynamo

    return functools.wraps(fn)(_dynamo.disable(fn))
