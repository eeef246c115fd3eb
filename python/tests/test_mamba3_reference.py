"""Properties of the float64 Mamba-3 reference (mamba3_reference.py) that need no kernel
package: its three forms agree (recurrence, decode steps, chunked / quadratic form), state
passing, packed sequences, L = 1, both rope fractions, MIMO rank 1 against SISO, the reduction
to Mamba-2's SSD, and gradients (gradcheck). No portssm op is called."""

import pytest
import torch

from mamba3_reference import (angle_dt_ref, halves_permutation, mamba3_chunked_ref,
                              mamba3_mimo_ref, mamba3_siso_ref, mamba3_siso_step_ref,
                              mamba3_step_fn_ref, mamba3_step_ref, num_rope_angles, rotate,
                              wrap_angle)
from references import ssd_ref

f64 = torch.float64


def close(a, b, tol=1e-10):
    assert a.shape == b.shape, (a.shape, b.shape)
    err = (a - b).abs().max().item() if a.numel() else 0.0
    assert err <= tol * (1 + b.abs().max().item() if b.numel() else 1), err


def close_all(xs, ys, tol=1e-10):
    assert len(xs) == len(ys)
    for x, y in zip(xs, ys):
        close(x, y, tol)


def inputs(batch=2, L=7, H=4, G=2, N=8, P=3, A=2, R=None, D=True, Z=True, S=None,
           states=True, requires_grad=False):
    """Random inputs in the reference ops' layouts (R None: SISO), and initial states for S
    sequences (default: batch)."""
    S = batch if S is None else S
    qk = (batch, L, G, N) if R is None else (batch, L, R, G, N)
    bias = (H, N) if R is None else (H, R, N)
    dt = torch.rand(batch, H, L, dtype=f64) * 0.5 + 0.05
    x = dict(
        Q=torch.randn(qk, dtype=f64), K=torch.randn(qk, dtype=f64),
        V=torch.randn(batch, L, H, P, dtype=f64),
        ADT=-(torch.rand(batch, H, L, dtype=f64) * 2 + 0.1) * dt, DT=dt,
        Trap=torch.randn(batch, H, L, dtype=f64),
        Q_bias=torch.randn(bias, dtype=f64), K_bias=torch.randn(bias, dtype=f64),
        Angles=torch.randn(batch, L, H, A, dtype=f64) * 2,
        D=torch.randn(H, dtype=f64) if D else None,
        Z=torch.randn(batch, L, H, P, dtype=f64) if Z else None)
    if R is not None:
        x.update(MIMO_V=torch.randn(H, R, P, dtype=f64), MIMO_Z=torch.randn(H, R, P, dtype=f64),
                 MIMO_Out=torch.randn(H, R, P, dtype=f64))
    kst = (S, H, N) if R is None else (S, R, H, N)
    st = None
    if states:
        st = (torch.rand(S, H, A, dtype=f64) * 6.2, torch.randn(S, H, P, N, dtype=f64),
              torch.randn(kst, dtype=f64), torch.randn(S, H, P, dtype=f64))
    if requires_grad:
        for v in list(x.values()) + list(st or ()):
            if v is not None:
                v.requires_grad_(True)
    return x, st


def siso(x, st, **kw):
    return mamba3_siso_ref(**x, input_states=st, return_final_states=True, **kw)


def mimo(x, st, **kw):
    return mamba3_mimo_ref(**x, input_states=st, return_final_states=True, **kw)


def siso_as_mimo(x, st):
    """SISO inputs in MIMO layout (R = 1), for mamba3_chunked_ref."""
    y = dict(x, Q=x["Q"][:, :, None], K=x["K"][:, :, None], Q_bias=x["Q_bias"][:, None],
             K_bias=x["K_bias"][:, None])
    s = None if st is None else (st[0], st[1], st[2][:, None], st[3])
    return y, s


def siso_steps(x, st):
    """mamba3_siso_step_ref token by token from st: (out, final states)."""
    states, outs = list(st), []
    for t in range(x["V"].shape[1]):
        out, states = mamba3_siso_step_ref(
            x["Q"][:, t], x["K"][:, t], x["V"][:, t], x["ADT"][..., t], x["DT"][..., t],
            x["Trap"][..., t], x["Q_bias"], x["K_bias"], x["Angles"][:, t], x["D"],
            None if x["Z"] is None else x["Z"][:, t], states)
        outs.append(out)
    return (torch.stack(outs, 1),) + tuple(states)


@pytest.mark.parametrize("G", [1, 2, 4])
def test_siso_step_loop_equals_recurrence(G):
    x, st = inputs(G=G)
    close_all(siso_steps(x, st), siso(x, st))


