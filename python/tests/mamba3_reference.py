"""Mamba-3's scans in float64, written from docs/mamba3.md (the semantics of mamba-ssm
2.3.2.post1's mamba3_siso_combined, mamba3_siso_step, mamba3_mimo and mamba3_step_fn), to test
portssm's Mamba-3 ops against. Plain PyTorch, no kernel package needed.

Three independent forms of the same math:
- mamba3_siso_ref / mamba3_mimo_ref: the recurrence token by token (docs/mamba3.md section 3);
- mamba3_step_ref (and mamba3_siso_step_ref, mamba3_step_fn_ref): one decode step on the four
  carried states (section 5);
- mamba3_chunked_ref: the chunked algorithm proposed for portssm (section 8), intra-chunk
  quadratic form plus state passing between chunks; chunk_size >= L is the whole-sequence
  quadratic ("attention") form.

Layouts follow the reference ops: Q, K (batch, L, G, N) for SISO and (batch, L, R, G, N) for
MIMO (head h reads group h // (H / G)); V, Z (batch, L, H, P); ADT, DT, Trap (batch, H, L) with
Trap before its sigmoid; Angles (batch, L, H, A) before tanh, A <= N / 2; biases (H, N) or
(H, R, N); MIMO_V / MIMO_Z / MIMO_Out (H, R, P); D (H). States per sequence: angle (S, H, A),
ssm (S, H, P, N), k (S, H, N) for SISO or (S, R, H, N) for MIMO, v (S, H, P). With cu_seqlens
(int offsets, S + 1 of them) batch is 1 and the sequences are packed along L.
"""

import math

import torch
import torch.nn.functional as F

TWO_PI = 2.0 * math.pi


def num_rope_angles(d_state, rope_fraction):
    """The Mamba3 module's count of rotary angles for a state of d_state (the in_proj slice)."""
    assert rope_fraction in (0.5, 1.0)
    split = int(d_state * rope_fraction)
    split -= split % 2
    assert split > 0
    return split // 2


def wrap_angle(theta):
    """theta reduced to [0, 2 pi), as the reference stores its angle states."""
    return theta - TWO_PI * torch.floor(theta / TWO_PI)


