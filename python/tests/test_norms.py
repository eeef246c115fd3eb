"""portssm.torch.norms: mamba-ssm 2.3.2.post1's fused norms (ops.triton.layer_norm and
ops.triton.layernorm_gated) on libportssm's norm ops, against a plain float64 torch computation
of their definitions, forward and gradients; the modules' signatures, parameters and
initialisation; bad inputs."""

import inspect

import pytest
import torch
import torch.nn.functional as F

import portssm.errors
from portssm.torch import norms

TOL = {torch.float32: (2e-5, 2e-5), torch.float16: (3e-3, 5e-3), torch.bfloat16: (2e-2, 3e-2)}
DTYPES = [torch.float32, torch.float16, torch.bfloat16]


def has_backward(device):
    from portssm.torch import _runtime

    return _runtime.context_of(torch.empty(1, device=device)).supports("norm_bwd")


def _skip_without_backward(device):
    if not has_backward(device):
        pytest.skip("the %s backend lacks norm_bwd (portssm_op_supported)" % device)


# ---------------------------------------------------------------- the definitions, in float64


def ref_layer_norm(x, weight, bias, residual=None, eps=1e-6, prenorm=False,
                   residual_in_fp32=False, is_rms_norm=False):
    """mamba-ssm's layer_norm_fn: s = x + residual (in float64), normalised; residual_out is s
    in residual's dtype (float32 with residual_in_fp32, else x's)."""
    s = x.double() + (residual.double() if residual is not None else 0)
    w, b = weight.double(), bias.double() if bias is not None else None
    if is_rms_norm:
        out = s * torch.rsqrt(s.square().mean(-1, keepdim=True) + eps) * w
        out = out + b if b is not None else out
    else:
        out = F.layer_norm(s, s.shape[-1:], w, b, eps)
    return out, s


