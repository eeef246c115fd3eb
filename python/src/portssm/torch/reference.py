"""Pure-torch references with the names, arguments and results of causal-conv1d 1.7.0's and
mamba-ssm 2.3.2.post1's `*_ref` functions (causal_conv1d_ref, selective_scan_ref,
selective_state_update_ref, mamba_inner_ref, ssd_chunk_scan_combined_ref, mamba_conv1d_scan_ref,
mamba_split_conv1d_scan_ref, causal_conv1d_update_ref, causal_conv1d_varlen_states_ref).

They are what their names say: slow, obviously-right torch code (the scans step through the
sequence one token at a time, in float32), for tests and for reading, independent of libportssm.
No fast function of portssm ever falls back to them.  Where mamba-ssm's own `_ref` calls its CUDA
kernels (mamba_inner_ref, mamba_split_conv1d_scan_ref), these use the references here instead.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

_ACTIVATIONS = (None, "silu", "swish")


def _activation(activation):
    if activation not in _ACTIVATIONS:
        raise NotImplementedError("activation must be None, silu, or swish")
    return activation is not None


def causal_conv1d_ref(x, weight, bias=None, initial_states=None, return_final_states=False,
                      final_states_out=None, activation=None, seq_idx=None):
    """
    x: (batch, dim, seqlen); weight: (dim, width); bias: (dim,); seq_idx: (batch, seqlen);
    initial_states: (batch, dim, width - 1); final_states_out: (batch, dim, width - 1)
    out: (batch, dim, seqlen), computed in weight's dtype, returned in x's; with
    return_final_states, (out, final_states): the last width - 1 columns of
    [initial_states | x].  With seq_idx a tap of another sequence than the output token's
    contributes nothing (initial_states belong to the first token's sequence) and a token with
    a negative seq_idx gives 0.
    """
    silu = _activation(activation)
    dtype_in = x.dtype
    batch, dim, seqlen = x.shape
    width = weight.shape[1]
    xw = x.to(weight.dtype)
    if initial_states is None:
        front = xw.new_zeros(batch, dim, width - 1)
    else:
        front = initial_states.to(weight.dtype)
    padded = torch.cat([front, xw], dim=-1)  # (batch, dim, width - 1 + seqlen)
    windows = padded.unfold(-1, width, 1)  # (batch, dim, seqlen, width)
    if seq_idx is not None:
        if return_final_states:
            raise ValueError("causal_conv1d_ref: seq_idx does not support return_final_states")
        if initial_states is None:
            front_idx = seq_idx.new_full((batch, width - 1), -1)
        else:
            front_idx = seq_idx[:, :1].expand(batch, width - 1)
        idx_windows = torch.cat([front_idx, seq_idx], dim=-1).unfold(-1, width, 1)
        same = (idx_windows == seq_idx.unsqueeze(-1)).to(windows.dtype)  # (batch, seqlen, width)
        windows = windows * same.unsqueeze(1)
    out = (windows * weight.view(1, dim, 1, width)).sum(-1)
    if bias is not None:
        out = out + bias.to(out.dtype).view(1, dim, 1)
    if seq_idx is not None:
        out = out.masked_fill((seq_idx < 0).unsqueeze(1), 0.0)
    out = (F.silu(out) if silu else out).to(dtype_in)
    if not return_final_states:
        return out
    final = padded[..., padded.shape[-1] - (width - 1):].to(dtype_in)
    if final_states_out is not None:
        final_states_out.copy_(final)
        final = final_states_out
    return out, final


def causal_conv1d_update_ref(x, conv_state, weight, bias=None, activation=None, cache_seqlens=None):
    """
    x: (batch, dim) or (batch, dim, seqlen); conv_state: (batch, dim, state_len), state_len >=
    width - 1, updated in place; cache_seqlens: (batch,): conv_state is then a ring buffer whose
    x is written at cache_seqlens % state_len.  out: x's shape.
    """
    silu = _activation(activation)
    dtype_in = x.dtype
    squeeze = x.dim() == 2
    if squeeze:
        x = x.unsqueeze(-1)
    batch, dim, seqlen = x.shape
    width = weight.shape[1]
    state_len = conv_state.shape[-1]
    if cache_seqlens is None:
        joined = torch.cat([conv_state.to(weight.dtype), x.to(weight.dtype)], dim=-1)
        conv_state.copy_(joined[..., joined.shape[-1] - state_len:])
    else:
        start = cache_seqlens.to(torch.long).view(batch, 1)
        read = torch.remainder(start + torch.arange(-(width - 1), 0, device=x.device), state_len)
        past = conv_state.gather(2, read.unsqueeze(1).expand(batch, dim, width - 1))
        joined = torch.cat([past.to(weight.dtype), x.to(weight.dtype)], dim=-1)
        write = torch.remainder(start + torch.arange(seqlen, device=x.device), state_len)
        conv_state.scatter_(2, write.unsqueeze(1).expand(batch, dim, seqlen), x.to(conv_state.dtype))
    windows = joined[..., joined.shape[-1] - (width - 1 + seqlen):].unfold(-1, width, 1)
    out = (windows * weight.view(1, dim, 1, width)).sum(-1)
    if bias is not None:
        out = out + bias.to(out.dtype).view(1, dim, 1)
    out = (F.silu(out) if silu else out).to(dtype_in)
    return out.squeeze(-1) if squeeze else out


def causal_conv1d_varlen_states_ref(x, cu_seqlens, state_len: int):
    """
    x: (total_tokens, dim) of sequences packed back to back; cu_seqlens: (batch + 1) offsets.
    Returns (batch, dim, state_len): the last state_len tokens of each sequence, right-aligned,
    zeros where the sequence is shorter.
    """
    _, dim = x.shape
    batch = cu_seqlens.shape[0] - 1
    states = x.new_zeros(batch, state_len, dim).transpose(1, 2)
    bounds = cu_seqlens.tolist()
    for i in range(batch):
        end = int(bounds[i + 1])
        start = max(int(bounds[i]), end - state_len)
        if end > start:
            states[i, :, state_len - (end - start):] = x[start:end].T
    return states


def selective_scan_ref(u, delta, A, B, C, D=None, z=None, delta_bias=None, delta_softplus=False,
                       return_last_state=False):
    """
    u, delta, z: (batch, dim, seqlen); A: (dim, dstate) real; B, C: (dim, dstate) constant or
    (batch, dstate, seqlen) / (batch, ngroups, dstate, seqlen) variable; D, delta_bias: (dim,).
    The recurrence x_t = exp(delta_t A) x_{t-1} + delta_t B_t u_t, y_t = C_t x_t + D u_t, one token
    at a time in float32; out (batch, dim, seqlen) in u's dtype, and last_state (batch, dim,
    dstate) float32 with return_last_state.
    """
    if A.is_complex():
        raise NotImplementedError("selective_scan_ref: complex A is not supported by portssm")
    dtype_in = u.dtype
    u = u.float()
    dt = delta.float()
    if delta_bias is not None:
        dt = dt + delta_bias.float().unsqueeze(-1)
    if delta_softplus:
        dt = F.softplus(dt)
    batch, dim, seqlen = u.shape
    A = A.float()

    def per_channel(M):  # -> (batch, dim, dstate, seqlen), or (dim, dstate) when constant
        if M.dim() == 2:
            return M.float()
        if M.dim() == 3:
            M = M.unsqueeze(1)
        return M.float().repeat_interleave(dim // M.shape[1], dim=1)

    Bv, Cv = per_channel(B), per_channel(C)
    state = u.new_zeros(batch, dim, A.shape[1])
    ys = []
    for t in range(seqlen):
        b_t = Bv if Bv.dim() == 2 else Bv[..., t]
        c_t = Cv if Cv.dim() == 2 else Cv[..., t]
        d_t = dt[:, :, t].unsqueeze(-1)
        state = torch.exp(d_t * A) * state + d_t * b_t * u[:, :, t].unsqueeze(-1)
        ys.append((state * c_t).sum(-1))
    y = torch.stack(ys, dim=-1) if ys else u.new_zeros(batch, dim, 0)
    if D is not None:
        y = y + D.float().unsqueeze(-1) * u
    if z is not None:
        y = y * F.silu(z.float())
    out = y.to(dtype_in)
    return (out, state) if return_last_state else out


def selective_state_update_ref(state, x, dt, A, B, C, D=None, z=None, dt_bias=None,
                               dt_softplus=False):
    """One token of the scan, state updated in place.  state (batch, dim, dstate) or (batch,
    nheads, dim, dstate); x, dt, z (batch, [nheads,] dim); A ([nheads,] dim, dstate); B, C (batch,
    [ngroups,] dstate); D, dt_bias ([nheads,] dim).  Returns out (batch, [nheads,] dim)."""
    heads = state.dim() == 4
    st = state if heads else state.unsqueeze(1)

    x3 = x if heads else x.unsqueeze(1)
    dt3 = (dt if heads else dt.unsqueeze(1)).float()
    A3 = (A if heads else A.unsqueeze(0)).float()
    B3 = B if B.dim() == 3 else B.unsqueeze(1)
    C3 = C if C.dim() == 3 else C.unsqueeze(1)
    nheads = st.shape[1]
    B3 = B3.float().repeat_interleave(nheads // B3.shape[1], dim=1)
    C3 = C3.float().repeat_interleave(nheads // C3.shape[1], dim=1)
    if dt_bias is not None:
        dt3 = dt3 + (dt_bias if heads else dt_bias.unsqueeze(0)).float()
    if dt_softplus:
        dt3 = F.softplus(dt3)
    d4 = dt3.unsqueeze(-1)
    new = st.float() * torch.exp(d4 * A3) + d4 * B3.unsqueeze(2) * x3.float().unsqueeze(-1)
    st.copy_(new.to(st.dtype))
    out = (new * C3.unsqueeze(2)).sum(-1)
    if D is not None:
        out = out + (D if heads else D.unsqueeze(0)).float() * x3.float()
    if z is not None:
        out = out * F.silu((z if heads else z.unsqueeze(1)).float())
    out = out.to(x.dtype)
    return out if heads else out.squeeze(1)


def mamba_inner_ref(xz, conv1d_weight, conv1d_bias, x_proj_weight, delta_proj_weight,
                    out_proj_weight, out_proj_bias, A, B=None, C=None, D=None, delta_bias=None,
                    B_proj_bias=None, C_proj_bias=None, delta_softplus=True):
    """The Mamba-1 mixer from xz (batch, 2*dim, seqlen) to (batch, seqlen, d_model) with the
    references above: conv1d + silu, x_proj, dt_proj, the scan gated by z, out_proj."""
    L = xz.shape[-1]
    rank = delta_proj_weight.shape[1]
    d_state = A.shape[-1]
    x, z = xz.chunk(2, dim=1)
    w = conv1d_weight.squeeze(1) if conv1d_weight.dim() == 3 else conv1d_weight
    x = causal_conv1d_ref(x, w, conv1d_bias, activation="silu")
    x_dbl = F.linear(x.transpose(1, 2).reshape(-1, x.shape[1]), x_proj_weight)  # (b*l, r+2n)
    delta = (delta_proj_weight @ x_dbl[:, :rank].t()).reshape(-1, xz.shape[0], L).transpose(0, 1)

    def variable(cols, bias):
        if bias is not None:
            cols = cols + bias.to(cols.dtype)
        return cols.reshape(-1, L, d_state).transpose(1, 2)  # (batch, dstate, seqlen)

    if B is None:
        B = variable(x_dbl[:, rank:rank + d_state], B_proj_bias)
    if C is None:
        C = variable(x_dbl[:, -d_state:], C_proj_bias)
    y = selective_scan_ref(x, delta, A, B, C, D, z=z, delta_bias=delta_bias,
                           delta_softplus=delta_softplus)
    return F.linear(y.transpose(1, 2), out_proj_weight, out_proj_bias)


def ssd_recurrence_ref(x, dt, A, B, C, D=None, z=None, dt_bias=None, dt_softplus=False,
                       dt_limit=(0.0, float("inf")), initial_states=None, seq_idx=None,
                       return_final_states=False):
    """The Mamba-2 SSD as its recurrence, one token at a time in float32 (DESIGN.md's
    definition): x (batch, seqlen, nheads, headdim); dt (batch, seqlen, nheads) or (batch,
    seqlen, nheads, headdim); A (nheads,); B, C (batch, seqlen, ngroups, dstate); D (nheads,) or
    (nheads, headdim); z like x; dt_bias (nheads,) or (nheads, headdim); initial_states (batch,
    nheads, headdim, dstate); seq_idx (batch, seqlen): the state restarts from 0 where it
    changes.  Returns out in x's dtype, and the final state (float32) if asked."""
    batch, seqlen, nheads, headdim = x.shape
    xf = x.float()
    d = dt.float()
    if d.dim() == 3:
        d = d.unsqueeze(-1)
    if dt_bias is not None:
        bias = dt_bias.float()
        d = d + (bias.unsqueeze(-1) if bias.dim() == 1 else bias)
    if dt_softplus:
        d = F.softplus(d)
    lo, hi = dt_limit
    if (lo, hi) != (0.0, float("inf")):
        d = d.clamp(min=lo, max=hi)
    d = d.expand(batch, seqlen, nheads, headdim)
    Bh = B.float().repeat_interleave(nheads // B.shape[2], dim=2)  # (batch, seqlen, nheads, n)
    Ch = C.float().repeat_interleave(nheads // C.shape[2], dim=2)
    Af = A.float().view(1, nheads, 1)
    if initial_states is not None:
        state = initial_states.float().clone()
    else:
        state = xf.new_zeros(batch, nheads, headdim, B.shape[-1])
    ys = []
    for t in range(seqlen):
        if seq_idx is not None and t > 0:
            keep = (seq_idx[:, t] == seq_idx[:, t - 1]).to(state.dtype).view(batch, 1, 1, 1)
            state = state * keep
        d_t = d[:, t]  # (batch, nheads, headdim)
        state = torch.exp(d_t * Af).unsqueeze(-1) * state + \
            (d_t * xf[:, t]).unsqueeze(-1) * Bh[:, t].unsqueeze(2)
        ys.append((state * Ch[:, t].unsqueeze(2)).sum(-1))
    y = torch.stack(ys, dim=1) if ys else xf.new_zeros(batch, 0, nheads, headdim)
    if D is not None:
        Df = D.float()
        y = y + (Df.unsqueeze(-1) if Df.dim() == 1 else Df) * xf
    if z is not None:
        y = y * F.silu(z.float())
    out = y.to(x.dtype)
    return (out, state) if return_final_states else out


def ssd_chunk_scan_combined_ref(x, dt, A, B, C, chunk_size, D=None, z=None, dt_bias=None,
                                dt_softplus=False):
    """mamba_chunk_scan_combined's result by the recurrence (ssd_recurrence_ref): chunk_size is
    accepted and does not change the result (beyond rounding: this is the exact definition)."""
    return ssd_recurrence_ref(x, dt, A, B, C, D=D, z=z, dt_bias=dt_bias, dt_softplus=dt_softplus)


def _split_heads(D, headdim, z_dim, nheads):
    if z_dim is not None:
        return z_dim // nheads
    if D.dim() == 1:
        if headdim is None:
            raise ValueError("headdim must be given when D is (nheads,) and z is None")
        return headdim
    return D.shape[1]


def mamba_conv1d_scan_ref(xBC, conv1d_weight, conv1d_bias, dt, A, chunk_size, D=None, z=None,
                          dt_bias=None, dt_softplus=False, dt_limit=(0.0, float("inf")),
                          activation="silu", headdim=None, ngroups=1):
    """
    xBC: (batch, seqlen, dim + 2 * ngroups * dstate), dim = nheads * headdim; conv1d_weight:
    (dim + 2 * ngroups * dstate, width); dt: (batch, seqlen, nheads) or (..., nheads, headdim);
    A: (nheads,); D: (nheads, headdim) or (nheads,); z: (batch, seqlen, dim); dt_bias: (nheads,)
    or (nheads, headdim).  The conv (causal_conv1d_ref), split into x, B, C, then the SSD
    (ssd_recurrence_ref) gated by z.  out: (batch, seqlen, dim)
    """
    batch, seqlen, nheads = dt.shape[:3]
    if nheads % ngroups:
        raise ValueError("ngroups = %d does not divide nheads = %d" % (ngroups, nheads))
    headdim = _split_heads(D, headdim, None if z is None else z.shape[-1], nheads)
    dim = nheads * headdim
    w = conv1d_weight.squeeze(1) if conv1d_weight.dim() == 3 else conv1d_weight
    xBC = causal_conv1d_ref(xBC.transpose(1, 2), w, conv1d_bias,
                            activation=activation).transpose(1, 2)
    dstate = (xBC.shape[-1] - dim) // ngroups // 2
    x, B, C = torch.split(xBC, [dim, ngroups * dstate, ngroups * dstate], dim=-1)
    out = ssd_recurrence_ref(
        x.reshape(batch, seqlen, nheads, headdim), dt.to(x.dtype), A,
        B.reshape(batch, seqlen, ngroups, dstate), C.reshape(batch, seqlen, ngroups, dstate),
        D=None if D is None else D.float(),
        z=None if z is None else z.reshape(batch, seqlen, nheads, headdim),
        dt_bias=dt_bias, dt_softplus=dt_softplus, dt_limit=dt_limit)
    return out.reshape(batch, seqlen, dim)


def rms_norm_gated_ref(x, weight, bias, z=None, eps=1e-6, group_size=None,
                       norm_before_gate=True, upcast=True):
    """mamba-ssm's gated RMSNorm (layernorm_gated.rms_norm_ref): over groups of group_size
    channels (None: all); with z, norm(x) * silu(z) when norm_before_gate, else
    norm(x * silu(z)).  In float32 (x's dtype if not upcast); the result in x's dtype."""
    dtype = x.dtype
    xf = x.float() if upcast else x
    if z is not None and not norm_before_gate:
        xf = xf * F.silu(z.to(xf.dtype))
    size = xf.shape[-1] if group_size is None else group_size
    g = xf.reshape(*xf.shape[:-1], xf.shape[-1] // size, size)
    g = g * torch.rsqrt(g.square().mean(-1, keepdim=True) + eps)
    out = g.reshape(xf.shape) * weight.float()
    if bias is not None:
        out = out + bias.float()
    if z is not None and norm_before_gate:
        out = out * F.silu(z.to(out.dtype) if upcast else z)
    return out.to(dtype)


def mamba_split_conv1d_scan_ref(zxbcdt, conv1d_weight, conv1d_bias, dt_bias, A, D, chunk_size,
                                dt_limit=(0.0, float("inf")), activation="silu",
                                rmsnorm_weight=None, rmsnorm_eps=1e-6, outproj_weight=None,
                                outproj_bias=None, headdim=None, ngroups=1,
                                norm_before_gate=True):
    """
    zxbcdt: (batch, seqlen, 2 * dim + 2 * ngroups * dstate + nheads) split into z, xBC, dt; the
    conv, the SSD with dt_softplus, then either the z gate or, with rmsnorm_weight (dim,), the
    gated RMSNorm over all dim channels (as mamba-ssm's reference normalises), then outproj.
    out: (batch, seqlen, out_dim or dim)
    """
    if D.dim() == 1:
        if headdim is None:
            raise ValueError("headdim must be given when D is (nheads,)")
        nheads = D.shape[0]
    else:
        nheads, headdim = D.shape
    if nheads % ngroups:
        raise ValueError("ngroups = %d does not divide nheads = %d" % (ngroups, nheads))
    batch, seqlen, width = zxbcdt.shape
    dim = nheads * headdim
    dstate = (width - 2 * dim - nheads) // ngroups // 2
    if width != 2 * dim + 2 * ngroups * dstate + nheads:
        raise ValueError("zxbcdt's last dim %d is not 2*%d + 2*%d*dstate + %d"
                         % (width, dim, ngroups, nheads))
    z, xBC, dt = torch.split(zxbcdt, [dim, dim + 2 * ngroups * dstate, nheads], dim=-1)
    out = mamba_conv1d_scan_ref(xBC, conv1d_weight, conv1d_bias, dt, A, chunk_size, D=D,
                                z=z if rmsnorm_weight is None else None, dt_bias=dt_bias,
                                dt_softplus=True, dt_limit=dt_limit, activation=activation,
                                headdim=headdim, ngroups=ngroups)
    if rmsnorm_weight is not None:
        out = rms_norm_gated_ref(out, rmsnorm_weight, None, z=z, eps=rmsnorm_eps,
                                 norm_before_gate=norm_before_gate)
    if outproj_weight is not None:
        out = F.linear(out, outproj_weight, outproj_bias)
    return out
