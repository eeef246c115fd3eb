"""portssm.ops: every op of the C API on any array that speaks DLPack (torch, CuPy, JAX, NumPy
for cpu), framework-neutral.  Outputs are arrays the caller allocated (the ops write into them,
like the C API); nothing is allocated here.

Each op runs on the device of its arrays: cpu arrays on the cpu backend (or on the sim with
``backend="sim64"``), CUDA arrays on the cuda backend, ROCm arrays on hip.  ``stream`` is the raw
cudaStream_t / hipStream_t as an int (or an object with ``cuda_stream`` or ``ptr``, as torch
and CuPy streams have); None is the default stream.  A failing call raises a subclass of
portssm.errors.PortssmError with the library's message, naming the argument, and writes
nothing.  Inputs may be read-only arrays (a NumPy array with writeable=False); the arrays an op
writes (its outputs and the states it updates in place) must be writable.  Backward ops take an optional ``workspace`` array (any dtype, at least
``<op>_workspace_size(...)`` bytes); without one the context uses its own buffer, which is
grown outside CUDA-graph capture only.
"""

from __future__ import annotations

from . import _call, _dlpack, _structs
from ._context import get_context, parse_backend

_ACTIVATIONS = {None: _structs.ACTIVATION_NONE, "none": _structs.ACTIVATION_NONE,
                "silu": _structs.ACTIVATION_SILU, "swish": _structs.ACTIVATION_SILU}

_GPU_DEVICE = {_structs.BACKEND_CUDA: _dlpack.DL_CUDA, _structs.BACKEND_HIP: _dlpack.DL_ROCM}

# The arrays each op writes (outputs and in/out states: portssm.h, src/validate_*.c's PSSM_OUT
# and PSSM_INOUT), which must be writable; every other array is only read.
WRITTEN = {
    "causal_conv1d_fwd": {"final_states", "out"},
    "causal_conv1d_bwd": {"dx", "dweight", "dbias", "dinitial_states"},
    "causal_conv1d_update": {"conv_state", "out"},
    "selective_scan_fwd": {"final_state", "out", "checkpoints"},
    "selective_scan_bwd": {"du", "ddelta", "dA", "dB", "dC", "dD", "dz", "ddelta_bias",
                           "dinitial_state"},
    "selective_state_update": {"state", "out"},
    "ssd_chunk_scan_fwd": {"out", "final_states", "varlen_states", "y", "checkpoints"},
    "ssd_chunk_scan_bwd": {"dx", "ddt", "dA", "dB", "dC", "dD", "dz", "ddt_bias",
                           "dinitial_states"},
    "norm_fwd": {"out", "residual_out", "mean", "rstd"},
    "norm_bwd": {"dx", "dresidual", "dz", "dweight", "dbias"},
}


def _stream_int(stream) -> int:
    if stream is None:
        return 0
    for attr in ("cuda_stream", "ptr", "handle"):
        if hasattr(stream, attr):
            return int(getattr(stream, attr))
    return int(stream)


def _activation(value) -> int:
    try:
        return _ACTIVATIONS[value if value is None else str(value).lower()]
    except KeyError:
        raise ValueError("'activation' must be None, 'silu' or 'swish', got %r" % (value,)) from None


def _context_for(views, backend):
    """The context of the arrays' device (or of `backend`), after checking that every array is
    on that one device."""
    first_name, first = views[0]
    for name, v in views[1:]:
        if (v.device_type, v.device_id) != (first.device_type, first.device_id):
            raise ValueError("'%s' is on %s but '%s' is on %s: every array of a call must be on "
                             "one device" % (name, v.device_label(), first_name, first.device_label()))
    host = first.device_type in (_dlpack.DL_CPU, _dlpack.DL_CUDA_HOST)
    if backend is None:
        if host:
            return get_context(_structs.BACKEND_CPU, 0)
        code = {_dlpack.DL_CUDA: _structs.BACKEND_CUDA, _dlpack.DL_ROCM: _structs.BACKEND_HIP}.get(
            first.device_type)
        if code is None:
            raise ValueError("'%s' is on %s: portssm runs on cpu, CUDA and ROCm memory"
                             % (first_name, first.device_label()))
        return get_context(code, first.device_id)
    code, device = parse_backend(backend)
    if code == _structs.BACKEND_AUTO:
        raise ValueError("backend 'auto' is not a device: name one (cpu, sim64, cuda:0...) or "
                         "leave backend=None to run on the arrays' device")
    if code in (_structs.BACKEND_CPU, _structs.BACKEND_SIM):
        if not host:
            raise ValueError("backend %r runs on host memory, but '%s' is on %s"
                             % (backend, first_name, first.device_label()))
    else:
        if first.device_type != _GPU_DEVICE[code]:
            raise ValueError("backend %r needs its device's memory, but '%s' is on %s"
                             % (backend, first_name, first.device_label()))
        if device < 0:
            device = first.device_id
        elif device != first.device_id:
            raise ValueError("backend %r is device %d, but '%s' is on %s"
                             % (backend, device, first_name, first.device_label()))
    return get_context(code, device)


