"""The Mamba-2 SSD drop-ins (mamba_chunk_scan_combined, mamba_split_conv1d_scan_combined) against
references.py's token-by-token recurrence in float64: every option, packed sequences, gradients
of every input (against float64 autograd and directional finite differences of portssm's own
forward), bad input."""

import pytest
import torch
import torch.nn.functional as F

import portssm.torch as pt
from conftest import require_backward, require_compile
from portssm import errors
from references import assert_close, conv1d_ref, ssd_ref

DTYPES = [torch.float32, torch.float16, torch.bfloat16]


def rand(*shape, device, dtype=torch.float32, lo=-1.0, hi=1.0):
    return (torch.rand(*shape, device=device) * (hi - lo) + lo).to(dtype)


def _inputs(device, dtype=torch.float32, batch=2, L=75, H=4, P=6, G=2, N=8):
    return dict(x=rand(batch, L, H, P, device=device, dtype=dtype),
                dt=rand(batch, L, H, device=device, dtype=dtype, lo=0.02, hi=0.6),
                A=-rand(H, device=device, lo=0.2, hi=1.5),
                B=rand(batch, L, G, N, device=device, dtype=dtype),
                C=rand(batch, L, G, N, device=device, dtype=dtype))


def _seq_idx(batch, L, device):
    """Each row cut into three sequences at random points (one of them inside the first chunk
    of 64 tokens, one past it)."""
    idx = torch.zeros(batch, L, dtype=torch.int32, device=device)
    for b in range(batch):
        cut1 = int(torch.randint(1, 40, ()))
        cut2 = int(torch.randint(65, L, ()))
        idx[b, cut1:] = 1
        idx[b, cut2:] = 2
    return idx


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("form", ["plain", "all_options", "D_per_head", "seq_idx", "limit"])
def test_chunk_scan_combined(device, dtype, form):
    a = _inputs(device, dtype)
    batch, L, H, P = a["x"].shape
    N = a["B"].shape[3]
    kw = {}
    if form in ("all_options", "D_per_head", "seq_idx"):
        kw.update(D=rand(H, P, device=device) if form != "D_per_head" else rand(H, device=device),
                  z=rand(batch, L, H, P, device=device, dtype=dtype),
                  dt_bias=rand(H, device=device), dt_softplus=True,
                  initial_states=rand(batch, H, P, N, device=device))
    if form == "seq_idx":
        kw.update(seq_idx=_seq_idx(batch, L, device))
    if form == "limit":
        kw.update(dt_softplus=True, dt_limit=(0.2, 0.6))
    out, final = pt.mamba_chunk_scan_combined(a["x"], a["dt"], a["A"], a["B"], a["C"], 64,
                                              return_final_states=True, **kw)
    ref_out, ref_final = ssd_ref(a["x"], a["dt"], a["A"], a["B"], a["C"], **kw)
    assert out.dtype == dtype and out.shape == a["x"].shape
    assert final.dtype == torch.float32 and final.shape == (batch, H, P, N)
    assert_close(out, ref_out, dtype, "out", scale=2.0)
    assert_close(final, ref_final, dtype, "final_states", scale=2.0)
    only_out = pt.mamba_chunk_scan_combined(a["x"], a["dt"], a["A"], a["B"], a["C"], 64, **kw)
    assert torch.equal(only_out, out)  # the same result whether final states are asked or not


