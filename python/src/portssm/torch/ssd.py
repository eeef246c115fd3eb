"""Drop-ins for mamba-ssm 2.3.2.post1's Mamba-2 SSD (mamba_ssm.ops.triton.ssd_combined):
mamba_chunk_scan_combined and mamba_split_conv1d_scan_combined, the same names, argument
order, defaults and return values, autograd through portssm's backward ops.

Where portssm differs: activations (x, dt, B, C, z) run in x's dtype (a float32 dt with bf16 x
is rounded to bf16 first); chunk_size is accepted and passed on but does not change the result;
cu_seqlens restarts the state at every packed boundary (mamba-ssm takes the restarts from
seq_idx alone and uses cu_seqlens for varlen_states only, so the two agree whenever seq_idx
marks the same sequences, which is how transformers and vLLM call it); return_varlen_states
works with autograd for out and final_states (mamba-ssm refuses the backward), the varlen
states themselves have no gradient.

state_dtype (mamba-ssm's main branch, after 2.3.2.post1): the dtype of the inter-chunk states,
forward and backward; None means the activation dtype.  portssm's chunked SSD (the GPU
backends) keeps those states in the activation dtype, forward and backward (the cpu backend,
the oracle, runs the recurrence in double), so None and the activation dtype itself are
honoured; any other dtype raises NotImplementedError naming what libportssm lacks (see
_check_state_dtype)."""

from __future__ import annotations

import collections
import math

import torch
import torch.nn.functional as F

from . import _checks, _impl, _impl_norm, _impl_ssd, _registry, _registry_norm
from ._runtime import compile_boundary, is_compiling
from .selective_scan import _autocast_dtype


def _i32(t):
    return t if t is None or t.dtype == torch.int32 else t.to(torch.int32)


_CHUNK_SCAN = "mamba_chunk_scan_combined"


def _check_chunk_scan_args(x, dt, A, B, C, D, z, dt_bias, initial_states, seq_idx, cu_seqlens):
    """Every tensor's rank (the function reads shapes to allocate its outputs), x's dtype (the
    others' are checked where they are converted to x's or float32)."""
    fn = _CHUNK_SCAN
    _checks.tensors(fn, (
            ("x", x, "(batch, seqlen, nheads, headdim)", (4,)),
            ("dt", dt, "(batch, seqlen, nheads)", (3,)),
            ("A", A, "(nheads,)", (1,)),
            ("B", B, "(batch, seqlen, ngroups, dstate)", (4,)),
            ("C", C, "(batch, seqlen, ngroups, dstate)", (4,)),
            ("D", D, "(nheads, headdim) or (nheads,)", (1, 2)),
            ("z", z, "(batch, seqlen, nheads, headdim)", (4,)),
            ("dt_bias", dt_bias, "(nheads,)", (1,)),
            ("initial_states", initial_states, "(batch, nheads, headdim, dstate)", (4,)),
            ("seq_idx", seq_idx, "(batch, seqlen)", (2,)),
            ("cu_seqlens", cu_seqlens, "(num_sequences + 1,)", (1,))))
    _checks.floating(fn, "x", x)


def _check_state_dtype(state_dtype, act, fn):
    """state_dtype of mamba_chunk_scan_combined / mamba_split_conv1d_scan_combined: None or the
    activation dtype act, the dtype libportssm's chunked ssd_chunk_scan keeps the inter-chunk
    states in (its chunk-output products take them in act, its checkpoints for the backward are
    act).  Another dtype would need the library to take a state dtype for those two: refused,
    never ignored."""
    if state_dtype is None or state_dtype == act:
        return
    if not isinstance(state_dtype, torch.dtype):
        raise TypeError("%s: state_dtype must be a torch.dtype or None, got %r"
                        % (fn, state_dtype))
    raise NotImplementedError(
        "%s: state_dtype=%s with %s activations is not supported by portssm: its chunked SSD "
        "keeps the inter-chunk states in the activation dtype (%s), forward and backward; "
        "states in another dtype need libportssm's ssd_chunk_scan to take a state dtype.  Pass "
        "state_dtype=None (or %s)." % (fn, state_dtype, act, act, act))