def _prepare(op, tensors, ints, backend, stream, workspace=None):
    """(spec, context, args buffer, keep-alive list) for op with the given arrays and flags."""
    spec = _call.SPECS[op]
    sint = _stream_int(stream)
    written = WRITTEN[op]
    views = []
    for name, obj in tensors.items():
        if obj is not None:
            views.append((name, _dlpack.view(obj, name, sint, name in written)))
    ctx = _context_for(views, backend)
    ctx.set_stream(sint)
    buf = _call.new_args(spec)
    for name, v in views:
        _call.put_tensor(buf, spec.offset[name], v.ptr, v.dtype, v.shape, v.stride)
    for name, value in ints.items():
        _call.put_int(buf, spec.offset[name], int(value))
    if workspace is not None:
        ws = _dlpack.workspace_view(workspace, sint)
        if (ws.device_type, ws.device_id) != (views[0][1].device_type, views[0][1].device_id):
            raise ValueError("'workspace' is on %s, the arrays on %s"
                             % (ws.device_label(), views[0][1].device_label()))
        _call.put_workspace(buf, spec.offset["workspace"], ws.ptr, ws.nbytes)
        views.append(("workspace", ws))
    return spec, ctx, buf, views


def _run(op, tensors, ints, backend, stream, workspace=None):
    spec, ctx, buf, keep = _prepare(op, tensors, ints, backend, stream, workspace)
    _call.call(spec, ctx, buf)
    del keep


def supports(op: str, backend: str) -> bool:
    """Does `backend` ("cpu", "cuda:0", "sim64"...) implement op ("selective_scan_bwd"...)?"""
    code, device = parse_backend(backend)
    return get_context(code, device).supports(op)


# ---------------------------------------------------------------- causal conv1d


def causal_conv1d_fwd(x, weight, out, *, bias=None, seq_idx=None, initial_states=None,
                      final_states=None, activation=None, backend=None, stream=None):
    """out (B,D,L) = act(bias + causal depthwise conv of x (B,D,L) with weight (D,W));
    final_states (B,D,W-1) receives the last W-1 inputs.  See portssm.h."""
    _run("causal_conv1d_fwd",
         dict(x=x, weight=weight, bias=bias, seq_idx=seq_idx, initial_states=initial_states,
              final_states=final_states, out=out),
         dict(activation=_activation(activation)), backend, stream)


def _conv_bwd_tensors(x, weight, dout, dx, dweight, bias, seq_idx, initial_states, dfinal_states,
                      dbias, dinitial_states):
    return dict(x=x, weight=weight, bias=bias, seq_idx=seq_idx, initial_states=initial_states,
                dout=dout, dfinal_states=dfinal_states, dx=dx, dweight=dweight, dbias=dbias,
                dinitial_states=dinitial_states)


def causal_conv1d_bwd(x, weight, dout, dx, dweight, *, bias=None, seq_idx=None,
                      initial_states=None, dfinal_states=None, dbias=None, dinitial_states=None,
                      activation=None, workspace=None, backend=None, stream=None):
    """Gradients of causal_conv1d_fwd, written into dx, dweight (and dbias, dinitial_states)."""
    _run("causal_conv1d_bwd",
         _conv_bwd_tensors(x, weight, dout, dx, dweight, bias, seq_idx, initial_states,
                           dfinal_states, dbias, dinitial_states),
         dict(activation=_activation(activation)), backend, stream, workspace)


def causal_conv1d_bwd_workspace_size(x, weight, dout, dx, dweight, *, bias=None, seq_idx=None,
                                     initial_states=None, dfinal_states=None, dbias=None,
                                     dinitial_states=None, activation=None, backend=None,
                                     stream=None) -> int:
    """Bytes of workspace causal_conv1d_bwd needs for these arguments on their device."""
    spec, ctx, buf, keep = _prepare(
        "causal_conv1d_bwd",
        _conv_bwd_tensors(x, weight, dout, dx, dweight, bias, seq_idx, initial_states,
                          dfinal_states, dbias, dinitial_states),
        dict(activation=_activation(activation)), backend, stream)
    return _call.workspace_size(spec, ctx, buf)


