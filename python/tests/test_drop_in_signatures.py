"""Every drop-in takes the reference's parameters: the same names, order, kinds and defaults as
causal-conv1d 1.7.0, mamba-ssm 2.3.2.post1 and, for the two SSD functions, mamba-ssm's main
branch (state_dtype=None, added after 2.3.2.post1), written out here.  Checked on portssm.torch's
functions and on the names the import aliases (causal_conv1d, mamba_ssm) give."""

import importlib
import inspect
import math

import pytest
import torch

from conftest import ALIASES_ACTIVE

# the references' signatures
REFERENCE = {
    "causal_conv1d_fn": "x, weight, bias=None, seq_idx=None, initial_states=None, "
                        "return_final_states=False, final_states_out=None, activation=None",
    "causal_conv1d_ref": "x, weight, bias=None, initial_states=None, return_final_states=False, "
                         "final_states_out=None, activation=None, seq_idx=None",
    "causal_conv1d_update": "x, conv_state, weight, bias=None, activation=None, "
                            "cache_seqlens=None, conv_state_indices=None",
    "causal_conv1d_update_ref": "x, conv_state, weight, bias=None, activation=None, "
                                "cache_seqlens=None",
    "causal_conv1d_varlen_states": "x, cu_seqlens, state_len",
    "causal_conv1d_varlen_states_ref": "x, cu_seqlens, state_len",
    "causal_conv1d_fwd_function": "x, weight, bias, seq_idx, initial_states, final_states_out, "
                                  "silu_activation",
    "causal_conv1d_bwd_function": "x, weight, bias, dout, seq_idx, initial_states, "
                                  "dfinal_states, dx, return_dinitial_states, silu_activation",
    "causal_conv1d_update_function": "x, conv_state, weight, bias, silu_activation, "
                                     "cache_seqlens, conv_state_indices",
    "rms_norm_forward": "x, weight, bias, eps=1e-06, is_rms_norm=True",
    "selective_scan_fn": "u, delta, A, B, C, D=None, z=None, delta_bias=None, "
                         "delta_softplus=False, return_last_state=False",
    "selective_scan_ref": "u, delta, A, B, C, D=None, z=None, delta_bias=None, "
                          "delta_softplus=False, return_last_state=False",
    "mamba_inner_fn": "xz, conv1d_weight, conv1d_bias, x_proj_weight, delta_proj_weight, "
                      "out_proj_weight, out_proj_bias, A, B=None, C=None, D=None, "
                      "delta_bias=None, B_proj_bias=None, C_proj_bias=None, delta_softplus=True, "
                      "checkpoint_lvl=1, b_rms_weight=None, c_rms_weight=None, "
                      "dt_rms_weight=None, b_c_dt_rms_eps=1e-06",
    "mamba_inner_ref": "xz, conv1d_weight, conv1d_bias, x_proj_weight, delta_proj_weight, "
                       "out_proj_weight, out_proj_bias, A, B=None, C=None, D=None, "
                       "delta_bias=None, B_proj_bias=None, C_proj_bias=None, "
                       "delta_softplus=True",
    "selective_state_update": "state, x, dt, A, B, C, D=None, z=None, dt_bias=None, "
                              "dt_softplus=False, state_batch_indices=None",
    "selective_state_update_ref": "state, x, dt, A, B, C, D=None, z=None, dt_bias=None, "
                                  "dt_softplus=False",
    "init_to_zero": "names",
    "ensure_stride": "inp",
    "selective_scan_bwd": "dout, x, dt, A, B, C, D=None, z=None",
    # mamba-ssm main: state_dtype=None after return_varlen_states
    "mamba_chunk_scan_combined": "x, dt, A, B, C, chunk_size, D=None, z=None, dt_bias=None, "
                                 "initial_states=None, seq_idx=None, cu_seqlens=None, "
                                 "dt_softplus=False, dt_limit=(0.0, float('inf')), "
                                 "return_final_states=False, return_varlen_states=False, "
                                 "state_dtype=None",
    "mamba_chunk_scan": "x, dt, A, B, C, chunk_size, D=None, z=None, dt_bias=None, "
                        "dt_softplus=False",
    "ssd_chunk_scan_combined_ref": "x, dt, A, B, C, chunk_size, D=None, z=None, dt_bias=None, "
                                   "dt_softplus=False",
    "ssd_selective_scan": "x, dt, A, B, C, D=None, z=None, dt_bias=None, dt_softplus=False, "
                          "dt_limit=(0.0, float('inf'))",
    "mamba_conv1d_scan_ref": "xBC, conv1d_weight, conv1d_bias, dt, A, chunk_size, D=None, "
                             "z=None, dt_bias=None, dt_softplus=False, "
                             "dt_limit=(0.0, float('inf')), activation='silu', headdim=None, "
                             "ngroups=1",
    # mamba-ssm main: state_dtype=None after norm_before_gate
    "mamba_split_conv1d_scan_combined": "zxbcdt, conv1d_weight, conv1d_bias, dt_bias, A, D, "
                                        "chunk_size, initial_states=None, seq_idx=None, "
                                        "dt_limit=(0.0, float('inf')), "
                                        "return_final_states=False, activation='silu', "
                                        "rmsnorm_weight=None, rmsnorm_eps=1e-06, "
                                        "outproj_weight=None, outproj_bias=None, "
                                        "headdim=None, ngroups=1, norm_before_gate=True, "
                                        "state_dtype=None",
    "mamba_split_conv1d_scan_ref": "zxbcdt, conv1d_weight, conv1d_bias, dt_bias, A, D, "
                                   "chunk_size, dt_limit=(0.0, float('inf')), "
                                   "activation='silu', rmsnorm_weight=None, rmsnorm_eps=1e-06, "
                                   "outproj_weight=None, outproj_bias=None, headdim=None, "
                                   "ngroups=1, norm_before_gate=True",
    "layernorm_gated.rms_norm_ref": "x, weight, bias, z=None, eps=1e-06, group_size=None, "
                                    "norm_before_gate=True, upcast=True",
}

