"""portssm.torch.modules' Mamba, Mamba2 and Mamba2Simple (mamba-ssm 2.3.2.post1's mixers):
forward and backward against float64 formulas of the same math, the parameters mamba-ssm's
checkpoints hold, the initialisation, and decoding (step / inference_params) against the full
forward."""

import math
from functools import partial

import pytest
import torch
import torch.nn as nn

from module_checks import assert_close_rel, check_against_reference
from module_references import mamba1_ref, mamba2_ref
from portssm.torch.generation import InferenceParams
from portssm.torch.modules import Mamba, Mamba2, Mamba2Simple

# ----------------------------------------------------------------------------- Mamba


MAMBA1_CONFIGS = [
    pytest.param(dict(), id="default"),
    pytest.param(dict(bias=True, conv_bias=False, dt_rank=3, d_conv=3), id="bias-rank3-w3"),
    pytest.param(dict(use_fast_path=False), id="unfused"),
]


@pytest.mark.parametrize("cfg", MAMBA1_CONFIGS)
def test_mamba_forward_backward(device, cfg):
    m = Mamba(d_model=16, d_state=8, **cfg).to(device)
    x = torch.randn(2, 19, 16, device=device)
    check_against_reference(m, partial(mamba1_ref, m), [x])


def test_mamba_state_dict():
    m = Mamba(d_model=20, d_state=6, d_conv=3, expand=2)  # d_inner 40, dt_rank ceil(20/16) = 2
    assert [(k, tuple(v.shape)) for k, v in m.state_dict().items()] == [
        ("A_log", (40, 6)),
        ("D", (40,)),
        ("in_proj.weight", (80, 20)),
        ("conv1d.weight", (40, 1, 3)),
        ("conv1d.bias", (40,)),
        ("x_proj.weight", (2 + 12, 40)),
        ("dt_proj.weight", (40, 2)),
        ("dt_proj.bias", (40,)),
        ("out_proj.weight", (20, 40)),
    ]
    assert Mamba(d_model=20, bias=True, conv_bias=False).state_dict().keys() >= {
        "in_proj.bias", "out_proj.bias"}
    assert "conv1d.bias" not in Mamba(d_model=20, conv_bias=False).state_dict()


def test_mamba_initialisation():
    torch.manual_seed(1234)
    m = Mamba(d_model=32, d_state=8, dt_min=0.002, dt_max=0.05)
    # the reference's draws, in its order: in_proj, conv1d, x_proj, dt_proj (default inits),
    # then dt_proj.weight uniform, then the dt bias draw, then out_proj
    torch.manual_seed(1234)
    in_proj = nn.Linear(32, 128, bias=False)
    conv1d = nn.Conv1d(64, 64, 4, groups=64, padding=3)
    x_proj = nn.Linear(64, 2 + 16, bias=False)
    dt_proj = nn.Linear(2, 64)
    nn.init.uniform_(dt_proj.weight, -2 ** -0.5, 2 ** -0.5)
    dt = torch.exp(torch.rand(64) * (math.log(0.05) - math.log(0.002)) + math.log(0.002))
    dt = dt.clamp(min=1e-4)
    out_proj = nn.Linear(64, 32, bias=False)
    for name, ref in (("in_proj.weight", in_proj.weight), ("conv1d.weight", conv1d.weight),
                      ("conv1d.bias", conv1d.bias), ("x_proj.weight", x_proj.weight),
                      ("dt_proj.weight", dt_proj.weight), ("out_proj.weight", out_proj.weight)):
        assert torch.equal(m.state_dict()[name], ref.detach()), name
    torch.testing.assert_close(torch.nn.functional.softplus(m.dt_proj.bias), dt)
    assert torch.equal(m.A_log, torch.log(torch.arange(1, 9.0)).expand(64, 8))
    assert torch.equal(m.D, torch.ones(64)) and m.A_log.dtype == m.D.dtype == torch.float32
    assert m.dt_proj.bias._no_reinit and m.A_log._no_weight_decay and m.D._no_weight_decay
    c = Mamba(d_model=32, dt_init="constant", dt_scale=2.0)
    assert torch.all(c.dt_proj.weight == 2.0 * c.dt_rank ** -0.5)
    with pytest.raises(NotImplementedError, match="dt_init"):
        Mamba(d_model=32, dt_init="normal")


