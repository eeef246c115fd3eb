"""The eager implementations of the Mamba-2 SSD's torch ops (ssd_chunk_scan_fwd / _bwd), as
_impl.py does the others: allocate the outputs (the same way on the meta device, for the fake
implementations), pack the args, call the C op.  Absent optional outputs are 0-element
placeholders."""

from __future__ import annotations

import struct

import torch

from .. import _call
from ._impl import placeholder
from ._runtime import Plan, context_where, put, put_workspace

_F32 = struct.Struct("<f")
_INPUTS = ("x", "dt", "A", "B", "C", "D", "z", "dt_bias", "initial_states", "seq_idx",
           "cu_seqlens")
_OPTIONS = ("dt_softplus", "dt_limit", "chunk_size")
# Each op's tensors (one Plan: packed in C by portssm._fastcall where it is there, else in
# Python, with the same checks as the decode ops'); the float fields, the checkpoints (shaped by
# the library for the args) and the workspace go in after.  `like`: made with empty_like.
_FWD = Plan("ssd_chunk_scan_fwd", _INPUTS + ("out", "final_states", "varlen_states", "y"),
            _OPTIONS, like={"out": "x", "y": "x"})
_BWD = Plan("ssd_chunk_scan_bwd",
            _INPUTS + ("dout", "dfinal_states", "y", "checkpoints", "dx", "ddt", "dA", "dB", "dC",
                       "dD", "dz", "ddt_bias", "dinitial_states"),
            _OPTIONS, like={"dx": "x", "ddt": "dt", "dB": "B", "dC": "B", "dz": "z"})


def _put_limits(buf, off, dt_min, dt_max):
    _F32.pack_into(buf, off["dt_min"], dt_min)
    _F32.pack_into(buf, off["dt_max"], dt_max)