def test_chunk_scan_combined_varlen_states(device):
    """Packed sequences (batch 1): out restarts at every boundary and varlen_states holds each
    sequence's last state, an empty sequence's being zero."""
    lens = [5, 0, 70, 1, 23]
    L = sum(lens)
    a = _inputs(device, batch=1, L=L)
    cu = torch.tensor([0] + list(torch.tensor(lens).cumsum(0)), dtype=torch.int32,
                      device=device)
    seq_idx = torch.repeat_interleave(torch.arange(len(lens), device=device),
                                      torch.tensor(lens, device=device)).to(torch.int32)[None]
    out, final, varlen = pt.mamba_chunk_scan_combined(
        a["x"], a["dt"], a["A"], a["B"], a["C"], 32, seq_idx=seq_idx, cu_seqlens=cu,
        dt_softplus=True, return_final_states=True, return_varlen_states=True)
    ref_out, ref_final = ssd_ref(a["x"], a["dt"], a["A"], a["B"], a["C"], dt_softplus=True,
                                 seq_idx=seq_idx)
    assert_close(out, ref_out, torch.float32, "out")
    assert_close(final, ref_final, torch.float32, "final_states")
    assert varlen.shape == (len(lens),) + final.shape[1:]
    for i, n in enumerate(lens):
        lo = int(cu[i])
        if n == 0:
            assert torch.count_nonzero(varlen[i]) == 0
            continue
        part = {k: v[:, lo:lo + n] if k != "A" else v for k, v in a.items()}
        _, ref_state = ssd_ref(part["x"], part["dt"], part["A"], part["B"], part["C"],
                               dt_softplus=True)
        assert_close(varlen[i], ref_state[0], torch.float32, "varlen_states[%d]" % i)
    with pytest.raises(ValueError, match="cu_seqlens"):
        pt.mamba_chunk_scan_combined(a["x"], a["dt"], a["A"], a["B"], a["C"], 32,
                                     return_varlen_states=True)