def _limit(dt_limit):
    lo, hi = float(dt_limit[0]), float(dt_limit[1])
    return (lo, hi) != (0.0, math.inf), lo, hi


@compile_boundary
def mamba_chunk_scan_combined(x, dt, A, B, C, chunk_size, D=None, z=None, dt_bias=None,
                              initial_states=None, seq_idx=None, cu_seqlens=None,
                              dt_softplus=False, dt_limit=(0.0, float("inf")),
                              return_final_states=False, return_varlen_states=False,
                              state_dtype=None):
    """
    x: (batch, seqlen, nheads, headdim); dt: (batch, seqlen, nheads); A: (nheads);
    B, C: (batch, seqlen, ngroups, dstate); D: (nheads, headdim) or (nheads,);
    z: (batch, seqlen, nheads, headdim); dt_bias: (nheads,);
    initial_states: (batch, nheads, headdim, dstate); seq_idx: (batch, seqlen);
    cu_seqlens: (num_sequences + 1), used with return_varlen_states (batch 1).
    Returns out (batch, seqlen, nheads, headdim), then final_states (batch, nheads, headdim,
    dstate) if return_final_states, then varlen_states (num_sequences, nheads, headdim, dstate)
    if return_varlen_states; the states in float32.
    state_dtype: the dtype of the inter-chunk states; None (the activation dtype) or x's dtype.
    """
    _check_chunk_scan_args(x, dt, A, B, C, D, z, dt_bias, initial_states, seq_idx, cu_seqlens)
    _check_state_dtype(state_dtype, x.dtype, "mamba_chunk_scan_combined")
    if return_varlen_states and cu_seqlens is None:
        raise ValueError("cu_seqlens must be provided if return_varlen_states is True")
    if not return_varlen_states:
        cu_seqlens = None
    act = x.dtype
    limit, lo, hi = _limit(dt_limit)
    # Where a gradient will flow, the forward keeps for the backward y before the gate (with
    # z; mamba-ssm keeps it likewise) and the states entering the chunks, (B, H, L/chunk,
    # P*N) in x's dtype, N/chunk of x's size (mamba-ssm computes those again): the backward
    # then reads them instead of computing them again.
    grad = torch.is_grad_enabled() and any(
        t is not None and t.requires_grad
        for t in (x, dt, A, B, C, D, z, dt_bias, initial_states))
    fn, as_act, f32 = _CHUNK_SCAN, _checks.as_dtype, _checks.f32
    out, final, varlen, _, _ = _registry.ssd_fwd_routed(
        grad, x, as_act(fn, "dt", dt, act), f32(fn, "A", A), as_act(fn, "B", B, act),
        as_act(fn, "C", C, act), f32(fn, "D", D), as_act(fn, "z", z, act),
        f32(fn, "dt_bias", dt_bias), f32(fn, "initial_states", initial_states),
        _i32(seq_idx), _i32(cu_seqlens), bool(dt_softplus), limit, lo, hi, int(chunk_size),
        bool(return_final_states), bool(return_varlen_states), grad and z is not None, grad)
    if not return_varlen_states:
        return out if not return_final_states else (out, final)
    return (out, varlen) if not return_final_states else (out, final, varlen)


# Whether mamba_split_conv1d_scan_combined keeps the SSD's chunk checkpoints for the backward.
# They spare the backward the chunk states and the state pass (7% of the SSD's fwd+bwd at B4
# L2048 H80, runs 88-89) but cost N/chunk of x's size per layer (half of x at N 128, chunk 256:
# 12 MiB a layer of the 130M model at B8 L1024, where the layer keeps 76 MiB otherwise);
# mamba-ssm keeps none, and so does the split op, which must fit where mamba-ssm's does.
SPLIT_KEEPS_CHECKPOINTS = False


