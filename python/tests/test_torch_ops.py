"""Each drop-in of portssm.torch against the pure-PyTorch formulas of references.py (float64),
on every dtype and the layouts and options the references have; gradients against float64
autograd of the same formulas and against directional finite differences of portssm's own
forward."""

import pytest
import torch

import portssm.torch as pt
from conftest import require_backward
from portssm import _structs
from portssm.torch import _runtime
from references import (assert_close, conv1d_ref, conv_update_ref, round_once, scan_ref,
                        state_update_ref)

DTYPES = [torch.float32, torch.float16, torch.bfloat16]


def rand(*shape, device, dtype=torch.float32, lo=-1.0, hi=1.0):
    return (torch.rand(*shape, device=device) * (hi - lo) + lo).to(dtype)


# ---------------------------------------------------------------- causal_conv1d_fn


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("width", [2, 4, 5])
@pytest.mark.parametrize("channel_last", [False, True])
def test_conv1d_fn(device, dtype, width, channel_last):
    B, D, L = 2, 6, 37
    x = rand(B, D, L, device=device, dtype=dtype)
    if channel_last:
        x = x.transpose(1, 2).contiguous().transpose(1, 2)
    w = rand(D, width, device=device)
    bias = rand(D, device=device)
    init = rand(B, D, width - 1, device=device, dtype=dtype)
    out, final = pt.causal_conv1d_fn(x, w, bias, None, init, True, None, "silu")
    ref, ref_final = conv1d_ref(x, w, bias, init, activation="silu")
    assert out.shape == x.shape and out.dtype == dtype
    assert_close(out, ref, dtype, "out")
    assert_close(final, ref_final, dtype, "final_states")
    assert pt.causal_conv1d_fn(x, w).shape == x.shape  # defaults: no bias, no activation
    assert_close(pt.causal_conv1d_fn(x, w), conv1d_ref(x, w)[0], dtype, "out (defaults)")


def test_conv1d_fn_seq_idx_and_final_states_out(device):
    B, D, L, W = 2, 5, 23, 4
    x = rand(B, D, L, device=device)
    w = rand(D, W, device=device)
    seq_idx = torch.sort(torch.randint(0, 3, (B, L), device=device), dim=1)[0].to(torch.int32)
    out = pt.causal_conv1d_fn(x, w, None, seq_idx, activation="swish")
    assert_close(out, conv1d_ref(x, w, seq_idx=seq_idx, activation="silu")[0], torch.float32,
                 "out")
    fs_out = torch.full((B, D, W - 1), float("nan"), device=device)
    out2, fs = pt.causal_conv1d_fn(x, w, return_final_states=True, final_states_out=fs_out)
    assert fs is fs_out
    assert_close(fs, conv1d_ref(x, w)[1], torch.float32, "final_states_out")
    with pytest.raises(NotImplementedError, match="activation"):
        pt.causal_conv1d_fn(x, w, activation="relu")


def test_conv1d_fn_grad(device):
    missing = require_backward(device)
    B, D, L, W = 2, 4, 19, 4
    x = rand(B, D, L, device=device).requires_grad_()
    w = rand(D, W, device=device).requires_grad_()
    bias = rand(D, device=device).requires_grad_()
    init = rand(B, D, W - 1, device=device).requires_grad_()
    if missing:
        with pytest.raises(NotImplementedError, match="causal_conv1d_bwd"):
            out, fs = pt.causal_conv1d_fn(x, w, bias, None, init, True, None, "silu")
            (out.sum() + fs.sum()).backward()
        pytest.xfail("the %s backend has no %s yet (library says UNSUPPORTED)" % (device, missing))
    out, fs = pt.causal_conv1d_fn(x, w, bias, None, init, True, None, "silu")
    gout, gfs = torch.randn_like(out), torch.randn_like(fs)
    (out * gout).sum().backward(inputs=[x, w, bias, init], retain_graph=True)
    (fs * gfs).sum().backward(inputs=[x, w, bias, init])
    leaves = [t.detach().double().requires_grad_() for t in (x, w, bias, init)]
    r_out, r_fs = conv1d_ref(leaves[0], leaves[1], leaves[2], leaves[3], activation="silu")
    ((r_out * gout.double()).sum() + (r_fs * gfs.double()).sum()).backward()
    for t, r, name in zip((x, w, bias, init), leaves, ("dx", "dweight", "dbias", "dinitial")):
        assert_close(t.grad, r.grad, torch.float32, name)
    # directional finite differences of portssm's own forward
    v = [torch.randn_like(t) for t in (x, w, bias, init)]
    eps = 1e-3

    def f(sign):
        a = [(t.detach() + sign * eps * d) for t, d in zip((x, w, bias, init), v)]
        o = pt.causal_conv1d_fn(a[0], a[1], a[2], None, a[3], activation="silu")
        return (o.double() * gout.double()).sum()

    fd = (f(1) - f(-1)) / (2 * eps)
    # the gradient of sum(out*gout) alone, for the directional derivative of f
    for t in (x, w, bias, init):
        t.grad = None
    out, _ = pt.causal_conv1d_fn(x, w, bias, None, init, True, None, "silu")
    (out * gout).sum().backward()
    analytic = sum((t.grad.double() * d.double()).sum() for t, d in zip((x, w, bias, init), v))
    assert abs(fd - analytic) <= 1e-2 * max(1.0, abs(analytic)), (fd.item(), analytic.item())