@pytest.mark.parametrize("form", ["all_options", "seq_idx_limit"])
def test_chunk_scan_combined_grad(device, form):
    missing = require_backward(device)
    a = _inputs(device, L=70)
    batch, L, H, P = a["x"].shape
    N = a["B"].shape[3]
    opt = dict(D=rand(H, P, device=device), z=rand(batch, L, H, P, device=device),
               dt_bias=rand(H, device=device), initial_states=rand(batch, H, P, N, device=device))
    leaves = dict(a, **opt)
    for t in leaves.values():
        t.requires_grad_()
    flags = dict(dt_softplus=True)
    if form == "seq_idx_limit":
        flags.update(seq_idx=_seq_idx(batch, L, device), dt_limit=(0.05, 0.9))

    def run(t):
        return pt.mamba_chunk_scan_combined(t["x"], t["dt"], t["A"], t["B"], t["C"], 64,
                                            D=t["D"], z=t["z"], dt_bias=t["dt_bias"],
                                            initial_states=t["initial_states"],
                                            return_final_states=True, **flags)

    if missing:
        with pytest.raises(NotImplementedError):
            run(leaves)[0].sum().backward()
        pytest.xfail("the %s backend has no %s yet (library says UNSUPPORTED)" % (device, missing))
    out, final = run(leaves)
    gout, gfinal = torch.randn_like(out), torch.randn_like(final)
    ((out * gout).sum() + (final * gfinal).sum()).backward()
    ref_leaves = {k: t.detach().double().requires_grad_() for k, t in leaves.items()}
    r = ref_leaves
    r_out, r_final = ssd_ref(r["x"], r["dt"], r["A"], r["B"], r["C"], D=r["D"], z=r["z"],
                             dt_bias=r["dt_bias"], initial_states=r["initial_states"], **flags)
    ((r_out * gout.double()).sum() + (r_final * gfinal.double()).sum()).backward()
    for k, t in leaves.items():
        assert t.grad is not None, k
        assert_close(t.grad, r[k].grad, torch.float32, "d" + k, scale=3.0)
    v = {k: torch.randn_like(t) * 0.05 for k, t in leaves.items()}
    eps = 1e-3

    def f(sign):
        o, fs = run({k: t.detach() + sign * eps * v[k] for k, t in leaves.items()})
        return (o.double() * gout.double()).sum() + (fs.double() * gfinal.double()).sum()

    fd = (f(1) - f(-1)) / (2 * eps)
    analytic = sum((t.grad.double() * v[k].double()).sum() for k, t in leaves.items())
    assert abs(fd - analytic) <= 2e-2 * max(1.0, abs(analytic)), (fd.item(), analytic.item())


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_chunk_scan_saves_y_for_backward(device, dtype):
    """With z and a gradient to come, the forward op also returns y (before the gate) and the
    backward reads it instead of computing y again (P 64, N 128, one group: the shape where the
    GPU backends' fast kernels run); without a gradient or without z, y is a placeholder."""
    from portssm.torch import _registry
    a = _inputs(device, dtype, batch=1, L=300, H=2, P=64, G=1, N=128)
    batch, L, H, P = a["x"].shape
    D, dt_bias = rand(H, P, device=device), rand(H, device=device)
    z = rand(batch, L, H, P, device=device, dtype=dtype, lo=-2.0, hi=2.0)
    args = (a["x"], a["dt"], a["A"], a["B"], a["C"], D, z, dt_bias, None, None, None, True,
            False, 0.0, float("inf"), 0, False, False)
    out, _, _, y, _ = _registry.ssd_fwd(*args, True, False)
    y_ref, _ = ssd_ref(a["x"], a["dt"], a["A"], a["B"], a["C"], D=D, dt_bias=dt_bias,
                       dt_softplus=True)
    assert y.shape == out.shape and y.dtype == out.dtype
    assert_close(y, y_ref, dtype, "y")
    assert_close(out, y_ref * F.silu(z.double()), dtype, "out")
    assert _registry.ssd_fwd(*args, False, False)[3].numel() == 0
    no_z = args[:6] + (None,) + args[7:]
    assert _registry.ssd_fwd(*no_z, True, False)[3].numel() == 0

    missing = require_backward(device)
    if missing:
        pytest.xfail("the %s backend has no %s yet (library says UNSUPPORTED)" % (device, missing))
    leaves = dict(a, z=z, D=D, dt_bias=dt_bias)
    for t in leaves.values():
        t.requires_grad_()
    out = pt.mamba_chunk_scan_combined(leaves["x"], leaves["dt"], leaves["A"], leaves["B"],
                                       leaves["C"], 256, D=leaves["D"], z=leaves["z"],
                                       dt_bias=leaves["dt_bias"], dt_softplus=True)
    gout = torch.randn_like(out)
    (out * gout).sum().backward()
    r = {k: t.detach().double().requires_grad_() for k, t in leaves.items()}
    r_out, _ = ssd_ref(r["x"], r["dt"], r["A"], r["B"], r["C"], D=r["D"], z=r["z"],
                       dt_bias=r["dt_bias"], dt_softplus=True)
    (r_out * gout.double()).sum().backward()
    for k in ("x", "z", "B", "C", "dt"):
        assert_close(leaves[k].grad, r[k].grad, dtype, "d" + k, scale=4.0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("chunk_size", [0, 64, 100])
def test_chunk_scan_checkpoints(device, dtype, chunk_size):
    """save_checkpoints: the forward op's fifth output holds the state entering every chunk,
    (B, H, K, P*N) in x's dtype with K from the library (which the fake implementation's rule
    matches): checkpoint k is the final state of the first k*T tokens (the initial state at
    k = 0), T the chunk (chunk_size rounded up to 64, 32 for float32, at most 256)."""
    from portssm.torch import _impl_ssd, _registry
    a = _inputs(device, dtype, batch=2, L=300, H=2, P=64, G=1, N=128)
    batch, L, H, P = a["x"].shape
    N = a["B"].shape[3]
    init = rand(batch, H, P, N, device=device)
    args = (a["x"], a["dt"], a["A"], a["B"], a["C"], None, None, None, init, None, None, False,
            False, 0.0, float("inf"), chunk_size, False, False, False)
    out, _, _, _, ckpt = _registry.ssd_fwd(*args, True)
    T = _impl_ssd.checkpoint_interval(chunk_size, dtype)
    K = -(-L // T)
    assert ckpt.shape == (batch, H, K, P * N) and ckpt.dtype == dtype
    assert _impl_ssd.checkpoints_like(a["x"], a["B"], chunk_size).shape == ckpt.shape
    assert_close(ckpt[:, :, 0], init.reshape(batch, H, P * N).to(dtype), dtype, "checkpoint 0")
    for k in range(1, K):
        _, state = ssd_ref(a["x"][:, :k * T], a["dt"][:, :k * T], a["A"], a["B"][:, :k * T],
                           a["C"][:, :k * T], initial_states=init)
        assert_close(ckpt[:, :, k], state.reshape(batch, H, P * N), dtype, "checkpoint %d" % k,
                     scale=2.0)
    assert _registry.ssd_fwd(*args, False)[4].numel() == 0


def _split_ref(zxbcdt, conv_w, conv_b, dt_bias, A, D, headdim, ngroups, dt_limit, rms_w, eps,
               out_w, out_b, norm_before_gate):
    """mamba-ssm's mamba_split_conv1d_scan_ref, spelled out on references.py's formulas."""
    batch, L, width = zxbcdt.shape
    H = D.shape[0]
    dim = H * headdim
    N = (conv_w.shape[0] - dim) // ngroups // 2
    d_nonssm = (width - 2 * dim - 2 * ngroups * N - H) // 2
    zx0, z, xBC, dt = torch.split(zxbcdt, [2 * d_nonssm, dim, dim + 2 * ngroups * N, H], dim=-1)
    xBC = conv1d_ref(xBC.transpose(1, 2), conv_w, conv_b, activation="silu")[0].transpose(1, 2)
    x, B, C = torch.split(xBC, [dim, ngroups * N, ngroups * N], dim=-1)
    y, _ = ssd_ref(x.reshape(batch, L, H, headdim), dt, A, B.reshape(batch, L, ngroups, N),
                   C.reshape(batch, L, ngroups, N), D=D, dt_bias=dt_bias, dt_softplus=True,
                   dt_limit=dt_limit)
    y = y.reshape(batch, L, dim)
    if not norm_before_gate:
        y = y * F.silu(z)
    g = y.reshape(batch, L, ngroups, dim // ngroups)
    y = (g * torch.rsqrt(g.pow(2).mean(-1, keepdim=True) + eps)).reshape(batch, L, dim) * rms_w
    if norm_before_gate:
        y = y * F.silu(z)
    if d_nonssm:
        a, gate = zx0.chunk(2, dim=-1)
        y = torch.cat([F.silu(a) * gate, y], dim=-1)
    return F.linear(y, out_w, out_b)


@pytest.mark.parametrize("norm_before_gate", [False, True])
def test_split_conv1d_scan_combined(device, norm_before_gate):
    batch, L, H, P, G, N, W, E, d_nonssm = 2, 40, 4, 4, 2, 8, 4, 12, 3
    dim = H * P
    conv_dim = dim + 2 * G * N
    zxbcdt = rand(batch, L, 2 * d_nonssm + dim + conv_dim + H, device=device)
    p = dict(conv_w=rand(conv_dim, W, device=device) * 0.5, conv_b=rand(conv_dim, device=device),
             dt_bias=rand(H, device=device), A=-rand(H, device=device, lo=0.2, hi=1.0),
             D=rand(H, device=device), rms_w=rand(dim, device=device, lo=0.5, hi=1.5),
             out_w=rand(E, d_nonssm + dim, device=device) * 0.3,
             out_b=rand(E, device=device))
    leaves = [zxbcdt] + list(p.values())
    for t in leaves:
        t.requires_grad_()
    limit = (0.0, 0.8)

    def run(z, q):
        return pt.mamba_split_conv1d_scan_combined(
            z, q["conv_w"].unsqueeze(1), q["conv_b"], q["dt_bias"], q["A"], q["D"], 16,
            dt_limit=limit, rmsnorm_weight=q["rms_w"], rmsnorm_eps=1e-5,
            outproj_weight=q["out_w"], outproj_bias=q["out_b"], headdim=P, ngroups=G,
            norm_before_gate=norm_before_gate)

    def ref(z, q):
        return _split_ref(z, q["conv_w"], q["conv_b"], q["dt_bias"], q["A"], q["D"], P, G, limit,
                          q["rms_w"], 1e-5, q["out_w"], q["out_b"], norm_before_gate)

    out = run(zxbcdt, p)
    assert out.shape == (batch, L, E)
    rl = [t.detach().double().requires_grad_() for t in leaves]
    r_out = ref(rl[0], dict(zip(p, rl[1:])))
    assert_close(out, r_out, torch.float32, "out", scale=2.0)
    if require_backward(device):
        pytest.xfail("backward ops missing on %s (library says UNSUPPORTED)" % device)
    g = torch.randn_like(out)
    (out * g).sum().backward()
    (r_out * g.double()).sum().backward()
    for name, t, r in zip(["zxbcdt"] + list(p), leaves, rl):
        assert_close(t.grad, r.grad, torch.float32, "d" + name, scale=3.0)


def test_chunk_scan_combined_bad_input(device):
    a = _inputs(device)
    with pytest.raises(errors.InvalidArgumentError, match="'B'"):
        pt.mamba_chunk_scan_combined(a["x"], a["dt"], a["A"], a["B"][:, :, :1].repeat(1, 1, 3, 1),
                                     a["C"], 64)  # 3 groups for 4 heads
    with pytest.raises(errors.InvalidArgumentError, match="'A'"):
        pt.mamba_chunk_scan_combined(a["x"], a["dt"], a["A"][:3], a["B"], a["C"], 64)
    with pytest.raises(ValueError, match="headdim"):
        pt.mamba_split_conv1d_scan_combined(torch.zeros(1, 4, 50, device=device),
                                            torch.zeros(20, 4, device=device), None,
                                            torch.zeros(2, device=device),
                                            torch.zeros(2, device=device),
                                            torch.zeros(2, device=device), 64)


def test_compile_chunk_scan_combined(device):
    """torch.compile(fullgraph=True) traces the SSD op and its backward (the fake implementation
    gives the shapes) and gives eager's results."""
    require_compile()
    torch._dynamo.reset()
    a = _inputs(device, L=33)
    batch, L, H, P = a["x"].shape
    D = rand(H, device=device)

    def f(x, dt, A, B, C, D):
        out, final = pt.mamba_chunk_scan_combined(x, dt, A, B, C, 64, D=D, dt_softplus=True,
                                                  return_final_states=True)
        return out.sum(-1) + final.sum((-1, -2)).unsqueeze(1)

    want_grad = not require_backward(device)
    inputs = [a["x"], a["dt"], a["A"], a["B"], a["C"], D]
    leaves = [t.clone().requires_grad_(want_grad) for t in inputs]
    got = torch.compile(f, fullgraph=True, backend="aot_eager")(*leaves)
    ref_leaves = [t.clone().requires_grad_(want_grad) for t in inputs]
    want = f(*ref_leaves)
    torch.testing.assert_close(got, want)
    if want_grad:
        got.sum().backward()
        want.sum().backward()
        for x, y in zip(leaves, ref_leaves):
            torch.testing.assert_close(x.grad, y.grad)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_chunk_scan_continued_by_state_update(device, dtype):
    """Prefill then decode, as a model serves: the SSD's final states continued token by token
    by selective_state_update (heads form, A / dt / D / dt_bias broadcast over P and N) give
    the outputs and the state of one longer SSD call."""
    L, k = 37, 5
    a = _inputs(device, dtype, L=L + k)
    batch, _, H, P = a["x"].shape
    N = a["B"].shape[3]
    D, dt_bias = rand(H, device=device), rand(H, device=device, lo=-0.5, hi=0.5)
    z = rand(batch, L + k, H, P, device=device, dtype=dtype)
    init = rand(batch, H, P, N, device=device)
    kw = dict(D=D, dt_bias=dt_bias, dt_softplus=True)
    want, want_final = pt.mamba_chunk_scan_combined(
        a["x"], a["dt"], a["A"], a["B"], a["C"], 16, z=z, initial_states=init,
        return_final_states=True, **kw)
    head = {n: t[:, :L] for n, t in a.items() if n != "A"}
    _, state = pt.mamba_chunk_scan_combined(
        head["x"], head["dt"], a["A"], head["B"], head["C"], 16, z=z[:, :L],
        initial_states=init, return_final_states=True, **kw)
    state = state.clone()
    A3 = a["A"][:, None, None].expand(H, P, N)
    for t in range(L, L + k):
        y = pt.selective_state_update(
            state, a["x"][:, t], a["dt"][:, t, :, None].expand(batch, H, P), A3, a["B"][:, t],
            a["C"][:, t], D=D[:, None].expand(H, P), z=z[:, t],
            dt_bias=dt_bias[:, None].expand(H, P), dt_softplus=True)
        assert_close(y, want[:, t], dtype, "decode step %d" % (t - L), scale=2.0)
    assert_close(state, want_final, dtype, "state after decode", scale=2.0)
