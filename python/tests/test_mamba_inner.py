"""mamba_inner_fn as one autograd node (what it keeps for the backward is mamba-ssm's
MambaInnerFn's): its output and the gradient of every input and weight against the composition
of portssm's drop-ins it replaced and against float64 formulas, with and without the optional
B/C/delta biases and RMSNorm weights, at checkpoint_lvl 0 and 1, under bf16 autocast; what it
saves; torch.compile."""

import pytest
import torch
import torch.nn.functional as F

import portssm.torch as pt
from accuracy import assert_as_accurate
from conftest import require_backward, require_compile
from portssm.torch import selective_scan as selective_scan_module
from references import assert_close, conv1d_ref, scan_ref


def rand(*shape, device, dtype=torch.float32, lo=-1.0, hi=1.0):
    return (torch.rand(*shape, device=device) * (hi - lo) + lo).to(dtype)


def _rms(x, w, eps):
    xf = x.float() if x.dtype != torch.float64 else x
    y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * w.to(xf.dtype)
    return y.to(x.dtype)


def composition(xz, conv_w, conv_b, xw, dtw, ow, ob, A, B=None, C=None, D=None, db=None,
                B_bias=None, C_bias=None, delta_softplus=True, b_rms=None, c_rms=None,
                dt_rms=None, eps=1e-6):
    """mamba_inner_fn as portssm composed it before it was one node: portssm's conv and scan
    drop-ins and torch's matmuls under autograd (and autocast)."""
    L = xz.shape[-1]
    r = dtw.shape[1]
    N = A.shape[-1]
    x, z = xz.chunk(2, dim=1)
    if conv_w.dim() == 3:
        conv_w = conv_w.squeeze(1)
    x = pt.causal_conv1d_fn(x, conv_w, conv_b, activation="silu")
    x_dbl = F.linear(x.transpose(1, 2).reshape(-1, x.shape[1]), xw)
    delta = dtw @ x_dbl[:, :r].t()
    delta = delta.reshape(delta.shape[0], -1, L).transpose(0, 1)
    if dt_rms is not None:
        delta = _rms(delta.transpose(1, 2), dt_rms, eps).transpose(1, 2)

    def variable(cols, bias, w):
        v = cols
        if bias is not None:
            v = v + bias.to(dtype=v.dtype)
        if w is not None:
            v = _rms(v, w, eps)
        return v.reshape(-1, L, N).transpose(1, 2).unsqueeze(1)

    if B is None:
        B = variable(x_dbl[:, r:r + N], B_bias, b_rms)
    if C is None:
        C = variable(x_dbl[:, -N:], C_bias, c_rms)
    y = pt.selective_scan_fn(x, delta, A, B, C, D, z=z, delta_bias=db,
                             delta_softplus=delta_softplus)
    return F.linear(y.transpose(1, 2), ow, ob)


def reference64(xz, conv_w, conv_b, xw, dtw, ow, ob, A, B=None, C=None, D=None, db=None,
                B_bias=None, C_bias=None, delta_softplus=True, b_rms=None, c_rms=None,
                dt_rms=None, eps=1e-6):
    """The same formulas in float64 on references.py's conv and scan."""
    L = xz.shape[-1]
    r = dtw.shape[1]
    N = A.shape[-1]
    x, z = xz.chunk(2, dim=1)
    x = conv1d_ref(x, conv_w.squeeze(1) if conv_w.dim() == 3 else conv_w, conv_b,
                   activation="silu")[0]
    x_dbl = F.linear(x.transpose(1, 2).reshape(-1, x.shape[1]), xw)
    delta = (dtw @ x_dbl[:, :r].t()).reshape(x.shape[1], -1, L).transpose(0, 1)
    if dt_rms is not None:
        delta = _rms(delta.transpose(1, 2), dt_rms, eps).transpose(1, 2)

    def variable(cols, bias, w):
        v = cols if bias is None else cols + bias
        v = v if w is None else _rms(v, w, eps)
        return v.reshape(-1, L, N).transpose(1, 2)

    B = variable(x_dbl[:, r:r + N], B_bias, b_rms) if B is None else B
    C = variable(x_dbl[:, -N:], C_bias, c_rms) if C is None else C
    y = scan_ref(x, delta, A, B, C, D=D, z=z, delta_bias=db, delta_softplus=delta_softplus)[0]
    return F.linear(y.transpose(1, 2), ow, ob)


