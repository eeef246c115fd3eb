"""Drop-ins for mamba-ssm 2.3.2.post1's selective_scan_fn and mamba_inner_fn
(mamba_ssm.ops.selective_scan_interface): the same names, argument order, defaults and return
values, autograd through portssm's backward ops."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from . import _checks, _impl, _registry
from ..errors import InvalidArgumentError
from ._runtime import compile_boundary, is_compiling


# Whether mamba_inner_fn keeps the scan's checkpoints (the states every 128 steps, float32) at
# checkpoint_lvl 1; at 0 it always does.  Kept, they spare the scan's backward a states-only
# forward over the whole row (about a tenth of the scan's fwd+bwd); they cost (L/128 - 1) * N
# floats a channel, 5.25 MiB a layer of the 130M model at B8 L1024, where mamba-ssm keeps 1.5
# (its states every 2048 steps) and the layer keeps 92.6 MiB otherwise (mamba-ssm 94.6): with
# them the model would keep more than mamba-ssm's.
INNER_KEEPS_SCAN_CHECKPOINTS = False


_SCAN = "selective_scan_fn"
_BC_FORM = "(dim, dstate), (batch, dstate, seqlen) or (batch, ngroups, dstate, seqlen)"


def _check_scan_args(u, delta, A, B, C, D, z, delta_bias):
    """Every tensor's rank (the function reads shapes to allocate its outputs), u's dtype (the
    float32 ones' where they are converted)."""
    fn = _SCAN
    _checks.tensors(fn, (
            ("u", u, "(batch, dim, seqlen)", (3,)),
            ("delta", delta, "(batch, dim, seqlen)", (3,)),
            ("A", A, "(dim, dstate)", (2,)),
            ("B", B, _BC_FORM, (2, 3, 4)),
            ("C", C, _BC_FORM, (2, 3, 4)),
            ("D", D, "(dim,)", (1,)),
            ("z", z, "(batch, dim, seqlen)", (3,)),
            ("delta_bias", delta_bias, "(dim,)", (1,))))
    _checks.floating(fn, "u", u)


def _l_contiguous(t):
    """t with L (its last dim) contiguous, a copy where it is not, as mamba-ssm makes the scan's
    inputs: the kernels load along L in vectors only there (any strides are right, others are
    slower)."""
    return t if t is None or t.stride(-1) == 1 else t.contiguous()


@compile_boundary
def selective_scan_fn(u, delta, A, B, C, D=None, z=None, delta_bias=None, delta_softplus=False,
                      return_last_state=False):
    """if return_last_state is True, returns (out, last_state)
    last_state has shape (batch, dim, dstate), float32.  Unlike mamba-ssm, a gradient that
    reaches last_state is propagated (portssm's backward takes it).

    u, delta, z: (batch, dim, seqlen); A: (dim, dstate); B, C: (dim, dstate) constant, or
    (batch, dstate, seqlen) / (batch, ngroups, dstate, seqlen) variable; D, delta_bias: (dim,)
    """
    _check_scan_args(u, delta, A, B, C, D, z, delta_bias)
    if A.is_complex():
        raise NotImplementedError("selective_scan_fn: complex A (S4D-Lin style, B/C as real "
                                  "pairs) is not supported by portssm")
    fn, f32 = _SCAN, _checks.f32
    A = f32(fn, "A", A)
    u, delta, z = _l_contiguous(u), _l_contiguous(delta), _l_contiguous(z)
    if B.dim() == 2:
        B = f32(fn, "B", B)
    else:
        B = _l_contiguous(B.unsqueeze(1) if B.dim() == 3 else B)
    if C.dim() == 2:
        C = f32(fn, "C", C)
    else:
        C = _l_contiguous(C.unsqueeze(1) if C.dim() == 3 else C)
    save = torch.is_grad_enabled() and any(
        t is not None and t.requires_grad for t in (u, delta, A, B, C, D, z, delta_bias))
    out, last, _ = _registry.scan_fwd_routed(save, u, delta, A, B, C, f32(fn, "D", D), z,
                                             f32(fn, "delta_bias", delta_bias), None, bool(delta_softplus),
                                             bool(return_last_state), save)
    return out if not return_last_state else (out, last)


def _rms_norm(x, weight, eps):
    """RMSNorm over the last dimension in float32, the result in x's dtype (what mamba-ssm's
    Triton layer-norm forward computes)."""
    xf = x.float()
    y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * weight.float()
    return y.to(x.dtype)


def _rms_norm_backward(x, weight, eps, g):
    """Gradients of _rms_norm(x, weight, eps) for the incoming gradient g: (dx in x's dtype,
    dweight in weight's dtype), in float32 as autograd takes them through _rms_norm."""
    xf = x.float()
    r = torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    gf = g.float()
    gw = gf * weight.float()
    dx = r * gw - xf * (r * r * r) * (gw * xf).mean(-1, keepdim=True)
    dw = (gf * (xf * r)).reshape(-1, x.shape[-1]).sum(0)
    return dx.to(x.dtype), dw.to(weight.dtype)


def _autocast_dtype(device_type):
    """The dtype autocast runs matmuls in on device_type now, or None where it is off."""
    try:
        if torch.is_autocast_enabled(device_type):
            return torch.get_autocast_dtype(device_type)
        return None
    except TypeError:  # torch < 2.4: no device argument
        if device_type == "cuda":
            return torch.get_autocast_gpu_dtype() if torch.is_autocast_enabled() else None
        if device_type == "cpu":
            return torch.get_autocast_cpu_dtype() if torch.is_autocast_cpu_enabled() else None
        return None


def _ops():
    """(conv_fwd, conv_bwd, scan_fwd, scan_bwd): the custom ops while torch.compile traces (it
    sees one op each, with its fake), else the implementations themselves."""
    if is_compiling():
        return _registry.conv_fwd, _registry.conv_bwd, _registry.scan_fwd, _registry.scan_bwd
    return _impl.conv_fwd, _impl.conv_bwd, _impl.scan_fwd, _impl.scan_bwd


def _channel_major(xz):
    """xz (batch, 2*dim, L) copied to L-contiguous rows laid out channel by channel, (2*dim,
    batch, L) in memory, as mamba-ssm's Mamba block computes it (in_proj's weight times the
    input's columns).  L contiguous: the conv and the scan read x and z (and the backward
    writes dx and dz) in vectors along L only there.  Channel-major rather than
    xz.contiguous()'s (batch, 2*dim, L): the conv output, the scan output and their gradients
    are allocated like xz (empty_like), and in this layout (batch, dim, L) -> (batch*L, dim)
    is a view, so x_proj, out_proj, their weight gradients and delta_proj's gradient run
    as plain matmuls on transposed operands instead of behind a transposing copy each (about
    ten a layer, each of a (batch, dim, L) tensor), and xz's gradient, allocated the same way,
    reaches in_proj's backward (transformers' Mamba: in_proj's output transposed) as a matrix
    it multiplies without copying.  transformers' Mamba gives xz channel-last (in_proj's
    output transposed); the copy is what the node keeps, in place of that view, so memory is
    unchanged.  An xz already L-contiguous is returned as it is."""
    if xz.stride(-1) == 1:
        return xz
    batch, width, L = xz.shape
    out = torch.empty((width, batch, L), dtype=xz.dtype, device=xz.device).transpose(0, 1)
    out.copy_(xz)
    return out


def _rows(t):
    """(batch, dim, L) as (batch*L, dim): a view where t is channel-last (what the conv and the
    scan return for xz's channel-last halves), else a copy."""
    return t.transpose(1, 2).reshape(-1, t.shape[1])


def _rows_view(t):
    """_rows(t) where that is a view of t (t channel-last), else None."""
    b, d, _ = t.shape
    if t.stride(1) == 1 and t.stride(2) == d and (b == 1 or t.stride(0) == d * t.shape[2]):
        return t.transpose(1, 2).reshape(-1, d)
    return None


def _cols_view(t):
    """(batch, dim, L) as (dim, batch*L) where that is a view of t (t channel-major: (dim,
    batch, L) in memory), else None."""
    b, d, L = t.shape
    if t.stride(2) == 1 and (b == 1 or t.stride(0) == L) and (d == 1 or t.stride(1) == b * L):
        return t.transpose(0, 1).reshape(d, -1)
    return None


def _delta_proj(delta_proj_weight, x_dbl, rank, L):
    """delta_proj_weight @ x_dbl[:, :rank]^T, (dim, batch*L), as (batch, dim, L) (a view, L the
    fastest dimension, as the scan reads it best)."""
    delta = delta_proj_weight @ x_dbl[:, :rank].t()
    return delta.reshape(delta.shape[0], -1, L).transpose(0, 1)


def _variable(x_dbl, lo, d_state, L, bias, rms_weight, eps):
    """B or C from x_dbl's columns lo..lo+d_state (+ bias, then RMSNorm) as the scan takes a
    variable B/C: (batch, 1, d_state, L), a view of x_dbl where neither is given."""
    v = x_dbl[:, lo:lo + d_state]
    if bias is not None:
        v = v + bias.to(dtype=v.dtype)
    if rms_weight is not None:
        v = _rms_norm(v, rms_weight, eps)
    # L contiguous (a copy of 2*N*L elements a row): a view of x_dbl would step L by its width
    return _l_contiguous(v.reshape(-1, L, d_state).transpose(1, 2).unsqueeze(1))


def _variable_backward(x_dbl, lo, d_state, bias, rms_weight, eps, grad):
    """grad (batch, 1, d_state, L) of _variable's result back to x_dbl's columns, (batch*L,
    d_state); and the gradients of bias and rms_weight (None where absent)."""
    g = grad.squeeze(1).transpose(1, 2).reshape(-1, d_state)
    drms = dbias = None
    if rms_weight is not None:
        v = x_dbl[:, lo:lo + d_state]
        if bias is not None:
            v = v + bias.to(dtype=v.dtype)
        g, drms = _rms_norm_backward(v, rms_weight, eps, g)
    if bias is not None:
        dbias = g.sum(0).to(bias.dtype)
    return g, dbias, drms


def _inner_forward(xz, conv_w, conv_b, x_proj_w, delta_proj_w, out_w, out_b, A, B, C, D,
                   delta_bias, B_bias, C_bias, b_rms, c_rms, dt_rms, softplus, eps,
                   save_checkpoints):
    """mamba_inner_fn's forward on tensors already in the dtypes it computes in.  Returns the
    output and (conv output, delta before its RMSNorm, x_dbl, the scan's gated output y, its
    checkpoints: computed where save_checkpoints, else a placeholder)."""
    conv_fwd, _, scan_fwd, _ = _ops()
    L = xz.shape[-1]
    rank = delta_proj_w.shape[1]
    d_state = A.shape[-1]
    x, z = xz.chunk(2, dim=1)
    conv_out = conv_fwd(x, conv_w, conv_b, None, None, False, True)[0]
    x_dbl = F.linear(_rows(conv_out), x_proj_w)  # (batch*L, rank + 2*d_state)
    delta_pre = _delta_proj(delta_proj_w, x_dbl, rank, L)
    delta = delta_pre
    if dt_rms is not None:
        delta = _rms_norm(delta.transpose(1, 2), dt_rms, eps).transpose(1, 2)
    if B is None:
        B = _variable(x_dbl, rank, d_state, L, B_bias, b_rms, eps)
    if C is None:
        C = _variable(x_dbl, x_dbl.shape[1] - d_state, d_state, L, C_bias, c_rms, eps)
    y, _, ckpt = scan_fwd(conv_out, delta, A, B, C, D, z, delta_bias, None, softplus, False,
                          save_checkpoints)
    out = F.linear(y.transpose(1, 2), out_w, out_b)
    return out, (conv_out, delta_pre, x_dbl, y, ckpt)


class _MambaInner(torch.autograd.Function):
    """mamba_inner_fn as one autograd node, keeping for the backward what mamba-ssm's
    MambaInnerFn keeps: xz, x_dbl and the scan's output (here after the gate, which the out
    projection's weight gradient reads; mamba-ssm keeps it before and gates it again).  At
    checkpoint_lvl 1 the conv output, delta and the scan's states (unless
    INNER_KEEPS_SCAN_CHECKPOINTS) are computed again in the backward; at 0 they are kept (the
    states as the scan's checkpoints).  Autocast is off inside: the caller gives the weights in
    the dtype autocast would have run the matmuls in."""

    @staticmethod
    def forward(ctx, xz, conv_w, conv_b, x_proj_w, delta_proj_w, out_w, out_b, A, B, C, D,
                delta_bias, B_bias, C_bias, b_rms, c_rms, dt_rms, softplus, checkpoint_lvl, eps):
        keep = checkpoint_lvl == 0
        xz = _channel_major(xz)  # inside the node: its gradient is given back channel-major
        with torch.autocast(xz.device.type, enabled=False):
            out, (conv_out, delta_pre, x_dbl, y, ckpt) = _inner_forward(
                xz, conv_w, conv_b, x_proj_w, delta_proj_w, out_w, out_b, A, B, C, D,
                delta_bias, B_bias, C_bias, b_rms, c_rms, dt_rms, softplus, eps,
                keep or INNER_KEEPS_SCAN_CHECKPOINTS)
        ctx.save_for_backward(xz, conv_w, conv_b, x_proj_w, delta_proj_w, out_w, A, B, C, D,
                              delta_bias, B_bias, C_bias, b_rms, c_rms, dt_rms, x_dbl, y, ckpt,
                              conv_out if keep else None, delta_pre if keep else None)
        ctx.options = (softplus, eps, out_b is not None)
        return out

    @staticmethod
    def backward(ctx, dout):
        with torch.autocast(dout.device.type, enabled=False):
            return _inner_backward(ctx, dout)


def _inner_backward(ctx, dout):
    (xz, conv_w, conv_b, x_proj_w, delta_proj_w, out_w, A, B, C, D, delta_bias, B_bias, C_bias,
     b_rms, c_rms, dt_rms, x_dbl, y, ckpt, conv_out, delta_pre) = ctx.saved_tensors
    softplus, eps, has_out_b = ctx.options
    conv_fwd, conv_bwd, _, scan_bwd = _ops()
    batch, _, L = xz.shape
    rank = delta_proj_w.shape[1]
    d_state = A.shape[-1]
    width = x_dbl.shape[1]
    x, z = xz.chunk(2, dim=1)
    dim = x.shape[1]
    if conv_out is None:  # checkpoint_lvl 1: computed again, as mamba-ssm does
        conv_out = conv_fwd(x, conv_w, conv_b, None, None, False, True)[0]
    if delta_pre is None:
        delta_pre = _delta_proj(delta_proj_w, x_dbl, rank, L)
    delta = delta_pre
    if dt_rms is not None:
        delta = _rms_norm(delta.transpose(1, 2), dt_rms, eps).transpose(1, 2)
    Bv = B if B is not None else _variable(x_dbl, rank, d_state, L, B_bias, b_rms, eps)
    Cv = C if C is not None else _variable(x_dbl, width - d_state, d_state, L, C_bias, c_rms,
                                           eps)

    # out projection: out = y^T W^T + b
    dout2 = dout.reshape(-1, dout.shape[-1])  # (batch*L, out_dim)
    dout_w = dout2.t() @ _rows(y)
    dout_b = dout2.sum(0) if has_out_b else None
    # dy as (dim, batch*L) viewed (batch, dim, L): L the fastest dimension, which the scan's
    # backward reads in vectors (channel-last, as dout2 @ out_w gives it, it reads element by
    # element); the same product, the other way round
    dy = (out_w.t() @ dout2.t()).view(dim, batch, L).transpose(0, 1)
    del y

    # the scan; eager: dz straight into xz's gradient (no copy)
    dxz = torch.empty_like(xz)
    eager = not is_compiling()
    into = dict(dz=dxz[:, dim:]) if eager else {}
    ckpt = ckpt if ckpt.numel() > 0 else None
    du, ddelta, dA, dB, dC, dD, dz, ddelta_bias, _ = scan_bwd(
        conv_out, delta, A, Bv, Cv, D, z, delta_bias, None, dy, None, ckpt, softplus, False,
        **into)
    del dy, delta, Bv, Cv

    # delta = RMSNorm?(delta_proj_w @ x_dbl[:, :rank]^T)
    ddt_rms = None
    if dt_rms is not None:
        ddelta, ddt_rms = _rms_norm_backward(delta_pre.transpose(1, 2), dt_rms, eps,
                                             ddelta.transpose(1, 2))
        ddelta = ddelta.transpose(1, 2)
    del delta_pre
    ddelta = ddelta.transpose(0, 1).reshape(dim, -1)  # (dim, batch*L)
    ddelta_proj_w = ddelta @ x_dbl[:, :rank]
    dx_dbl = torch.zeros_like(x_dbl)
    dx_dbl[:, :rank] += ddelta.t() @ delta_proj_w
    del ddelta
    dB_bias = dC_bias = db_rms = dc_rms = None
    if B is None:
        g, dB_bias, db_rms = _variable_backward(x_dbl, rank, d_state, B_bias, b_rms, eps, dB)
        dx_dbl[:, rank:rank + d_state] += g
        dB = None
    if C is None:
        g, dC_bias, dc_rms = _variable_backward(x_dbl, width - d_state, d_state, C_bias, c_rms,
                                                eps, dC)
        dx_dbl[:, width - d_state:] += g
        dC = None

    # x_dbl = conv_out^T x_proj_w^T
    dx_proj_w = dx_dbl.t() @ _rows(conv_out)
    del conv_out
    du_rows = _rows_view(du)
    du_cols = _cols_view(du)
    if du_rows is not None:  # channel-last du: the matmul adds into du itself
        du_rows.addmm_(dx_dbl, x_proj_w)
    elif du_cols is not None:  # channel-major du (xz's layout): likewise, one product
        du_cols.addmm_(x_proj_w.t(), dx_dbl.t())
    elif du.is_contiguous():  # (batch, dim, L): one product a sequence, added in place
        du.baddbmm_(x_proj_w.t().expand(batch, -1, -1), dx_dbl.view(batch, L, -1).transpose(1, 2))
    else:
        du = du + (dx_dbl @ x_proj_w).view(batch, L, dim).transpose(1, 2)

    # the conv (+ silu)
    if eager:
        _, dconv_w, dconv_b, _ = conv_bwd(x, conv_w, conv_b, None, None, du, None, False, True,
                                          dx=dxz[:, :dim])
    else:
        dx, dconv_w, dconv_b, _ = conv_bwd(x, conv_w, conv_b, None, None, du, None, False, True)
        dxz[:, :dim].copy_(dx)
        dxz[:, dim:].copy_(dz)
    return (dxz, dconv_w, dconv_b if conv_b is not None else None, dx_proj_w, ddelta_proj_w,
            dout_w, dout_b, dA, dB, dC, dD if D is not None else None,
            ddelta_bias if delta_bias is not None else None, dB_bias, dC_bias, db_rms, dc_rms,
            ddt_rms, None, None, None)


_INNER = "mamba_inner_fn"


def _check_inner_args(xz, conv1d_weight, conv1d_bias, x_proj_weight, delta_proj_weight,
                      out_proj_weight, out_proj_bias, A, B, C, D, delta_bias, B_proj_bias,
                      C_proj_bias, b_rms_weight, c_rms_weight, dt_rms_weight):
    """Every tensor's rank and the sizes the function computes with before the library sees
    the call (its matmuls would otherwise fail with torch's message, naming no argument); the
    dtypes of those not converted to float32 on the way (f32 checks those)."""
    fn = _INNER
    _checks.tensors(fn, (
            ("xz", xz, "(batch, 2*dim, seqlen)", (3,)),
            ("conv1d_weight", conv1d_weight, "(dim, width) or (dim, 1, width)", (2, 3)),
            ("conv1d_bias", conv1d_bias, "(dim,)", (1,)),
            ("x_proj_weight", x_proj_weight, "(dt_rank + 2*dstate, dim)", (2,)),
            ("delta_proj_weight", delta_proj_weight, "(dim, dt_rank)", (2,)),
            ("out_proj_weight", out_proj_weight, "(d_model, dim)", (2,)),
            ("out_proj_bias", out_proj_bias, "(d_model,)", (1,)),
            ("A", A, "(dim, dstate)", (2,)),
            ("B", B, _BC_FORM, (2, 3, 4)),
            ("C", C, _BC_FORM, (2, 3, 4)),
            ("D", D, "(dim,)", (1,)),
            ("delta_bias", delta_bias, "(dim,)", (1,)),
            ("B_proj_bias", B_proj_bias, "(dstate,)", (1,)),
            ("C_proj_bias", C_proj_bias, "(dstate,)", (1,)),
            ("b_rms_weight", b_rms_weight, "(dstate,)", (1,)),
            ("c_rms_weight", c_rms_weight, "(dstate,)", (1,)),
            ("dt_rms_weight", dt_rms_weight, "(dim,)", (1,))))
    for name, t in (("xz", xz), ("conv1d_weight", conv1d_weight), ("conv1d_bias", conv1d_bias),
                    ("x_proj_weight", x_proj_weight), ("delta_proj_weight", delta_proj_weight),
                    ("out_proj_weight", out_proj_weight), ("out_proj_bias", out_proj_bias),
                    ("B_proj_bias", B_proj_bias), ("C_proj_bias", C_proj_bias),
                    ("b_rms_weight", b_rms_weight), ("c_rms_weight", c_rms_weight),
                    ("dt_rms_weight", dt_rms_weight)):
        _checks.floating(fn, name, t)
    if xz.shape[1] % 2:
        raise InvalidArgumentError("%s: 'xz' shape[1] must be 2*dim (even), got shape %s"
                                   % (fn, tuple(xz.shape)))
    dim, dstate, rank = xz.shape[1] // 2, A.shape[1], delta_proj_weight.shape[1]
    from_xz = "dim, from 'xz'"
    _checks.size(fn, "conv1d_weight", conv1d_weight, 0, dim, from_xz)
    _checks.size(fn, "x_proj_weight", x_proj_weight, 1, dim, from_xz)
    _checks.size(fn, "delta_proj_weight", delta_proj_weight, 0, dim, from_xz)
    _checks.size(fn, "out_proj_weight", out_proj_weight, 1, dim, from_xz)
    _checks.size(fn, "A", A, 0, dim, from_xz)
    columns = rank + (dstate if B is None else 0) + (dstate if C is None else 0)
    _checks.size(fn, "x_proj_weight", x_proj_weight, 0, columns,
                 "dt_rank from 'delta_proj_weight' + dstate from 'A' for each of B, C not given")


@compile_boundary
def mamba_inner_fn(
    xz, conv1d_weight, conv1d_bias, x_proj_weight, delta_proj_weight,
    out_proj_weight, out_proj_bias,
    A, B=None, C=None, D=None, delta_bias=None, B_proj_bias=None,
    C_proj_bias=None, delta_softplus=True, checkpoint_lvl=1, b_rms_weight=None, c_rms_weight=None,
    dt_rms_weight=None, b_c_dt_rms_eps=1e-6,
):
    """The Mamba-1 mixer from the in_proj output xz (batch, 2*dim, seqlen) to the out_proj output
    (batch, seqlen, d_model): conv1d + silu, x_proj, dt_proj, selective scan gated by z, out_proj.

    One autograd node where a gradient will flow, which keeps what mamba-ssm's MambaInnerFn
    keeps: xz, x_dbl (batch*seqlen, dt_rank + 2*dstate) and the scan's output; with
    checkpoint_lvl=1 (the default) the conv output, delta and the scan's states are computed
    again in the backward, with checkpoint_lvl=0 they are kept.  Under autocast the matmuls run
    in its dtype (the weights cast as autocast casts them), as mamba-ssm's do; B/C/delta biases
    and RMSNorm weights get their gradients."""
    if checkpoint_lvl not in (0, 1):
        raise ValueError("checkpoint_lvl must be 0 or 1, got %r" % (checkpoint_lvl,))
    _check_inner_args(xz, conv1d_weight, conv1d_bias, x_proj_weight, delta_proj_weight,
                      out_proj_weight, out_proj_bias, A, B, C, D, delta_bias, B_proj_bias,
                      C_proj_bias, b_rms_weight, c_rms_weight, dt_rms_weight)
    if A.is_complex():
        raise NotImplementedError("mamba_inner_fn: complex A is not supported by portssm")
    if conv1d_weight.dim() == 3:
        conv1d_weight = conv1d_weight.squeeze(1)  # (dim, 1, width) -> (dim, width)
    dtype = _autocast_dtype(xz.device.type)
    if dtype is not None:  # the casts autocast makes for the matmuls (their backward is torch's)
        x_proj_weight = x_proj_weight.to(dtype)
        delta_proj_weight = delta_proj_weight.to(dtype)
        out_proj_weight = out_proj_weight.to(dtype)
        out_proj_bias = out_proj_bias.to(dtype) if out_proj_bias is not None else None
    fn, f32 = _INNER, _checks.f32
    A = f32(fn, "A", A)
    if B is not None:
        B = f32(fn, "B", B) if B.dim() == 2 else B.unsqueeze(1) if B.dim() == 3 else B
    if C is not None:
        C = f32(fn, "C", C) if C.dim() == 2 else C.unsqueeze(1) if C.dim() == 3 else C
    args = (xz, conv1d_weight, conv1d_bias, x_proj_weight, delta_proj_weight, out_proj_weight,
            out_proj_bias, A, B, C, f32(fn, "D", D), f32(fn, "delta_bias", delta_bias),
            B_proj_bias, C_proj_bias,
            b_rms_weight, c_rms_weight, dt_rms_weight)
    if torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in args):
        return _MambaInner.apply(*args, bool(delta_softplus), checkpoint_lvl,
                                 float(b_c_dt_rms_eps))
    args = (_channel_major(xz),) + args[1:]
    with torch.autocast(xz.device.type, enabled=False):
        return _inner_forward(*args, bool(delta_softplus), float(b_c_dt_rms_eps), False)[0]