def _decode_against_forward(m, x, prefix, forward_kwargs=None):
    """Prefill x[:, :prefix] through inference_params, then one token at a time through the
    cache: every output equals the full forward's at that position."""
    full = m(x, **(forward_kwargs or {}))
    params = InferenceParams(max_seqlen=x.shape[1], max_batch_size=x.shape[0])
    out = m(x[:, :prefix], inference_params=params)
    assert_close_rel(out, full[:, :prefix], "prefill", 1e-4)
    for t in range(prefix, x.shape[1]):
        params.seqlen_offset = t
        out = m(x[:, t:t + 1], inference_params=params)
        assert_close_rel(out, full[:, t:t + 1], "token %d" % t, 2e-4)
    return params


@pytest.mark.parametrize("prefix", [2, 7], ids=["prompt-shorter-than-conv", "prompt-7"])
@pytest.mark.parametrize("cfg", MAMBA1_CONFIGS)
def test_mamba_decode_matches_forward(device, cfg, prefix):
    m = Mamba(d_model=16, d_state=8, layer_idx=3, **cfg).to(device)
    x = torch.randn(2, 12, 16, device=device)
    with torch.no_grad():
        params = _decode_against_forward(m, x, prefix)
    conv_state, ssm_state = params.key_value_memory_dict[3]
    assert conv_state.shape == (2, m.d_inner, m.d_conv) and ssm_state.shape == (2, m.d_inner, 8)


def test_mamba_step_with_allocated_cache(device):
    m = Mamba(d_model=16, d_state=8).to(device)
    x = torch.randn(3, 6, 16, device=device)
    conv_state, ssm_state = m.allocate_inference_cache(3, 6)
    assert conv_state.shape == (3, m.d_inner, m.d_conv) and conv_state.dtype == torch.float32
    assert ssm_state.shape == (3, m.d_inner, 8) and not conv_state.any()
    with torch.no_grad():
        full = m(x)
        for t in range(6):
            out, cs, ss = m.step(x[:, t:t + 1], conv_state, ssm_state)
            assert cs is conv_state and ss is ssm_state
            assert_close_rel(out, full[:, t:t + 1], "step %d" % t, 2e-4)
    assert m.allocate_inference_cache(1, 4, dtype=torch.bfloat16)[1].dtype == torch.bfloat16


def test_mamba_invalid_use():
    m = Mamba(d_model=16)
    conv_state, ssm_state = m.allocate_inference_cache(1, 4)
    with pytest.raises(ValueError, match="one token at a time"):
        m.step(torch.randn(1, 2, 16), conv_state, ssm_state)
    with pytest.raises(ValueError, match="layer_idx"):
        m(torch.randn(1, 3, 16), inference_params=InferenceParams(4, 1))


def test_mamba_states_reused_and_reinitialised():
    m = Mamba(d_model=16, layer_idx=0)
    params = InferenceParams(max_seqlen=8, max_batch_size=1)
    with torch.no_grad():
        m(torch.randn(1, 5, 16), inference_params=params)
    conv_state, ssm_state = params.key_value_memory_dict[0]
    assert conv_state.any() and ssm_state.any()
    again = m._get_states_from_cache(params, 1)
    assert again[0] is conv_state and again[1] is ssm_state
    m._get_states_from_cache(params, 1, initialize_states=True)
    assert not conv_state.any() and not ssm_state.any()


# ----------------------------------------------------------------------------- Mamba2


MAMBA2_CONFIGS = [
    pytest.param(dict(), id="default"),
    pytest.param(dict(ngroups=2, chunk_size=8), id="groups2-chunk8"),
    pytest.param(dict(D_has_hdim=True, norm_before_gate=True), id="D-hdim-norm-first"),
    pytest.param(dict(rmsnorm=False), id="no-rmsnorm"),
    pytest.param(dict(d_ssm=32), id="d_ssm-mlp"),
    pytest.param(dict(dt_limit=(0.02, 0.3), bias=True, conv_bias=False, d_conv=3),
                 id="dt_limit-bias"),
]


def _mamba2(device, **cfg):
    return Mamba2(d_model=32, d_state=8, headdim=16, **cfg).to(device)