OPTIONS = {
    "plain": {},
    "biases": {"B_bias", "C_bias"},
    "rms": {"b_rms", "c_rms", "dt_rms"},
    "all": {"B_bias", "C_bias", "b_rms", "c_rms", "dt_rms", "ob"},
}


def make(device, options, batch=2, dim=6, N=4, L=37, R=3, W=4, E=5, transposed=True):
    """xz as transformers gives it (in_proj's output transposed: channel-last) and the
    parameters, float32 leaves."""
    if transposed:
        xz = rand(batch, L, 2 * dim, device=device).transpose(1, 2)
    else:
        xz = rand(batch, 2 * dim, L, device=device)
    p = dict(conv_w=rand(dim, 1, W, device=device), conv_b=rand(dim, device=device),
             xw=rand(R + 2 * N, dim, device=device) * 0.5,
             dtw=rand(dim, R, device=device) * 0.5, ow=rand(E, dim, device=device),
             ob=rand(E, device=device) if "ob" in options else None,
             A=-rand(dim, N, device=device, lo=0.1, hi=1), D=rand(dim, device=device),
             db=rand(dim, device=device))
    for name, n in (("B_bias", N), ("C_bias", N)):
        p[name] = rand(n, device=device) * 0.5 if name in options else None
    for name, n in (("b_rms", N), ("c_rms", N), ("dt_rms", dim)):
        p[name] = rand(n, device=device, lo=0.5, hi=1.5) if name in options else None
    return xz.detach(), p


def leaves_of(xz, p):
    xz = xz.detach().clone().requires_grad_()
    q = {k: (v.detach().clone().requires_grad_() if v is not None else None)
         for k, v in p.items()}
    return xz, q


def call(fn, xz, q, **kw):
    return fn(xz, q["conv_w"], q["conv_b"], q["xw"], q["dtw"], q["ow"], q["ob"], q["A"],
              None, None, q["D"], q["db"], q["B_bias"], q["C_bias"], True,
              b_rms=q["b_rms"], c_rms=q["c_rms"], dt_rms=q["dt_rms"], **kw)


def fused(xz, conv_w, conv_b, xw, dtw, ow, ob, A, B, C, D, db, B_bias, C_bias, softplus,
          b_rms=None, c_rms=None, dt_rms=None, eps=1e-6, checkpoint_lvl=1):
    return pt.mamba_inner_fn(xz, conv_w, conv_b, xw, dtw, ow, ob, A, B, C, D, db, B_bias,
                             C_bias, softplus, checkpoint_lvl, b_rms, c_rms, dt_rms, eps)


def grads_of(fn, xz, p, g, **kw):
    xz, q = leaves_of(xz, p)
    out = call(fn, xz, q, **kw)
    (out.float() * g).sum().backward()
    names = ["xz"] + [k for k, v in q.items() if v is not None]
    return out, dict(zip(names, [xz.grad] + [q[k].grad for k in names[1:]]))


def skip_without_backward(device):
    missing = require_backward(device)
    if missing:
        pytest.skip("backward ops missing on %s: %s" % (device, ", ".join(missing)))


@pytest.mark.parametrize("checkpoint_lvl", [0, 1])
@pytest.mark.parametrize("options", sorted(OPTIONS))
@pytest.mark.parametrize("L", [37, 300])
def test_matches_composition_and_float64(device, options, checkpoint_lvl, L):
    """L 300 passes the scan's checkpoint interval (the checkpoints are kept and read)."""
    skip_without_backward(device)
    xz, p = make(device, OPTIONS[options], L=L)
    g = torch.randn(xz.shape[0], L, p["ow"].shape[0], device=device)
    out, grads = grads_of(fused, xz, p, g, checkpoint_lvl=checkpoint_lvl)
    want, want_grads = grads_of(composition, xz, p, g)
    assert_close(out, want, torch.float32, "out vs composition")
    xz64, q64 = leaves_of(xz.double(), {k: v.double() if v is not None else None
                                        for k, v in p.items()})
    ref = call(reference64, xz64, q64)
    (ref * g.double()).sum().backward()
    assert_close(out, ref, torch.float32, "out vs float64", scale=2.0)
    assert grads.keys() == want_grads.keys()
    for name, got in grads.items():
        assert got.dtype == want_grads[name].dtype and got.shape == want_grads[name].shape, name
        assert_close(got, want_grads[name], torch.float32, "d%s vs composition" % name)
        r = xz64.grad if name == "xz" else q64[name].grad
        assert_close(got, r, torch.float32, "d%s vs float64" % name, scale=3.0)


