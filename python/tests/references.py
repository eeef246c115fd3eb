"""Pure-PyTorch formulas of the references' semantics (causal-conv1d 1.7.0, mamba-ssm
2.3.2.post1), written for these tests in float64 from portssm.h / the references' documented
behaviour, to compare portssm's ops with."""

import torch
import torch.nn.functional as F


def conv1d_ref(x, weight, bias=None, initial_states=None, seq_idx=None, activation=None):
    """(out, final_states) of the causal depthwise conv, float64."""
    x = x.double()
    w = weight.double()
    batch, dim, L = x.shape
    W = w.shape[1]
    if initial_states is None:
        pre = torch.zeros(batch, dim, W - 1, dtype=x.dtype, device=x.device)
    else:
        pre = initial_states.double()
    xp = torch.cat([pre, x], dim=-1)
    out = torch.zeros(batch, dim, L, dtype=x.dtype, device=x.device)
    for k in range(W):
        tap = xp[:, :, k:k + L]
        if seq_idx is not None:
            # token t reads token t-(W-1-k); one of another sequence contributes 0, and the
            # positions before token 0 belong to token 0's sequence
            src = torch.cat([seq_idx[:, :1].expand(-1, W - 1), seq_idx], dim=1)[:, k:k + L]
            tap = tap * (src == seq_idx).unsqueeze(1).double()
        out = out + w[:, k].view(1, dim, 1) * tap
    if bias is not None:
        out = out + bias.double().view(1, dim, 1)
    if activation in ("silu", "swish"):
        out = F.silu(out)
    final = xp[:, :, -(W - 1):] if W > 1 else xp[:, :, :0]
    return out, final


def conv_update_ref(x, conv_state, weight, bias=None, activation=None, cache_seqlens=None,
                    conv_state_indices=None):
    """(out, new conv_state) in float64; conv_state is not modified."""
    squeeze = x.dim() == 2
    if squeeze:
        x = x.unsqueeze(-1)
    state = conv_state.double().clone()
    batch, dim, T = x.shape
    W = weight.shape[1]
    S = state.shape[-1]
    out = torch.zeros(batch, dim, T, dtype=torch.float64, device=x.device)
    for b in range(batch):
        row = b if conv_state_indices is None else int(conv_state_indices[b])
        if row < 0 or row >= state.shape[0]:
            continue
        st = state[row]
        xb = x[b].double()
        if cache_seqlens is None:
            full = torch.cat([st, xb], dim=-1)  # (dim, S+T)
            for t in range(T):
                window = full[:, S + t - (W - 1):S + t + 1]
                out[b, :, t] = (window * weight.double()).sum(-1)
            state[row] = full[:, -S:]
        else:
            pos = int(cache_seqlens[b])
            hist = [st[:, (pos - (W - 1) + i) % S] for i in range(W - 1)]
            for t in range(T):
                hist.append(xb[:, t])
                window = torch.stack(hist[-W:], dim=-1)
                out[b, :, t] = (window * weight.double()).sum(-1)
            for t in range(T):
                st[:, (pos + t) % S] = xb[:, t]
            state[row] = st
        if bias is not None:
            out[b] += bias.double().view(dim, 1)
    if activation in ("silu", "swish"):
        out = F.silu(out)
    return (out.squeeze(-1) if squeeze else out), state