@pytest.mark.parametrize("mem_eff", [True, False], ids=["fused", "unfused"])
@pytest.mark.parametrize("cfg", MAMBA2_CONFIGS)
def test_mamba2_forward_backward(device, cfg, mem_eff):
    m = _mamba2(device, use_mem_eff_path=mem_eff, **cfg)
    u = torch.randn(2, 19, 32, device=device)
    check_against_reference(m, partial(mamba2_ref, m), [u])


@pytest.mark.parametrize("mem_eff", [True, False], ids=["fused", "unfused"])
def test_mamba2_seq_idx(device, mem_eff):
    m = _mamba2(device, use_mem_eff_path=mem_eff, ngroups=2, chunk_size=8)
    u = torch.randn(2, 21, 32, device=device)
    seq_idx = torch.tensor([[0] * 5 + [1] * 9 + [2] * 7, [0] * 21], dtype=torch.int32,
                           device=device)
    check_against_reference(m, partial(mamba2_ref, m), [u], seq_idx=seq_idx)


def test_mamba2_flat_input_with_seqlen(device):
    for mem_eff in (True, False):
        m = _mamba2(device, use_mem_eff_path=mem_eff)
        u = torch.randn(3, 10, 32, device=device)
        with torch.no_grad():
            torch.testing.assert_close(m(u.reshape(30, 32), seqlen=10),
                                       m(u).reshape(30, 32), rtol=1e-5, atol=1e-6)


def test_mamba2_state_dict():
    # d_inner 64, nheads 4, conv_dim 64 + 2*2*8 = 96, in_proj 2*64 + 2*2*8 + 4 = 164
    m = Mamba2(d_model=32, d_state=8, headdim=16, ngroups=2)
    assert [(k, tuple(v.shape)) for k, v in m.state_dict().items()] == [
        ("dt_bias", (4,)),
        ("A_log", (4,)),
        ("D", (4,)),
        ("in_proj.weight", (164, 32)),
        ("conv1d.weight", (96, 1, 4)),
        ("conv1d.bias", (96,)),
        ("norm.weight", (64,)),
        ("out_proj.weight", (32, 64)),
    ]
    assert m.norm.group_size == 32 and m.norm.eps == 1e-5 and m.norm.norm_before_gate is False
    # d_ssm 32 of d_inner 64: 2 heads; in_proj 2*64 + 2*8 + 2 = 146, conv 32 + 16
    s = Mamba2(d_model=32, d_state=8, headdim=16, d_ssm=32, D_has_hdim=True, rmsnorm=False)
    assert {k: tuple(v.shape) for k, v in s.state_dict().items()} == {
        "dt_bias": (2,), "A_log": (2,), "D": (32,), "in_proj.weight": (146, 32),
        "conv1d.weight": (48, 1, 4), "conv1d.bias": (48,), "out_proj.weight": (32, 64)}


def test_mamba2_initialisation():
    torch.manual_seed(99)
    m = Mamba2(d_model=32, d_state=8, headdim=16, A_init_range=(2, 5), conv_init=0.3)
    torch.manual_seed(99)
    in_proj = nn.Linear(32, 2 * 64 + 16 + 4, bias=False)
    conv1d = nn.Conv1d(80, 80, 4, groups=80, padding=3)
    nn.init.uniform_(conv1d.weight, -0.3, 0.3)
    dt = torch.exp(torch.rand(4) * (math.log(0.1) - math.log(0.001)) + math.log(0.001))
    A = torch.empty(4).uniform_(2, 5)
    out_proj = nn.Linear(64, 32, bias=False)
    sd = m.state_dict()
    for name, ref in (("in_proj.weight", in_proj.weight), ("conv1d.weight", conv1d.weight),
                      ("conv1d.bias", conv1d.bias), ("out_proj.weight", out_proj.weight)):
        assert torch.equal(sd[name], ref.detach()), name
    torch.testing.assert_close(torch.nn.functional.softplus(m.dt_bias), dt.clamp(min=1e-4))
    torch.testing.assert_close(m.A_log, torch.log(A))
    assert torch.equal(m.D, torch.ones(4)) and torch.equal(m.norm.weight, torch.ones(64))
    assert m.dt_bias._no_weight_decay and m.A_log._no_weight_decay and m.D._no_weight_decay
    assert Mamba2(d_model=32, headdim=16, dtype=torch.bfloat16).A_log.dtype == torch.bfloat16


