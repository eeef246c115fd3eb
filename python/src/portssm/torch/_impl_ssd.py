"""The eager implementations of the Mamba-2 SSD's torch ops (ssd_chunk_scan_fwd / _bwd), as
_impl.py does the others: allocate the outputs (the same way on the meta device, for the fake
implementations), pack the args, call the C op.  Absent optional outputs are 0-element
placeholders."""

from __future__ import annotations

import struct

import torch

from .. import _call
from ._impl import opt, placeholder
from ._runtime import SPECS, context_of, put, put_workspace

_F32 = struct.Struct("<f")
_INPUTS = ("D", "z", "dt_bias", "initial_states", "seq_idx", "cu_seqlens")


def _put_options(buf, off, dt_softplus, dt_limit, dt_min, dt_max, chunk_size):
    _call.put_int(buf, off["dt_softplus"], 1 if dt_softplus else 0)
    _call.put_int(buf, off["dt_limit"], 1 if dt_limit else 0)
    _F32.pack_into(buf, off["dt_min"], dt_min)
    _F32.pack_into(buf, off["dt_max"], dt_max)
    _call.put_int(buf, off["chunk_size"], chunk_size)


def _put_inputs(buf, spec, dev, x, dt, A, B, C, optional):
    for name, t in (("x", x), ("dt", dt), ("A", A), ("B", B), ("C", C)):
        put(buf, spec.offset[name], t, name, dev)
    for name, t in zip(_INPUTS, optional):
        opt(buf, spec, name, t, dev)


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
    spec = SPECS["ssd_chunk_scan_fwd"]
    ctx = context_of(x)
    dev = x.device
    out, final, varlen, y, _ = ssd_fwd_outputs(x, B, z, return_final_states,
                                               return_varlen_states, cu_seqlens, save_y)
    buf = _call.new_args(spec)
    off = spec.offset
    _put_inputs(buf, spec, dev, x, dt, A, B, C,
                (D, z, dt_bias, initial_states, seq_idx, cu_seqlens))
    put(buf, off["out"], out, "out", dev)
    opt(buf, spec, "final_states", final if return_final_states else None, dev)
    opt(buf, spec, "varlen_states", varlen if return_varlen_states else None, dev)
    opt(buf, spec, "y", y if y.numel() > 0 else None, dev)
    _put_options(buf, off, dt_softplus, dt_limit, dt_min, dt_max, chunk_size)
    ckpt = placeholder(x)
    if save_checkpoints:  # shaped by the library for these args
        ckpt = checkpoints_like(x, B, chunk_size,
                                _call.checkpoint_shape(ctx, buf, "ssd_chunk_scan")[2])
        put(buf, off["checkpoints"], ckpt, "checkpoints", dev)
    ws = put_workspace(buf, spec, ctx, dev)
    _call.call(spec, ctx, buf)
    del ws
    return out, final, varlen, y, ckpt


def ssd_bwd_outputs(x, dt, A, B, D, z, dt_bias, want_dinitial):
    f32 = dict(device=x.device, dtype=torch.float32)
    dx = torch.empty_like(x)
    ddt = torch.empty_like(dt)
    dA = torch.empty(A.shape, **f32)
    dB = torch.empty_like(B)
    dC = torch.empty_like(B)
    dD = torch.empty(D.shape, **f32) if D is not None else torch.empty(0, **f32)
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
            dt_max: float, chunk_size: int, want_dinitial: bool):
    spec = SPECS["ssd_chunk_scan_bwd"]
    ctx = context_of(x)
    ctx.require("ssd_chunk_scan_bwd")
    dev = x.device
    grads = ssd_bwd_outputs(x, dt, A, B, D, z, dt_bias, want_dinitial)
    dx, ddt, dA, dB, dC, dD, dz, ddtb, dinit = grads
    buf = _call.new_args(spec)
    off = spec.offset
    _put_inputs(buf, spec, dev, x, dt, A, B, C,
                (D, z, dt_bias, initial_states, seq_idx, cu_seqlens))
    put(buf, off["dout"], dout, "dout", dev)
    opt(buf, spec, "dfinal_states", dfinal_states, dev)
    # the forward's y (saved with z): the backward reads it instead of computing y again
    opt(buf, spec, "y", y if z is not None and y is not None and y.numel() > 0 else None, dev)
    # the forward's checkpoints: the states entering the chunks are not computed again
    opt(buf, spec, "checkpoints",
        checkpoints if checkpoints is not None and checkpoints.numel() > 0 else None, dev)
    for name, t in (("dx", dx), ("ddt", ddt), ("dA", dA), ("dB", dB), ("dC", dC)):
        put(buf, off[name], t, name, dev)
    # each gradient only where its input is (absent ones are placeholders, left unset)
    for name, t, wanted in (("dD", dD, D is not None), ("dz", dz, z is not None),
                            ("ddt_bias", ddtb, dt_bias is not None),
                            ("dinitial_states", dinit, want_dinitial)):
        if wanted:
            put(buf, off[name], t, name, dev)
    _put_options(buf, off, dt_softplus, dt_limit, dt_min, dt_max, chunk_size)
    ws = put_workspace(buf, spec, ctx, dev)
    _call.call(spec, ctx, buf)
    del ws
    return grads