@pytest.mark.parametrize("options", ["plain", "all"])
def test_bf16_autocast(device, options):
    """Under bf16 autocast (transformers' training path) the dtypes of the composition under
    autocast (the matmuls in bf16, the weights' gradients in float32), its output, and
    gradients as accurate as its own against float32."""
    skip_without_backward(device)
    xz, p = make(device, OPTIONS[options], batch=2, dim=16, N=8, L=160, R=4, E=12)
    xz = xz.to(torch.bfloat16)  # in_proj's output under autocast
    g = torch.randn(xz.shape[0], xz.shape[-1], 12, device=device)
    with torch.autocast(device, dtype=torch.bfloat16):
        out, grads = grads_of(fused, xz, p, g)
        want, want_grads = grads_of(composition, xz, p, g)
    _, exact = grads_of(composition, xz.float(), p, g)
    assert out.dtype == want.dtype == torch.bfloat16
    assert_close(out, want, torch.bfloat16, "out")
    for name, got in grads.items():
        assert got.dtype == want_grads[name].dtype, name
        assert_as_accurate(got, want_grads[name], exact[name], "d" + name)
    assert grads["xz"].dtype == torch.bfloat16 and grads["xw"].dtype == torch.float32


def test_bf16_model_without_autocast(device):
    """A bf16 model (weights and xz in bf16, no autocast)."""
    skip_without_backward(device)
    xz, p = make(device, OPTIONS["all"], L=70)
    p = {k: v.to(torch.bfloat16) if v is not None and k not in ("A",) else v
         for k, v in p.items()}
    xz = xz.to(torch.bfloat16)
    g = torch.randn(xz.shape[0], xz.shape[-1], p["ow"].shape[0], device=device)
    out, grads = grads_of(fused, xz, p, g)
    want, want_grads = grads_of(composition, xz, p, g)
    _, exact = grads_of(composition, xz.float(),
                        {k: v.float() if v is not None else None for k, v in p.items()}, g)
    assert out.dtype == torch.bfloat16
    assert_close(out, want, torch.bfloat16, "out")
    for name, got in grads.items():
        assert got.dtype == want_grads[name].dtype, name
        assert_as_accurate(got, want_grads[name], exact[name], "d" + name)


@pytest.mark.parametrize("form", ["constant", "variable"])
def test_given_B_and_C(device, form):
    """B and C given by the caller (constant (dim, N), or variable (batch, N, L)): x_proj's
    columns are then delta's only; B and C get their gradients."""
    skip_without_backward(device)
    batch, dim, N, L, R = 2, 6, 4, 45, 3
    xz, p = make(device, set(), batch=batch, dim=dim, N=N, L=L, R=R)
    p["xw"] = p["xw"][:R].contiguous()
    if form == "constant":
        Bm, Cm = rand(dim, N, device=device), rand(dim, N, device=device)
    else:
        Bm, Cm = rand(batch, N, L, device=device), rand(batch, N, L, device=device)
    g = torch.randn(batch, L, p["ow"].shape[0], device=device)

    def run(fn):
        x, q = leaves_of(xz, p)
        b, c = Bm.clone().requires_grad_(), Cm.clone().requires_grad_()
        out = fn(x, q["conv_w"], q["conv_b"], q["xw"], q["dtw"], q["ow"], None, q["A"], b, c,
                 q["D"], q["db"], None, None, True)
        (out * g).sum().backward()
        return out, [x.grad, q["xw"].grad, q["dtw"].grad, b.grad, c.grad]

    out, grads = run(fused)
    want, want_grads = run(composition)
    assert_close(out, want, torch.float32, "out")
    for name, a, b in zip(["xz", "xw", "dtw", "B", "C"], grads, want_grads):
        assert_close(a, b, torch.float32, "d" + name)


def test_contiguous_xz(device):
    """xz (batch, 2*dim, L) contiguous (not transformers' layout): the conv output is then not
    channel-last and its rows are copies; the same results."""
    skip_without_backward(device)
    xz, p = make(device, OPTIONS["rms"], transposed=False, L=50)
    g = torch.randn(xz.shape[0], 50, p["ow"].shape[0], device=device)
    out, grads = grads_of(fused, xz, p, g)
    want, want_grads = grads_of(composition, xz, p, g)
    assert_close(out, want, torch.float32, "out")
    for name, got in grads.items():
        assert_close(got, want_grads[name], torch.float32, "d" + name)