def _split_ops():
    """(conv_fwd, conv_bwd, ssd_fwd, ssd_bwd, norm_fwd, norm_bwd): the custom ops while
    torch.compile traces, else the implementations themselves."""
    if is_compiling():
        return (_registry.conv_fwd, _registry.conv_bwd, _registry.ssd_fwd, _registry.ssd_bwd,
                _registry_norm.norm_fwd, _registry_norm.norm_bwd)
    return (_impl.conv_fwd, _impl.conv_bwd, _impl_ssd.ssd_fwd, _impl_ssd.ssd_bwd,
            _impl_norm.norm_fwd, _impl_norm.norm_bwd)


# The split op's sizes and options (a named tuple: torch.compile traces it as constants).
_Opt = collections.namedtuple("_Opt", (
    "batch", "seqlen", "nheads", "headdim", "ngroups", "dim", "dstate", "conv_dim", "d_nonssm",
    "chunk_size", "limit", "lo", "hi", "return_final_states", "silu", "eps", "norm_before_gate",
    "out_dtype", "keep_checkpoints"))


def _split(opt, t):
    """zxbcdt (or its gradient) as (zx0, z, xBC, dt), views."""
    return torch.split(t, [2 * opt.d_nonssm, opt.dim, opt.conv_dim, opt.nheads], dim=-1)


def _xbc(opt, t):
    """The conv output (batch, L, conv_dim) (or its gradient) as x, B, C in the SSD's shapes,
    views."""
    x, B, C = torch.split(t, [opt.dim, opt.ngroups * opt.dstate, opt.ngroups * opt.dstate],
                          dim=-1)
    b, l = opt.batch, opt.seqlen
    return (x.reshape(b, l, opt.nheads, opt.headdim), B.reshape(b, l, opt.ngroups, opt.dstate),
            C.reshape(b, l, opt.ngroups, opt.dstate))


def _rows(opt, t):
    """(batch, L, ...) as (batch*L, -1)."""
    return t.reshape(opt.batch * opt.seqlen, -1)


def _heads(opt, t):
    """(batch, L, dim) or (batch*L, dim) as (batch, L, nheads, headdim)."""
    return t.reshape(opt.batch, opt.seqlen, opt.nheads, opt.headdim)


def _conv(conv_fwd, xBC, conv_w, conv_b, seq_idx, silu):
    """The causal conv of xBC (batch, L, conv_dim) along L: (batch, L, conv_dim)."""
    return conv_fwd(xBC.transpose(1, 2), conv_w, conv_b, seq_idx, None, False,
                    silu)[0].transpose(1, 2)


def _split_forward(zxbcdt, conv_w, conv_b, dt_bias, A, D, initial_states, rms_w, out_w, out_b,
                   seq_idx, opt, save):
    """The split op's forward on tensors in the dtypes it computes in.  Returns (out, final
    states, kept): kept is what the backward reads, (y, rstd, checkpoints): y the SSD's output
    before the gate or the norm (kept where save), rstd the norm's statistics, the checkpoints
    where SPLIT_KEEPS_CHECKPOINTS."""
    conv_fwd, _, ssd_fwd, _, norm_fwd, _ = _split_ops()
    zx0, z, xBC, dt = _split(opt, zxbcdt)
    x, B, C = _xbc(opt, _conv(conv_fwd, xBC, conv_w, conv_b, seq_idx, opt.silu))
    gate_in_scan = rms_w is None
    z4 = _heads(opt, z)
    out, final, _, y, ckpt = ssd_fwd(
        x, dt, A, B, C, D, z4 if gate_in_scan else None, dt_bias, initial_states, seq_idx,
        None, True, opt.limit, opt.lo, opt.hi, opt.chunk_size, opt.return_final_states, False,
        save and gate_in_scan, save and opt.keep_checkpoints)
    del x, B, C
    rstd = None
    if gate_in_scan:
        y_ssm = _rows(opt, out)
    else:
        y = out
        y_ssm, _, _, rstd = norm_fwd(_rows(opt, out), None, _rows(opt, z), rms_w, None,
                                     opt.eps, True, opt.dim // opt.ngroups,
                                     opt.norm_before_gate, _impl_norm.RESIDUAL_NONE, save)
    del out
    y_full = y_ssm
    if opt.d_nonssm > 0:
        a, g = _rows(opt, zx0).chunk(2, dim=-1)
        y_full = torch.cat([F.silu(a) * g, y_ssm], dim=-1)
    if out_w is not None:
        if opt.out_dtype is not None:
            y_full = y_full.to(opt.out_dtype)
        y_full = F.linear(y_full, out_w, out_b)
    out = y_full.reshape(opt.batch, opt.seqlen, -1)
    return out, final, (y, rstd, ckpt)