@pytest.mark.parametrize("prefix", [3, 9])
@pytest.mark.parametrize("cfg", MAMBA2_CONFIGS)
def test_mamba2_decode_matches_forward(device, cfg, prefix):
    m = _mamba2(device, layer_idx=0, **cfg)
    u = torch.randn(2, 14, 32, device=device)
    with torch.no_grad():
        params = _decode_against_forward(m, u, prefix)
    conv_state, ssm_state = params.key_value_memory_dict[0]
    assert conv_state.shape == (2, m.conv1d.weight.shape[0], m.d_conv)
    assert conv_state.stride(1) == 1  # mamba-ssm's layout: channels contiguous
    assert ssm_state.shape == (2, m.nheads, m.headdim, m.d_state)


def test_mamba2_packed_prefill_fills_one_state_per_sequence(device):
    """cu_seqlens with inference_params: the packed prompts' states equal those of each prompt
    alone, and decoding goes on from them."""
    m = _mamba2(device, layer_idx=0, chunk_size=8)
    lengths = [5, 2, 11]  # 2 < d_conv: its conv state is zero-padded
    prompts = [torch.randn(1, n, 32, device=device) for n in lengths]
    packed = torch.cat(prompts, dim=1)
    cu = torch.tensor([0, 5, 7, 18], dtype=torch.int32, device=device)
    seq_idx = torch.repeat_interleave(torch.arange(3, device=device),
                                      torch.tensor(lengths, device=device)).int().unsqueeze(0)
    with torch.no_grad():
        params = InferenceParams(max_seqlen=20, max_batch_size=3)
        out = m(packed, seq_idx=seq_idx, cu_seqlens=cu, inference_params=params)
        conv_state, ssm_state = (s.clone() for s in params.key_value_memory_dict[0])
        assert conv_state.shape[0] == 3
        nxt = torch.randn(3, 1, 32, device=device)
        params.seqlen_offset = 1
        step_out = m(nxt, inference_params=params)
        for i, (p, lo) in enumerate(zip(prompts, [0, 5, 7])):
            alone = InferenceParams(max_seqlen=20, max_batch_size=1)
            ref = m(p, inference_params=alone)
            assert_close_rel(out[:, lo:lo + p.shape[1]], ref, "packed output %d" % i, 1e-4)
            cs, ss = alone.key_value_memory_dict[0]
            torch.testing.assert_close(conv_state[i], cs[0])
            assert_close_rel(ssm_state[i], ss[0], "state %d" % i, 1e-4)
            alone.seqlen_offset = 1
            assert_close_rel(step_out[i], m(nxt[i:i + 1], inference_params=alone)[0],
                             "step after packed prefill %d" % i, 1e-4)
    with pytest.raises(ValueError, match="batch 1"):
        m(torch.randn(2, 9, 32, device=device), cu_seqlens=cu[:2],
          inference_params=InferenceParams(max_seqlen=20, max_batch_size=1))


def test_mamba2_unsupported_options():
    with pytest.raises(NotImplementedError, match="process_group"):
        Mamba2(d_model=32, headdim=16, process_group=object())
    with pytest.raises(ValueError, match="headdim"):
        Mamba2(d_model=24, headdim=32)
    m = Mamba2(d_model=32, headdim=16)
    conv_state, ssm_state = m.allocate_inference_cache(1, 4)
    with pytest.raises(ValueError, match="one token at a time"):
        m.step(torch.randn(1, 3, 32), conv_state, ssm_state)


def test_mamba2_hub_mixin(tmp_path):
    """mamba-ssm's Mamba2 is a huggingface_hub PyTorchModelHubMixin: save/load by its config."""
    pytest.importorskip("huggingface_hub", reason="huggingface_hub not installed")
    m = Mamba2(d_model=32, d_state=8, headdim=16, ngroups=2)
    m.save_pretrained(tmp_path)
    loaded = Mamba2.from_pretrained(tmp_path)
    assert loaded.ngroups == 2 and loaded.d_state == 8
    for k, v in m.state_dict().items():
        assert torch.equal(loaded.state_dict()[k], v), k


# ----------------------------------------------------------------------------- Mamba2Simple