def test_batch_middle_xz(device):
    """xz with the batch between channels and time in memory (an odd layout): the same
    results as the composition."""
    skip_without_backward(device)
    xz, p = make(device, OPTIONS["all"], L=50)
    odd = xz.permute(1, 0, 2).contiguous().permute(1, 0, 2)
    g = torch.randn(xz.shape[0], 50, p["ow"].shape[0], device=device)
    out, grads = grads_of(fused, odd, p, g)
    want, want_grads = grads_of(composition, xz, p, g)
    assert_close(out, want, torch.float32, "out")
    for name, got in grads.items():
        assert_close(got, want_grads[name], torch.float32, "d" + name)


def test_no_grad_path(device):
    """Without a gradient to compute, the same output (no node, nothing kept)."""
    xz, p = make(device, OPTIONS["all"], L=140)
    with torch.no_grad():
        out = call(fused, xz, p)
    assert out.grad_fn is None
    assert_close(out, call(composition, xz, p).detach(), torch.float32, "out")


def saved_bytes(fn, xz, p, **kw):
    """{(shape, dtype): bytes of its storage} of every tensor autograd keeps for the backward
    of fn's call (one row per storage)."""
    seen = {}

    def pack(t):
        seen.setdefault(t.untyped_storage().data_ptr(),
                        (tuple(t.shape), t.dtype, t.untyped_storage().nbytes()))
        return t

    x, q = leaves_of(xz, p)
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        call(fn, x, q, **kw)
    return list(seen.values())


@pytest.mark.parametrize("checkpoint_lvl", [0, 1])
def test_saves_what_mamba_ssm_saves(device, checkpoint_lvl):
    """At checkpoint_lvl 1, the (batch, dim, L) activations kept are xz's storage (which holds x
    and z) and the scan's output, as mamba-ssm's MambaInnerFn (xz, out); the conv output, delta
    and the scan's states are computed again.  At 0 those are kept too (the states as the
    scan's checkpoints).  The rest is x_dbl and the parameters."""
    batch, dim, N, L, R = 2, 64, 4, 300, 3
    xz, p = make(device, OPTIONS["all"], batch=batch, dim=dim, N=N, L=L, R=R)
    rows = saved_bytes(fused, xz, p, checkpoint_lvl=checkpoint_lvl)
    act = batch * dim * L * 4
    big = sorted(b for _, _, b in rows if b >= act)
    assert big == ([act, act] if checkpoint_lvl == 0 else []) + [act, 2 * act]
    rest = sum(b for _, _, b in rows if b < act)
    x_dbl = batch * L * (R + 2 * N) * 4
    ckpt = batch * dim * 2 * N * 4  # K = 2 at L 300 (interval 128)
    params = sum(v.numel() * 4 for v in p.values() if v is not None)
    assert rest <= x_dbl + params + (ckpt if checkpoint_lvl == 0 else 0)
    if checkpoint_lvl == 0:
        assert (batch, dim, 2, N) in [shape for shape, _, _ in rows]
    # the composition kept the conv output, delta and the scan's output besides xz
    assert len([b for _, _, b in saved_bytes(composition, xz, p) if b >= act]) >= 4