class _SplitConvScan(torch.autograd.Function):
    """mamba_split_conv1d_scan_combined as one autograd node, keeping for the backward what
    mamba-ssm's MambaSplitConv1dScanCombinedFn keeps: zxbcdt, the SSD's output before the gate
    or norm, the norm's rstd and the parameters.  The conv output, the norm's (or the gate's)
    output for the out projection's weight gradient and the SSD's chunk states (unless
    SPLIT_KEEPS_CHECKPOINTS) are computed again in the backward.  Autocast is off inside: the
    caller gives the out projection's weights in autocast's dtype."""

    @staticmethod
    def forward(ctx, zxbcdt, conv_w, conv_b, dt_bias, A, D, initial_states, rms_w, out_w, out_b,
                seq_idx, opt):
        with torch.autocast(zxbcdt.device.type, enabled=False):
            out, final, (y, rstd, ckpt) = _split_forward(
                zxbcdt, conv_w, conv_b, dt_bias, A, D, initial_states, rms_w, out_w, out_b,
                seq_idx, opt, True)
        ctx.save_for_backward(zxbcdt, conv_w, conv_b, dt_bias, A, D, initial_states, rms_w,
                              out_w, seq_idx, y, rstd, ckpt)
        ctx.opt = opt
        ctx.device_type = zxbcdt.device.type
        ctx.has_out_b = out_b is not None
        ctx.set_materialize_grads(False)
        if not opt.return_final_states:
            return out
        return out, final

    @staticmethod
    def backward(ctx, dout, dfinal=None):
        with torch.autocast(ctx.device_type, enabled=False):
            return _split_backward(ctx, dout, dfinal)