def checkpoint_interval(chunk_size: int, dtype) -> int:
    """T of portssm.h's SSD checkpoints: chunk_size rounded up to a multiple of 64 (32 for
    float32), at most 256, 256 for 0.  (The fake implementation's rule; the eager path asks the
    library, and the tests hold the two equal.)"""
    tile = 32 if dtype == torch.float32 else 64
    q = 256 if chunk_size <= 0 else -(-chunk_size // tile) * tile
    return min(q, 256)


def checkpoints_like(x, B, chunk_size, count=None):
    """Checkpoints (B, H, K, P*N) in x's dtype; K = ceil(L/T), or count (the library's)."""
    batch, length, heads, hdim = x.shape
    if count is None:
        count = -(-length // checkpoint_interval(chunk_size, x.dtype))
    return torch.empty(batch, heads, count, hdim * B.shape[3], device=x.device, dtype=x.dtype)


def ssd_fwd_outputs(x, B, z, return_final_states, return_varlen_states, cu_seqlens, save_y,
                    save_checkpoints=False, chunk_size=0):
    """out like x; final states (B,H,P,N) and varlen states (n_seq,H,P,N) float32 or
    placeholders; y (before the gate) like x where save_y and z is given, else a placeholder;
    checkpoints (B,H,K,P*N) in x's dtype where save_checkpoints, else a placeholder."""
    batch, _, heads, hdim = x.shape
    N = B.shape[3]
    f32 = dict(device=x.device, dtype=torch.float32)
    out = torch.empty_like(x)
    final = torch.empty(batch, heads, hdim, N, **f32) if return_final_states else \
        torch.empty(0, **f32)
    if return_varlen_states:
        varlen = torch.empty(cu_seqlens.shape[0] - 1, heads, hdim, N, **f32)
    else:
        varlen = torch.empty(0, **f32)
    y = torch.empty_like(x) if save_y and z is not None else placeholder(x)
    ckpt = checkpoints_like(x, B, chunk_size) if save_checkpoints else placeholder(x)
    return out, final, varlen, y, ckpt


def ssd_fwd(x, dt, A, B, C, D, z, dt_bias, initial_states, seq_idx, cu_seqlens,
            dt_softplus: bool, dt_limit: bool, dt_min: float, dt_max: float, chunk_size: int,
            return_final_states: bool, return_varlen_states: bool, save_y: bool = False,
            save_checkpoints: bool = False):
    spec = _FWD.spec
    ctx, where = context_where(x)
    out, final, varlen, y, _ = ssd_fwd_outputs(x, B, z, return_final_states,
                                               return_varlen_states, cu_seqlens, save_y)
    buf = spec.buffer_type()
    keep = _FWD.pack(buf, where, x, (
        x, dt, A, B, C, D, z, dt_bias, initial_states, seq_idx, cu_seqlens, out,
        final if return_final_states else None, varlen if return_varlen_states else None,
        y if y.numel() > 0 else None), (int(dt_softplus), int(dt_limit), chunk_size))
    _put_limits(buf, spec.offset, dt_min, dt_max)
    ckpt = placeholder(x)
    if save_checkpoints:  # shaped by the library for these args
        ckpt = checkpoints_like(x, B, chunk_size,
                                _call.checkpoint_shape(ctx, buf, "ssd_chunk_scan")[2])
        put(buf, spec.offset["checkpoints"], ckpt, "checkpoints", x.device)
    ws = put_workspace(buf, spec, ctx, x.device)
    _call.call(spec, ctx, buf)
    del ws, keep
    return out, final, varlen, y, ckpt


def ssd_bwd_outputs(x, dt, A, B, D, z, dt_bias, want_dinitial, into=None):
    """The gradients, each made here or (dx, ddt, dB, dC, dz) taken from `into` (a dict, eager
    callers only: slices of larger gradients, the inputs' shapes and dtypes, any strides)."""
    into = into or {}
    f32 = dict(device=x.device, dtype=torch.float32)
    dx = into.get("dx")
    dx = torch.empty_like(x) if dx is None else dx
    ddt = into.get("ddt")
    ddt = torch.empty_like(dt) if ddt is None else ddt
    dA = torch.empty(A.shape, **f32)
    dB = into.get("dB")
    dB = torch.empty_like(B) if dB is None else dB
    dC = into.get("dC")
    dC = torch.empty_like(B) if dC is None else dC
    dD = torch.empty(D.shape, **f32) if D is not None else torch.empty(0, **f32)
    dz = into.get("dz")
    if dz is None:
        dz = torch.empty_like(z) if z is not None else placeholder(x)
    ddtb = torch.empty(dt_bias.shape, **f32) if dt_bias is not None else torch.empty(0, **f32)
    if want_dinitial:
        batch, _, heads, hdim = x.shape
        dinit = torch.empty(batch, heads, hdim, B.shape[3], **f32)
    else:
        dinit = torch.empty(0, **f32)
    return dx, ddt, dA, dB, dC, dD, dz, ddtb, dinit


def ssd_bwd(x, dt, A, B, C, D, z, dt_bias, initial_states, seq_idx, cu_seqlens, dout,
            dfinal_states, y, checkpoints, dt_softplus: bool, dt_limit: bool, dt_min: float,
            dt_max: float, chunk_size: int, want_dinitial: bool, dx=None, ddt=None, dB=None,
            dC=None, dz=None):
    """dx, ddt, dB, dC, dz (optional, eager callers only): where to write those gradients (the
    inputs' shapes and dtypes, any strides: slices of larger gradients, which then need no
    copy)."""
    spec = _BWD.spec
    ctx, where = context_where(x)
    ctx.require("ssd_chunk_scan_bwd")
    grads = ssd_bwd_outputs(x, dt, A, B, D, z, dt_bias, want_dinitial,
                            dict(dx=dx, ddt=ddt, dB=dB, dC=dC, dz=dz))
    dx, ddt, dA, dB, dC, dD, dz, ddtb, dinit = grads
    buf = spec.buffer_type()
    keep = _BWD.pack(buf, where, x, (
        x, dt, A, B, C, D, z, dt_bias, initial_states, seq_idx, cu_seqlens, dout, dfinal_states,
        # the forward's y (saved with z): the backward reads it instead of computing y again
        y if z is not None and y is not None and y.numel() > 0 else None,
        # the forward's checkpoints: the states entering the chunks are not computed again
        checkpoints if checkpoints is not None and checkpoints.numel() > 0 else None,
        dx, ddt, dA, dB, dC,
        # each gradient only where its input is (absent ones are placeholders, left unset)
        dD if D is not None else None, dz if z is not None else None,
        ddtb if dt_bias is not None else None, dinit if want_dinitial else None),
        (int(dt_softplus), int(dt_limit), chunk_size))
    _put_limits(buf, spec.offset, dt_min, dt_max)
    ws = put_workspace(buf, spec, ctx, x.device)
    _call.call(spec, ctx, buf)
    del ws, keep
    return grads
