"""The module layer under mamba-ssm's import names (portssm's alias): each of
mamba_ssm.modules.*, mamba_ssm.models.*, mamba_ssm.utils.* gives portssm's objects, with the
public names of mamba-ssm 2.3.2.post1's module (written out here), and Mamba-3's gap is an
ImportError naming it."""

import importlib

import pytest
import torch

import conftest

# module -> (names users import from it, the portssm module that defines the first name)
SHIMS = {
    "mamba_ssm.modules.mamba_simple": (
        ["Mamba", "selective_scan_fn", "mamba_inner_fn", "causal_conv1d_fn",
         "causal_conv1d_update", "selective_state_update", "RMSNorm", "layer_norm_fn",
         "rms_norm_fn"], "portssm.torch.modules.mamba1"),
    "mamba_ssm.modules.mamba2": (
        ["Mamba2", "causal_conv1d_fn", "causal_conv1d_update", "causal_conv1d_varlen_states",
         "selective_state_update", "RMSNormGated", "mamba_chunk_scan_combined",
         "mamba_split_conv1d_scan_combined"], "portssm.torch.modules.mamba2"),
    "mamba_ssm.modules.mamba2_simple": (
        ["Mamba2Simple", "causal_conv1d_fn", "RMSNormGated", "LayerNorm",
         "mamba_chunk_scan_combined", "mamba_split_conv1d_scan_combined"],
        "portssm.torch.modules.mamba2_simple"),
    "mamba_ssm.modules.block": (["Block", "RMSNorm", "layer_norm_fn"],
                                "portssm.torch.modules.block"),
    "mamba_ssm.modules.mlp": (["GatedMLP"], "portssm.torch.modules.mlp"),
    "mamba_ssm.modules.mha": (["MHA", "_update_kv_cache", "RotaryEmbedding", "causal_conv1d_fn",
                               "causal_conv1d_update"], "portssm.torch.modules.mha"),
    "mamba_ssm.modules.ssd_minimal": (
        ["ssd_minimal_discrete", "segsum", "segsum_unstable", "mamba_chunk_scan_combined"],
        "portssm.torch.modules.ssd_minimal"),
    "mamba_ssm.models.config_mamba": (["MambaConfig"], "portssm.torch.models.config"),
    "mamba_ssm.models.mixer_seq_simple": (
        ["MambaLMHeadModel", "MixerModel", "create_block", "_init_weights", "MambaConfig",
         "Mamba", "Mamba2", "MHA", "GatedMLP", "Block", "GenerationMixin", "load_config_hf",
         "load_state_dict_hf", "RMSNorm", "layer_norm_fn", "rms_norm_fn"],
        "portssm.torch.models.mixer_seq"),
    "mamba_ssm.utils.generation": (
        ["InferenceParams", "modify_logits_for_min_p_filtering",
         "modify_logits_for_top_k_filtering", "modify_logits_for_top_p_filtering",
         "modify_logit_for_repetition_penalty", "sample", "decode", "GenerationMixin",
         "DecodingCGCache", "update_graph_cache", "capture_graph"],
        "portssm.torch.generation.params"),
    "mamba_ssm.utils.hf": (["load_config_hf", "load_state_dict_hf"], "portssm.torch.hub"),
    "mamba_ssm.utils.torch": (["custom_fwd", "custom_bwd", "custom_amp_decorator"],
                              "portssm.torch.amp"),
}


@pytest.fixture(autouse=True)
def _aliased():
    import mamba_ssm
    from _portssm_aliases import aliased

    if not conftest.ALIASES_ACTIVE or not aliased(mamba_ssm):
        pytest.skip("mamba_ssm is not portssm's alias here (a real mamba-ssm is installed, or "
                    "PORTSSM_NO_ALIAS is set)")


@pytest.mark.parametrize("name", list(SHIMS))
def test_shim_names_are_portssms(name):
    from _portssm_aliases import aliased

    names, home = SHIMS[name]
    shim = importlib.import_module(name)
    assert aliased(shim), shim.__file__
    for attr in names:
        value = getattr(shim, attr)
        module = getattr(value, "__module__", "") or ""
        assert module.startswith("portssm."), (attr, module)
    first = getattr(shim, names[0])
    assert first is getattr(importlib.import_module(home), names[0])


def test_top_level_names():
    import mamba_ssm
    import portssm.torch.models as models
    import portssm.torch.modules as modules

    assert mamba_ssm.Mamba is modules.Mamba and mamba_ssm.Mamba2 is modules.Mamba2
    assert mamba_ssm.MambaLMHeadModel is models.MambaLMHeadModel
    from mamba_ssm.modules.mamba_simple import Mamba
    from mamba_ssm.models.mixer_seq_simple import MambaLMHeadModel
    assert Mamba is modules.Mamba and MambaLMHeadModel is models.MambaLMHeadModel


def test_mamba3_gap():
    with pytest.raises(ImportError, match="Mamba3.*not implemented by portssm"):
        from mamba_ssm.modules.mamba3 import Mamba3  # noqa: F401


def test_generation_reexports_transformers_types():
    transformers = pytest.importorskip("transformers", reason="transformers not installed")
    from mamba_ssm.utils import generation

    assert generation.TextStreamer is transformers.TextStreamer
    assert generation.GenerateDecoderOnlyOutput is \
        transformers.generation.GenerateDecoderOnlyOutput
    with pytest.raises(AttributeError):
        generation.no_such_name


def test_custom_fwd_bwd_decorate_a_function():
    from mamba_ssm.utils.torch import custom_bwd, custom_fwd

    class Double(torch.autograd.Function):
        @staticmethod
        @custom_fwd
        def forward(ctx, x):
            return 2 * x

        @staticmethod
        @custom_bwd
        def backward(ctx, g):
            return 2 * g

    x = torch.randn(3, requires_grad=True)
    Double.apply(x).sum().backward()
    assert torch.equal(x.grad, torch.full((3,), 2.0))
