"""The eager implementations of the row norms' torch ops (norm_fwd / norm_bwd), as _impl.py does
the others: allocate the outputs (the same way on the meta device, for the fake
implementations), pack the args, call the C op.  Tensors are 2-D (rows, hidden) with any
strides; absent optional outputs are 0-element placeholders."""

from __future__ import annotations

import torch

from .. import _call, _structs
from ._impl import placeholder
from ._runtime import Plan, context_where, put_workspace

_F32 = torch.float32

# residual_out of the forward: none, in x's dtype, in float32 (residual_in_fp32)
RESIDUAL_NONE, RESIDUAL_ACT, RESIDUAL_F32 = 0, 1, 2

_FWD = Plan("norm_fwd", ("x", "residual", "z", "weight", "bias", "out", "residual_out", "mean",
                         "rstd"), ("kind", "norm_before_gate"), like={"out": "x"})
_BWD = Plan("norm_bwd", ("x", "z", "weight", "bias", "mean", "rstd", "dout", "dresidual_out",
                         "dx", "dresidual", "dz", "dweight", "dbias", "out"),
            ("kind", "norm_before_gate"), like={"dx": "dout", "dz": "z", "out": "dout"})


def groups(hidden: int, group_size: int) -> int:
    return hidden // group_size if group_size > 0 else 1


def norm_fwd_outputs(x, rms: bool, group_size: int, residual_out: int, save_stats: bool):
    """out like x (contiguous), residual_out (x's dtype or float32) or a placeholder, and the
    statistics (rows, groups) float32 where save_stats (mean for LayerNorm only)."""
    rows, hidden = x.shape
    out = torch.empty(rows, hidden, dtype=x.dtype, device=x.device)
    if residual_out == RESIDUAL_NONE:
        res = placeholder(x)
    else:
        dtype = _F32 if residual_out == RESIDUAL_F32 else x.dtype
        res = torch.empty(rows, hidden, dtype=dtype, device=x.device)
    f32 = dict(dtype=_F32, device=x.device)
    g = groups(hidden, group_size)
    mean = torch.empty(rows, g, **f32) if save_stats and not rms else torch.empty(0, **f32)
    rstd = torch.empty(rows, g, **f32) if save_stats else torch.empty(0, **f32)
    return out, res, mean, rstd


def _scalars(buf, spec, group_size, eps=None):
    _call.put_i64(buf, spec.offset["group_size"], group_size)
    if eps is not None:
        _call.put_float(buf, spec.offset["eps"], eps)


def _kind(rms):
    return _structs.NORM_RMS if rms else _structs.NORM_LAYER


def norm_fwd(x, residual, z, weight, bias, eps: float, rms: bool, group_size: int,
             norm_before_gate: bool, residual_out: int, save_stats: bool):
    spec = _FWD.spec
    ctx, where = context_where(x)
    out, res, mean, rstd = norm_fwd_outputs(x, rms, group_size, residual_out, save_stats)
    buf = spec.buffer_type()
    keep = _FWD.pack(buf, where, x, (
        x, residual, z, weight, bias, out, res if residual_out != RESIDUAL_NONE else None,
        mean if save_stats and not rms else None, rstd if save_stats else None),
        (_kind(rms), int(norm_before_gate)))
    _scalars(buf, spec, group_size, eps)
    _call.call(spec, ctx, buf)
    del keep
    return out, res, mean, rstd


def norm_bwd_outputs(x, z, weight, bias, dout, dresidual_f32: bool, want_dz: bool,
                     want_dweight: bool, want_dbias: bool, want_out: bool, dz=None):
    """dx like dout (contiguous); dresidual float32 where asked (an F32 residual's gradient,
    else the caller reuses dx); dz like z (or the given one: eager callers only, z's shape and
    dtype, any strides); dweight, dbias like weight; out (the forward's out again) like dout;
    or placeholders."""
    rows, hidden = x.shape
    dx = torch.empty(rows, hidden, dtype=dout.dtype, device=dout.device)
    f32 = dict(dtype=_F32, device=dout.device)
    dres = torch.empty(rows, hidden, **f32) if dresidual_f32 else torch.empty(0, **f32)
    if dz is None:
        dz = torch.empty(rows, hidden, dtype=z.dtype, device=z.device) if want_dz \
            else placeholder(dout)
    dweight = torch.empty(hidden, dtype=weight.dtype, device=weight.device) if want_dweight \
        else placeholder(weight)
    dbias = torch.empty(hidden, dtype=weight.dtype, device=weight.device) if want_dbias \
        else placeholder(weight)
    out = torch.empty(rows, hidden, dtype=dout.dtype, device=dout.device) if want_out \
        else placeholder(dout)
    return dx, dres, dz, dweight, dbias, out


def norm_bwd(x, z, weight, bias, mean, rstd, dout, dresidual_out, rms: bool, group_size: int,
             norm_before_gate: bool, dresidual_f32: bool, want_dz: bool, want_dweight: bool,
             want_dbias: bool, want_out: bool, dz=None):
    """The gradients (dx, dresidual, dz, dweight, dbias) and, where want_out, the forward's
    out computed again (for the gradient of a layer after the norm)."""
    spec = _BWD.spec
    ctx, where = context_where(dout)
    ctx.require("norm_bwd")
    grads = norm_bwd_outputs(x, z, weight, bias, dout, dresidual_f32, want_dz, want_dweight,
                             want_dbias, want_out, dz)
    dx, dres, dz, dweight, dbias, out = grads
    buf = spec.buffer_type()
    keep = _BWD.pack(buf, where, dout, (
        x, z, weight, bias, None if rms else mean, rstd, dout, dresidual_out, dx,
        dres if dresidual_f32 else None, dz if want_dz else None,
        dweight if want_dweight else None, dbias if want_dbias else None,
        out if want_out else None),
        (_kind(rms), int(norm_before_gate)))
    _scalars(buf, spec, group_size)
    ws = put_workspace(buf, spec, ctx, dout.device)
    _call.call(spec, ctx, buf)
    del ws, keep
    return grads
