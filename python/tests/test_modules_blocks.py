"""portssm.torch.modules' MHA, GatedMLP and Block (mamba-ssm 2.3.2.post1's): forward and
backward against float64 formulas, parameters, and MHA's kv-cache decoding (per-call offsets
and the per-sequence offsets of graph decoding) against the full forward."""

from functools import partial

import pytest
import torch
import torch.nn as nn

from module_checks import assert_close_rel, check_against_reference
from module_references import block_ref, mha_ref, mlp_ref
from portssm.torch.generation import InferenceParams
from portssm.torch.modules import MHA, Block, GatedMLP, Mamba, Mamba2
from portssm.torch.norms import RMSNorm

# ----------------------------------------------------------------------------- MHA

MHA_CONFIGS = [
    pytest.param(dict(causal=True), id="causal"),
    pytest.param(dict(causal=False, qkv_proj_bias=False, out_proj_bias=False), id="full-nobias"),
    pytest.param(dict(causal=True, num_heads_kv=2, softmax_scale=0.3), id="gqa-scale"),
    pytest.param(dict(causal=True, head_dim=6, mlp_dim=100), id="head_dim-mlp"),
    pytest.param(dict(causal=True, d_conv=3), id="conv"),
    pytest.param(dict(causal=True, rotary_emb_dim=4), id="rotary"),
    pytest.param(dict(causal=True, rotary_emb_dim=8, rotary_emb_interleaved=True,
                      rotary_emb_base=500.0, num_heads_kv=1), id="rotary-interleaved-mqa"),
]


def _mha(device, **cfg):
    return MHA(embed_dim=32, num_heads=4, layer_idx=0, **cfg).to(device)


@pytest.mark.parametrize("cfg", MHA_CONFIGS)
def test_mha_forward_backward(device, cfg):
    m = _mha(device, **cfg)
    x = torch.randn(2, 11, 32, device=device)
    check_against_reference(m, partial(mha_ref, m), [x])


def test_mha_state_dict():
    m = MHA(embed_dim=32, num_heads=4, num_heads_kv=2, mlp_dim=100, d_conv=3, rotary_emb_dim=4)
    # head_dim 8, qkv 8 * (4 + 2 * 2) = 64, mlp_dim rounded up to 256, out_proj in 32 + 128
    assert [(k, tuple(v.shape)) for k, v in m.state_dict().items()] == [
        ("in_proj.weight", (64 + 256, 32)),
        ("in_proj.bias", (64 + 256,)),
        ("conv1d.weight", (64, 1, 3)),
        ("conv1d.bias", (64,)),
        ("out_proj.weight", (32, 32 + 128)),
        ("out_proj.bias", (32,)),
    ]  # the rotary inv_freq is a non-persistent buffer, as flash-attn's
    assert m.rotary_emb.inv_freq.shape == (2,)
    with pytest.raises(ValueError, match="num_heads_kv"):
        MHA(embed_dim=32, num_heads=4, num_heads_kv=3)
    with pytest.raises(ValueError, match="embed_dim"):
        MHA(embed_dim=30, num_heads=4)


DECODE_CONFIGS = [c for c in MHA_CONFIGS if c.values[0].get("causal")]


@pytest.mark.parametrize("graph_offsets", [False, True], ids=["seqlen_offset", "lengths"])
@pytest.mark.parametrize("cfg", DECODE_CONFIGS)
def test_mha_decode_matches_forward(device, cfg, graph_offsets):
    """Prefill, then one token at a time through the kv cache: the full forward's outputs.
    graph_offsets: offsets from lengths_per_sample, as cached-graph decoding runs it."""
    m = _mha(device, **cfg)
    x = torch.randn(2, 10, 32, device=device)
    lengths = torch.zeros(2, dtype=torch.int32, device=device) if graph_offsets else None
    params = InferenceParams(max_seqlen=12, max_batch_size=2, lengths_per_sample=lengths)
    with torch.no_grad():
        full = m(x)
        out = m(x[:, :4], inference_params=params)
        assert_close_rel(out, full[:, :4], "prefill", 1e-4)
        for t in range(4, 10):
            params.seqlen_offset = t
            if lengths is not None:
                lengths.fill_(t)
            assert_close_rel(m(x[:, t:t + 1], inference_params=params), full[:, t:t + 1],
                             "token %d" % t, 2e-4)
    kv_cache, conv_state = params.key_value_memory_dict[0]
    assert kv_cache.shape == (2, 12, 2, m.num_heads_kv, m.head_dim)
    assert (conv_state is None) == (m.d_conv == 0)


def test_mha_multi_token_decode_chunk(device):
    """A chunk of several new tokens after a prefill sees the cache and, causally, itself."""
    m = _mha(device, causal=True, rotary_emb_dim=4)
    x = torch.randn(1, 9, 32, device=device)
    params = InferenceParams(max_seqlen=9, max_batch_size=1)
    with torch.no_grad():
        full = m(x)
        m(x[:, :5], inference_params=params)
        params.seqlen_offset = 5
        assert_close_rel(m(x[:, 5:], inference_params=params), full[:, 5:], "chunk", 2e-4)


