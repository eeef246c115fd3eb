"""The rest of the import surface the aliases give: every public name of causal-conv1d 1.7.0's
and mamba-ssm 2.3.2.post1's op modules is there and does what the reference's does (the
pure-torch `*_ref` functions against portssm's kernels, the raw cpp_functions against the
autograd functions, the Function classes' apply), and every name portssm does not provide
raises ImportError saying so and what to use."""

import importlib

import pytest
import torch
import torch.nn.functional as F

from conftest import ALIASES_ACTIVE

pytestmark = pytest.mark.skipif(not ALIASES_ACTIVE,
                                reason="PORTSSM_NO_ALIAS is set: the aliases are off")

PUBLIC = {
    "causal_conv1d": ["causal_conv1d_fn", "causal_conv1d_update", "__version__"],
    "causal_conv1d.causal_conv1d_interface": [
        "CausalConv1dFn", "causal_conv1d_fn", "causal_conv1d_ref", "causal_conv1d_update",
        "causal_conv1d_update_ref"],
    "causal_conv1d.causal_conv1d_varlen": ["causal_conv1d_varlen_states",
                                           "causal_conv1d_varlen_states_ref"],
    "causal_conv1d.cpp_functions": ["causal_conv1d_fwd_function", "causal_conv1d_bwd_function",
                                    "causal_conv1d_update_function", "LIBRARY_NAME"],
    "mamba_ssm": ["selective_scan_fn", "mamba_inner_fn", "__version__"],
    "mamba_ssm.ops.selective_scan_interface": [
        "SelectiveScanFn", "MambaInnerFn", "rms_norm_forward", "selective_scan_fn",
        "selective_scan_ref", "mamba_inner_fn", "mamba_inner_ref"],
    "mamba_ssm.ops.triton.selective_state_update": ["selective_state_update",
                                                    "selective_state_update_ref"],
    "mamba_ssm.ops.triton.ssd_combined": [
        "MambaChunkScanCombinedFn", "MambaSplitConv1dScanCombinedFn", "init_to_zero",
        "ensure_stride", "selective_scan_bwd", "mamba_chunk_scan_combined", "mamba_chunk_scan",
        "ssd_chunk_scan_combined_ref", "ssd_selective_scan", "mamba_conv1d_scan_ref",
        "mamba_split_conv1d_scan_combined", "mamba_split_conv1d_scan_ref"],
}


@pytest.mark.parametrize("module", sorted(PUBLIC))
def test_public_names(module):
    mod = importlib.import_module(module)
    missing = [n for n in PUBLIC[module] if not hasattr(mod, n)]
    assert not missing


def _gap(fn, match="not provided by portssm"):
    with pytest.raises(ImportError, match=match) as info:
        fn()
    return str(info.value)


def test_gaps_name_themselves_and_the_way_out():
    import mamba_ssm

    msg = _gap(lambda: mamba_ssm.Mamba3)
    assert "Mamba2" in msg and "real install" in msg
    exec_import = lambda stmt: (lambda: exec(stmt, {}))  # noqa: E731
    _gap(exec_import("from mamba_ssm import Mamba3"))
    for module in ("mamba_ssm.ops.triton.mamba3", "mamba_ssm.ops.tilelang",
                   "mamba_ssm.ops.cute", "mamba_ssm.distributed"):
        _gap(exec_import("import " + module))
    for module in ("ssd_bmm", "ssd_chunk_scan", "ssd_chunk_state", "ssd_state_passing",
                   "k_activations", "softplus"):
        msg = _gap(exec_import("import mamba_ssm.ops.triton." + module))
        assert "mamba_chunk_scan_combined" in msg
    msg = _gap(exec_import("from mamba_ssm.ops.triton.ssd_combined import chunk_state_ref"),
               "Triton building blocks")
    with pytest.raises(NotImplementedError, match="autograd"):
        from mamba_ssm.ops.triton.ssd_combined import selective_scan_bwd
        selective_scan_bwd(*[None] * 6)
    # probes by attribute still get AttributeError (transformers resolves names this way)
    assert getattr(mamba_ssm, "selective_state_update", None) is None
    assert getattr(mamba_ssm.ops, "no_such_module", None) is None


