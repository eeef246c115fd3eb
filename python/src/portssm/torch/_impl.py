"""The eager implementations behind portssm's torch ops: allocate the outputs (the same way on
the meta device, for the fake implementations), pack the args, call the C op.  Absent optional
outputs are 0-element placeholders, because a torch custom op cannot return None."""

from __future__ import annotations

import torch

from .. import _call, _structs
from . import _runtime
from ._runtime import SPECS, Plan, context_of, context_where, put, put_workspace, wrong_float_dtype

_NONE, _SILU = _structs.ACTIVATION_NONE, _structs.ACTIVATION_SILU
_F32 = torch.float32
_HALF = (torch.float16, torch.bfloat16)
_empty_like = torch.empty_like


def placeholder(like: torch.Tensor) -> torch.Tensor:
    return torch.empty(0, dtype=like.dtype, device=like.device)


def present(t) -> bool:
    return t is not None and t.numel() > 0


def opt(buf, spec, name, t, device):
    """t at field `name` when given (None: the field stays absent)."""
    if t is not None:
        put(buf, spec.offset[name], t, name, device)


# ---------------------------------------------------------------- causal conv1d


def conv_fwd_outputs(x, weight, return_final_states):
    out = torch.empty_like(x)
    if return_final_states:
        batch, dim, _ = x.shape
        # channel-last, as causal-conv1d returns them
        final = torch.empty(batch, weight.shape[1] - 1, dim, device=x.device,
                            dtype=x.dtype).transpose(1, 2)
    else:
        final = placeholder(x)
    return out, final


def conv_fwd(x, weight, bias, seq_idx, initial_states, return_final_states: bool, silu: bool):
    spec = SPECS["causal_conv1d_fwd"]
    ctx = context_of(x)
    dev = x.device
    out, final = conv_fwd_outputs(x, weight, return_final_states)
    buf = _call.new_args(spec)
    off = spec.offset
    put(buf, off["x"], x, "x", dev)
    put(buf, off["weight"], weight, "weight", dev)
    opt(buf, spec, "bias", bias, dev)
    opt(buf, spec, "seq_idx", seq_idx, dev)
    opt(buf, spec, "initial_states", initial_states, dev)
    if return_final_states:
        put(buf, off["final_states"], final, "final_states", dev)
    put(buf, off["out"], out, "out", dev)
    _call.put_int(buf, off["activation"], _SILU if silu else _NONE)
    _call.call(spec, ctx, buf)
    return out, final


def conv_bwd_outputs(x, weight, bias, want_dinitial, dx=None):
    dx = torch.empty_like(x) if dx is None else dx
    dweight = torch.empty_like(weight, memory_format=torch.contiguous_format)
    dbias = torch.empty_like(bias) if bias is not None else placeholder(weight)
    if want_dinitial:
        batch, dim, _ = x.shape
        dinit = torch.empty(batch, dim, weight.shape[1] - 1, device=x.device, dtype=x.dtype)
    else:
        dinit = placeholder(x)
    return dx, dweight, dbias, dinit


def conv_bwd(x, weight, bias, seq_idx, initial_states, dout, dfinal_states, want_dinitial: bool,
             silu: bool, dx=None):
    """dx (optional, eager callers only): where to write x's gradient, x's shape and dtype with
    any strides (a slice of a larger gradient, which then needs no copy)."""
    spec = SPECS["causal_conv1d_bwd"]
    ctx = context_of(x)
    ctx.require("causal_conv1d_bwd")
    dev = x.device
    dx, dweight, dbias, dinit = conv_bwd_outputs(x, weight, bias, want_dinitial, dx)
    buf = _call.new_args(spec)
    off = spec.offset
    put(buf, off["x"], x, "x", dev)
    put(buf, off["weight"], weight, "weight", dev)
    opt(buf, spec, "bias", bias, dev)
    opt(buf, spec, "seq_idx", seq_idx, dev)
    opt(buf, spec, "initial_states", initial_states, dev)
    put(buf, off["dout"], dout, "dout", dev)
    opt(buf, spec, "dfinal_states", dfinal_states, dev)
    put(buf, off["dx"], dx, "dx", dev)
    put(buf, off["dweight"], dweight, "dweight", dev)
    if bias is not None:
        put(buf, off["dbias"], dbias, "dbias", dev)
    if want_dinitial:
        put(buf, off["dinitial_states"], dinit, "dinitial_states", dev)
    _call.put_int(buf, off["activation"], _SILU if silu else _NONE)
    ws = put_workspace(buf, spec, ctx, dev)
    _call.call(spec, ctx, buf)
    del ws
    return dx, dweight, dbias, dinit