def test_mha_non_causal_decode_sees_the_cache_only(device):
    m = _mha(device, causal=False)
    x = torch.randn(2, 6, 32, device=device)
    params = InferenceParams(max_seqlen=6, max_batch_size=2)
    with torch.no_grad():
        m(x[:, :5], inference_params=params)
        params.seqlen_offset = 5
        last = m(x[:, 5:], inference_params=params)
        # the last token of a non-causal pass over all six sees the same six keys
        assert_close_rel(last, m(x)[:, 5:], "non-causal step", 2e-4)


def test_mha_cache_too_small():
    m = MHA(embed_dim=32, num_heads=4, causal=True, layer_idx=0)
    params = InferenceParams(max_seqlen=4, max_batch_size=1)
    with pytest.raises(ValueError, match="too small"):
        m(torch.randn(1, 5, 32), inference_params=params)


# ----------------------------------------------------------------------------- GatedMLP


def test_gated_mlp(device):
    m = GatedMLP(24, hidden_features=40, out_features=16, bias=True).to(device)
    # hidden width rounded up to multiple_of (128)
    assert m.fc1.weight.shape == (256, 24) and m.fc2.weight.shape == (16, 128)
    assert GatedMLP(48, multiple_of=32).fc2.weight.shape == (48, 128)  # int(8*48/3) = 128
    check_against_reference(m, mlp_ref, [torch.randn(3, 5, 24, device=device)])


# ----------------------------------------------------------------------------- Block


def _block(device, norm, fused, mlp, residual_in_fp32, mixer="mamba"):
    norm_cls = partial(RMSNorm if norm == "rms" else nn.LayerNorm, eps=1e-5)
    mixer_cls = {"mamba": partial(Mamba, d_state=8, layer_idx=0),
                 "mamba2": partial(Mamba2, d_state=8, headdim=16, layer_idx=0),
                 "mha": partial(MHA, num_heads=4, causal=True, layer_idx=0)}[mixer]
    mlp_cls = partial(GatedMLP, hidden_features=48) if mlp else nn.Identity
    return Block(32, mixer_cls, mlp_cls, norm_cls=norm_cls, fused_add_norm=fused,
                 residual_in_fp32=residual_in_fp32).to(device)


@pytest.mark.parametrize("mixer", ["mamba", "mamba2", "mha"])
@pytest.mark.parametrize("mlp", [False, True], ids=["no-mlp", "mlp"])
@pytest.mark.parametrize("fused", [False, True], ids=["unfused", "fused"])
@pytest.mark.parametrize("norm", ["rms", "layer"])
def test_block_forward_backward(device, norm, fused, mlp, mixer):
    b = _block(device, norm, fused, mlp, residual_in_fp32=True, mixer=mixer)
    if norm == "layer":
        with torch.no_grad():  # not the identity init, so the norm's bias is exercised
            b.norm.bias.normal_()
    hidden = torch.randn(2, 9, 32, device=device)
    residual = torch.randn(2, 9, 32, device=device)

    def run(module, h, r):
        out, res = module(h, r)
        assert res.dtype == torch.float32
        return torch.cat([out, res], dim=-1)

    def ref(p, h, r):
        return torch.cat(block_ref(b, p, h, r), dim=-1)

    check_against_reference(_Wrap(b, run), lambda p, h, r: ref(_unwrap(p), h, r),
                            [hidden, residual])


class _Wrap(nn.Module):
    """module(h, r) -> one tensor, so check_against_reference compares both of Block's
    outputs."""

    def __init__(self, inner, fn):
        super().__init__()
        self.inner = inner
        self.fn = fn

    def forward(self, *args):
        return self.fn(self.inner, *args)


def _unwrap(p):
    return {k[len("inner."):]: v for k, v in p.items()}


def test_block_first_layer_and_residual_dtype(device):
    for fused in (False, True):
        b = _block(device, "rms", fused, mlp=False, residual_in_fp32=True).to(torch.bfloat16)
        h = torch.randn(2, 5, 32, device=device, dtype=torch.bfloat16)
        out, res = b(h)  # no residual: the first block
        assert out.dtype == torch.bfloat16 and res.dtype == torch.float32
        torch.testing.assert_close(res, h.float())
        b16 = _block(device, "rms", fused, mlp=False, residual_in_fp32=False).to(torch.bfloat16)
        assert b16(h)[1].dtype == torch.bfloat16


def test_block_fused_rejects_other_norms():
    with pytest.raises(ValueError, match="fused_add_norm"):
        Block(16, partial(Mamba, layer_idx=0), nn.Identity, norm_cls=partial(nn.GroupNorm, 1),
              fused_add_norm=True)


def test_block_allocates_its_mixers_cache():
    b = _block("cpu", "rms", True, mlp=True, residual_in_fp32=True)
    conv_state, ssm_state = b.allocate_inference_cache(3, 10)
    assert conv_state.shape == (3, 64, 4) and ssm_state.shape == (3, 64, 8)