def causal_conv1d_update(x, conv_state, weight, out, *, bias=None, cache_seqlens=None,
                         conv_state_indices=None, activation=None, backend=None, stream=None):
    """Decode: out = conv of x (B,D) or (B,D,T) against conv_state (B',D,S), updated in place."""
    _run("causal_conv1d_update",
         dict(x=x, conv_state=conv_state, weight=weight, bias=bias, cache_seqlens=cache_seqlens,
              conv_state_indices=conv_state_indices, out=out),
         dict(activation=_activation(activation)), backend, stream)


# ---------------------------------------------------------------- selective scan


def _scan_fwd_tensors(u, delta, A, B, C, out, D, z, delta_bias, initial_state, final_state,
                      checkpoints):
    return dict(u=u, delta=delta, A=A, B=B, C=C, D=D, z=z, delta_bias=delta_bias,
                initial_state=initial_state, final_state=final_state, out=out,
                checkpoints=checkpoints)


def selective_scan_fwd(u, delta, A, B, C, out, *, D=None, z=None, delta_bias=None,
                       delta_softplus=False, initial_state=None, final_state=None,
                       checkpoints=None, backend=None, stream=None):
    """Mamba-1 selective scan into out (B,D,L); see portssm.h for the recurrence.  checkpoints
    (B,D,K,N) float32, shaped by selective_scan_checkpoint_shape (absent when K == 0), receives
    the states that selective_scan_bwd can read instead of recomputing them."""
    _run("selective_scan_fwd",
         _scan_fwd_tensors(u, delta, A, B, C, out, D, z, delta_bias, initial_state, final_state,
                           checkpoints),
         dict(delta_softplus=bool(delta_softplus)), backend, stream)


def selective_scan_checkpoint_shape(u, delta, A, B, C, out, *, D=None, z=None, delta_bias=None,
                                    delta_softplus=False, initial_state=None, final_state=None,
                                    backend=None, stream=None):
    """(B, D, K, N): the shape of selective_scan_fwd's checkpoints; K == 0: leave them absent."""
    spec, ctx, buf, keep = _prepare(
        "selective_scan_fwd",
        _scan_fwd_tensors(u, delta, A, B, C, out, D, z, delta_bias, initial_state, final_state,
                          None),
        dict(delta_softplus=bool(delta_softplus)), backend, stream)
    return _call.checkpoint_shape(ctx, buf)


def _scan_bwd_tensors(u, delta, A, B, C, dout, du, ddelta, dA, dB, dC, D, z, delta_bias,
                      initial_state, dfinal_state, dD, dz, ddelta_bias, dinitial_state,
                      checkpoints):
    return dict(u=u, delta=delta, A=A, B=B, C=C, D=D, z=z, delta_bias=delta_bias,
                initial_state=initial_state, dout=dout, dfinal_state=dfinal_state, du=du,
                ddelta=ddelta, dA=dA, dB=dB, dC=dC, dD=dD, dz=dz, ddelta_bias=ddelta_bias,
                dinitial_state=dinitial_state, checkpoints=checkpoints)


def selective_scan_bwd(u, delta, A, B, C, dout, du, ddelta, dA, dB, dC, *, D=None, z=None,
                       delta_bias=None, initial_state=None, dfinal_state=None, dD=None, dz=None,
                       ddelta_bias=None, dinitial_state=None, delta_softplus=False,
                       checkpoints=None, workspace=None, backend=None, stream=None):
    """Gradients of selective_scan_fwd (dD, dz, ddelta_bias need D, z, delta_bias)."""
    _run("selective_scan_bwd",
         _scan_bwd_tensors(u, delta, A, B, C, dout, du, ddelta, dA, dB, dC, D, z, delta_bias,
                           initial_state, dfinal_state, dD, dz, ddelta_bias, dinitial_state,
                           checkpoints),
         dict(delta_softplus=bool(delta_softplus)), backend, stream, workspace)


def selective_scan_bwd_workspace_size(u, delta, A, B, C, dout, du, ddelta, dA, dB, dC, *, D=None,
                                      z=None, delta_bias=None, initial_state=None,
                                      dfinal_state=None, dD=None, dz=None, ddelta_bias=None,
                                      dinitial_state=None, delta_softplus=False,
                                      checkpoints=None, backend=None, stream=None) -> int:
    """Bytes of workspace selective_scan_bwd needs for these arguments on their device."""
    spec, ctx, buf, keep = _prepare(
        "selective_scan_bwd",
        _scan_bwd_tensors(u, delta, A, B, C, dout, du, ddelta, dA, dB, dC, D, z, delta_bias,
                          initial_state, dfinal_state, dD, dz, ddelta_bias, dinitial_state,
                          checkpoints),
        dict(delta_softplus=bool(delta_softplus)), backend, stream)
    return _call.workspace_size(spec, ctx, buf)