def rotate(x, theta, pairing):
    """x (..., N) with the first A pairs rotated by theta (..., A) (broadcast over x's leading
    dimensions); the other N / 2 - A pairs unchanged. pairing "interleaved" pairs (2i, 2i + 1)
    (SISO), "halves" pairs (i, i + N / 2) (MIMO)."""
    N = x.shape[-1]
    A = theta.shape[-1]
    assert N % 2 == 0 and A <= N // 2
    pad = torch.zeros(theta.shape[:-1] + (N // 2 - A,), dtype=theta.dtype, device=theta.device)
    th = torch.cat([theta, pad], dim=-1)
    c, s = torch.cos(th), torch.sin(th)
    if pairing == "interleaved":
        x0, x1 = x[..., 0::2], x[..., 1::2]
        return torch.stack([x0 * c - x1 * s, x0 * s + x1 * c], dim=-1).flatten(-2)
    if pairing == "halves":
        x0, x1 = x[..., : N // 2], x[..., N // 2:]
        return torch.cat([x0 * c - x1 * s, x0 * s + x1 * c], dim=-1)
    raise ValueError(pairing)


def halves_permutation(N):
    """perm with x_halves = x_interleaved[..., perm]: pair i of the interleaved layout (2i, 2i+1)
    becomes pair i of the halves layout (i, i + N/2)."""
    return torch.tensor([2 * j for j in range(N // 2)] + [2 * j + 1 for j in range(N // 2)])


def _d(t):
    return None if t is None else t.double()


def _sequences(batch, L, cu_seqlens):
    """(row, start, end) of every sequence."""
    if cu_seqlens is None:
        return [(b, 0, L) for b in range(batch)]
    assert batch == 1, "cu_seqlens needs batch 1"
    cu = [int(c) for c in cu_seqlens]
    assert cu[0] == 0 and cu[-1] == L and all(a <= b for a, b in zip(cu, cu[1:]))
    return [(0, cu[i], cu[i + 1]) for i in range(len(cu) - 1)]


def _gather(outs, batch, cu_seqlens):
    """Per-sequence outputs (len, ...) back to (batch, L, ...)."""
    if cu_seqlens is None:
        return torch.stack(outs, dim=0)
    return torch.cat(outs, dim=0).unsqueeze(0)


def _states_or_zeros(input_states, i, shapes, like):
    if input_states is None:
        return [like.new_zeros(s) for s in shapes]
    return [st[i].double() for st in input_states]


def _angle_rate(angles_raw, dt):
    """pi * tanh(angle) * dt: the increment of the cumulative angle (A) of one token."""
    return math.pi * torch.tanh(angles_raw) * dt.unsqueeze(-1)


def angle_dt_ref(Angles, DT, init_state=None, cu_seqlens=None):
    """(cumulative angles (batch, L, H, A), final angle state (S, H, A)), both in [0, 2 pi):
    theta_t = theta_{t-1} + pi * tanh(Angles_t) * DT_t, theta_{-1} = init_state or 0."""
    Angles, DT = Angles.double(), DT.double()
    batch, L, H, A = Angles.shape
    outs, finals = [], []
    for i, (b, s0, s1) in enumerate(_sequences(batch, L, cu_seqlens)):
        theta = Angles.new_zeros(H, A) if init_state is None else init_state[i].double()
        rows = []
        for t in range(s0, s1):
            theta = wrap_angle(theta + _angle_rate(Angles[b, t], DT[b, :, t]))
            rows.append(theta)
        outs.append(torch.stack(rows) if rows else Angles.new_zeros(0, H, A))
        finals.append(theta)
    return _gather(outs, batch, cu_seqlens), torch.stack(finals)


def mamba3_siso_ref(Q, K, V, ADT, DT, Trap, Q_bias, K_bias, Angles, D=None, Z=None,
                    input_states=None, cu_seqlens=None, return_final_states=False):
    """mamba3_siso_combined's math, token by token in float64. input_states: (angle, ssm, k, v)
    or None (zeros). Returns out (batch, L, H, P), and with return_final_states also the final
    (angle (S, H, A), ssm (S, H, P, N), k (S, H, N), v (S, H, P))."""
    Q, K, V, ADT, DT, Trap = map(_d, (Q, K, V, ADT, DT, Trap))
    Q_bias, K_bias, Angles, D, Z = map(_d, (Q_bias, K_bias, Angles, D, Z))
    batch, L, G, N = Q.shape
    H, P = V.shape[2], V.shape[3]
    A = Angles.shape[-1]
    assert H % G == 0
    grp = torch.arange(H) // (H // G)
    outs, finals = [], []
    for i, (b, s0, s1) in enumerate(_sequences(batch, L, cu_seqlens)):
        theta, S, k_prev, v_prev = _states_or_zeros(
            input_states, i, [(H, A), (H, P, N), (H, N), (H, P)], Q)
        ys = []
        for t in range(s0, s1):
            dt, lam, alpha = DT[b, :, t], torch.sigmoid(Trap[b, :, t]), torch.exp(ADT[b, :, t])
            beta, gamma = alpha * dt * (1 - lam), dt * lam
            theta = wrap_angle(theta + _angle_rate(Angles[b, t], dt))
            q = rotate(Q[b, t, grp] + Q_bias, theta, "interleaved")  # (H, N)
            k = rotate(K[b, t, grp] + K_bias, theta, "interleaved")
            v = V[b, t]  # (H, P)
            S = (alpha[:, None, None] * S
                 + beta[:, None, None] * v_prev[:, :, None] * k_prev[:, None, :]
                 + gamma[:, None, None] * v[:, :, None] * k[:, None, :])
            y = torch.einsum("hpn,hn->hp", S, q)
            if D is not None:
                y = y + D[:, None] * v
            if Z is not None:
                y = y * F.silu(Z[b, t])
            ys.append(y)
            k_prev, v_prev = k, v
        outs.append(torch.stack(ys) if ys else V.new_zeros(0, H, P))
        finals.append((theta, S, k_prev, v_prev))
    out = _gather(outs, batch, cu_seqlens)
    if not return_final_states:
        return out
    return (out,) + tuple(torch.stack(f) for f in zip(*finals))


def _mimo_proj(W, R, H, P, like):
    """A MIMO projection (H, R, P) as (R, H, P); None means ones."""
    if W is None:
        return like.new_ones(R, H, P)
    return W.double().permute(1, 0, 2)


def mamba3_mimo_ref(Q, K, V, ADT, DT, Trap, Q_bias, K_bias, MIMO_V, MIMO_Z, MIMO_Out, Angles,
                    D=None, Z=None, input_states=None, cu_seqlens=None,
                    return_final_states=False, pairing="halves"):
    """mamba3_mimo's math (rank R), token by token in float64. The reference op has no initial
    states; input_states here extends it like the SISO op (k state (S, R, H, N)). MIMO_Out None:
    out (batch, L, R, H, P) per rank; else (batch, L, H, P). MIMO_Z is used only with Z."""
    Q, K, V, ADT, DT, Trap = map(_d, (Q, K, V, ADT, DT, Trap))
    Q_bias, K_bias, Angles, D, Z = map(_d, (Q_bias, K_bias, Angles, D, Z))
    batch, L, R, G, N = Q.shape
    H, P = V.shape[2], V.shape[3]
    A = Angles.shape[-1]
    assert H % G == 0
    grp = torch.arange(H) // (H // G)
    psi = _mimo_proj(MIMO_V, R, H, P, V)
    zeta = _mimo_proj(MIMO_Z, R, H, P, V)
    phi = None if MIMO_Out is None else _mimo_proj(MIMO_Out, R, H, P, V)
    qb, kb = Q_bias.permute(1, 0, 2), K_bias.permute(1, 0, 2)  # (R, H, N)
    outs, finals = [], []
    for i, (b, s0, s1) in enumerate(_sequences(batch, L, cu_seqlens)):
        theta, S, k_prev, v_prev = _states_or_zeros(
            input_states, i, [(H, A), (H, P, N), (R, H, N), (H, P)], Q)
        ys = []
        for t in range(s0, s1):
            dt, lam, alpha = DT[b, :, t], torch.sigmoid(Trap[b, :, t]), torch.exp(ADT[b, :, t])
            beta, gamma = alpha * dt * (1 - lam), dt * lam
            theta = wrap_angle(theta + _angle_rate(Angles[b, t], dt))
            q = rotate(Q[b, t][:, grp] + qb, theta, pairing)  # (R, H, N)
            k = rotate(K[b, t][:, grp] + kb, theta, pairing)
            v = psi * V[b, t]  # (R, H, P)
            vp = psi * v_prev
            S = (alpha[:, None, None] * S
                 + beta[:, None, None] * torch.einsum("rhp,rhn->hpn", vp, k_prev)
                 + gamma[:, None, None] * torch.einsum("rhp,rhn->hpn", v, k))
            y = torch.einsum("hpn,rhn->rhp", S, q)
            if D is not None:
                y = y + D[None, :, None] * v
            if Z is not None:
                y = y * F.silu(zeta * Z[b, t])
            ys.append(y if phi is None else (phi * y).sum(0))
            k_prev, v_prev = k, V[b, t]
        shape = (0, R, H, P) if phi is None else (0, H, P)
        outs.append(torch.stack(ys) if ys else V.new_zeros(shape))
        finals.append((theta, S, k_prev, v_prev))
    out = _gather(outs, batch, cu_seqlens)
    if not return_final_states:
        return out
    return (out,) + tuple(torch.stack(f) for f in zip(*finals))


def mamba3_step_ref(Q, K, V, ADT, DT, Trap, Q_bias, K_bias, Angles, states, D=None, Z=None,
                    MIMO_V=None, MIMO_Z=None, MIMO_Out=None, pairing="halves"):
    """One decode token, rank R (batch rows independent): Q, K (batch, R, G, N); V, Z
    (batch, H, P); ADT, DT, Trap (batch, H); Q_bias, K_bias (H, R, N); Angles (batch, H, A);
    states (angle (batch, H, A), ssm (batch, H, P, N), k (batch, R, H, N), v (batch, H, P)).
    Returns (out, new states): out (batch, H, P), or (batch, R, H, P) when MIMO_Out is None
    and R > 1 (R == 1 without MIMO_Out: out = the single rank's output)."""
    Q, K, V, ADT, DT, Trap = map(_d, (Q, K, V, ADT, DT, Trap))
    Q_bias, K_bias, Angles, D, Z = map(_d, (Q_bias, K_bias, Angles, D, Z))
    theta, S, k_prev, v_prev = (s.double() for s in states)
    batch, R, G, N = Q.shape
    H, P = V.shape[1], V.shape[2]
    grp = torch.arange(H) // (H // G)
    psi = _mimo_proj(MIMO_V, R, H, P, V)
    zeta = _mimo_proj(MIMO_Z, R, H, P, V)
    lam, alpha = torch.sigmoid(Trap), torch.exp(ADT)  # (batch, H)
    beta, gamma = alpha * DT * (1 - lam), DT * lam
    theta = wrap_angle(theta + _angle_rate(Angles, DT))  # (batch, H, A)
    th = theta[:, None]  # one angle per head, shared by the ranks
    q = rotate(Q[:, :, grp] + Q_bias.permute(1, 0, 2), th, pairing)  # (batch, R, H, N)
    k = rotate(K[:, :, grp] + K_bias.permute(1, 0, 2), th, pairing)
    v = psi * V[:, None]  # (batch, R, H, P)
    vp = psi * v_prev[:, None]
    S = (alpha[..., None, None] * S
         + beta[..., None, None] * torch.einsum("brhp,brhn->bhpn", vp, k_prev)
         + gamma[..., None, None] * torch.einsum("brhp,brhn->bhpn", v, k))
    y = torch.einsum("bhpn,brhn->brhp", S, q)
    if D is not None:
        y = y + D[None, None, :, None] * v
    if Z is not None:
        y = y * F.silu(zeta * Z[:, None])
    if MIMO_Out is not None:
        y = (_mimo_proj(MIMO_Out, R, H, P, V) * y).sum(1)
    elif R == 1:
        y = y[:, 0]
    return y, (theta, S, k, V)


def mamba3_siso_step_ref(Q, K, V, ADT, DT, Trap, Q_bias, K_bias, Angles, D=None, Z=None,
                         Input_States=None):
    """mamba3_siso_step's math: Q, K (batch, G, N), Q_bias (H, N), states (angle, ssm,
    k (batch, H, N), v). Returns (out (batch, H, P), [angle, ssm, k, v])."""
    angle, ssm, k_state, v_state = Input_States
    out, (a, s, k, v) = mamba3_step_ref(
        Q[:, None], K[:, None], V, ADT, DT, Trap, Q_bias[:, None], K_bias[:, None], Angles,
        (angle, ssm, k_state[:, None], v_state), D=D, Z=Z, pairing="interleaved")
    return out, [a, s, k[:, 0], v]


def mamba3_step_fn_ref(state, Bstate, Xstate, A, B, C, D, x, dt, trap, xproj, outproj=None,
                       z=None, zproj=None):
    """mamba3_step_fn's math (cute decode step): B, C, Bstate (batch, R, H, N) already biased and
    rotated; A (batch, H) the decay rate (alpha = exp(A * dt)); trap (batch, H) AFTER its
    sigmoid; xproj / outproj / zproj (R, H, P). Returns (out, new_state): out (batch, H, P)
    with outproj, else (batch, R, H, P); z is applied only together with outproj, as there."""
    state, Bstate, Xstate, A, B, C, D, x, dt, trap = map(
        _d, (state, Bstate, Xstate, A, B, C, D, x, dt, trap))
    alpha = torch.exp(A * dt)
    beta, gamma = (1 - trap) * dt * alpha, trap * dt
    xr = xproj.double()[None] * x[:, None]  # (batch, R, H, P)
    xs = xproj.double()[None] * Xstate[:, None]
    new = (alpha[..., None, None] * state
           + gamma[..., None, None] * torch.einsum("brhp,brhn->bhpn", xr, B)
           + beta[..., None, None] * torch.einsum("brhp,brhn->bhpn", xs, Bstate))
    y = torch.einsum("bhpn,brhn->brhp", new, C) + D.double()[None, None, :, None] * xr
    if outproj is None:
        return y, new
    if z is not None:
        y = y * F.silu(zproj.double()[None] * z.double()[:, None])
    return (outproj.double()[None] * y).sum(1), new


def mamba3_chunked_ref(Q, K, V, ADT, DT, Trap, Q_bias, K_bias, Angles, D=None, Z=None,
                       MIMO_V=None, MIMO_Z=None, MIMO_Out=None, input_states=None,
                       cu_seqlens=None, chunk_size=64, pairing="halves",
                       return_final_states=False):
    """The chunked algorithm of docs/mamba3.md section 8 in MIMO layout (SISO: R = 1 with
    pairing "interleaved" and the MIMO_* None). Per sequence and chunk: the state entering the
    chunk times exp(cumulative decay) read by q; inside the chunk the quadratic form with weights
    exp(c_t - c_s) * scale_s for s < t and gamma_t on the diagonal; then the state passed on.
    chunk_size >= L is the whole-sequence quadratic form. Same returns as mamba3_mimo_ref
    (MIMO_Out None and R == 1: out (batch, L, H, P))."""
    Q, K, V, ADT, DT, Trap = map(_d, (Q, K, V, ADT, DT, Trap))
    Q_bias, K_bias, Angles, D, Z = map(_d, (Q_bias, K_bias, Angles, D, Z))
    batch, L, R, G, N = Q.shape
    H, P = V.shape[2], V.shape[3]
    A = Angles.shape[-1]
    grp = torch.arange(H) // (H // G)
    psi = _mimo_proj(MIMO_V, R, H, P, V)
    zeta = _mimo_proj(MIMO_Z, R, H, P, V)
    qb, kb = Q_bias.permute(1, 0, 2), K_bias.permute(1, 0, 2)
    outs, finals = [], []
    for i, (b, s0, s1) in enumerate(_sequences(batch, L, cu_seqlens)):
        theta0, S, k_prev, v_prev = _states_or_zeros(
            input_states, i, [(H, A), (H, P, N), (R, H, N), (H, P)], Q)
        n = s1 - s0
        if n == 0:  # nothing consumed: the states pass through
            shape = (0, R, H, P) if MIMO_Out is None and R > 1 else (0, H, P)
            outs.append(V.new_zeros(shape))
            finals.append((theta0, S, k_prev, v_prev))
            continue
        dt, a = DT[b, :, s0:s1], ADT[b, :, s0:s1]  # (H, n)
        lam = torch.sigmoid(Trap[b, :, s0:s1])
        gamma = dt * lam
        shifted = torch.cat([dt[:, 1:] * (1 - lam[:, 1:]), dt.new_zeros(H, 1)], dim=1)
        scale = gamma + shifted  # weight of v_s k_s^T in every later state, s < n - 1
        # cumulative angles by a prefix sum (not the recurrence's running sum)
        theta = wrap_angle(theta0 + torch.cumsum(
            _angle_rate(Angles[b, s0:s1], dt.transpose(0, 1)), dim=0))  # (n, H, A)
        q = rotate(Q[b, s0:s1][:, :, grp] + qb, theta[:, None], pairing)  # (n, R, H, N)
        k = rotate(K[b, s0:s1][:, :, grp] + kb, theta[:, None], pairing)
        v = psi * V[b, s0:s1][:, None]  # (n, R, H, P)
        # the previous token's trapezoid term, added to the entering state before its decay
        S = S + (dt[:, 0] * (1 - lam[:, 0]))[:, None, None] * torch.einsum(
            "rhp,rhn->hpn", psi * v_prev, k_prev)
        ys = []
        for c0 in range(0, n, chunk_size):
            c1 = min(c0 + chunk_size, n)
            T = c1 - c0
            cum = torch.cumsum(a[:, c0:c1], dim=1)  # (H, T), decay within the chunk
            qc, kc, vc = q[c0:c1], k[c0:c1], v[c0:c1]
            y = torch.exp(cum).transpose(0, 1)[:, None, :, None] * torch.einsum(
                "trhn,hpn->trhp", qc, S)
            seg = cum[:, :, None] - cum[:, None, :]  # (H, t, s)
            strict = torch.ones(T, T, dtype=torch.bool).tril(-1)
            W = torch.exp(seg.masked_fill(~strict, float("-inf"))) * scale[:, None, c0:c1]
            W = W + torch.diag_embed(gamma[:, c0:c1])
            qk = torch.einsum("trhn,suhn->htrsu", qc, kc)  # (H, t, R, s, R')
            y = y + torch.einsum("hts,htrsu,suhp->trhp", W, qk, vc)
            if D is not None:
                y = y + D[None, None, :, None] * vc
            ys.append(y)
            last = torch.exp(cum[:, -1:] - cum) * scale[:, c0:c1]  # (H, T)
            S = torch.exp(cum[:, -1])[:, None, None] * S + torch.einsum(
                "hs,srhp,srhn->hpn", last, vc, kc)
        y = torch.cat(ys, dim=0)  # (n, R, H, P)
        if Z is not None:
            y = y * F.silu(zeta * Z[b, s0:s1][:, None])
        if MIMO_Out is not None:
            y = (_mimo_proj(MIMO_Out, R, H, P, V) * y).sum(1)
        elif R == 1:
            y = y[:, 0]
        outs.append(y)
        finals.append((theta[-1], S, k[-1], V[b, s1 - 1]))
    out = _gather(outs, batch, cu_seqlens)
    if not return_final_states:
        return out
    return (out,) + tuple(torch.stack(f) for f in zip(*finals))