# ---------------------------------------------------------------- causal_conv1d_update


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("mode", ["shift", "ring", "indices", "tokens"])
def test_conv1d_update(device, dtype, mode):
    B, D, W = 3, 8, 4
    S = W - 1 if mode != "ring" else 7
    T = 3 if mode == "tokens" else 1
    x = rand(B, D, T, device=device, dtype=dtype) if T > 1 else rand(B, D, device=device,
                                                                        dtype=dtype)
    pool = 5 if mode == "indices" else B
    state = rand(pool, D, S, device=device, dtype=dtype)
    w = rand(D, W, device=device)
    bias = rand(D, device=device)
    seqlens = torch.randint(0, 20, (B,), device=device, dtype=torch.int32) if mode == "ring" else None
    idx = (torch.tensor([4, -1, 1], device=device, dtype=torch.int32) if mode == "indices"
           else None)
    ref, ref_state = conv_update_ref(x, state, w, bias, "silu", seqlens, idx)
    out = pt.causal_conv1d_update(x, state, w, bias, "silu", seqlens, idx)
    assert out.shape == x.shape
    assert_close(out, ref, dtype, "out")
    assert_close(state, ref_state, dtype, "conv_state")


# ---------------------------------------------------------------- selective_scan_fn


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("variant", ["const_BC", "var_BC", "groups", "all_options"])
def test_selective_scan_fn(device, dtype, variant):
    B, D, N, L = 2, 4, 5, 150  # L past one checkpoint interval
    u = rand(B, D, L, device=device, dtype=dtype)
    delta = rand(B, D, L, device=device, dtype=dtype, lo=0.0, hi=0.5)
    A = -rand(D, N, device=device, lo=0.1, hi=1.0)
    if variant == "const_BC":
        Bm, Cm = rand(D, N, device=device), rand(D, N, device=device)
    elif variant == "groups":
        Bm, Cm = (rand(B, 2, N, L, device=device, dtype=dtype),
                  rand(B, 2, N, L, device=device, dtype=dtype))
    else:
        Bm, Cm = (rand(B, N, L, device=device, dtype=dtype),
                  rand(B, N, L, device=device, dtype=dtype))
    kw = {}
    if variant == "all_options":
        kw = dict(D=rand(D, device=device), z=rand(B, D, L, device=device, dtype=dtype),
                  delta_bias=rand(D, device=device), delta_softplus=True)
    out, last = pt.selective_scan_fn(u, delta, A, Bm, Cm, return_last_state=True, **kw)
    ref, ref_last = scan_ref(u, delta, A, Bm, Cm, **kw)
    assert out.dtype == dtype and last.dtype == torch.float32
    assert_close(out, ref, dtype, "out")
    assert_close(last, ref_last, torch.float32 if dtype == torch.float32 else dtype, "last_state")
    only = pt.selective_scan_fn(u, delta, A, Bm, Cm, **kw)
    assert torch.equal(only, out)


def test_selective_scan_complex_A_refused(device):
    u = rand(1, 2, 4, device=device)
    A = torch.complex(-torch.rand(2, 3), torch.rand(2, 3)).to(device)
    with pytest.raises(NotImplementedError, match="complex A"):
        pt.selective_scan_fn(u, u, A, rand(1, 3, 8, device=device), rand(1, 3, 8, device=device))