@pytest.mark.parametrize("chunk", [1, 3, 7, 64])
def test_siso_chunked_equals_recurrence(chunk):
    x, st = inputs(L=7)
    ref = siso(x, st)
    xm, sm = siso_as_mimo(x, st)
    got = mamba3_chunked_ref(**xm, input_states=sm, chunk_size=chunk, pairing="interleaved",
                             return_final_states=True)
    close_all(got[:2] + (got[2], got[3][:, 0], got[4]), ref)


@pytest.mark.parametrize("reduce_out", [True, False])
@pytest.mark.parametrize("chunk", [2, 5, 64])
def test_mimo_forms_agree(reduce_out, chunk):
    x, st = inputs(R=3, L=8, G=1)
    if not reduce_out:
        x["MIMO_Out"] = None
    ref = mimo(x, st)
    got = mamba3_chunked_ref(**x, input_states=st, chunk_size=chunk, return_final_states=True)
    close_all(got, ref)
    states, outs = st, []
    for t in range(x["V"].shape[1]):
        out, states = mamba3_step_ref(
            x["Q"][:, t], x["K"][:, t], x["V"][:, t], x["ADT"][..., t], x["DT"][..., t],
            x["Trap"][..., t], x["Q_bias"], x["K_bias"], x["Angles"][:, t], states, D=x["D"],
            Z=x["Z"][:, t], MIMO_V=x["MIMO_V"], MIMO_Z=x["MIMO_Z"], MIMO_Out=x["MIMO_Out"])
        outs.append(out)
    close_all((torch.stack(outs, 1),) + tuple(states), ref)


def test_no_initial_states_means_zeros():
    x, st = inputs(states=False)
    zeros = (torch.zeros(2, 4, 2, dtype=f64), torch.zeros(2, 4, 3, 8, dtype=f64),
             torch.zeros(2, 4, 8, dtype=f64), torch.zeros(2, 4, 3, dtype=f64))
    close_all(siso(x, None), siso(x, zeros))
    assert torch.equal(mamba3_siso_ref(**x), siso(x, None)[0])


@pytest.mark.parametrize("kind", ["siso", "mimo"])
def test_split_sequence_state_passing(kind):
    L, cut = 9, 4
    x, st = inputs(L=L, R=None if kind == "siso" else 2)
    run = siso if kind == "siso" else mimo
    full = run(x, st)

    def part(lo, hi):
        y = {}
        for k, v in x.items():
            if v is None or k in ("Q_bias", "K_bias", "D", "MIMO_V", "MIMO_Z", "MIMO_Out"):
                y[k] = v
            elif k in ("ADT", "DT", "Trap"):
                y[k] = v[..., lo:hi]
            else:
                y[k] = v[:, lo:hi]
        return y

    first = run(part(0, cut), st)
    second = run(part(cut, L), first[1:])
    close(torch.cat([first[0], second[0]], dim=1), full[0])
    close_all(second[1:], full[1:])


@pytest.mark.parametrize("kind", ["siso", "mimo"])
def test_varlen_packing_equals_separate_sequences(kind):
    lens = [3, 0, 5, 1]
    R = None if kind == "siso" else 2
    run = siso if kind == "siso" else mimo
    x, st = inputs(batch=1, L=sum(lens), R=R, S=len(lens))
    cu = torch.tensor([0] + torch.tensor(lens).cumsum(0).tolist(), dtype=torch.int32)
    packed = run(x, st, cu_seqlens=cu)
    xm, sm = (x, st) if R else siso_as_mimo(x, st)
    chunked = mamba3_chunked_ref(**xm, input_states=sm, cu_seqlens=cu, chunk_size=2,
                                 pairing="halves" if R else "interleaved",
                                 return_final_states=True)
    if not R:
        chunked = chunked[:3] + (chunked[3][:, 0], chunked[4])
    close_all(chunked, packed)
    for i, (lo, hi) in enumerate(zip(cu[:-1].tolist(), cu[1:].tolist())):
        y = {k: (v if v is None or k in ("Q_bias", "K_bias", "D", "MIMO_V", "MIMO_Z", "MIMO_Out")
                 else v[..., lo:hi] if k in ("ADT", "DT", "Trap") else v[:, lo:hi])
             for k, v in x.items()}
        one = run(y, tuple(s[i:i + 1] for s in st))
        close(packed[0][:, lo:hi], one[0])
        close_all([s[i:i + 1] for s in packed[1:]], one[1:])
    # an empty sequence passes its initial states through unchanged
    for s_in, s_out in zip(st, packed[1:]):
        assert torch.equal(s_in[1], s_out[1])