# where each name lives: in portssm.torch (module, attribute), and under the aliases
PORTSSM = {
    "causal_conv1d_fn": "portssm.torch", "causal_conv1d_update": "portssm.torch",
    "selective_scan_fn": "portssm.torch", "mamba_inner_fn": "portssm.torch",
    "selective_state_update": "portssm.torch", "mamba_chunk_scan_combined": "portssm.torch",
    "mamba_split_conv1d_scan_combined": "portssm.torch",
    "layernorm_gated.rms_norm_ref": "portssm.torch.reference:rms_norm_gated_ref",
}
for _name in REFERENCE:
    if _name not in PORTSSM:
        PORTSSM[_name] = ("portssm.torch.reference" if _name.endswith("_ref")
                          else "portssm.torch.compat")

ALIASED = {
    "causal_conv1d": ["causal_conv1d_fn", "causal_conv1d_update"],
    "causal_conv1d.causal_conv1d_interface": [
        "causal_conv1d_fn", "causal_conv1d_ref", "causal_conv1d_update",
        "causal_conv1d_update_ref", "causal_conv1d_fwd_function", "causal_conv1d_bwd_function",
        "causal_conv1d_update_function"],
    "causal_conv1d.causal_conv1d_varlen": ["causal_conv1d_varlen_states",
                                           "causal_conv1d_varlen_states_ref"],
    "causal_conv1d.cpp_functions": ["causal_conv1d_fwd_function", "causal_conv1d_bwd_function",
                                    "causal_conv1d_update_function"],
    "mamba_ssm": ["selective_scan_fn", "mamba_inner_fn"],
    "mamba_ssm.ops.selective_scan_interface": [
        "rms_norm_forward", "selective_scan_fn", "selective_scan_ref", "mamba_inner_fn",
        "mamba_inner_ref", "causal_conv1d_fn"],
    "mamba_ssm.ops.triton.selective_state_update": ["selective_state_update",
                                                    "selective_state_update_ref"],
    "mamba_ssm.ops.triton.ssd_combined": [
        "init_to_zero", "ensure_stride", "selective_scan_bwd", "mamba_chunk_scan_combined",
        "mamba_chunk_scan", "ssd_chunk_scan_combined_ref", "ssd_selective_scan",
        "mamba_conv1d_scan_ref", "mamba_split_conv1d_scan_combined",
        "mamba_split_conv1d_scan_ref"],
}


def _expected(name):
    # the reference's parameter list as a signature (defaults evaluated: float('inf') etc.)
    return inspect.signature(eval("lambda %s: None" % REFERENCE[name], {"float": float}))


def _same(actual, expected):
    a = [(p.name, p.kind, p.default) for p in actual.parameters.values()]
    e = [(p.name, p.kind, p.default) for p in expected.parameters.values()]
    return a == e


def _portssm_function(name):
    where = PORTSSM[name]
    module, _, attr = where.partition(":")
    return getattr(importlib.import_module(module), attr or name.split(".")[-1])