@pytest.mark.parametrize("variable", [True, False])
def test_selective_scan_fn_grad(device, variable):
    missing = require_backward(device)
    B, D, N, L = 2, 3, 4, 140
    u = rand(B, D, L, device=device).requires_grad_()
    delta = rand(B, D, L, device=device, lo=0.0, hi=0.5).requires_grad_()
    A = (-rand(D, N, device=device, lo=0.1, hi=1.0)).requires_grad_()
    if variable:
        Bm = rand(B, N, L, device=device).requires_grad_()
        Cm = rand(B, N, L, device=device).requires_grad_()
    else:
        Bm = rand(D, N, device=device).requires_grad_()
        Cm = rand(D, N, device=device).requires_grad_()
    Dv = rand(D, device=device).requires_grad_()
    z = rand(B, D, L, device=device).requires_grad_()
    db = rand(D, device=device).requires_grad_()
    leaves = [u, delta, A, Bm, Cm, Dv, z, db]
    if missing:
        with pytest.raises(NotImplementedError, match="selective_scan_bwd"):
            pt.selective_scan_fn(u, delta, A, Bm, Cm, Dv, z, db, True).sum().backward()
        pytest.xfail("the %s backend has no %s yet (library says UNSUPPORTED)" % (device, missing))
    out, last = pt.selective_scan_fn(u, delta, A, Bm, Cm, Dv, z, db, True, True)
    gout, glast = torch.randn_like(out), torch.randn_like(last)
    ((out * gout).sum() + (last * glast).sum()).backward()
    ref_leaves = [t.detach().double().requires_grad_() for t in leaves]
    r_out, r_last = scan_ref(*ref_leaves[:5], D=ref_leaves[5], z=ref_leaves[6],
                             delta_bias=ref_leaves[7], delta_softplus=True)
    ((r_out * gout.double()).sum() + (r_last * glast.double()).sum()).backward()
    names = ["du", "ddelta", "dA", "dB", "dC", "dD", "dz", "ddelta_bias"]
    for t, r, name in zip(leaves, ref_leaves, names):
        assert_close(t.grad, r.grad, torch.float32, name, scale=2.0)
    # directional finite differences of portssm's own forward
    v = [torch.randn_like(t) * 0.1 for t in leaves]
    eps = 1e-3

    def f(sign):
        a = [t.detach() + sign * eps * d for t, d in zip(leaves, v)]
        o, lst = pt.selective_scan_fn(*a[:5], a[5], a[6], a[7], True, True)
        return (o.double() * gout.double()).sum() + (lst.double() * glast.double()).sum()

    fd = (f(1) - f(-1)) / (2 * eps)
    analytic = sum((t.grad.double() * d.double()).sum() for t, d in zip(leaves, v))
    assert abs(fd - analytic) <= 2e-2 * max(1.0, abs(analytic)), (fd.item(), analytic.item())


def test_checkpoint_interval_matches_library(device):
    """The fake implementation's checkpoint count (used under torch.compile) is the library's."""
    from portssm.torch import _impl

    A = -torch.rand(2, 3, device=device)
    for L in (1, 2, 127, 128, 129, 256, 257, 1000):
        u = torch.rand(1, 2, L, device=device)
        shape = _impl.checkpoint_shape_of(u, u, A, A, A, None, None, None, None, torch.empty_like(u))
        assert shape[2] == _impl.fake_checkpoints_k(u, True), L


# ---------------------------------------------------------------- selective_state_update


def _mamba2_tied_step(device, dtype, B, N, P, rows, H=4, G=2, state_dtype=torch.float32):
    """Mamba-2's decode step in selective_state_update's tied form (dt, A, D, dt_bias broadcast
    over headdim P, A over N; B and C per group): (state (rows, H, P, N), x, dt, A, B, C, D,
    dt_bias)."""
    state = rand(rows, H, P, N, device=device, dtype=state_dtype)
    x = rand(B, H, P, device=device, dtype=dtype)
    dt = rand(B, H, device=device, dtype=dtype, lo=0, hi=0.5)[..., None].expand(-1, -1, P)
    A = (-rand(H, device=device, lo=0.1, hi=1))[:, None, None].expand(-1, P, N)
    Bm, Cm = rand(B, G, N, device=device, dtype=dtype), rand(B, G, N, device=device, dtype=dtype)
    D = rand(H, device=device)[:, None].expand(-1, P)
    dt_bias = rand(H, device=device)[:, None].expand(-1, P)
    return state, x, dt, A, Bm, Cm, D, dt_bias