def test_module_layer_resolves_lazily():
    """Mamba, Mamba2, MambaLMHeadModel come from the module layer (mamba_ssm.modules /
    .models, another branch's files) on first use."""
    import mamba_ssm

    for name, module in (("Mamba", "mamba_ssm.modules.mamba_simple"),
                         ("Mamba2", "mamba_ssm.modules.mamba2"),
                         ("MambaLMHeadModel", "mamba_ssm.models.mixer_seq_simple")):
        try:
            mod = importlib.import_module(module)
        except ImportError as exc:
            pytest.skip("the module layer is not in this tree yet (%s)" % exc)
        assert getattr(mamba_ssm, name) is getattr(mod, name)


def test_norm_modules_reexport_portssm_norms():
    try:
        norms = importlib.import_module("portssm.torch.norms")
    except ImportError as exc:
        pytest.skip("portssm.torch.norms (the fused norms) is not in this tree yet: %s" % exc)
    from mamba_ssm.ops.triton import layer_norm, layernorm_gated

    assert layer_norm.RMSNorm is norms.RMSNorm
    assert layer_norm.layer_norm_fn is norms.layer_norm_fn
    assert layer_norm.rms_norm_fn is norms.rms_norm_fn
    assert layernorm_gated.RMSNorm is norms.GatedRMSNorm
    assert layernorm_gated.LayerNorm is norms.GatedLayerNorm
    assert layernorm_gated.rmsnorm_fn is norms.rmsnorm_fn
    assert layernorm_gated.layernorm_fn is norms.layernorm_fn


# ---------------------------------------------------------------- the references vs the kernels

def _close(a, b, what, rtol=1e-4, atol=1e-4):
    torch.testing.assert_close(a, b, rtol=rtol, atol=atol, msg=lambda m: "%s: %s" % (what, m))


def test_causal_conv1d_refs():
    from causal_conv1d import causal_conv1d_fn, causal_conv1d_update
    from causal_conv1d.causal_conv1d_interface import causal_conv1d_ref, causal_conv1d_update_ref

    batch, dim, seqlen, width = 2, 6, 13, 4
    x = torch.randn(batch, dim, seqlen)
    w, b = torch.randn(dim, width), torch.randn(dim)
    init = torch.randn(batch, dim, width - 1)
    for act in (None, "silu"):
        out, final = causal_conv1d_ref(x, w, b, init, return_final_states=True, activation=act)
        k_out, k_final = causal_conv1d_fn(x, w, b, initial_states=init, return_final_states=True,
                                          activation=act)
        _close(out, k_out, "out")
        _close(final, k_final, "final states")
    seq_idx = torch.tensor([[0] * 5 + [1] * 8, [0] * 2 + [1] * 3 + [2] * 8], dtype=torch.int32)
    _close(causal_conv1d_ref(x, w, b, activation="silu", seq_idx=seq_idx),
           causal_conv1d_fn(x, w, b, seq_idx=seq_idx, activation="silu"), "seq_idx")
    # a token of another sequence than the first contributes nothing
    solo = causal_conv1d_ref(x[:1, :, 5:], w, b)
    _close(causal_conv1d_ref(x, w, b, seq_idx=seq_idx)[:1, :, 5:], solo, "packed vs alone")

    state_len = width + 2
    state = torch.randn(batch, dim, state_len)
    xs = torch.randn(batch, dim, 3)
    for cache_seqlens in (None, torch.tensor([1, 7], dtype=torch.int32)):
        s_ref, s_k = state.clone(), state.clone()
        out_ref = causal_conv1d_update_ref(xs, s_ref, w, b, "silu", cache_seqlens)
        out_k = causal_conv1d_update(xs, s_k, w, b, "silu", cache_seqlens)
        _close(out_ref, out_k, "update out")
        _close(s_ref, s_k, "update state")