def ref_gated(x, weight, bias, z=None, eps=1e-6, group_size=None, norm_before_gate=True,
              is_rms_norm=False):
    """mamba-ssm's layernorm_gated: per group of group_size channels, gated by silu(z)."""
    v = x.double()
    if z is not None and not norm_before_gate:
        v = v * F.silu(z.double())
    H = v.shape[-1]
    g = group_size or H
    vg = v.reshape(*v.shape[:-1], H // g, g)
    if is_rms_norm:
        vh = vg * torch.rsqrt(vg.square().mean(-1, keepdim=True) + eps)
    else:
        mu = vg.mean(-1, keepdim=True)
        vh = (vg - mu) * torch.rsqrt((vg - mu).square().mean(-1, keepdim=True) + eps)
    out = vh.reshape(v.shape) * weight.double()
    if bias is not None:
        out = out + bias.double()
    if z is not None and norm_before_gate:
        out = out * F.silu(z.double())
    return out


def close(got, want, dtype, scale=1.0):
    rtol, atol = TOL[dtype]
    torch.testing.assert_close(got.double(), want.double(), rtol=rtol * scale, atol=atol * scale)


def leaf(t):
    return t.detach().clone().requires_grad_(True)


# ---------------------------------------------------------------- layer_norm_fn / rms_norm_fn

SHAPES = [(1, 1), (3, 7), (2, 3, 64), (4, 2, 131)]


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("rms", [False, True], ids=["ln", "rms"])
@pytest.mark.parametrize("residual", ["none", "act", "f32"])
def test_layer_norm_forward(device, shape, dtype, rms, residual):
    H = shape[-1]
    x = torch.randn(shape, device=device).to(dtype)
    w = torch.randn(H, device=device)
    b = None if rms else torch.randn(H, device=device)
    res = None
    if residual != "none":
        res = torch.randn(shape, device=device).to(dtype if residual == "act" else torch.float32)
    fn = norms.rms_norm_fn if rms else norms.layer_norm_fn
    out, res_out = fn(x, w, b, residual=res, eps=1e-5, prenorm=True)
    want, s = ref_layer_norm(x, w, b, res, 1e-5, is_rms_norm=rms)
    assert out.dtype == dtype and out.shape == x.shape
    close(out, want, dtype)
    if res is None:
        assert res_out is x  # mamba-ssm returns x itself as the residual
    else:
        assert res_out.dtype == res.dtype and res_out.shape == x.shape
        # s rounded once to residual_out's dtype
        torch.testing.assert_close(res_out, s.to(res.dtype), rtol=0, atol=0)
    # without prenorm, the same out alone
    out2 = fn(x, w, b, residual=res, eps=1e-5)
    assert torch.equal(out2, out)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_residual_in_fp32(device, dtype):
    x = torch.randn(3, 5, 32, device=device).to(dtype)
    w = torch.randn(32, device=device).to(dtype)
    out, res_out = norms.rms_norm_fn(x, w, None, prenorm=True, residual_in_fp32=True)
    assert res_out.dtype == torch.float32
    assert torch.equal(res_out, x.float())
    out2, res2 = norms.rms_norm_fn(x, w, None, residual=res_out, prenorm=True)
    assert res2.dtype == torch.float32
    want, s = ref_layer_norm(x, w, None, res_out, is_rms_norm=True)
    close(out2, want, dtype)
    torch.testing.assert_close(res2.double(), s.float().double(), rtol=0, atol=0)
    # float32 x with residual_in_fp32: residual_out is x itself (no other dtype asked for)
    xf = x.float()
    assert norms.rms_norm_fn(xf, w.float(), None, prenorm=True, residual_in_fp32=True)[1] is xf


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("rms", [False, True], ids=["ln", "rms"])
@pytest.mark.parametrize("residual", ["none", "act", "f32"])
def test_layer_norm_backward(device, dtype, rms, residual):
    _skip_without_backward(device)
    shape, H = (2, 5, 24), 24
    x = leaf(torch.randn(shape, device=device).to(dtype))
    w = leaf(torch.randn(H, device=device))
    b = leaf(torch.randn(H, device=device))
    res = None
    if residual != "none":
        res = leaf(torch.randn(shape, device=device).to(dtype if residual == "act" else
                                                        torch.float32))
    fn = norms.rms_norm_fn if rms else norms.layer_norm_fn
    dout = torch.randn(shape, device=device).to(dtype)
    dres = torch.randn(shape, device=device)
    out, res_out = fn(x, w, b, residual=res, prenorm=True)
    loss = (out.double() * dout.double()).sum() + (res_out.double() * dres.to(res_out.dtype).double()).sum()
    loss.backward()

    xr, wr, br = leaf(x.detach().double()), leaf(w.detach().double()), leaf(b.detach().double())
    rr = leaf(res.detach().double()) if res is not None else None
    want, s = ref_layer_norm(xr, wr, br, rr, is_rms_norm=rms)
    ((want * dout.double()).sum() + (s * dres.to(res_out.dtype).double()).sum()).backward()
    scale = 4.0  # gradients take a few more roundings than the forward
    close(x.grad, xr.grad, dtype, scale)
    assert x.grad.dtype == dtype
    close(w.grad, wr.grad, dtype, 4 * scale)
    close(b.grad, br.grad, dtype, 4 * scale)
    if res is not None:
        assert res.grad.dtype == res.dtype
        close(res.grad, rr.grad, dtype, scale)


def test_backward_deterministic(device):
    _skip_without_backward(device)
    x = torch.randn(64, 96, device=device, dtype=torch.bfloat16)
    res = torch.randn(64, 96, device=device)
    w = torch.randn(96, device=device)
    grads = []
    for _ in range(2):
        xl, rl, wl = leaf(x), leaf(res), leaf(w)
        out, ro = norms.rms_norm_fn(xl, wl, None, residual=rl, prenorm=True)
        (out.float().square().sum() + ro.sum()).backward()
        grads.append((xl.grad, rl.grad, wl.grad))
    for a, b in zip(*grads):
        assert torch.equal(a, b)


def test_strided_rows(device):
    """Leading dims that do not flatten to a view of unit row stride, and a strided last dim."""
    base = torch.randn(4, 6, 40, device=device)
    x = base[:, ::2, :32]  # rows 2 apart, not contiguous
    w = torch.randn(32, device=device)
    out = norms.layer_norm_fn(x, w, None, eps=1e-5)
    close(out, ref_layer_norm(x, w, None, eps=1e-5)[0], torch.float32)
    xt = torch.randn(4, 32, 5, device=device).transpose(1, 2)  # hidden stride 5
    close(norms.rms_norm_fn(xt, w, None), ref_layer_norm(xt, w, None, is_rms_norm=True)[0],
          torch.float32)


def test_weight_dtypes(device):
    """Weights in another dtype than float32 or x's go through an exact float32 copy; their
    gradients come back in their own dtype."""
    x = torch.randn(3, 16, device=device, dtype=torch.bfloat16)
    w = torch.randn(16, device=device, dtype=torch.float16)
    b = torch.randn(16, device=device, dtype=torch.float16)
    out = norms.layer_norm_fn(x, w, b)
    close(out, ref_layer_norm(x, w, b)[0], torch.bfloat16)
    _skip_without_backward(device)
    wl = leaf(w)
    norms.layer_norm_fn(x, wl, b).float().sum().backward()
    assert wl.grad.dtype == torch.float16


def test_return_dropout_mask(device):
    x = torch.randn(2, 8, device=device)
    w = torch.randn(8, device=device)
    out, m0, m1 = norms.rms_norm_fn(x, w, None, return_dropout_mask=True)
    assert m0 is None and m1 is None
    out2, res, m0, m1 = norms.rms_norm_fn(x, w, None, prenorm=True, return_dropout_mask=True)
    assert torch.equal(out, out2) and res is x and m0 is None and m1 is None


# ---------------------------------------------------------------- layernorm_gated


GATED = [  # (shape, group_size, z, norm_before_gate)
    ((3, 16), None, False, True),
    ((2, 3, 48), 16, True, False),   # Mamba-2: groups, the gate before the norm
    ((2, 3, 48), 16, True, True),
    ((5, 12), 1, True, False),
    ((4, 30), 10, True, True),
    ((1, 1), None, True, False),
]


@pytest.mark.parametrize("case", GATED, ids=lambda c: "%s-g%s-z%d-nbg%d" % (
    "x".join(map(str, c[0])), c[1], c[2], c[3]))
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("rms", [False, True], ids=["ln", "rms"])
def test_gated_forward_backward(device, case, dtype, rms):
    shape, group_size, with_z, nbg = case
    H = shape[-1]
    x = leaf(torch.randn(shape, device=device).to(dtype))
    z = leaf(torch.randn(shape, device=device).to(dtype)) if with_z else None
    w = leaf(torch.randn(H, device=device))
    b = None if rms else leaf(torch.randn(H, device=device))
    fn = (lambda *a, **k: norms.rmsnorm_fn(*a, **k)) if rms else norms.layernorm_fn
    out = fn(x, w, b, z=z, eps=1e-5, group_size=group_size, norm_before_gate=nbg)
    want = ref_gated(x, w, b, z, 1e-5, group_size, nbg, rms)
    assert out.dtype == dtype and out.shape == x.shape
    close(out, want, dtype)
    _skip_without_backward(device)  # (the forward is checked)
    dout = torch.randn(shape, device=device).to(dtype)
    (out.double() * dout.double()).sum().backward()
    refs = [leaf(t.detach().double()) if t is not None else None for t in (x, w, b, z)]
    (ref_gated(refs[0], refs[1], refs[2], refs[3], 1e-5, group_size, nbg, rms) *
     dout.double()).sum().backward()
    for got, ref in zip((x, w, b, z), refs):
        if got is not None:
            assert got.grad.dtype == got.dtype
            close(got.grad, ref.grad, dtype, 4.0 if got.dim() > 1 else 16.0)


@pytest.mark.parametrize("case", GATED, ids=lambda c: "%s-g%s-z%d-nbg%d" % (
    "x".join(map(str, c[0])), c[1], c[2], c[3]))
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("rms", [False, True], ids=["ln", "rms"])
def test_backward_gives_the_forward_out(device, case, dtype, rms):
    """norm_bwd's optional out (what the split op's out projection needs for its weight
    gradient) is the forward's out, from the saved statistics; the gradients do not change."""
    from portssm.torch import _impl_norm

    _skip_without_backward(device)
    shape, group_size, with_z, nbg = case
    H = shape[-1]
    x = torch.randn(shape, device=device).to(dtype).reshape(-1, H)
    z = torch.randn(shape, device=device).to(dtype).reshape(-1, H) if with_z else None
    w = torch.randn(H, device=device)
    b = None if rms else torch.randn(H, device=device)
    group = group_size or 0
    out, _, mean, rstd = _impl_norm.norm_fwd(x, None, z, w, b, 1e-5, rms, group, nbg,
                                             _impl_norm.RESIDUAL_NONE, True)
    dout = torch.randn(x.shape, device=device).to(dtype)
    args = (x, z, w, b, mean, rstd, dout, None, rms, group, nbg, False, with_z, True,
            b is not None)
    with_out = _impl_norm.norm_bwd(*args, True)
    without = _impl_norm.norm_bwd(*args, False)
    assert with_out[5].shape == out.shape and with_out[5].dtype == dtype
    # (from the statistics rounded to float32, the forward's own on a GPU: a group of one
    # channel under LayerNorm amplifies that rounding by 1 / sqrt(eps))
    close(with_out[5], out, dtype, 4.0)
    assert without[5].numel() == 0
    for got, want in zip(with_out[:5], without[:5]):
        assert torch.equal(got, want)


# ---------------------------------------------------------------- modules


def test_rmsnorm_module(device):
    m = norms.RMSNorm(32, device=device)
    assert [n for n, _ in m.named_parameters()] == ["weight"]
    assert m.bias is None and m.eps == 1e-5 and m.drop is None
    assert torch.equal(m.weight, torch.ones(32, device=device))
    with torch.no_grad():
        m.weight.mul_(2)
    m.reset_parameters()
    assert torch.equal(m.weight, torch.ones(32, device=device))
    x = torch.randn(2, 4, 32, device=device)
    r = torch.randn(2, 4, 32, device=device)
    out, res = m(x, residual=r, prenorm=True, residual_in_fp32=True)
    want, s = ref_layer_norm(x, m.weight, None, r, 1e-5, is_rms_norm=True)
    close(out, want, torch.float32)
    assert set(m.state_dict()) == {"weight"}
    bf = norms.RMSNorm(32, dtype=torch.bfloat16, device=device)
    assert bf.weight.dtype == torch.bfloat16


def test_rmsnorm_dropout(device):
    m = norms.RMSNorm(8, dropout_p=0.1, device=device)
    assert isinstance(m.drop, torch.nn.Dropout) and m.drop.p == 0.1
    x = torch.randn(2, 8, device=device)
    with pytest.raises(NotImplementedError, match="dropout_p"):
        m(x)  # training: mamba-ssm would drop out
    m.eval()
    close(m(x), ref_layer_norm(x, m.weight, None, eps=1e-5, is_rms_norm=True)[0], torch.float32)


def test_gated_modules(device):
    ln = norms.GatedLayerNorm(24, group_size=8, norm_before_gate=False, device=device)
    assert [n for n, _ in ln.named_parameters()] == ["weight", "bias"]
    assert torch.equal(ln.weight, torch.ones(24, device=device))
    assert torch.equal(ln.bias, torch.zeros(24, device=device))
    assert ln.group_size == 8 and ln.norm_before_gate is False and ln.eps == 1e-5
    rn = norms.GatedRMSNorm(24, eps=1e-6, group_size=None, device=device)
    assert [n for n, _ in rn.named_parameters()] == ["weight"] and rn.bias is None
    x, z = torch.randn(3, 24, device=device), torch.randn(3, 24, device=device)
    close(ln(x, z), ref_gated(x, ln.weight, ln.bias, z, 1e-5, 8, False), torch.float32)
    close(rn(x, z), ref_gated(x, rn.weight, None, z, 1e-6, None, True, True), torch.float32)
    close(rn(x), ref_gated(x, rn.weight, None, None, 1e-6, None, True, True), torch.float32)


# mamba-ssm 2.3.2.post1's signatures, as written in its source
SIGNATURES = {
    "layer_norm_fn": "(x, weight, bias, residual=None, x1=None, weight1=None, bias1=None, "
                     "eps=1e-06, dropout_p=0.0, rowscale=None, prenorm=False, "
                     "residual_in_fp32=False, is_rms_norm=False, return_dropout_mask=False)",
    "rms_norm_fn": "(x, weight, bias, residual=None, x1=None, weight1=None, bias1=None, "
                   "eps=1e-06, dropout_p=0.0, rowscale=None, prenorm=False, "
                   "residual_in_fp32=False, return_dropout_mask=False)",
    "layernorm_fn": "(x, weight, bias, z=None, eps=1e-06, group_size=None, "
                    "norm_before_gate=True, is_rms_norm=False)",
    "rmsnorm_fn": "(x, weight, bias, z=None, eps=1e-06, group_size=None, norm_before_gate=True)",
    "RMSNorm": "(hidden_size, eps=1e-05, dropout_p=0.0, device=None, dtype=None)",
    "RMSNorm.forward": "(self, x, residual=None, prenorm=False, residual_in_fp32=False)",
    "GatedRMSNorm": "(hidden_size, eps=1e-05, group_size=None, norm_before_gate=True, "
                    "device=None, dtype=None)",
    "GatedRMSNorm.forward": "(self, x, z=None)",
    "GatedLayerNorm": "(hidden_size, eps=1e-05, group_size=None, norm_before_gate=True, "
                      "device=None, dtype=None)",
    "GatedLayerNorm.forward": "(self, x, z=None)",
}


@pytest.mark.parametrize("name", sorted(SIGNATURES))
def test_signatures(name):
    obj = norms
    for part in name.split("."):
        obj = getattr(obj, part)
    assert str(inspect.signature(obj)) == SIGNATURES[name]


def test_exported_from_portssm_torch():
    import portssm.torch as pt

    for name in ("layer_norm_fn", "rms_norm_fn", "RMSNorm", "layernorm_fn", "rmsnorm_fn",
                 "GatedRMSNorm", "GatedLayerNorm"):
        assert getattr(pt, name) is getattr(norms, name)


# ---------------------------------------------------------------- bad inputs


@pytest.mark.parametrize("option", ["x1", "weight1", "bias1", "rowscale"])
def test_unsupported_tensors(device, option):
    x = torch.randn(2, 8, device=device)
    w = torch.randn(8, device=device)
    extra = {option: torch.randn(2 if option == "rowscale" else 8, device=device)}
    if option == "x1":
        extra[option] = torch.randn(2, 8, device=device)
    with pytest.raises(NotImplementedError, match=option):
        norms.layer_norm_fn(x, w, None, **extra)


def test_unsupported_dropout(device):
    x = torch.randn(2, 8, device=device)
    with pytest.raises(NotImplementedError, match="dropout_p"):
        norms.rms_norm_fn(x, torch.randn(8, device=device), None, dropout_p=0.1)


def test_bad_shapes_and_dtypes(device):
    x = torch.randn(2, 3, 8, device=device)
    w = torch.randn(8, device=device)
    with pytest.raises(ValueError, match="'residual'"):
        norms.layer_norm_fn(x, w, None, residual=torch.randn(2, 8, device=device))
    with pytest.raises(ValueError, match="'z'"):
        norms.rmsnorm_fn(x, w, None, z=torch.randn(2, 8, device=device))
    with pytest.raises(portssm.errors.InvalidArgumentError, match="'group_size'"):
        norms.rmsnorm_fn(x, w, None, group_size=3)
    with pytest.raises(portssm.errors.InvalidArgumentError, match="'weight'"):
        norms.layer_norm_fn(x, torch.randn(7, device=device), None)
    with pytest.raises(portssm.errors.InvalidArgumentError, match="'z'"):
        norms.rmsnorm_fn(x, w, None, z=torch.randn(2, 3, 8, device=device, dtype=torch.float16))
    with pytest.raises(portssm.errors.InvalidArgumentError, match="'eps'"):
        norms.layer_norm_fn(x, w, None, eps=-1.0)
    with pytest.raises(TypeError, match="'x'"):
        norms.layer_norm_fn(x.double(), w, None)


# ---------------------------------------------------------------- torch.compile


def test_compile(device):
    from conftest import require_compile

    require_compile()
    torch._dynamo.reset()

    def block(x, res, w, z, w2):
        h, r = norms.rms_norm_fn(x, w, None, residual=res, prenorm=True, residual_in_fp32=True)
        return norms.rmsnorm_fn(h, w2, None, z=z, group_size=8, norm_before_gate=False), r

    args = [torch.randn(2, 3, 16, device=device), torch.randn(2, 3, 16, device=device),
            torch.randn(16, device=device), torch.randn(2, 3, 16, device=device),
            torch.randn(16, device=device)]
    want_grad = has_backward(device)
    leaves = [t.clone().requires_grad_(want_grad) for t in args]
    compiled = torch.compile(block, fullgraph=True, backend="aot_eager")
    out, r = compiled(*leaves)
    ref, rr = block(*args)
    torch.testing.assert_close(out, ref)
    torch.testing.assert_close(r, rr)
    if want_grad:
        (out.sum() + r.sum()).backward()
        ref_leaves = [t.clone().requires_grad_() for t in args]
        o2, r2 = block(*ref_leaves)
        (o2.sum() + r2.sum()).backward()
        for a, b in zip(leaves, ref_leaves):
            torch.testing.assert_close(a.grad, b.grad)


# ---------------------------------------------------------------- portssm.ops (any DLPack array)


def test_ops_binding(device):
    import portssm.ops as ops

    x = torch.randn(4, 8, device=device)
    w = torch.randn(8, device=device)
    out = torch.empty(4, 8, device=device)
    rstd = torch.empty(4, 2, device=device)
    ops.norm_fwd(x, w, out, kind="rms", rstd=rstd, group_size=4, eps=1e-5)
    close(out, ref_gated(x, w, None, None, 1e-5, 4, True, True), torch.float32)
    _skip_without_backward(device)
    dout = torch.randn(4, 8, device=device)
    dx, dw = torch.empty(4, 8, device=device), torch.empty(8, device=device)
    nbytes = ops.norm_bwd_workspace_size(x, w, rstd, dout, dx, kind="rms", group_size=4,
                                         dweight=dw)
    ws = torch.empty(max(nbytes, 1) + 256, dtype=torch.uint8, device=device)
    ws = ws[(-ws.data_ptr()) % 256:][:max(nbytes, 1)]
    again = torch.full_like(out, float("nan"))
    ops.norm_bwd(x, w, rstd, dout, dx, kind="rms", group_size=4, dweight=dw, out=again,
                 workspace=ws if nbytes else None)
    close(again, out, torch.float32)
    xr, wr = leaf(x.double()), leaf(w.double())
    (ref_gated(xr, wr, None, None, 1e-5, 4, True, True) * dout.double()).sum().backward()
    close(dx, xr.grad, torch.float32, 4.0)
    close(dw, wr.grad, torch.float32, 16.0)
    with pytest.raises(ValueError, match="'kind'"):
        ops.norm_fwd(x, w, out, kind="batch")