def _mamba1_step(device, dtype, B, N, rows, Dm=10, state_dtype=torch.float32):
    """Mamba-1's decode step (every argument per channel): (state (rows, Dm, N), x, dt, A, B,
    C, D, dt_bias)."""
    state = rand(rows, Dm, N, device=device, dtype=state_dtype)
    x = rand(B, Dm, device=device, dtype=dtype)
    dt = rand(B, Dm, device=device, dtype=dtype, lo=0, hi=0.5)
    A = -rand(Dm, N, device=device, lo=0.1, hi=1)
    Bm, Cm = rand(B, N, device=device, dtype=dtype), rand(B, N, device=device, dtype=dtype)
    D, dt_bias = rand(Dm, device=device), rand(Dm, device=device)
    return state, x, dt, A, Bm, Cm, D, dt_bias


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("form", ["mamba1", "mamba2_tied", "mamba1_no_D_no_bias", "indices",
                                  "bf16_state"])
def test_selective_state_update(device, dtype, form):
    B, N = 3, 8
    if form == "mamba2_tied":
        state, x, dt, A, Bm, Cm, D, dt_bias = _mamba2_tied_step(device, dtype, B, N, P=6,
                                                                 rows=B)
        z = None
    else:
        sdt = torch.bfloat16 if form == "bf16_state" else torch.float32
        state, x, dt, A, Bm, Cm, D, dt_bias = _mamba1_step(
            device, dtype, B, N, rows=6 if form == "indices" else B, state_dtype=sdt)
        z = rand(*x.shape, device=device, dtype=dtype)
        if form == "mamba1_no_D_no_bias":
            D = dt_bias = None
    idx = (torch.tensor([5, -1, 0], device=device, dtype=torch.int32) if form == "indices"
           else None)
    ref, ref_state = state_update_ref(state, x, dt, A, Bm, Cm, D, z, dt_bias, True, idx)
    out = pt.selective_state_update(state, x, dt, A, Bm, Cm, D, z, dt_bias, True, idx)
    assert out.shape == x.shape and out.dtype == dtype
    assert_close(out, ref, dtype, "out")
    assert_close(state, ref_state, torch.bfloat16 if form == "bf16_state" else torch.float32,
                 "state")