def scan_ref(u, delta, A, B, C, D=None, z=None, delta_bias=None, delta_softplus=False,
             initial_state=None):
    """(out, last_state) of the Mamba-1 selective scan, float64, by the recurrence."""
    u, delta, A = u.double(), delta.double(), A.double()
    batch, dim, L = u.shape
    N = A.shape[1]
    if delta_bias is not None:
        delta = delta + delta_bias.double().view(1, dim, 1)
    if delta_softplus:
        delta = torch.where(delta <= 20, torch.log1p(torch.exp(delta)), delta)

    def expand(M):
        if M.dim() == 2:
            return M.double().view(1, dim, N, 1).expand(batch, dim, N, L)
        if M.dim() == 3:
            M = M.unsqueeze(1)
        G = M.shape[1]
        return M.double().repeat_interleave(dim // G, dim=1)

    Bx, Cx = expand(B), expand(C)
    x = (initial_state.double() if initial_state is not None
         else torch.zeros(batch, dim, N, dtype=torch.float64, device=u.device))
    ys = []
    for t in range(L):
        dt = delta[:, :, t].unsqueeze(-1)
        x = torch.exp(dt * A) * x + dt * Bx[..., t] * u[:, :, t].unsqueeze(-1)
        ys.append((x * Cx[..., t]).sum(-1))
    y = torch.stack(ys, dim=-1)
    if D is not None:
        y = y + D.double().view(1, dim, 1) * u
    if z is not None:
        y = y * F.silu(z.double())
    return y, x


def state_update_ref(state, x, dt, A, B, C, D=None, z=None, dt_bias=None, dt_softplus=False,
                     state_batch_indices=None):
    """(out, new state) of one decode step, float64; `state` is not modified.  Heads form when
    state is 4-d, Mamba-1 form (one head) when 3-d."""
    heads = state.dim() == 4
    st = state.double().clone()
    if not heads:
        st4 = st.unsqueeze(1)
        x, dt, B, C = x.unsqueeze(1), dt.unsqueeze(1), B.unsqueeze(1), C.unsqueeze(1)
        A = A.unsqueeze(0)
        z = z.unsqueeze(1) if z is not None else None
        D = D.unsqueeze(0) if D is not None else None
        dt_bias = dt_bias.unsqueeze(0) if dt_bias is not None else None
    else:
        st4 = st
    batch, H, P = x.shape
    G = B.shape[1]
    dtv = dt.double()
    if dt_bias is not None:
        dtv = dtv + dt_bias.double()
    if dt_softplus:
        dtv = torch.where(dtv <= 20, torch.log1p(torch.exp(dtv)), dtv)
    Bh = B.double().repeat_interleave(H // G, dim=1)
    Ch = C.double().repeat_interleave(H // G, dim=1)
    out = torch.zeros(batch, H, P, dtype=torch.float64, device=x.device)
    for b in range(batch):
        row = b if state_batch_indices is None else int(state_batch_indices[b])
        if row < 0 or row >= st4.shape[0]:
            continue
        s = st4[row]
        d = dtv[b].unsqueeze(-1)
        s = torch.exp(d * A.double()) * s + d * Bh[b].unsqueeze(1) * x[b].double().unsqueeze(-1)
        st4[row] = s
        o = (s * Ch[b].unsqueeze(1)).sum(-1)
        if D is not None:
            o = o + D.double() * x[b].double()
        if z is not None:
            o = o * F.silu(z[b].double())
        out[b] = o
    if not heads:
        return out.squeeze(1), st4.squeeze(1)
    return out, st4


def ssd_ref(x, dt, A, B, C, D=None, z=None, dt_bias=None, dt_softplus=False,
            dt_limit=(0.0, float("inf")), initial_states=None, seq_idx=None):
    """(out, final_states) of the Mamba-2 SSD, float64, by the recurrence token by token (not
    the chunked algorithm): x (b,l,h,p), dt (b,l,h), A (h), B/C (b,l,g,n), D (h,p) or (h); the
    state restarts from 0 wherever seq_idx changes."""
    x, dt, A = x.double(), dt.double(), A.double()
    batch, L, H, P = x.shape
    G, N = B.shape[2], B.shape[3]
    if dt_bias is not None:
        dt = dt + dt_bias.double()
    if dt_softplus:
        dt = torch.where(dt <= 20, torch.log1p(torch.exp(dt)), dt)
    if tuple(dt_limit) != (0.0, float("inf")):
        dt = dt.clamp(dt_limit[0], dt_limit[1])
    Bh = B.double().repeat_interleave(H // G, dim=2)
    Ch = C.double().repeat_interleave(H // G, dim=2)
    s = (initial_states.double() if initial_states is not None
         else torch.zeros(batch, H, P, N, dtype=torch.float64, device=x.device))
    ys = []
    for t in range(L):
        if seq_idx is not None and t > 0:
            keep = (seq_idx[:, t] == seq_idx[:, t - 1]).double().view(batch, 1, 1, 1)
            s = s * keep
        d = dt[:, t].view(batch, H, 1, 1)
        s = torch.exp(d * A.view(1, H, 1, 1)) * s + \
            d * Bh[:, t].unsqueeze(2) * x[:, t].unsqueeze(-1)
        ys.append((s * Ch[:, t].unsqueeze(2)).sum(-1))
    y = torch.stack(ys, dim=1)
    if D is not None:
        Dv = D.double().view(1, 1, H, -1)
        y = y + Dv * x
    if z is not None:
        y = y * F.silu(z.double())
    return y, s


TOL = {torch.float32: (6e-4, 2e-3), torch.float16: (3e-3, 5e-3), torch.bfloat16: (3e-2, 5e-2)}


def neighbours16(a):
    """The next float16/bfloat16 values above and below each element of `a` (infinities stay),
    from the bit patterns: torch.nextafter has no 16-bit cpu kernel before torch 2.2 or so (2.1:
    "nextafter_cpu" not implemented for 'Half').  The patterns are sign and magnitude; as
    integers that order like the values (-0 = +0) one step up or down is a neighbour."""
    bits = a.view(torch.int16).to(torch.int32)
    order = torch.where(bits >= 0, bits, -(bits & 0x7FFF))
    top = int(torch.tensor(float("inf"), dtype=a.dtype).view(torch.int16))  # +inf's pattern

    def value(o):
        o = o.clamp(-top, top)
        b = torch.where(o >= 0, o, -o + 0x8000)  # 0..0xFFFF
        return torch.where(b >= 0x8000, b - 0x10000, b).to(torch.int16).view(a.dtype)

    return value(order + 1), value(order - 1)


def round_once(v, dtype):
    """float64 v rounded once, to nearest even, to a 16-bit dtype.  (torch's own float64 ->
    float16/bfloat16 conversion goes through float32: rounded twice, one unit off where the first
    rounding lands on a tie of the second.)  The correct result is that conversion or one of its
    two neighbours: the nearest of them, the even one on a tie."""
    v = v.double()
    a = v.to(dtype)
    cands = torch.stack([a, *neighbours16(a)])
    err = (cands.double() - v).abs()
    odd = cands.view(torch.int16) & 1  # the last bit of the significand
    # the nearest; of two equally near (a tie), the even one
    key = (err != err.min(0, keepdim=True).values).to(torch.int16) * 2 + odd
    best = key.argmin(0, keepdim=True)
    return cands.gather(0, best).squeeze(0)


def assert_close(got, ref, dtype, name, scale=1.0):
    rtol, atol = TOL[dtype]
    got64 = got.double()
    ref64 = ref.double().to(got64.device)
    err = ((got64 - ref64) ** 2).sum() / ((ref64 ** 2).sum() + 1e-30)
    ok = torch.allclose(got64, ref64, rtol=rtol * scale, atol=atol * scale)
    assert ok and torch.isfinite(got64).all(), (
        "%s: max |diff| %.3g, normalised error %.3g (rtol %g atol %g)"
        % (name, (got64 - ref64).abs().max().item(), err.item(), rtol * scale, atol * scale))