def test_single_token():
    x, st = inputs(L=1)
    out = siso(x, st)
    step = siso_steps(x, st)
    close_all(step, out)
    # by hand: h_0 = alpha (h_-1 + dt (1 - lam) v_-1 k_-1^T) + dt lam v_0 k_0^T
    b, h = 1, 2
    dt, lam = x["DT"][b, h, 0], torch.sigmoid(x["Trap"][b, h, 0])
    alpha = torch.exp(x["ADT"][b, h, 0])
    theta = wrap_angle(st[0][b, h] + torch.pi * torch.tanh(x["Angles"][b, 0, h]) * dt)
    g = h // 2
    k = rotate(x["K"][b, 0, g] + x["K_bias"][h], theta, "interleaved")
    q = rotate(x["Q"][b, 0, g] + x["Q_bias"][h], theta, "interleaved")
    v = x["V"][b, 0, h]
    S = alpha * (st[1][b, h] + dt * (1 - lam) * torch.outer(st[3][b, h], st[2][b, h])) \
        + dt * lam * torch.outer(v, k)
    y = (S @ q + x["D"][h] * v) * torch.nn.functional.silu(x["Z"][b, 0, h])
    close(out[0][b, 0, h], y)
    close(out[2][b, h], S)


def test_num_rope_angles():
    assert [num_rope_angles(n, f) for n, f in [(128, 0.5), (128, 1.0), (64, 0.5), (16, 1.0),
                                               (6, 0.5), (4, 0.5)]] == [32, 64, 16, 8, 1, 1]
    with pytest.raises(AssertionError):
        num_rope_angles(2, 0.5)  # the module's `assert self.num_rope_angles > 0`


