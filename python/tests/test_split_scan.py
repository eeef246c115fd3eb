"""mamba_split_conv1d_scan_combined as one autograd node (what it keeps for the backward is
mamba-ssm's MambaSplitConv1dScanCombinedFn's): its outputs and the gradient of every input and
weight against the composition of portssm's drop-ins it replaced and against float64 formulas,
with the gated RMSNorm or the z gate, with and without the out projection, the swiglu part,
initial states, seq_idx, final states, under bf16 autocast; what it saves; torch.compile."""

import pytest
import torch
import torch.nn.functional as F

import portssm.torch as pt
from accuracy import assert_as_accurate
from conftest import require_backward, require_compile
from portssm.torch import ssd as ssd_module
from references import assert_close, conv1d_ref, ssd_ref


def rand(*shape, device, dtype=torch.float32, lo=-1.0, hi=1.0):
    return (torch.rand(*shape, device=device) * (hi - lo) + lo).to(dtype)


def composition(zxbcdt, conv_w, conv_b, dt_bias, A, D, chunk_size, initial_states=None,
                seq_idx=None, dt_limit=(0.0, float("inf")), return_final_states=False,
                activation="silu", rmsnorm_weight=None, rmsnorm_eps=1e-6, outproj_weight=None,
                outproj_bias=None, headdim=None, ngroups=1, norm_before_gate=True):
    """The split op as portssm composed it before it was one node: its conv, SSD and fused norm
    drop-ins and torch's matmul under autograd (and autocast)."""
    from portssm.torch.norms import rmsnorm_fn

    if D.dim() == 1:
        nheads = D.shape[0]
    else:
        nheads, headdim = D.shape
    batch, seqlen, width = zxbcdt.shape
    dim = nheads * headdim
    dstate = (conv_w.shape[0] - dim) // ngroups // 2
    d_nonssm = (width - 2 * dim - 2 * ngroups * dstate - nheads) // 2
    zx0, z, xBC, dt = torch.split(zxbcdt, [2 * d_nonssm, dim, dim + 2 * ngroups * dstate, nheads],
                                  dim=-1)
    xBC = pt.causal_conv1d_fn(xBC.transpose(1, 2), conv_w, conv_b, seq_idx=seq_idx,
                              activation=activation).transpose(1, 2)
    x, B, C = torch.split(xBC, [dim, ngroups * dstate, ngroups * dstate], dim=-1)
    x = x.reshape(batch, seqlen, nheads, headdim)
    B = B.reshape(batch, seqlen, ngroups, dstate)
    C = C.reshape(batch, seqlen, ngroups, dstate)
    z = z.reshape(batch, seqlen, nheads, headdim)
    gate_in_scan = rmsnorm_weight is None
    res = pt.mamba_chunk_scan_combined(x, dt, A, B, C, chunk_size, D=D,
                                       z=z if gate_in_scan else None, dt_bias=dt_bias,
                                       initial_states=initial_states, seq_idx=seq_idx,
                                       dt_softplus=True, dt_limit=dt_limit,
                                       return_final_states=return_final_states)
    y, final = res if return_final_states else (res, None)
    y = y.reshape(batch, seqlen, dim)
    if not gate_in_scan:
        y = rmsnorm_fn(y, rmsnorm_weight, None, z=z.reshape(batch, seqlen, dim), eps=rmsnorm_eps,
                       group_size=dim // ngroups, norm_before_gate=norm_before_gate)
    if d_nonssm > 0:
        a, g = zx0.chunk(2, dim=-1)
        y = torch.cat([F.silu(a) * g, y], dim=-1)
    if outproj_weight is not None:
        if torch.is_autocast_enabled(zxbcdt.device.type):
            dtype = torch.get_autocast_dtype(zxbcdt.device.type)
            y, outproj_weight = y.to(dtype), outproj_weight.to(dtype)
            outproj_bias = outproj_bias.to(dtype) if outproj_bias is not None else None
        y = F.linear(y, outproj_weight, outproj_bias)
    return y if not return_final_states else (y, final)


def reference64(zxbcdt, conv_w, conv_b, dt_bias, A, D, chunk_size, initial_states=None,
                seq_idx=None, dt_limit=(0.0, float("inf")), return_final_states=False,
                activation="silu", rmsnorm_weight=None, rmsnorm_eps=1e-6, outproj_weight=None,
                outproj_bias=None, headdim=None, ngroups=1, norm_before_gate=True):
    """The same in float64 on references.py's conv and SSD recurrence."""
    H = D.shape[0]
    headdim = headdim if D.dim() == 1 else D.shape[1]
    batch, L, width = zxbcdt.shape
    dim = H * headdim
    N = (conv_w.shape[0] - dim) // ngroups // 2
    d_nonssm = (width - 2 * dim - 2 * ngroups * N - H) // 2
    zx0, z, xBC, dt = torch.split(zxbcdt, [2 * d_nonssm, dim, dim + 2 * ngroups * N, H], dim=-1)
    xBC = conv1d_ref(xBC.transpose(1, 2), conv_w, conv_b, seq_idx=seq_idx,
                     activation=activation)[0].transpose(1, 2)
    x, B, C = torch.split(xBC, [dim, ngroups * N, ngroups * N], dim=-1)
    gate = rmsnorm_weight is None
    y, final = ssd_ref(x.reshape(batch, L, H, headdim), dt, A, B.reshape(batch, L, ngroups, N),
                       C.reshape(batch, L, ngroups, N), D=D, dt_bias=dt_bias, dt_softplus=True,
                       dt_limit=dt_limit, initial_states=initial_states, seq_idx=seq_idx,
                       z=z.reshape(batch, L, H, headdim) if gate else None)
    y = y.reshape(batch, L, dim)
    if not gate:
        if not norm_before_gate:
            y = y * F.silu(z)
        g = y.reshape(batch, L, ngroups, dim // ngroups)
        y = (g * torch.rsqrt(g.pow(2).mean(-1, keepdim=True) + rmsnorm_eps)).reshape(
            batch, L, dim) * rmsnorm_weight
        if norm_before_gate:
            y = y * F.silu(z)
    if d_nonssm:
        a, gt = zx0.chunk(2, dim=-1)
        y = torch.cat([F.silu(a) * gt, y], dim=-1)
    if outproj_weight is not None:
        y = F.linear(y, outproj_weight, outproj_bias)
    return y if not return_final_states else (y, final)


# name: (norm, out projection (with bias), d_nonssm, initial states, seq_idx, final states,
#        D per head-channel, ngroups, norm_before_gate)
CASES = {
    "transformers": dict(norm=True, outproj=True, out_bias=False, d_nonssm=0, ngroups=1,
                         norm_before_gate=False),
    "norm_groups_swiglu": dict(norm=True, outproj=True, out_bias=True, d_nonssm=3, ngroups=2,
                               norm_before_gate=True),
    "gate_in_scan": dict(norm=False, outproj=True, out_bias=True, d_nonssm=0, ngroups=2),
    "gate_no_outproj_swiglu": dict(norm=False, outproj=False, d_nonssm=2, ngroups=1),
    "norm_no_outproj": dict(norm=True, outproj=False, d_nonssm=0, ngroups=2,
                            norm_before_gate=False),
    "states_seq_idx": dict(norm=True, outproj=True, out_bias=False, d_nonssm=0, ngroups=1,
                           norm_before_gate=False, init=True, seq_idx=True, final=True,
                           D_per_channel=True),
    "gate_states": dict(norm=False, outproj=True, out_bias=False, d_nonssm=0, ngroups=2,
                        init=True, final=True),
}


def make(device, case, batch=2, L=40, H=4, P=4, N=8, W=4, E=12):
    c = CASES[case]
    G = c["ngroups"]
    dim = H * P
    conv_dim = dim + 2 * G * N
    dn = c["d_nonssm"]
    zxbcdt = rand(batch, L, 2 * dn + dim + conv_dim + H, device=device)
    p = dict(conv_w=rand(conv_dim, W, device=device) * 0.5, conv_b=rand(conv_dim, device=device),
             dt_bias=rand(H, device=device), A=-rand(H, device=device, lo=0.2, hi=1.0),
             D=rand(H, P, device=device) if c.get("D_per_channel") else rand(H, device=device),
             init=rand(batch, H, P, N, device=device) if c.get("init") else None,
             rms_w=rand(dim, device=device, lo=0.5, hi=1.5) if c["norm"] else None,
             out_w=rand(E, dn + dim, device=device) * 0.3 if c["outproj"] else None,
             out_b=rand(E, device=device) if c.get("out_bias") else None)
    seq_idx = None
    if c.get("seq_idx"):
        cut = torch.randint(1, L - 1, (batch, 2), device=device)
        seq_idx = (torch.arange(L, device=device).view(1, L, 1) >= cut.view(batch, 1, 2)).sum(
            -1).to(torch.int32)
    kw = dict(headdim=P, ngroups=G, norm_before_gate=c.get("norm_before_gate", True),
              dt_limit=(0.0, 0.8), return_final_states=bool(c.get("final")), seq_idx=seq_idx)
    return zxbcdt, p, kw


def call(fn, zxbcdt, q, kw, chunk_size=16):
    return fn(zxbcdt, q["conv_w"], q["conv_b"], q["dt_bias"], q["A"], q["D"], chunk_size,
              initial_states=q["init"], rmsnorm_weight=q["rms_w"], rmsnorm_eps=1e-5,
              outproj_weight=q["out_w"], outproj_bias=q["out_b"], **kw)


def leaves_of(zxbcdt, p, dtype=None):
    conv = (lambda t: t.to(dtype)) if dtype is not None else (lambda t: t)
    z = conv(zxbcdt.detach()).clone().requires_grad_()
    q = {k: (conv(v.detach()).clone().requires_grad_() if v is not None else None)
         for k, v in p.items()}
    return z, q


def run(fn, zxbcdt, p, kw, gout, gfinal=None, dtype=None):
    z, q = leaves_of(zxbcdt, p, dtype)
    res = call(fn, z, q, kw)
    out, final = res if kw["return_final_states"] else (res, None)
    loss = (out.to(gout.dtype) * gout).sum()
    if final is not None:
        loss = loss + (final.to(gfinal.dtype) * gfinal).sum()
    loss.backward()
    names = ["zxbcdt"] + [k for k, v in q.items() if v is not None]
    return (out, final), dict(zip(names, [z.grad] + [q[k].grad for k in names[1:]]))


def skip_without_backward(device):
    missing = require_backward(device)
    if missing:
        pytest.skip("backward ops missing on %s: %s" % (device, ", ".join(missing)))


def grads_for(out_shape, final_shape, device, dtype):
    gout = torch.randn(out_shape, device=device, dtype=dtype)
    gfinal = torch.randn(final_shape, device=device, dtype=dtype) if final_shape else None
    return gout, gfinal


@pytest.mark.parametrize("case", sorted(CASES))
def test_matches_composition_and_float64(device, case):
    skip_without_backward(device)
    zxbcdt, p, kw = make(device, case)
    with torch.no_grad():
        res = call(pt.mamba_split_conv1d_scan_combined, zxbcdt, p, kw)
    out0, final0 = res if kw["return_final_states"] else (res, None)
    gout, gfinal = grads_for(out0.shape, final0.shape if final0 is not None else None, device,
                             torch.float32)
    (out, final), grads = run(pt.mamba_split_conv1d_scan_combined, zxbcdt, p, kw, gout, gfinal)
    (want, want_final), want_grads = run(composition, zxbcdt, p, kw, gout, gfinal)
    assert_close(out, want, torch.float32, "out vs composition")
    assert_close(out0, out.detach(), torch.float32, "out without grad")
    r_kw = dict(kw, seq_idx=kw["seq_idx"])
    (ref, ref_final), ref_grads = run(reference64, zxbcdt, p, r_kw, gout.double(),
                                      gfinal.double() if gfinal is not None else None,
                                      dtype=torch.float64)
    assert_close(out, ref, torch.float32, "out vs float64", scale=2.0)
    if final is not None:
        assert_close(final, want_final, torch.float32, "final vs composition")
        assert_close(final, ref_final, torch.float32, "final vs float64", scale=2.0)
    assert grads.keys() == want_grads.keys() == ref_grads.keys()
    for name, got in grads.items():
        assert got.dtype == want_grads[name].dtype and got.shape == want_grads[name].shape, name
        assert_close(got, want_grads[name], torch.float32, "d%s vs composition" % name)
        assert_close(got, ref_grads[name], torch.float32, "d%s vs float64" % name, scale=3.0)


@pytest.mark.parametrize("case", ["norm_groups_swiglu", "gate_in_scan"])
def test_odd_layout(device, case):
    """zxbcdt with the batch as its slowest-but-one dimension (a transposed tensor): the same
    results and gradients as contiguous."""
    skip_without_backward(device)
    zxbcdt, p, kw = make(device, case)
    odd = zxbcdt.transpose(0, 1).contiguous().transpose(0, 1)
    assert not odd.is_contiguous()
    gout = torch.randn(2, 40, p["out_w"].shape[0] if p["out_w"] is not None else
                       zxbcdt.shape[-1], device=device)
    gout = gout[..., :call(pt.mamba_split_conv1d_scan_combined, zxbcdt.detach(), p,
                           kw).shape[-1]]

    def grads(z0):
        z = z0.detach().clone(memory_format=torch.preserve_format).requires_grad_()
        q = {k: (v.detach().clone().requires_grad_() if v is not None else None)
             for k, v in p.items()}
        out = call(pt.mamba_split_conv1d_scan_combined, z, q, kw)
        (out * gout).sum().backward()
        return out, [z.grad] + [v.grad for v in q.values() if v is not None]

    out, g = grads(zxbcdt)
    out2, g2 = grads(odd)
    assert_close(out2, out, torch.float32, "out")
    for a, b in zip(g2, g):
        assert_close(a, b, torch.float32, "grad")


def test_only_final_states_used(device):
    """A loss on the final states alone: the output's gradient is absent (not zeros made by
    torch), the gradients those of the composition."""
    skip_without_backward(device)
    zxbcdt, p, kw = make(device, "states_seq_idx")

    def grads(fn):
        z, q = leaves_of(zxbcdt, p)
        _, final = call(fn, z, q, kw)
        final.square().sum().backward()
        return [z.grad, q["init"].grad, q["A"].grad, q["conv_w"].grad]

    for a, b in zip(grads(pt.mamba_split_conv1d_scan_combined), grads(composition)):
        assert_close(a, b, torch.float32, "grad")


@pytest.mark.parametrize("case", ["transformers", "gate_in_scan", "norm_groups_swiglu"])
def test_bf16_autocast(device, case):
    """Under bf16 autocast (transformers' training path: zxbcdt in bf16, float32 parameters)
    the dtypes of the composition under autocast, its output, and gradients as accurate as its
    own against float32."""
    skip_without_backward(device)
    zxbcdt, p, kw = make(device, case, L=70, H=4, P=8, N=16)
    zxbcdt = zxbcdt.to(torch.bfloat16)
    E = p["out_w"].shape[0]
    gout = torch.randn(2, 70, E, device=device)
    with torch.autocast(device, dtype=torch.bfloat16):
        (out, _), grads = run(pt.mamba_split_conv1d_scan_combined, zxbcdt, p, kw, gout)
        (want, _), want_grads = run(composition, zxbcdt, p, kw, gout)
    _, exact = run(composition, zxbcdt.float(), p, kw, gout)
    assert out.dtype == want.dtype == torch.bfloat16
    assert_close(out, want, torch.bfloat16, "out")
    for name, got in grads.items():
        assert got.dtype == want_grads[name].dtype, name
        assert_as_accurate(got, want_grads[name], exact[name], "d" + name)
    assert grads["zxbcdt"].dtype == torch.bfloat16 and grads["out_w"].dtype == torch.float32


def test_bf16_model_without_autocast(device):
    """A bf16 model: every parameter and zxbcdt in bf16, no autocast."""
    skip_without_backward(device)
    zxbcdt, p, kw = make(device, "norm_groups_swiglu", L=50)
    p = {k: v.to(torch.bfloat16) if v is not None and k != "A" else v for k, v in p.items()}
    zxbcdt = zxbcdt.to(torch.bfloat16)
    gout = torch.randn(2, 50, p["out_w"].shape[0], device=device)
    (out, _), grads = run(pt.mamba_split_conv1d_scan_combined, zxbcdt, p, kw, gout)
    (want, _), want_grads = run(composition, zxbcdt, p, kw, gout)
    _, exact = run(composition, zxbcdt.float(), p, kw, gout, dtype=torch.float32)
    assert out.dtype == torch.bfloat16
    assert_close(out, want, torch.bfloat16, "out")
    for name, got in grads.items():
        assert got.dtype == want_grads[name].dtype, name
        assert_as_accurate(got, want_grads[name], exact[name], "d" + name)


def saved_rows(fn, zxbcdt, p, kw):
    """(shape, dtype, storage bytes) of every tensor autograd keeps for fn's backward, one row
    per storage."""
    seen = {}

    def pack(t):
        seen.setdefault(t.untyped_storage().data_ptr(),
                        (tuple(t.shape), t.dtype, t.untyped_storage().nbytes()))
        return t

    z, q = leaves_of(zxbcdt, p)
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        call(fn, z, q, kw)
    return list(seen.values())


@pytest.mark.parametrize("case", ["transformers", "gate_in_scan"])
def test_saves_what_mamba_ssm_saves(device, case):
    """The activations kept are zxbcdt and the SSD's output before the norm or gate (y), as
    mamba-ssm's (zxbcdt, out_x); the rest is the norm's rstd and the parameters: no conv output,
    no norm output, no checkpoints."""
    batch, L, H, P, N = 2, 300, 4, 16, 32
    zxbcdt, p, kw = make(device, case, batch=batch, L=L, H=H, P=P, N=N)
    rows = saved_rows(pt.mamba_split_conv1d_scan_combined, zxbcdt, p, kw)
    y = batch * L * H * P * 4
    big = sorted(b for _, _, b in rows if b >= y)
    assert big == sorted([y, zxbcdt.numel() * 4])
    rest = sum(b for _, _, b in rows if b < y)
    rstd = batch * L * kw["ngroups"] * 4 if p["rms_w"] is not None else 0
    params = sum(v.numel() * 4 for v in p.values() if v is not None)
    assert rest <= rstd + params + batch * L * 4  # (+ seq_idx's size, where given)


def test_keeps_checkpoints_where_asked(device, monkeypatch):
    """SPLIT_KEEPS_CHECKPOINTS: the SSD's checkpoints kept (and read) too, the same results."""
    skip_without_backward(device)
    zxbcdt, p, kw = make(device, "transformers", L=300, H=4, P=8, N=16)
    gout = torch.randn(2, 300, p["out_w"].shape[0], device=device)
    (out, _), grads = run(pt.mamba_split_conv1d_scan_combined, zxbcdt, p, kw, gout)
    monkeypatch.setattr(ssd_module, "SPLIT_KEEPS_CHECKPOINTS", True)
    rows = saved_rows(pt.mamba_split_conv1d_scan_combined, zxbcdt, p, kw)
    assert any(len(shape) == 4 and shape[:2] == (2, 4) and shape[3] == 8 * 16
               for shape, _, _ in rows), rows
    (out2, _), grads2 = run(pt.mamba_split_conv1d_scan_combined, zxbcdt, p, kw, gout)
    assert_close(out2, out, torch.float32, "out")
    for name in grads:
        assert_close(grads2[name], grads[name], torch.float32, "d" + name)


@pytest.mark.parametrize("case", ["transformers", "gate_states", "norm_groups_swiglu"])
def test_compile(device, case):
    """torch.compile(fullgraph=True) traces the node and its backward and gives eager's
    outputs and gradients."""
    require_compile()
    skip_without_backward(device)
    torch._dynamo.reset()
    zxbcdt, p, kw = make(device, case, L=70)
    with torch.no_grad():
        res = call(pt.mamba_split_conv1d_scan_combined, zxbcdt, p, kw)
    out0, final0 = res if kw["return_final_states"] else (res, None)
    gout, gfinal = grads_for(out0.shape, final0.shape if final0 is not None else None, device,
                             torch.float32)
    compiled = torch.compile(pt.mamba_split_conv1d_scan_combined, fullgraph=True,
                             backend="aot_eager")
    (out, final), grads = run(compiled, zxbcdt, p, kw, gout, gfinal)
    (want, want_final), want_grads = run(pt.mamba_split_conv1d_scan_combined, zxbcdt, p, kw,
                                         gout, gfinal)
    torch.testing.assert_close(out, want, rtol=1e-5, atol=1e-5)
    if final is not None:
        torch.testing.assert_close(final, want_final, rtol=1e-5, atol=1e-5)
    for name, got in grads.items():
        torch.testing.assert_close(got, want_grads[name], rtol=1e-5, atol=1e-5, msg=name)


def test_bad_input(device):
    zxbcdt, p, kw = make(device, "transformers")
    with pytest.raises(ValueError, match="outproj_bias"):
        pt.mamba_split_conv1d_scan_combined(zxbcdt, p["conv_w"], p["conv_b"], p["dt_bias"],
                                            p["A"], p["D"], 16, headdim=4,
                                            outproj_bias=torch.zeros(3, device=device))
    with pytest.raises(ValueError, match="last dim"):
        pt.mamba_split_conv1d_scan_combined(zxbcdt[..., 1:], p["conv_w"], p["conv_b"],
                                            p["dt_bias"], p["A"], p["D"], 16, headdim=4)
    with pytest.raises(ValueError, match="activation"):
        pt.mamba_split_conv1d_scan_combined(zxbcdt, p["conv_w"], p["conv_b"], p["dt_bias"],
                                            p["A"], p["D"], 16, headdim=4, activation="relu")


def test_rmsnorm_eps_none_without_the_norm(device):
    """transformers' FalconH1 passes rmsnorm_eps=None with rmsnorm_weight=None (its eps is
    unused then, as in mamba-ssm); with a norm weight None is a clear TypeError."""
    zxbcdt, p, kw = make(device, "gate_in_scan")
    want = call(pt.mamba_split_conv1d_scan_combined, zxbcdt, p, kw)
    got = pt.mamba_split_conv1d_scan_combined(
        zxbcdt, p["conv_w"], p["conv_b"], p["dt_bias"], p["A"], p["D"], 16,
        initial_states=p["init"], rmsnorm_weight=None, rmsnorm_eps=None,
        outproj_weight=p["out_w"], outproj_bias=p["out_b"], **kw)
    torch.testing.assert_close(got, want, rtol=0, atol=0)
    zxbcdt, p, kw = make(device, "transformers")
    with pytest.raises(TypeError, match="rmsnorm_eps"):
        pt.mamba_split_conv1d_scan_combined(
            zxbcdt, p["conv_w"], p["conv_b"], p["dt_bias"], p["A"], p["D"], 16,
            rmsnorm_weight=p["rms_w"], rmsnorm_eps=None, outproj_weight=p["out_w"], **kw)
