"""The checks the torch drop-ins make in Python before they read a shape, convert a dtype or
write into a tensor the caller gave: each raises the class of portssm.errors the library would
(InvalidArgumentError for a rank, shape or device, DtypeError for a dtype), naming the function,
the argument, what it takes and what it got, before anything is written.  The library checks
every tensor again (and what is not checked here); these exist because the drop-ins read shapes
to allocate outputs and convert dtypes before the library sees the call."""

from __future__ import annotations

import torch

from ..errors import DtypeError, InvalidArgumentError

_FLOATS = (torch.float32, torch.float16, torch.bfloat16)
_F32 = torch.float32


def _shape(t) -> str:
    return str(tuple(int(s) for s in t.shape))


def tensor(fn: str, name: str, t, form: str, *ndims: int) -> None:
    """t (None passes) is a tensor of one of `ndims` dimensions; `form` says the shape in words,
    "(batch, seqlen, nheads, headdim)", for the message."""
    if t is None:
        return
    if not isinstance(t, torch.Tensor):
        raise TypeError("%s: '%s' must be a tensor %s, got %s" % (fn, name, form,
                                                                   type(t).__name__))
    if t.dim() not in ndims:
        raise InvalidArgumentError("%s: '%s' must be %s, got shape %s"
                                   % (fn, name, form, _shape(t)))


def tensors(fn: str, table) -> None:
    """tensor() for each (name, t, form, ndims) of table, ndims a tuple of the ranks taken."""
    for name, t, form, ndims in table:
        tensor(fn, name, t, form, *ndims)


def size(fn: str, name: str, t, dim: int, want: int, what: str) -> None:
    """t.shape[dim] == want (what: the symbol and where it comes from, for the message)."""
    if t is not None and t.shape[dim] != want:
        raise InvalidArgumentError("%s: '%s' shape[%d] must be %d (%s), got shape %s"
                                   % (fn, name, dim, want, what, _shape(t)))


def floating(fn: str, name: str, t) -> None:
    """t (None passes) is float32, float16 or bfloat16: what portssm computes in (float64 and
    the integer dtypes are refused by every op)."""
    if t is not None and t.dtype not in _FLOATS:
        raise DtypeError("%s: '%s' has dtype %s; it takes float32, float16 or bfloat16"
                         % (fn, name, t.dtype))


def f32(fn: str, name: str, t):
    """t in float32 (a float16/bfloat16 t converted: exact), after floating()."""
    if t is None or t.dtype == _F32:
        return t
    floating(fn, name, t)
    return t.float()


def as_dtype(fn: str, name: str, t, dtype):
    """t in `dtype` (one of floating()'s), after floating()."""
    # (t.to(dtype) returns t itself too, but only after 3 us of dispatch)
    if t is None or t.dtype == dtype:
        return t
    floating(fn, name, t)
    return t.to(dtype)


def output(fn: str, name: str, out, shape, dtype, device) -> None:
    """out, a tensor the caller gave for the function to write into, has `shape` (a tuple),
    `dtype` and `device`; raises naming what differs (nothing is written then)."""
    if not isinstance(out, torch.Tensor):
        raise TypeError("%s: '%s' must be a tensor, got %s" % (fn, name, type(out).__name__))
    shape = tuple(int(s) for s in shape)
    if tuple(out.shape) != shape:
        raise InvalidArgumentError("%s: '%s' must have shape %s, got %s"
                                   % (fn, name, shape, _shape(out)))
    if out.dtype != dtype:
        raise DtypeError("%s: '%s' must have dtype %s, got %s" % (fn, name, dtype, out.dtype))
    if out.device != device:
        raise InvalidArgumentError("%s: '%s' must be on %s, got %s"
                                   % (fn, name, device, out.device))