def selective_state_update(state, x, dt, A, B, C, out, *, D=None, z=None, dt_bias=None,
                           state_batch_indices=None, dt_softplus=False, backend=None,
                           stream=None):
    """Decode step of the scan, state (B',[H,]P,N) float32, float16 or bfloat16 (whatever x's
    dtype; computed in float32, rounded once per store) updated in place; see portssm.h."""
    _run("selective_state_update",
         dict(state=state, x=x, dt=dt, A=A, B=B, C=C, D=D, z=z, dt_bias=dt_bias,
              state_batch_indices=state_batch_indices, out=out),
         dict(dt_softplus=bool(dt_softplus)), backend, stream)


# ---------------------------------------------------------------- row norms

_NORM_KINDS = {"layer": _structs.NORM_LAYER, "layernorm": _structs.NORM_LAYER,
               "rms": _structs.NORM_RMS, "rmsnorm": _structs.NORM_RMS}


def _norm_kind(kind) -> int:
    try:
        return _NORM_KINDS[str(kind).lower()]
    except KeyError:
        raise ValueError("'kind' must be 'layer' or 'rms', got %r" % (kind,)) from None


def _norm_scalars(spec, buf, group_size, eps=None):
    _call.put_i64(buf, spec.offset["group_size"], int(group_size or 0))
    if eps is not None:
        _call.put_float(buf, spec.offset["eps"], float(eps))


def norm_fwd(x, weight, out, *, kind="layer", residual=None, z=None, bias=None,
             residual_out=None, mean=None, rstd=None, eps=1e-6, group_size=0,
             norm_before_gate=True, backend=None, stream=None):
    """Row norm over the last dim of (R,H) arrays into out: s = x (+ residual), written to
    residual_out; LayerNorm (kind "layer") or RMSNorm ("rms") of s per group of group_size
    channels (0: all H) times weight (+ bias), gated by silu(z) after the norm
    (norm_before_gate) or before it; mean (LayerNorm) and rstd (R, H/group_size) float32
    receive the statistics.  See portssm.h."""
    spec, ctx, buf, keep = _prepare(
        "norm_fwd",
        dict(x=x, residual=residual, z=z, weight=weight, bias=bias, out=out,
             residual_out=residual_out, mean=mean, rstd=rstd),
        dict(kind=_norm_kind(kind), norm_before_gate=bool(norm_before_gate)), backend, stream)
    _norm_scalars(spec, buf, group_size, eps)
    _call.call(spec, ctx, buf)
    del keep


def _norm_bwd_prepare(x, weight, rstd, dout, dx, kind, z, bias, mean, dresidual_out, dresidual,
                      dz, dweight, dbias, out, group_size, norm_before_gate, backend, stream,
                      workspace):
    spec, ctx, buf, keep = _prepare(
        "norm_bwd",
        dict(x=x, z=z, weight=weight, bias=bias, mean=mean, rstd=rstd, dout=dout,
             dresidual_out=dresidual_out, dx=dx, dresidual=dresidual, dz=dz, dweight=dweight,
             dbias=dbias, out=out),
        dict(kind=_norm_kind(kind), norm_before_gate=bool(norm_before_gate)), backend, stream,
        workspace)
    _norm_scalars(spec, buf, group_size)
    return spec, ctx, buf, keep


def norm_bwd(x, weight, rstd, dout, dx, *, kind="layer", z=None, bias=None, mean=None,
             dresidual_out=None, dresidual=None, dz=None, dweight=None, dbias=None, out=None,
             group_size=0, norm_before_gate=True, workspace=None, backend=None, stream=None):
    """Gradients of norm_fwd: x is the forward's residual_out where it wrote one (else its x),
    mean / rstd its statistics; dx (and dresidual, in its own dtype) receive the gradient of
    s plus dresidual_out, dz, dweight, dbias theirs; out (optional) the forward's out again."""
    spec, ctx, buf, keep = _norm_bwd_prepare(
        x, weight, rstd, dout, dx, kind, z, bias, mean, dresidual_out, dresidual, dz, dweight,
        dbias, out, group_size, norm_before_gate, backend, stream, workspace)
    _call.call(spec, ctx, buf)
    del keep


def norm_bwd_workspace_size(x, weight, rstd, dout, dx, *, kind="layer", z=None, bias=None,
                            mean=None, dresidual_out=None, dresidual=None, dz=None, dweight=None,
                            dbias=None, out=None, group_size=0, norm_before_gate=True,
                            backend=None, stream=None) -> int:
    """Bytes of workspace norm_bwd needs for these arguments on their device."""
    spec, ctx, buf, keep = _norm_bwd_prepare(
        x, weight, rstd, dout, dx, kind, z, bias, mean, dresidual_out, dresidual, dz, dweight,
        dbias, out, group_size, norm_before_gate, backend, stream, None)
    return _call.workspace_size(spec, ctx, buf)