def test_causal_conv1d_varlen_states():
    from causal_conv1d.causal_conv1d_varlen import (causal_conv1d_varlen_states,
                                                    causal_conv1d_varlen_states_ref)

    x = torch.randn(20, 5)
    cu = torch.tensor([0, 2, 2, 9, 20], dtype=torch.int32)
    for state_len in (1, 3, 8):
        a = causal_conv1d_varlen_states(x, cu, state_len)
        b = causal_conv1d_varlen_states_ref(x, cu, state_len)
        assert a.shape == (4, 5, state_len)
        assert torch.equal(a, b)
    assert torch.equal(causal_conv1d_varlen_states(x, cu, 3)[2, :, :], x[6:9].T)
    assert torch.equal(causal_conv1d_varlen_states(x, cu, 3)[0, :, 0], torch.zeros(5))


def test_cpp_functions_and_function_classes():
    from causal_conv1d import causal_conv1d_fn
    from causal_conv1d.causal_conv1d_interface import CausalConv1dFn
    from causal_conv1d.cpp_functions import (causal_conv1d_bwd_function,
                                             causal_conv1d_fwd_function,
                                             causal_conv1d_update_function)

    batch, dim, seqlen, width = 2, 8, 11, 3
    x = torch.randn(batch, dim, seqlen, requires_grad=True)
    w = torch.randn(dim, width, requires_grad=True)
    b = torch.randn(dim, requires_grad=True)
    init = torch.randn(batch, dim, width - 1, requires_grad=True)
    out = causal_conv1d_fn(x, w, b, initial_states=init, activation="silu")
    dout = torch.randn_like(out)
    grads = torch.autograd.grad(out, (x, w, b, init), dout)
    with torch.no_grad():
        final = torch.empty(batch, width - 1, dim).transpose(1, 2)
        raw = causal_conv1d_fwd_function(x, w, b, None, init, final, True)
        _close(raw, out, "fwd_function")
        _close(final, torch.cat([init, x], -1)[..., -(width - 1):], "final_states_out")
        dx = torch.empty_like(x)
        raw_grads = causal_conv1d_bwd_function(x, w, b, dout, None, init, None, dx, True, True)
        assert raw_grads[0] is dx
        for g, r, what in zip(grads, raw_grads, ("dx", "dweight", "dbias", "dinitial_states")):
            _close(r, g, what)
        state = torch.randn(batch, dim, width - 1)
        step = torch.randn(batch, dim, 1)
        expect = causal_conv1d_fn(torch.cat([state, step], -1), w, b, activation="silu")[..., -1:]
        _close(causal_conv1d_update_function(step, state, w, b, True, None, None), expect,
               "update_function")
    _close(CausalConv1dFn.apply(x, w, b, None, init, False, None, "silu"), out, "apply")


def _scan_inputs(batch=2, dim=8, dstate=4, seqlen=19, groups=2):
    u = torch.randn(batch, dim, seqlen)
    delta = torch.rand(batch, dim, seqlen) * 0.5
    A = -torch.rand(dim, dstate) - 0.2
    B = torch.randn(batch, groups, dstate, seqlen)
    C = torch.randn(batch, groups, dstate, seqlen)
    return u, delta, A, B, C, torch.randn(dim), torch.randn(batch, dim, seqlen), torch.randn(dim)


def test_selective_scan_refs():
    from mamba_ssm.ops.selective_scan_interface import (SelectiveScanFn, selective_scan_fn,
                                                        selective_scan_ref)

    u, delta, A, B, C, D, z, bias = _scan_inputs()
    out, last = selective_scan_ref(u, delta, A, B, C, D, z, bias, True, True)
    k_out, k_last = selective_scan_fn(u, delta, A, B, C, D, z, bias, True, True)
    _close(out, k_out, "out")
    _close(last, k_last, "last state")
    # B in the 3-D variable form (batch, dstate, seqlen), C constant (dim, dstate)
    C_const = torch.randn(A.shape)
    _close(selective_scan_ref(u, delta, A, B[:, 0], C_const),
           selective_scan_fn(u, delta, A, B[:, 0], C_const), "3-D B, constant C")
    _close(SelectiveScanFn.apply(u, delta, A, B, C, D, z, bias, True, False), k_out, "apply")