SIMPLE_CONFIGS = [
    pytest.param(dict(), id="default"),
    pytest.param(dict(learnable_init_states=True), id="init-states"),
    pytest.param(dict(ngroups=2, dt_limit=(0.01, 0.2), activation="silu"), id="groups2-limit"),
]


@pytest.mark.parametrize("mem_eff", [True, False], ids=["fused", "unfused"])
@pytest.mark.parametrize("cfg", SIMPLE_CONFIGS)
def test_mamba2_simple_forward_backward(device, cfg, mem_eff):
    m = Mamba2Simple(d_model=32, d_state=8, headdim=16, chunk_size=8, use_mem_eff_path=mem_eff,
                     **cfg).to(device)
    if m.learnable_init_states:
        with torch.no_grad():
            m.init_states.normal_()  # zeros at init; a gradient check needs more
    u = torch.randn(2, 19, 32, device=device)
    seq_idx = torch.tensor([[0] * 7 + [1] * 12, [0] * 19], dtype=torch.int32, device=device)
    # as in mamba-ssm, the fused path's gated norm works per group of B/C (the split op's
    # group_size = d_inner / ngroups), the unfused one over all of d_inner (the norm module's
    # group_size None)
    group = m.d_inner // m.ngroups if mem_eff else None
    check_against_reference(m, partial(mamba2_ref, m, norm_group=group), [u], seq_idx=seq_idx)


def test_mamba2_simple_state_dict():
    m = Mamba2Simple(d_model=32, d_state=8, headdim=16, learnable_init_states=True)
    assert [(k, tuple(v.shape)) for k, v in m.state_dict().items()] == [
        ("init_states", (4, 16, 8)),
        ("dt_bias", (4,)),
        ("A_log", (4,)),
        ("D", (4,)),
        ("in_proj.weight", (2 * 64 + 16 + 4, 32)),
        ("conv1d.weight", (80, 1, 4)),
        ("conv1d.bias", (80,)),
        ("norm.weight", (64,)),
        ("out_proj.weight", (32, 64)),
    ]
    assert not m.init_states.any() and m.norm.group_size is None
    with pytest.raises(ValueError, match="activation"):
        Mamba2Simple(d_model=32, headdim=16, activation="relu")


def test_mamba3_import_names_the_gap():
    with pytest.raises(ImportError, match="Mamba3.*not implemented by portssm"):
        from portssm.torch.modules import Mamba3  # noqa: F401
    with pytest.raises(ImportError, match="Mamba-3 scan kernels"):
        import portssm.torch.modules.mamba3  # noqa: F401


# ----------------------------------------------------------------------------- ssd_minimal


def test_ssd_minimal_matches_the_recurrence():
    from portssm.torch.modules.ssd_minimal import segsum, segsum_unstable, ssd_minimal_discrete
    from references import ssd_ref

    x = torch.randn(2, 12, 3, 4, dtype=torch.float64)
    dt = torch.rand(2, 12, 3, dtype=torch.float64) * 0.5
    A = -torch.rand(3, dtype=torch.float64) - 0.1
    B = torch.randn(2, 12, 1, 5, dtype=torch.float64)
    C = torch.randn(2, 12, 1, 5, dtype=torch.float64)
    init = torch.randn(2, 3, 4, 5, dtype=torch.float64)
    y, final = ssd_minimal_discrete(x * dt.unsqueeze(-1), A * dt, B, C, 4,
                                    initial_states=init.unsqueeze(1))
    y_ref, final_ref = ssd_ref(x, dt, A, B, C, initial_states=init)
    torch.testing.assert_close(y, y_ref)
    torch.testing.assert_close(final, final_ref)
    a = torch.randn(2, 6, dtype=torch.float64)
    torch.testing.assert_close(segsum(a), segsum_unstable(a))
    assert segsum(a)[0, 3, 1].item() == pytest.approx(a[0, 2:4].sum().item())
    assert torch.isinf(segsum(a)[0, 1, 3])
    with pytest.raises(ValueError, match="multiple of block_len"):
        ssd_minimal_discrete(x, A * dt, B, C, 5)
    with pytest.raises(ValueError, match="dtype"):
        ssd_minimal_discrete(x.float(), A * dt, B, C, 4)