def _split_backward(ctx, dout, dfinal):
    (zxbcdt, conv_w, conv_b, dt_bias, A, D, initial_states, rms_w, out_w, seq_idx, y, rstd,
     ckpt) = ctx.saved_tensors
    opt = ctx.opt
    conv_fwd, conv_bwd, _, ssd_bwd, _, norm_bwd = _split_ops()
    eager = not is_compiling()
    gate_in_scan = rms_w is None
    act = zxbcdt.dtype
    zx0, z, xBC, dt = _split(opt, zxbcdt)
    z4 = _heads(opt, z)
    group = opt.dim // opt.ngroups
    if dout is None:  # only the final states were used
        width = out_w.shape[0] if out_w is not None else opt.d_nonssm + opt.dim
        dout = torch.zeros(opt.batch, opt.seqlen, width, device=zxbcdt.device,
                           dtype=(opt.out_dtype or act) if out_w is not None else act)
    # contiguous, so that its slices' rows below are views (they receive gradients in place)
    dzxbcdt = torch.empty(zxbcdt.shape, dtype=act, device=zxbcdt.device)
    dzx0, dz, dxBC_in, ddt = _split(opt, dzxbcdt)

    # the out projection's input gradient; its weight gradient below, once the norm's backward
    # has given its input again (the gate's or the norm's output)
    g_out = _rows(opt, dout)
    dy_full = g_out
    dout_b = None
    if out_w is not None:
        dout_b = g_out.sum(0) if ctx.has_out_b else None
        dy_full = g_out @ out_w
        if dy_full.dtype != act:
            dy_full = dy_full.to(act)
    dy = dy_full[:, opt.d_nonssm:]
    if opt.d_nonssm > 0:  # out = [silu(a) * g, ...]
        a, g = _rows(opt, zx0).chunk(2, dim=-1)
        dy0 = dy_full[:, :opt.d_nonssm]
        da = torch.ops.aten.silu_backward(dy0 * g, a)
        dg = dy0 * F.silu(a)
        rows0 = _rows(opt, dzx0)
        rows0[:, :opt.d_nonssm].copy_(da)
        rows0[:, opt.d_nonssm:].copy_(dg)
        del da, dg, dy0

    # the gated norm (or the gate, inside the SSD); the norm's backward also gives its output
    # again, the out projection's input
    drms = y_ssm = None
    if gate_in_scan:
        dout_ssd = _heads(opt, dy)
        if out_w is not None:
            y_ssm = _rows(opt, y * F.silu(z4))
    else:
        into = dict(dz=_rows(opt, dz)) if eager else {}
        d_ssd, _, dz_rows, drms, _, y_ssm = norm_bwd(
            _rows(opt, y), _rows(opt, z), rms_w, None, None, rstd, dy, None, True, group,
            opt.norm_before_gate, False, True, True, False, out_w is not None, **into)
        if not eager:
            _rows(opt, dz).copy_(dz_rows)
        del dz_rows
        dout_ssd = _heads(opt, d_ssd)
        y = None  # (the SSD reads y only with z)
    del dy, dy_full

    dout_w = None
    if out_w is not None:
        cast = opt.out_dtype
        if cast is not None:
            y_ssm = y_ssm.to(cast)
        dout_w = g_out.t() @ y_ssm
        del y_ssm
        if opt.d_nonssm > 0:
            a, g = _rows(opt, zx0).chunk(2, dim=-1)
            swiglu = F.silu(a) * g
            swiglu = swiglu.to(cast) if cast is not None else swiglu
            dout_w = torch.cat([g_out.t() @ swiglu, dout_w], dim=1)
            del swiglu
    del g_out

    # the SSD on the conv output computed again.  In eager dz (with the gate) or ddt go
    # straight into zxbcdt's gradient (one of them: the library refuses outputs whose extents
    # overlap, as two slices of one row do; for the same reason dx, dB and dC come separate)
    x, B, C = _xbc(opt, _conv(conv_fwd, xBC, conv_w, conv_b, seq_idx, opt.silu))
    into = {}
    if eager:
        into = dict(dz=_heads(opt, dz)) if gate_in_scan else dict(ddt=ddt)
    want_dinit = initial_states is not None and ctx.needs_input_grad[6]
    grads = ssd_bwd(x, dt, A, B, C, D, z4 if gate_in_scan else None, dt_bias, initial_states,
                    seq_idx, None, dout_ssd, dfinal if opt.return_final_states else None,
                    y if gate_in_scan else None, ckpt if ckpt.numel() > 0 else None, True,
                    opt.limit, opt.lo, opt.hi, opt.chunk_size, want_dinit, **into)
    gx, gdt, dA, gB, gC, dD, gz, ddt_bias, dinit = grads
    del x, B, C, dout_ssd
    if "ddt" not in into:
        ddt.copy_(gdt)
    if gate_in_scan and "dz" not in into:
        dz.copy_(gz.reshape(opt.batch, opt.seqlen, opt.dim))
    b, l = opt.batch, opt.seqlen
    dxBC = torch.cat([gx.reshape(b, l, -1), gB.reshape(b, l, -1), gC.reshape(b, l, -1)], dim=-1)
    del gx, gB, gC, gdt, gz

    # the conv (+ activation)
    if eager:
        _, dconv_w, dconv_b, _ = conv_bwd(xBC.transpose(1, 2), conv_w, conv_b, seq_idx, None,
                                          dxBC.transpose(1, 2), None, False, opt.silu,
                                          dx=dxBC_in.transpose(1, 2))
    else:
        g, dconv_w, dconv_b, _ = conv_bwd(xBC.transpose(1, 2), conv_w, conv_b, seq_idx, None,
                                          dxBC.transpose(1, 2), None, False, opt.silu)
        dxBC_in.copy_(g.transpose(1, 2))
    return (dzxbcdt, dconv_w, dconv_b if conv_b is not None else None,
            ddt_bias if dt_bias is not None else None, dA, dD if D is not None else None,
            dinit if want_dinit else None, drms, dout_w, dout_b, None, None)