def test_selective_state_update_ref():
    from mamba_ssm.ops.triton.selective_state_update import (selective_state_update,
                                                             selective_state_update_ref)

    batch, nheads, dim, dstate, ngroups = 3, 4, 5, 6, 2
    state = torch.randn(batch, nheads, dim, dstate)
    x, dt, z = (torch.randn(batch, nheads, dim) for _ in range(3))
    A = -torch.rand(nheads, dim, dstate)
    B, C = torch.randn(batch, ngroups, dstate), torch.randn(batch, ngroups, dstate)
    D, dt_bias = torch.randn(nheads, dim), torch.randn(nheads, dim)
    s1, s2 = state.clone(), state.clone()
    _close(selective_state_update_ref(s1, x, dt, A, B, C, D, z, dt_bias, True),
           selective_state_update(s2, x, dt, A, B, C, D, z, dt_bias, True), "heads out")
    _close(s1, s2, "heads state")
    s1, s2 = state[:, 0].clone(), state[:, 0].clone()  # the Mamba-1 form
    _close(selective_state_update_ref(s1, x[:, 0], dt[:, 0], A[0], B[:, 0], C[:, 0], D[0]),
           selective_state_update(s2, x[:, 0], dt[:, 0], A[0], B[:, 0], C[:, 0], D[0]), "out")
    _close(s1, s2, "state")


def test_mamba_inner_ref():
    from mamba_ssm.ops.selective_scan_interface import (MambaInnerFn, mamba_inner_fn,
                                                        mamba_inner_ref)

    batch, d_model, dim, dstate, rank, seqlen, width = 2, 6, 8, 4, 3, 10, 4
    xz = torch.randn(batch, 2 * dim, seqlen)
    args = (xz, torch.randn(dim, 1, width), torch.randn(dim), torch.randn(rank + 2 * dstate, dim),
            torch.randn(dim, rank) * 0.3, torch.randn(d_model, dim), torch.randn(d_model),
            -torch.rand(dim, dstate) - 0.2)
    kw = dict(D=torch.randn(dim), delta_bias=torch.randn(dim) * 0.3)
    out = mamba_inner_fn(*args, **kw)
    _close(mamba_inner_ref(*args, **kw), out, "mamba_inner")
    _close(MambaInnerFn.apply(*args, None, None, kw["D"], kw["delta_bias"]), out, "apply")


def _ssd(batch=2, seqlen=29, nheads=4, headdim=4, ngroups=2, dstate=5):
    x = torch.randn(batch, seqlen, nheads, headdim)
    dt = torch.rand(batch, seqlen, nheads) * 0.5
    A = -torch.rand(nheads) - 0.3
    B = torch.randn(batch, seqlen, ngroups, dstate)
    C = torch.randn(batch, seqlen, ngroups, dstate)
    return x, dt, A, B, C, torch.randn(nheads, headdim), torch.randn(*x.shape), torch.rand(nheads)


def test_ssd_refs_and_adapters():
    from mamba_ssm.ops.triton.ssd_combined import (MambaChunkScanCombinedFn, mamba_chunk_scan,
                                                   mamba_chunk_scan_combined,
                                                   ssd_chunk_scan_combined_ref,
                                                   ssd_selective_scan)

    x, dt, A, B, C, D, z, dt_bias = _ssd()
    out = mamba_chunk_scan_combined(x, dt, A, B, C, 8, D=D, z=z, dt_bias=dt_bias,
                                    dt_softplus=True)
    _close(ssd_chunk_scan_combined_ref(x, dt, A, B, C, 8, D, z, dt_bias, True), out, "ref")
    _close(ssd_selective_scan(x, dt, A, B, C, D, z, dt_bias, True), out, "ssd_selective_scan")
    _close(mamba_chunk_scan(x, dt, A, B, C, 8, D, z, dt_bias, True), out, "mamba_chunk_scan")
    _close(MambaChunkScanCombinedFn.apply(x, dt, A, B, C, 8, D, z, dt_bias, None, None, None,
                                          True), out, "apply")
    limit = (0.05, 0.4)
    _close(ssd_selective_scan(x, dt, A, B, C, D, None, dt_bias, True, limit),
           mamba_chunk_scan_combined(x, dt, A, B, C, 8, D=D, dt_bias=dt_bias, dt_softplus=True,
                                     dt_limit=limit), "dt_limit")