@pytest.mark.parametrize("kind", ["siso", "mimo"])
@pytest.mark.parametrize("fraction", [0.5, 1.0])
def test_rope_fraction(kind, fraction):
    N = 8
    A = num_rope_angles(N, fraction)
    R = None if kind == "siso" else 2
    run = siso if kind == "siso" else mimo
    x, st = inputs(N=N, A=A, R=R, L=6)
    # with no carried SSM/K state the outputs depend only on angle differences: a constant
    # added to the initial angle state changes nothing but the final K state's rotation
    st0 = (st[0], torch.zeros_like(st[1]), torch.zeros_like(st[2]), st[3])
    shifted = (st0[0] + 1.234,) + st0[1:]
    a, b = run(x, st0), run(x, shifted)
    close(a[0], b[0], 1e-9)
    close(wrap_angle(a[1] + 1.234), b[1], 1e-9)
    # the final K state is K_last + bias rotated by the final angle; pairs past A unrotated
    pairing = "interleaved" if R is None else "halves"
    grp = torch.arange(4) // 2
    if R is None:
        raw = x["K"][:, -1][:, grp] + x["K_bias"]
        close(a[3], rotate(raw, a[1], pairing))
    else:
        raw = x["K"][:, -1][:, :, grp] + x["K_bias"].permute(1, 0, 2)
        close(a[3], rotate(raw, a[1][:, None], pairing))
    rotated = torch.zeros(N, dtype=torch.bool)
    if pairing == "interleaved":
        rotated[: 2 * A] = True
    else:
        rotated[:A] = True
        rotated[N // 2: N // 2 + A] = True
    assert torch.equal(a[3][..., ~rotated], raw[..., ~rotated])
    assert (a[3][..., rotated] - raw[..., rotated]).abs().min() > 0


@pytest.mark.parametrize("same_pairing", [True, False])
def test_mimo_rank1_equals_siso(same_pairing):
    """Rank 1 with the projections at 1 is SISO, up to the rotary pairing: SISO pairs (2i, 2i+1)
    and MIMO (i, i + N/2), the same pairs after permuting the state axis N."""
    N = 8
    x, st = inputs(N=N, A=3)
    ref = siso(x, st)
    perm = torch.arange(N) if same_pairing else halves_permutation(N)
    H, P = 4, 3
    ones = torch.ones(H, 1, P, dtype=f64)
    xm = dict(x, Q=x["Q"][..., perm][:, :, None], K=x["K"][..., perm][:, :, None],
              Q_bias=x["Q_bias"][..., perm][:, None], K_bias=x["K_bias"][..., perm][:, None],
              MIMO_V=ones, MIMO_Z=ones, MIMO_Out=ones)
    sm = (st[0], st[1][..., perm], st[2][..., perm][:, None], st[3])
    got = mimo(xm, sm, pairing="interleaved" if same_pairing else "halves")
    close_all((got[0], got[1], got[2], got[3][:, 0], got[4]),
              (ref[0], ref[1], ref[2][..., perm], ref[3][..., perm], ref[4]))
    # with the pairings mixed up (no permutation) they differ
    if not same_pairing:
        bad = mimo(dict(xm, Q=x["Q"][:, :, None], K=x["K"][:, :, None],
                        Q_bias=x["Q_bias"][:, None], K_bias=x["K_bias"][:, None]),
                   (st[0], st[1], st[2][:, None], st[3]))
        assert (bad[0] - ref[0]).abs().max() > 1e-3


def test_trap_one_no_rotation_is_mamba2_ssd():
    """lambda = 1 (Trap = +inf), no angles, no biases, ADT = A * dt: Mamba-2's SSD with x = V,
    B = K, C = Q (references.ssd_ref)."""
    x, _ = inputs(states=False)
    A = -torch.rand(4, dtype=f64) - 0.2
    x.update(Trap=torch.full_like(x["Trap"], float("inf")), Angles=torch.zeros_like(x["Angles"]),
             Q_bias=torch.zeros_like(x["Q_bias"]), K_bias=torch.zeros_like(x["K_bias"]),
             ADT=A[None, :, None] * x["DT"])
    out, _, ssm, _, _ = siso(x, None)
    y, s = ssd_ref(x["V"], x["DT"].transpose(1, 2), A, x["K"], x["Q"], D=x["D"], z=x["Z"])
    close(out, y)
    close(ssm, s)


def test_angle_dt_ref():
    x, st = inputs()
    cum, final = angle_dt_ref(x["Angles"], x["DT"], init_state=st[0])
    inc = torch.pi * torch.tanh(x["Angles"]) * x["DT"].transpose(1, 2)[..., None]
    close(torch.cos(cum), torch.cos(st[0][:, None] + inc.cumsum(1)))
    close(torch.sin(cum), torch.sin(st[0][:, None] + inc.cumsum(1)))
    assert (cum >= 0).all() and (cum < 2 * torch.pi).all()
    close(final, siso(x, st)[1])
    close(final, cum[:, -1])


def test_step_fn_form_equals_step():
    """mamba3_step_fn's inputs (B/C biased and rotated outside, A and trap after the sigmoid)
    give the raw-input step's output and state."""
    x, st = inputs(R=2, G=1, L=1)
    t = 0
    out, new = mamba3_step_ref(
        x["Q"][:, t], x["K"][:, t], x["V"][:, t], x["ADT"][..., t], x["DT"][..., t],
        x["Trap"][..., t], x["Q_bias"], x["K_bias"], x["Angles"][:, t], st, D=x["D"],
        Z=x["Z"][:, t], MIMO_V=x["MIMO_V"], MIMO_Z=x["MIMO_Z"], MIMO_Out=x["MIMO_Out"])
    dt = x["DT"][..., t]
    theta = wrap_angle(st[0] + torch.pi * torch.tanh(x["Angles"][:, t]) * dt[..., None])
    Bm = rotate(x["K"][:, t].expand(-1, -1, 4, -1) + x["K_bias"].permute(1, 0, 2), theta[:, None],
                "halves")
    Cm = rotate(x["Q"][:, t].expand(-1, -1, 4, -1) + x["Q_bias"].permute(1, 0, 2), theta[:, None],
                "halves")
    perm = lambda w: w.permute(1, 0, 2)  # noqa: E731  (H, R, P) -> (R, H, P)
    y, s = mamba3_step_fn_ref(st[1], st[2], st[3], x["ADT"][..., t] / dt, Bm, Cm, x["D"],
                              x["V"][:, t], dt, torch.sigmoid(x["Trap"][..., t]),
                              perm(x["MIMO_V"]), outproj=perm(x["MIMO_Out"]), z=x["Z"][:, t],
                              zproj=perm(x["MIMO_Z"]))
    close(y, out)
    close(s, new[1])
    close(Bm, new[2])


def test_gradcheck_siso():
    x, st = inputs(batch=1, L=3, H=2, G=1, N=4, P=2, A=1, requires_grad=True)
    names = [k for k, v in x.items() if v is not None]

    def f(*args):
        kw = dict(zip(names, args[:len(names)]))
        return mamba3_siso_ref(**kw, input_states=args[len(names):], return_final_states=True)

    assert torch.autograd.gradcheck(f, [x[k] for k in names] + list(st), fast_mode=True)


def test_gradcheck_mimo_chunked():
    x, st = inputs(batch=1, L=3, H=2, G=1, N=4, P=2, A=1, R=2, requires_grad=True)
    names = [k for k, v in x.items() if v is not None]

    def f(*args):
        kw = dict(zip(names, args[:len(names)]))
        return mamba3_chunked_ref(**kw, input_states=args[len(names):], chunk_size=2,
                                  return_final_states=True)

    assert torch.autograd.gradcheck(f, [x[k] for k in names] + list(st), fast_mode=True)