_CONV_UPDATE = Plan("causal_conv1d_update",
                    ("x", "conv_state", "weight", "bias", "cache_seqlens", "conv_state_indices",
                     "out"), ("activation",), like={"out": "x"})
_ACT = {False: (_NONE,), True: (_SILU,)}


def conv_update(x, conv_state, weight, bias, silu: bool, cache_seqlens, conv_state_indices):
    ctx, where = context_where(x)
    out = _empty_like(x)
    _CONV_UPDATE.run(ctx.handle, where, x,
                     (x, conv_state, weight, bias, cache_seqlens, conv_state_indices, out),
                     _ACT[silu])
    return out


# ---------------------------------------------------------------- selective scan

def _checkpoints_for_length(L: int) -> int:
    """K of the checkpoint shape the library gives for one row of length L (cpu context, host
    buffers of ctypes: no torch tensor, so this also works while torch is tracing)."""
    import ctypes

    from .._context import get_context

    spec = SPECS["selective_scan_fwd"]
    ctx = get_context(_structs.BACKEND_CPU, 0)
    row = (ctypes.c_float * L)()
    out = (ctypes.c_float * L)()
    a = (ctypes.c_float * 1)(-1.0)
    buf = _call.new_args(spec)
    off = spec.offset
    for name, arr, shape in (("u", row, (1, 1, L)), ("delta", row, (1, 1, L)),
                             ("A", a, (1, 1)), ("B", a, (1, 1)), ("C", a, (1, 1)),
                             ("out", out, (1, 1, L))):
        stride = (L, L, 1) if len(shape) == 3 else (1, 1)
        _call.put_tensor(buf, off[name], ctypes.addressof(arr), _structs.F32, shape, stride)
    return _call.checkpoint_shape(ctx, buf)[2]


def _find_checkpoint_interval() -> int:
    """T of portssm.h's checkpoints (K = ceil(L/T) - 1), read from the library: the largest L
    with K = 0 is T.  Used where the library cannot be asked per call (fake tensors under
    torch.compile, symbolic L); a test checks it against the library's answer for many L."""
    lo, hi = 1, 1 << 16  # K(lo) == 0 < K(hi)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if _checkpoints_for_length(mid) == 0:
            lo = mid
        else:
            hi = mid
    return lo


CHECKPOINT_INTERVAL = _find_checkpoint_interval()


def checkpoint_interval() -> int:
    return CHECKPOINT_INTERVAL


def checkpoint_shape_of(u, delta, A, B, C, D, z, delta_bias, initial_state, out):
    spec = SPECS["selective_scan_fwd"]
    ctx = context_of(u)
    dev = u.device
    buf = _call.new_args(spec)
    off = spec.offset
    for name, t in (("u", u), ("delta", delta), ("A", A), ("B", B), ("C", C), ("out", out)):
        put(buf, off[name], t, name, dev)
    for name, t in (("D", D), ("z", z), ("delta_bias", delta_bias),
                    ("initial_state", initial_state)):
        opt(buf, spec, name, t, dev)
    return _call.checkpoint_shape(ctx, buf)


def scan_extra_outputs(u, A, return_last_state, checkpoints_k):
    """final state (B,D,N) and checkpoints (B,D,K,N), float32, or placeholders."""
    batch, dim, _ = u.shape
    N = A.shape[1]
    f32 = dict(device=u.device, dtype=torch.float32)
    last = torch.empty(batch, dim, N, **f32) if return_last_state else torch.empty(0, **f32)
    if checkpoints_k > 0:
        ckpt = torch.empty(batch, dim, checkpoints_k, N, **f32)
    else:
        ckpt = torch.empty(0, **f32)
    return last, ckpt


def fake_checkpoints_k(u, save_checkpoints):
    return (u.shape[2] - 1) // checkpoint_interval() if save_checkpoints else 0


def scan_fwd(u, delta, A, B, C, D, z, delta_bias, initial_state, softplus: bool,
             return_last_state: bool, save_checkpoints: bool):
    spec = SPECS["selective_scan_fwd"]
    ctx = context_of(u)
    dev = u.device
    out = torch.empty_like(u)
    buf = _call.new_args(spec)
    off = spec.offset
    for name, t in (("u", u), ("delta", delta), ("A", A), ("B", B), ("C", C)):
        put(buf, off[name], t, name, dev)
    for name, t in (("D", D), ("z", z), ("delta_bias", delta_bias),
                    ("initial_state", initial_state)):
        opt(buf, spec, name, t, dev)
    put(buf, off["out"], out, "out", dev)
    _call.put_int(buf, off["delta_softplus"], 1 if softplus else 0)
    k = _call.checkpoint_shape(ctx, buf)[2] if save_checkpoints else 0
    last, ckpt = scan_extra_outputs(u, A, return_last_state, k)
    if return_last_state:
        put(buf, off["final_state"], last, "final_state", dev)
    if k > 0:
        put(buf, off["checkpoints"], ckpt, "checkpoints", dev)
    _call.call(spec, ctx, buf)
    return out, last, ckpt


