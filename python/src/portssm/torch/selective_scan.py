"""Drop-ins for mamba-ssm 2.3.2.post1's selective_scan_fn and mamba_inner_fn
(mamba_ssm.ops.selective_scan_interface): the same names, argument order, defaults and return
values, autograd through portssm's backward ops."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from . import _registry


def _f32(t):
    return t if t is None or t.dtype == torch.float32 else t.float()


def selective_scan_fn(u, delta, A, B, C, D=None, z=None, delta_bias=None, delta_softplus=False,
                      return_last_state=False):
    """if return_last_state is True, returns (out, last_state)
    last_state has shape (batch, dim, dstate), float32.  Unlike mamba-ssm, a gradient that
    reaches last_state is propagated (portssm's backward takes it).

    u, delta, z: (batch, dim, seqlen); A: (dim, dstate); B, C: (dim, dstate) constant, or
    (batch, dstate, seqlen) / (batch, ngroups, dstate, seqlen) variable; D, delta_bias: (dim,)
    """
    if A.is_complex():
        raise NotImplementedError("selective_scan_fn: complex A (S4D-Lin style, B/C as real "
                                  "pairs) is not supported by portssm")
    A = _f32(A)
    if B.dim() == 2:
        B = _f32(B)
    elif B.dim() == 3:
        B = B.unsqueeze(1)
    if C.dim() == 2:
        C = _f32(C)
    elif C.dim() == 3:
        C = C.unsqueeze(1)
    save = torch.is_grad_enabled() and any(
        t is not None and t.requires_grad for t in (u, delta, A, B, C, D, z, delta_bias))
    out, last, _ = _registry.scan_fwd_routed(save, u, delta, A, B, C, _f32(D), z,
                                             _f32(delta_bias), None, bool(delta_softplus),
                                             bool(return_last_state), save)
    return out if not return_last_state else (out, last)


def _rms_norm(x, weight, eps):
    """RMSNorm over the last dimension in float32, the result in x's dtype (what mamba-ssm's
    Triton layer-norm forward computes)."""
    xf = x.float()
    y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * weight.float()
    return y.to(x.dtype)


def mamba_inner_fn(
    xz, conv1d_weight, conv1d_bias, x_proj_weight, delta_proj_weight,
    out_proj_weight, out_proj_bias,
    A, B=None, C=None, D=None, delta_bias=None, B_proj_bias=None,
    C_proj_bias=None, delta_softplus=True, checkpoint_lvl=1, b_rms_weight=None, c_rms_weight=None,
    dt_rms_weight=None, b_c_dt_rms_eps=1e-6,
):
    """The Mamba-1 mixer from the in_proj output xz (batch, 2*dim, seqlen) to the out_proj output
    (batch, seqlen, d_model): conv1d + silu, x_proj, dt_proj, selective scan gated by z, out_proj.
    Built from portssm's conv and scan ops and torch's matmuls, so autograd, autocast and
    torch.compile treat it like any composition.  checkpoint_lvl (0 or 1) is accepted for
    compatibility; memory use is that of the composition."""
    if checkpoint_lvl not in (0, 1):
        raise ValueError("checkpoint_lvl must be 0 or 1, got %r" % (checkpoint_lvl,))
    if A.is_complex():
        raise NotImplementedError("mamba_inner_fn: complex A is not supported by portssm")
    from .causal_conv1d import causal_conv1d_fn

    L = xz.shape[-1]
    delta_rank = delta_proj_weight.shape[1]
    d_state = A.shape[-1]
    x, z = xz.chunk(2, dim=1)
    if conv1d_weight.dim() == 3:
        conv1d_weight = conv1d_weight.squeeze(1)  # (dim, 1, width) -> (dim, width)
    x = causal_conv1d_fn(x, conv1d_weight, conv1d_bias, activation="silu")
    x_dbl = F.linear(x.transpose(1, 2).reshape(-1, x.shape[1]), x_proj_weight)  # (b*l, r+2n)
    delta = delta_proj_weight @ x_dbl[:, :delta_rank].t()  # (dim, b*l)
    delta = delta.reshape(delta.shape[0], -1, L).transpose(0, 1)  # (b, dim, l)
    if dt_rms_weight is not None:
        delta = _rms_norm(delta.transpose(1, 2), dt_rms_weight, b_c_dt_rms_eps).transpose(1, 2)

    def variable(cols, bias, rms_weight):
        v = cols
        if bias is not None:
            v = v + bias.to(dtype=v.dtype)
        if rms_weight is not None:
            v = _rms_norm(v, rms_weight, b_c_dt_rms_eps)
        return v.reshape(-1, L, d_state).transpose(1, 2).unsqueeze(1)  # (b, 1, n, l)

    if B is None:
        B = variable(x_dbl[:, delta_rank:delta_rank + d_state], B_proj_bias, b_rms_weight)
    if C is None:
        C = variable(x_dbl[:, -d_state:], C_proj_bias, c_rms_weight)
    y = selective_scan_fn(x, delta, A, B, C, D, z=z, delta_bias=delta_bias,
                          delta_softplus=delta_softplus)
    return F.linear(y.transpose(1, 2), out_proj_weight, out_proj_bias)
