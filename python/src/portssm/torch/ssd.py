"""Drop-ins for mamba-ssm 2.3.2.post1's Mamba-2 SSD (mamba_ssm.ops.triton.ssd_combined):
mamba_chunk_scan_combined and mamba_split_conv1d_scan_combined, the same names, argument
order, defaults and return values, autograd through portssm's backward ops.

Where portssm differs: activations (x, dt, B, C, z) run in x's dtype (a float32 dt with bf16 x
is rounded to bf16 first); chunk_size is accepted and passed on but does not change the result;
cu_seqlens restarts the state at every packed boundary (mamba-ssm takes the restarts from
seq_idx alone and uses cu_seqlens for varlen_states only, so the two agree whenever seq_idx
marks the same sequences, which is how transformers and vLLM call it); return_varlen_states
works with autograd for out and final_states (mamba-ssm refuses the backward), the varlen
states themselves have no gradient."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from . import _registry


def _f32(t):
    return t if t is None or t.dtype == torch.float32 else t.float()


def _i32(t):
    return t if t is None or t.dtype == torch.int32 else t.to(torch.int32)


def _as(t, dtype):
    # (t.to(dtype) returns t itself too, but only after 3 us of dispatch: four a call)
    return t if t is None or t.dtype == dtype else t.to(dtype)


def _limit(dt_limit):
    lo, hi = float(dt_limit[0]), float(dt_limit[1])
    return (lo, hi) != (0.0, math.inf), lo, hi


def mamba_chunk_scan_combined(x, dt, A, B, C, chunk_size, D=None, z=None, dt_bias=None,
                              initial_states=None, seq_idx=None, cu_seqlens=None,
                              dt_softplus=False, dt_limit=(0.0, float("inf")),
                              return_final_states=False, return_varlen_states=False):
    """
    x: (batch, seqlen, nheads, headdim); dt: (batch, seqlen, nheads); A: (nheads);
    B, C: (batch, seqlen, ngroups, dstate); D: (nheads, headdim) or (nheads,);
    z: (batch, seqlen, nheads, headdim); dt_bias: (nheads,);
    initial_states: (batch, nheads, headdim, dstate); seq_idx: (batch, seqlen);
    cu_seqlens: (num_sequences + 1), used with return_varlen_states (batch 1).
    Returns out (batch, seqlen, nheads, headdim), then final_states (batch, nheads, headdim,
    dstate) if return_final_states, then varlen_states (num_sequences, nheads, headdim, dstate)
    if return_varlen_states; the states in float32.
    """
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
    out, final, varlen, _, _ = _registry.ssd_fwd_routed(
        grad, x, _as(dt, act), _f32(A), _as(B, act), _as(C, act), _f32(D), _as(z, act),
        _f32(dt_bias), _f32(initial_states),
        _i32(seq_idx), _i32(cu_seqlens), bool(dt_softplus), limit, lo, hi, int(chunk_size),
        bool(return_final_states), bool(return_varlen_states), grad and z is not None, grad)
    if not return_varlen_states:
        return out if not return_final_states else (out, final)
    return (out, varlen) if not return_final_states else (out, final, varlen)


def mamba_split_conv1d_scan_combined(zxbcdt, conv1d_weight, conv1d_bias, dt_bias, A, D,
                                     chunk_size, initial_states=None, seq_idx=None,
                                     dt_limit=(0.0, float("inf")), return_final_states=False,
                                     activation="silu", rmsnorm_weight=None, rmsnorm_eps=1e-6,
                                     outproj_weight=None, outproj_bias=None, headdim=None,
                                     ngroups=1, norm_before_gate=True):
    """
    The Mamba-2 mixer after in_proj: zxbcdt (batch, seqlen, 2*d_nonssm + 2*dim +
    2*ngroups*dstate + nheads), dim = nheads * headdim, split into the swiglu part, z, xBC and
    dt; xBC through the causal conv1d (conv1d_weight (dim + 2*ngroups*dstate, width)) and the
    activation, split into x, B, C; the SSD with dt_softplus; then either the z gate or the
    gated RMSNorm (rmsnorm_weight (dim,)), then outproj.  Returns out (batch, seqlen, out_dim or
    d_nonssm + dim), and final_states if return_final_states.
    """
    if activation not in (None, "silu", "swish"):
        raise ValueError("activation must be None, 'silu' or 'swish', got %r" % (activation,))
    from .causal_conv1d import causal_conv1d_fn

    if D.dim() == 1:
        if headdim is None:
            raise ValueError("headdim must be given when D is (nheads,)")
        nheads = D.shape[0]
    else:
        nheads, headdim = D.shape
    batch, seqlen, width = zxbcdt.shape
    dim = nheads * headdim
    if nheads % ngroups:
        raise ValueError("ngroups = %d does not divide nheads = %d" % (ngroups, nheads))
    dstate = (conv1d_weight.shape[0] - dim) // ngroups // 2
    d_nonssm = (width - 2 * dim - 2 * ngroups * dstate - nheads) // 2
    if d_nonssm < 0 or width != 2 * d_nonssm + 2 * dim + 2 * ngroups * dstate + nheads:
        raise ValueError("zxbcdt's last dim %d is not 2*d_nonssm + 2*%d + 2*%d*%d + %d"
                         % (width, dim, ngroups, dstate, nheads))
    zx0, z, xBC, dt = torch.split(zxbcdt, [2 * d_nonssm, dim, dim + 2 * ngroups * dstate, nheads],
                                  dim=-1)
    if conv1d_weight.dim() == 3:
        conv1d_weight = conv1d_weight.squeeze(1)
    xBC = causal_conv1d_fn(xBC.transpose(1, 2), conv1d_weight, conv1d_bias,
                           seq_idx=_i32(seq_idx), activation=activation).transpose(1, 2)
    x, B, C = torch.split(xBC, [dim, ngroups * dstate, ngroups * dstate], dim=-1)
    x = x.reshape(batch, seqlen, nheads, headdim)
    B = B.reshape(batch, seqlen, ngroups, dstate)
    C = C.reshape(batch, seqlen, ngroups, dstate)
    z = z.reshape(batch, seqlen, nheads, headdim)
    gate_in_scan = rmsnorm_weight is None
    res = mamba_chunk_scan_combined(x, dt, A, B, C, chunk_size, D=D,
                                    z=z if gate_in_scan else None, dt_bias=dt_bias,
                                    initial_states=initial_states, seq_idx=seq_idx,
                                    dt_softplus=True, dt_limit=dt_limit,
                                    return_final_states=return_final_states)
    y, final = res if return_final_states else (res, None)
    y = y.reshape(batch, seqlen, dim)
    if not gate_in_scan:
        # the gated RMSNorm per group of B/C (mamba-ssm's group_size), portssm's fused op
        from .norms import rmsnorm_fn

        y = rmsnorm_fn(y, rmsnorm_weight, None, z=z.reshape(batch, seqlen, dim),
                       eps=rmsnorm_eps, group_size=dim // ngroups,
                       norm_before_gate=norm_before_gate)
    if d_nonssm > 0:
        a, g = zx0.chunk(2, dim=-1)
        y = torch.cat([F.silu(a) * g, y], dim=-1)
    if outproj_weight is not None:
        if torch.is_autocast_enabled():
            dtype = torch.get_autocast_gpu_dtype()
            y, outproj_weight = y.to(dtype), outproj_weight.to(dtype)
            outproj_bias = outproj_bias.to(dtype) if outproj_bias is not None else None
        y = F.linear(y, outproj_weight, outproj_bias)
    elif outproj_bias is not None:
        raise ValueError("outproj_bias without outproj_weight")
    return y if not return_final_states else (y, final)