@pytest.mark.parametrize("state_dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
@pytest.mark.parametrize("form", ["mamba1", "mamba2_tied_pool"])
def test_selective_state_update_16bit_state(device, monkeypatch, state_dtype, dtype, form):
    """A float16/bfloat16 state is updated in place in its own dtype, with no float32 copy of it:
    the new state is the float64 step rounded once to the state's dtype (where the backend's
    float32 arithmetic lands on the other side of a rounding boundary, one unit off), out the
    float64 step's, and pool rows that no sequence picks stay bit for bit as they were."""
    B, N = 3, 16
    if form == "mamba2_tied_pool":
        state, x, dt, A, Bm, Cm, D, dt_bias = _mamba2_tied_step(device, dtype, B, N, P=8, rows=7,
                                                                 state_dtype=state_dtype)
        idx = torch.tensor([4, -1, 1], device=device, dtype=torch.int32)
    else:
        state, x, dt, A, Bm, Cm, D, dt_bias = _mamba1_step(device, dtype, B, N, rows=B,
                                                            state_dtype=state_dtype)
        idx = None
    z = rand(*x.shape, device=device, dtype=dtype)
    before = state.clone()
    ref, ref_state = state_update_ref(state, x, dt, A, Bm, Cm, D, z, dt_bias, True, idx)

    # no float32 (or other) copy of the state: neither converted nor copied back into
    converted, ptr = [], state.data_ptr()
    for name in ("float", "to", "copy_"):
        orig = getattr(torch.Tensor, name)

        def spy(self, *args, _orig=orig, _name=name, **kwargs):
            try:
                if self.data_ptr() == ptr:
                    converted.append(_name)
            except RuntimeError:  # a tensor without storage is not the state
                pass
            return _orig(self, *args, **kwargs)
        monkeypatch.setattr(torch.Tensor, name, spy)
    out = pt.selective_state_update(state, x, dt, A, Bm, Cm, D, z, dt_bias, True, idx)
    monkeypatch.undo()
    assert converted == [], converted
    assert state.dtype == state_dtype and state.data_ptr() == ptr

    assert out.shape == x.shape and out.dtype == dtype
    assert_close(out, ref, dtype, "out")
    rounded = round_once(ref_state, state_dtype)  # the float64 step, rounded once
    got, want = state.double(), rounded.double()
    ulp = (torch.finfo(state_dtype).eps * want.abs()).clamp_min(torch.finfo(state_dtype).tiny)
    assert ((got - want).abs() <= ulp).all(), (got - want).abs().max()
    exact = (got == want).double().mean().item()
    assert exact >= 0.9, "only %.3f of the states are the float64 step rounded once" % exact
    if device == "cpu" and _runtime._CPU_BACKEND[0] == _structs.BACKEND_CPU:
        # the cpu backend computes in float64: exactly that step, rounded once
        assert torch.equal(state, rounded)
    if idx is not None:
        untouched = [r for r in range(state.shape[0]) if r not in idx.tolist()]
        assert torch.equal(state[untouched], before[untouched])
        assert torch.equal(out[1], torch.zeros_like(out[1]))  # index -1: zero output


# ---------------------------------------------------------------- mamba_inner_fn


def _inner_ref(xz, conv_w, conv_b, xw, dtw, ow, ob, A, D, db):
    """The composition mamba-ssm's mamba_inner_ref spells out, on references.py's formulas."""
    L = xz.shape[-1]
    r = dtw.shape[1]
    N = A.shape[1]
    x, z = xz.chunk(2, dim=1)
    x = conv1d_ref(x, conv_w.squeeze(1), conv_b, activation="silu")[0]
    x_dbl = torch.nn.functional.linear(x.transpose(1, 2).reshape(-1, x.shape[1]), xw.double())
    delta = (dtw.double() @ x_dbl[:, :r].t()).reshape(x.shape[1], -1, L).transpose(0, 1)
    Bv = x_dbl[:, r:r + N].reshape(-1, L, N).transpose(1, 2)
    Cv = x_dbl[:, -N:].reshape(-1, L, N).transpose(1, 2)
    y = scan_ref(x, delta, A, Bv, Cv, D=D, z=z, delta_bias=db, delta_softplus=True)[0]
    return torch.nn.functional.linear(y.transpose(1, 2), ow.double(), ob.double())


def test_mamba_inner_fn(device):
    B, D, N, L, R, W, E = 2, 6, 4, 33, 3, 4, 5
    xz = rand(B, 2 * D, L, device=device).requires_grad_()
    params = dict(conv_w=rand(D, 1, W, device=device), conv_b=rand(D, device=device),
                  xw=rand(R + 2 * N, D, device=device) * 0.5, dtw=rand(D, R, device=device) * 0.5,
                  ow=rand(E, D, device=device), ob=rand(E, device=device),
                  A=-rand(D, N, device=device, lo=0.1, hi=1), D=rand(D, device=device),
                  db=rand(D, device=device))
    for p in params.values():
        p.requires_grad_()
    p = params
    out = pt.mamba_inner_fn(xz, p["conv_w"], p["conv_b"], p["xw"], p["dtw"], p["ow"], p["ob"],
                            p["A"], None, None, p["D"], delta_bias=p["db"], delta_softplus=True)
    ref = _inner_ref(xz.double(), *[t.double() for t in p.values()])
    assert out.shape == (B, L, E)
    assert_close(out, ref, torch.float32, "out", scale=2.0)
    if require_backward(device):
        pytest.xfail("backward ops missing on %s (library says UNSUPPORTED)" % device)
    g = torch.randn_like(out)
    (out * g).sum().backward()
    leaves = [xz] + list(p.values())
    ref_leaves = [t.detach().double().requires_grad_() for t in leaves]
    (_inner_ref(*ref_leaves) * g.double()).sum().backward()
    for t, r in zip(leaves, ref_leaves):
        assert_close(t.grad, r.grad, torch.float32, "grad", scale=3.0)