def test_split_conv1d_scan_refs():
    from mamba_ssm.ops.triton.ssd_combined import (MambaSplitConv1dScanCombinedFn,
                                                   mamba_conv1d_scan_ref,
                                                   mamba_split_conv1d_scan_combined,
                                                   mamba_split_conv1d_scan_ref)

    batch, seqlen, nheads, headdim, ngroups, dstate, width = 2, 21, 4, 4, 1, 6, 4
    dim = nheads * headdim
    conv_dim = dim + 2 * ngroups * dstate
    zxbcdt = torch.randn(batch, seqlen, 2 * dim + 2 * ngroups * dstate + nheads)
    w, b = torch.randn(conv_dim, width) * 0.5, torch.randn(conv_dim)
    dt_bias, A, D = torch.rand(nheads), -torch.rand(nheads) - 0.3, torch.randn(nheads, headdim)
    out_w, out_b = torch.randn(7, dim), torch.randn(7)
    for norm in (None, torch.rand(dim) + 0.5):
        kw = dict(rmsnorm_weight=norm, outproj_weight=out_w, outproj_bias=out_b,
                  norm_before_gate=False)
        out = mamba_split_conv1d_scan_combined(zxbcdt, w, b, dt_bias, A, D, 8, **kw)
        _close(mamba_split_conv1d_scan_ref(zxbcdt, w, b, dt_bias, A, D, 8, **kw), out,
               "split ref (norm %s)" % (norm is not None))
    apply_out = MambaSplitConv1dScanCombinedFn.apply(zxbcdt, w, b, dt_bias, A, D, 8)
    _close(apply_out, mamba_split_conv1d_scan_combined(zxbcdt, w, b, dt_bias, A, D, 8), "apply")
    # the conv + scan part alone, gated by z
    z, xBC, dt = torch.split(zxbcdt, [dim, conv_dim, nheads], dim=-1)
    ref = mamba_conv1d_scan_ref(xBC, w, b, dt, A, 8, D=D, z=z, dt_bias=dt_bias, dt_softplus=True)
    from causal_conv1d import causal_conv1d_fn
    from mamba_ssm.ops.triton.ssd_combined import mamba_chunk_scan_combined

    xBC = causal_conv1d_fn(xBC.transpose(1, 2), w, b, activation="silu").transpose(1, 2)
    xs, Bs, Cs = torch.split(xBC, [dim, ngroups * dstate, ngroups * dstate], dim=-1)
    k = mamba_chunk_scan_combined(xs.reshape(batch, seqlen, nheads, headdim), dt, A,
                                  Bs.reshape(batch, seqlen, ngroups, dstate),
                                  Cs.reshape(batch, seqlen, ngroups, dstate), 8, D=D,
                                  z=z.reshape(batch, seqlen, nheads, headdim), dt_bias=dt_bias,
                                  dt_softplus=True)
    _close(ref, k.reshape(batch, seqlen, dim), "conv1d_scan ref")


def test_helpers():
    from mamba_ssm.ops.triton.ssd_combined import ensure_stride, init_to_zero

    t = torch.randn(2, 5, 16)
    assert ensure_stride(t) is t
    odd = torch.randn(2, 16, 10)[:, :, :5].transpose(1, 2)  # (2, 5, 16) with stride(1) == 1
    assert ensure_stride(odd).stride(1) % 8 == 0
    with pytest.raises(ValueError, match="multiple of 8"):
        ensure_stride(torch.randn(2, 5, 6))
    a, b = torch.ones(3), torch.ones(2)
    init_to_zero(["a", "c"])({"a": a, "b": b, "c": None})
    assert torch.equal(a, torch.zeros(3)) and torch.equal(b, torch.ones(2))


def test_rms_norm_gated_ref_matches_its_definition():
    from portssm.torch.reference import rms_norm_gated_ref

    x, z, w = torch.randn(3, 8), torch.randn(3, 8), torch.rand(8) + 0.5
    g = (x * F.silu(z)).reshape(3, 2, 4)
    expect = (g * torch.rsqrt(g.square().mean(-1, keepdim=True) + 1e-6)).reshape(3, 8) * w
    _close(rms_norm_gated_ref(x, w, None, z=z, group_size=4, norm_before_gate=False), expect,
           "norm after gate")