_SPLIT = "mamba_split_conv1d_scan_combined"


def _check_split_args(zxbcdt, conv1d_weight, conv1d_bias, dt_bias, A, D, initial_states, seq_idx,
                      rmsnorm_weight, outproj_weight, outproj_bias):
    """Every tensor's rank (the function reads shapes to split zxbcdt), and the dtypes of those
    that are not converted to float32 on the way (where they are, f32 checks theirs)."""
    fn = _SPLIT
    _checks.tensors(fn, (
            ("zxbcdt", zxbcdt, "(batch, seqlen, 2*d_nonssm + 2*dim + 2*ngroups*dstate + nheads)",
             (3,)),
            ("conv1d_weight", conv1d_weight, "(dim + 2*ngroups*dstate, width) or "
             "(dim + 2*ngroups*dstate, 1, width)", (2, 3)),
            ("conv1d_bias", conv1d_bias, "(dim + 2*ngroups*dstate,)", (1,)),
            ("dt_bias", dt_bias, "(nheads,)", (1,)),
            ("A", A, "(nheads,)", (1,)),
            ("D", D, "(nheads, headdim) or (nheads,)", (1, 2)),
            ("initial_states", initial_states, "(batch, nheads, headdim, dstate)", (4,)),
            ("seq_idx", seq_idx, "(batch, seqlen)", (2,)),
            ("rmsnorm_weight", rmsnorm_weight, "(dim,)", (1,)),
            ("outproj_weight", outproj_weight, "(out_dim, d_nonssm + dim)", (2,)),
            ("outproj_bias", outproj_bias, "(out_dim,)", (1,))))
    for name, t in (("zxbcdt", zxbcdt), ("conv1d_weight", conv1d_weight),
                    ("conv1d_bias", conv1d_bias), ("outproj_weight", outproj_weight),
                    ("outproj_bias", outproj_bias)):
        _checks.floating(fn, name, t)