@pytest.mark.parametrize("name", sorted(REFERENCE))
def test_portssm_signature_is_the_references(name):
    fn = _portssm_function(name)
    sig = inspect.signature(fn)
    assert _same(sig, _expected(name)), "%s%s != reference (%s)" % (name, sig, REFERENCE[name])


@pytest.mark.skipif(not ALIASES_ACTIVE, reason="PORTSSM_NO_ALIAS is set: the aliases are off")
@pytest.mark.parametrize("module", sorted(ALIASED))
def test_aliased_names_are_the_drop_ins(module):
    mod = importlib.import_module(module)
    for name in ALIASED[module]:
        fn = getattr(mod, name)
        assert fn is _portssm_function(name), "%s.%s" % (module, name)
        assert _same(inspect.signature(fn), _expected(name)), "%s.%s" % (module, name)


def test_reference_defaults_are_what_they_seem():
    # the one default that is not a literal: dt_limit's upper bound
    sig = inspect.signature(_portssm_function("mamba_chunk_scan_combined"))
    assert sig.parameters["dt_limit"].default == (0.0, math.inf)


# ---------------------------------------------------------------- state_dtype


def _ssd_inputs(dtype, batch=2, seqlen=37, nheads=4, headdim=8, ngroups=2, dstate=8):
    x = torch.randn(batch, seqlen, nheads, headdim).to(dtype)
    dt = (torch.rand(batch, seqlen, nheads) * 0.5).to(dtype)
    A = -torch.rand(nheads) - 0.5
    B = torch.randn(batch, seqlen, ngroups, dstate).to(dtype)
    C = torch.randn(batch, seqlen, ngroups, dstate).to(dtype)
    return x, dt, A, B, C


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["f32", "bf16"])
def test_state_dtype_none_and_activation_dtype(dtype):
    """None and the activation dtype are portssm's behaviour: the same result, forward and
    backward, as no state_dtype at all."""
    from portssm.torch import mamba_chunk_scan_combined

    inputs = [t.requires_grad_() if t.is_floating_point() else t for t in _ssd_inputs(dtype)]
    results = []
    for kw in ({}, {"state_dtype": None}, {"state_dtype": dtype}):
        for t in inputs:
            t.grad = None
        out, final = mamba_chunk_scan_combined(*inputs, 16, dt_softplus=True,
                                               return_final_states=True, **kw)
        (out.float().square().sum() + final.sum()).backward()
        results.append([out.detach(), final.detach()] + [t.grad.clone() for t in inputs])
    for other in results[1:]:
        for a, b in zip(results[0], other):
            assert torch.equal(a, b)


def test_state_dtype_unsupported_is_refused():
    from portssm.torch import mamba_chunk_scan_combined, mamba_split_conv1d_scan_combined

    x, dt, A, B, C = _ssd_inputs(torch.bfloat16)
    with pytest.raises(NotImplementedError, match="state_dtype=torch.float32 with "
                                                  "torch.bfloat16 activations"):
        mamba_chunk_scan_combined(x, dt, A, B, C, 16, state_dtype=torch.float32)
    with pytest.raises(NotImplementedError, match="needs? libportssm"):
        mamba_chunk_scan_combined(x.float(), dt.float(), A, B.float(), C.float(), 16,
                                  state_dtype=torch.bfloat16)
    with pytest.raises(TypeError, match="state_dtype must be a torch.dtype"):
        mamba_chunk_scan_combined(x, dt, A, B, C, 16, state_dtype="float32")

    nheads, headdim, ngroups, dstate, width = 4, 8, 1, 8, 4
    dim = nheads * headdim
    conv_dim = dim + 2 * ngroups * dstate
    zxbcdt = torch.randn(2, 19, 2 * dim + 2 * ngroups * dstate + nheads, dtype=torch.bfloat16)
    args = (zxbcdt, torch.randn(conv_dim, width), torch.randn(conv_dim), torch.rand(nheads),
            -torch.rand(nheads) - 0.5, torch.randn(nheads, headdim), 16)
    with pytest.raises(NotImplementedError, match="mamba_split_conv1d_scan_combined"):
        mamba_split_conv1d_scan_combined(*args, state_dtype=torch.float32)
    out = mamba_split_conv1d_scan_combined(*args, state_dtype=None)
    torch.testing.assert_close(
        mamba_split_conv1d_scan_combined(*args, state_dtype=torch.bfloat16), out, rtol=0, atol=0)