def scan_bwd_outputs(u, delta, A, B, C, D, z, delta_bias, want_dinitial, dz=None):
    f32 = dict(device=u.device, dtype=torch.float32)
    du = torch.empty_like(u)
    ddelta = torch.empty_like(delta)
    dA = torch.empty(A.shape, **f32)
    dB = torch.empty(B.shape, device=B.device, dtype=B.dtype)
    dC = torch.empty(C.shape, device=C.device, dtype=C.dtype)
    dD = torch.empty(D.shape, **f32) if D is not None else torch.empty(0, **f32)
    if dz is None:
        dz = torch.empty_like(z) if z is not None else placeholder(u)
    ddb = torch.empty(delta_bias.shape, **f32) if delta_bias is not None else torch.empty(0, **f32)
    if want_dinitial:
        dinit = torch.empty(u.shape[0], u.shape[1], A.shape[1], **f32)
    else:
        dinit = torch.empty(0, **f32)
    return du, ddelta, dA, dB, dC, dD, dz, ddb, dinit


def scan_bwd(u, delta, A, B, C, D, z, delta_bias, initial_state, dout, dfinal_state, checkpoints,
             softplus: bool, want_dinitial: bool, dz=None):
    """dz (optional, with z; eager callers only): where to write z's gradient, z's shape and
    dtype with any strides."""
    spec = SPECS["selective_scan_bwd"]
    ctx = context_of(u)
    ctx.require("selective_scan_bwd")
    dev = u.device
    grads = scan_bwd_outputs(u, delta, A, B, C, D, z, delta_bias, want_dinitial, dz)
    du, ddelta, dA, dB, dC, dD, dz, ddb, dinit = grads
    buf = _call.new_args(spec)
    off = spec.offset
    for name, t in (("u", u), ("delta", delta), ("A", A), ("B", B), ("C", C), ("dout", dout),
                    ("du", du), ("ddelta", ddelta), ("dA", dA), ("dB", dB), ("dC", dC)):
        put(buf, off[name], t, name, dev)
    for name, t in (("D", D), ("z", z), ("delta_bias", delta_bias),
                    ("initial_state", initial_state), ("dfinal_state", dfinal_state)):
        opt(buf, spec, name, t, dev)
    if D is not None:
        put(buf, off["dD"], dD, "dD", dev)
    if z is not None:
        put(buf, off["dz"], dz, "dz", dev)
    if delta_bias is not None:
        put(buf, off["ddelta_bias"], ddb, "ddelta_bias", dev)
    if want_dinitial:
        put(buf, off["dinitial_state"], dinit, "dinitial_state", dev)
    if present(checkpoints):
        put(buf, off["checkpoints"], checkpoints, "checkpoints", dev)
    _call.put_int(buf, off["delta_softplus"], 1 if softplus else 0)
    ws = put_workspace(buf, spec, ctx, dev)
    _call.call(spec, ctx, buf)
    del ws
    return grads


_STATE_UPDATE = Plan("selective_state_update",
                     ("state", "x", "dt", "A", "B", "C", "D", "z", "dt_bias",
                      "state_batch_indices", "out"), ("dt_softplus",), like={"out": "x"},
                     f32=("A", "D", "dt_bias"))
_SOFTPLUS = {False: (0,), True: (1,)}


def state_update(state, x, dt, A, B, C, D, z, dt_bias, state_batch_indices, softplus: bool):
    """A, D and dt_bias are used in float32 (the plan converts float16/bfloat16 ones)."""
    # the state is updated in place in its own dtype (float32, float16 or bfloat16, whatever
    # x's): computed in float32 and rounded once per store by the kernel, no float32 copy.
    # Any other dtype (float64 too: no op of portssm takes it) is refused before anything is
    # read or written.
    if state.dtype is not _F32 and state.dtype not in _HALF:
        raise wrong_float_dtype("state", state)
    ctx, where = context_where(x)
    out = _empty_like(x)
    _STATE_UPDATE.run(ctx.handle, where, x,
                      (state, x, dt, A, B, C, D, z, dt_bias, state_batch_indices, out),
                      _SOFTPLUS[softplus])
    return out