@compile_boundary
def mamba_split_conv1d_scan_combined(zxbcdt, conv1d_weight, conv1d_bias, dt_bias, A, D,
                                     chunk_size, initial_states=None, seq_idx=None,
                                     dt_limit=(0.0, float("inf")), return_final_states=False,
                                     activation="silu", rmsnorm_weight=None, rmsnorm_eps=1e-6,
                                     outproj_weight=None, outproj_bias=None, headdim=None,
                                     ngroups=1, norm_before_gate=True, state_dtype=None):
    """
    The Mamba-2 mixer after in_proj: zxbcdt (batch, seqlen, 2*d_nonssm + 2*dim +
    2*ngroups*dstate + nheads), dim = nheads * headdim, split into the swiglu part, z, xBC and
    dt; xBC through the causal conv1d (conv1d_weight (dim + 2*ngroups*dstate, width)) and the
    activation, split into x, B, C; the SSD with dt_softplus; then either the z gate or the
    gated RMSNorm (rmsnorm_weight (dim,)), then outproj.  Returns out (batch, seqlen, out_dim or
    d_nonssm + dim), and final_states if return_final_states.  state_dtype: as for
    mamba_chunk_scan_combined, None or zxbcdt's dtype.

    One autograd node where a gradient will flow, which keeps what mamba-ssm's keeps (zxbcdt,
    the SSD's output before the gate or norm, the norm's rstd) and computes the conv output and
    the out projection's input again in the backward.  Under autocast the out projection runs
    in its dtype, as mamba-ssm's does.
    """
    _check_split_args(zxbcdt, conv1d_weight, conv1d_bias, dt_bias, A, D, initial_states, seq_idx,
                      rmsnorm_weight, outproj_weight, outproj_bias)
    _check_state_dtype(state_dtype, zxbcdt.dtype, "mamba_split_conv1d_scan_combined")
    if activation not in (None, "silu", "swish"):
        raise ValueError("activation must be None, 'silu' or 'swish', got %r" % (activation,))
    if D.dim() == 1:
        if headdim is None:
            raise ValueError("headdim must be given when D is (nheads,)")
        nheads = D.shape[0]
    else:
        nheads, headdim = D.shape
    if nheads % ngroups:
        raise ValueError("ngroups = %d does not divide nheads = %d" % (ngroups, nheads))
    if conv1d_weight.dim() == 3:
        _checks.size(_SPLIT, "conv1d_weight", conv1d_weight, 1, 1, "(dim, 1, width)")
        conv1d_weight = conv1d_weight.squeeze(1)
    batch, seqlen, width = zxbcdt.shape
    dim = nheads * headdim
    dstate = (conv1d_weight.shape[0] - dim) // ngroups // 2
    d_nonssm = (width - 2 * dim - 2 * ngroups * dstate - nheads) // 2
    if d_nonssm < 0 or width != 2 * d_nonssm + 2 * dim + 2 * ngroups * dstate + nheads:
        raise ValueError("zxbcdt's last dim %d is not 2*d_nonssm + 2*%d + 2*%d*%d + %d"
                         % (width, dim, ngroups, dstate, nheads))
    if outproj_weight is None and outproj_bias is not None:
        raise ValueError("outproj_bias without outproj_weight")
    out_dtype = _autocast_dtype(zxbcdt.device.type) if outproj_weight is not None else None
    if out_dtype is not None:  # the casts autocast makes for the out projection
        outproj_weight = outproj_weight.to(out_dtype)
        outproj_bias = outproj_bias.to(out_dtype) if outproj_bias is not None else None
    if rmsnorm_weight is not None and rmsnorm_weight.dtype not in (torch.float32, zxbcdt.dtype):
        # what the norm op takes (an exact copy)
        rmsnorm_weight = _checks.f32(_SPLIT, "rmsnorm_weight", rmsnorm_weight)
    if rmsnorm_weight is not None and rmsnorm_eps is None:
        raise TypeError("rmsnorm_eps must be a number when rmsnorm_weight is given, got None")
    # (without the norm its eps is unused: transformers' FalconH1 passes None then)
    eps = float(rmsnorm_eps) if rmsnorm_weight is not None else 0.0
    limit, lo, hi = _limit(dt_limit)
    opt = _Opt(batch, seqlen, nheads, headdim, ngroups, dim, dstate, dim + 2 * ngroups * dstate,
               d_nonssm, int(chunk_size), limit, lo, hi, bool(return_final_states),
               activation is not None, eps, bool(norm_before_gate), out_dtype,
               SPLIT_KEEPS_CHECKPOINTS)
    fn, f32 = _SPLIT, _checks.f32
    args = (zxbcdt, conv1d_weight, conv1d_bias, f32(fn, "dt_bias", dt_bias), f32(fn, "A", A),
            f32(fn, "D", D), f32(fn, "initial_states", initial_states), rmsnorm_weight,
            outproj_weight, outproj_bias)
    if torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in args):
        return _SplitConvScan.apply(*args, _i32(seq_idx), opt)
    with torch.autocast(zxbcdt.device.type, enabled=False):
        out, final, _ = _split_forward(*args, _i32(seq_idx), opt, False)
    return out if not return_final_states else (out, final)