def test_keeps_scan_checkpoints_where_asked(device, monkeypatch):
    """INNER_KEEPS_SCAN_CHECKPOINTS: the scan's checkpoints kept at checkpoint_lvl 1 too (and
    read by its backward), the same results."""
    skip_without_backward(device)
    xz, p = make(device, OPTIONS["all"], L=300)
    g = torch.randn(xz.shape[0], 300, p["ow"].shape[0], device=device)
    out, grads = grads_of(fused, xz, p, g)
    monkeypatch.setattr(selective_scan_module, "INNER_KEEPS_SCAN_CHECKPOINTS", True)
    shapes = [shape for shape, _, _ in saved_bytes(fused, xz, p)]
    assert (xz.shape[0], xz.shape[1] // 2, 2, p["A"].shape[1]) in shapes
    out2, grads2 = grads_of(fused, xz, p, g)
    assert_close(out2, out, torch.float32, "out")
    for name in grads:
        assert_close(grads2[name], grads[name], torch.float32, "d" + name)


def test_checkpoint_lvl_checked(device):
    xz, p = make(device, set(), L=8)
    with pytest.raises(ValueError, match="checkpoint_lvl"):
        call(fused, xz, p, checkpoint_lvl=2)


@pytest.mark.parametrize("options", ["plain", "all"])
def test_compile(device, options):
    """torch.compile(fullgraph=True) traces the node (its backward too) and gives eager's
    output and gradients."""
    require_compile()
    skip_without_backward(device)
    torch._dynamo.reset()
    xz, p = make(device, OPTIONS[options], L=140)
    g = torch.randn(xz.shape[0], xz.shape[-1], p["ow"].shape[0], device=device)
    compiled = torch.compile(fused, fullgraph=True, backend="aot_eager")
    out, grads = grads_of(compiled, xz, p, g)
    want, want_grads = grads_of(fused, xz, p, g)
    torch.testing.assert_close(out, want, rtol=1e-5, atol=1e-5)
    for name, got in grads.items():
        torch.testing.assert_close(got, want_grads[name], rtol=1e-5, atol=1e-5, msg=name)


@pytest.mark.parametrize("transposed", [True, False])
def test_scan_reads_L_contiguous(device, monkeypatch, transposed):
    """The scan's kernels load u, z, delta, B and C in vectors along L only where L is their
    contiguous dim: mamba_inner_fn hands them over so (as mamba-ssm's MambaInnerFn does), also
    for transformers' channel-last xz and B/C taken from x_dbl's columns; dz goes back the same
    way."""
    skip_without_backward(device)
    xz, p = make(device, OPTIONS["all"], transposed=transposed)
    seen = []
    real = selective_scan_module._ops

    def recording():
        conv_fwd, conv_bwd, scan_fwd, scan_bwd = real()

        def fwd(u, delta, A, B, C, D, z, *rest, **kw):
            seen.append(("fwd", [t.stride(-1) for t in (u, delta, B, C, z)]))
            return scan_fwd(u, delta, A, B, C, D, z, *rest, **kw)

        def bwd(u, delta, A, B, C, D, z, *rest, **kw):
            seen.append(("bwd", [t.stride(-1) for t in (u, delta, B, C, z)] +
                         ([kw["dz"].stride(-1)] if "dz" in kw else [])))
            return scan_bwd(u, delta, A, B, C, D, z, *rest, **kw)

        return conv_fwd, conv_bwd, fwd, bwd

    monkeypatch.setattr(selective_scan_module, "_ops", recording)
    g = torch.randn(xz.shape[0], xz.shape[2], p["ow"].shape[0], device=device)
    grads_of(fused, xz, p, g)
    assert [k for k, _ in seen] == ["fwd", "bwd"]
    for kind, strides in seen:
        assert all(s == 1 for s in strides), (kind, strides)


def test_copies_the_activations_once(device):
    """Over transformers' channel-last xz, the forward and the backward copy a (batch, dim, L)-
    sized tensor once: xz into L-contiguous rows, channel by channel.  In that layout the
    conv's and the scan's outputs and gradients, allocated like xz, are matrices the
    projections multiply as they are (no transposing copy of each, which mamba-ssm's
    MambaInnerFn makes about ten times a layer), and xz's gradient reaches in_proj's backward as
    one (a view of the right shape)."""
    skip_without_backward(device)
    from torch.utils._python_dispatch import TorchDispatchMode

    batch, dim, L = 2, 16, 64
    xz, p = make(device, OPTIONS["plain"], batch=batch, dim=dim, L=L)
    big = []

    class Copies(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            name = func.__name__
            if ("copy" in name or "clone" in name or "contiguous" in name) and \
                    isinstance(args[0], torch.Tensor) and args[0].numel() >= batch * dim * L:
                big.append((name, tuple(args[0].shape)))
            return func(*args, **(kwargs or {}))

    _, q = leaves_of(xz, p)
    h = torch.randn(batch, L, 8, device=device, requires_grad=True)
    w = torch.randn(2 * dim, 8, device=device, requires_grad=True)
    x = F.linear(h, w).transpose(1, 2)  # transformers' in_proj(hidden_states).transpose(1, 2)
    seen = []
    x.register_hook(lambda g: seen.append(g))
    g = torch.randn(batch, L, p["ow"].shape[0], device=device)
    with Copies():
        (call(fused, x, q).float() * g).sum().backward()
    assert big == [("copy_.default", (batch, 2 * dim, L))], big
    rows = seen[0].transpose(1, 2).reshape(-1, 2 * dim)  # in_proj's backward's matrix
    assert rows.data_ptr() == seen[0].data_ptr() and rows._base is not None
    assert h.grad is not None and w.grad is not None
