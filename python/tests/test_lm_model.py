"""portssm.torch.models (mamba-ssm 2.3.2.post1's MambaConfig, MixerModel, MambaLMHeadModel,
create_block, _init_weights) and portssm.torch.hub: logits and gradients against float64
formulas, the checkpoint's keys and shapes, the initialisation, save_pretrained /
from_pretrained from a directory and from a Hugging Face cache (no network)."""

import json
import math
import os
import subprocess
import sys
import textwrap

import pytest
import torch
import torch.nn as nn

from module_checks import assert_close_rel, check_against_reference
from module_references import lm_ref
from portssm.torch.models import MambaConfig, MambaLMHeadModel, MixerModel, create_block
from portssm.torch.models.mixer_seq import _init_weights
from portssm.torch.modules import MHA, Mamba2
from portssm.torch.norms import RMSNorm

CONFIGS = {
    "mamba1": dict(d_model=32, n_layer=2, vocab_size=50, ssm_cfg=dict(d_state=8)),
    "mamba2-layernorm-unfused": dict(
        d_model=32, n_layer=2, vocab_size=64, rms_norm=False, fused_add_norm=False,
        residual_in_fp32=False, ssm_cfg=dict(layer="Mamba2", d_state=8, headdim=16)),
    "hybrid-mlp-untied": dict(
        d_model=32, n_layer=3, vocab_size=40, d_intermediate=48, tie_embeddings=False,
        ssm_cfg=dict(layer="Mamba2", d_state=8, headdim=16, ngroups=2, chunk_size=8),
        attn_layer_idx=[1], attn_cfg=dict(num_heads=4, causal=True, rotary_emb_dim=4)),
}


@pytest.mark.parametrize("name", list(CONFIGS))
def test_lm_forward_backward(device, name):
    model = MambaLMHeadModel(MambaConfig(**CONFIGS[name]), device=device)
    ids = torch.randint(0, CONFIGS[name]["vocab_size"], (2, 13), device=device)

    class Logits(nn.Module):  # ids -> logits, for the comparison helper
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, ids):
            return self.model(ids).logits

    p_prefix = "model."
    check_against_reference(
        Logits(), lambda p, ids: lm_ref(model, {k[len(p_prefix):]: v for k, v in p.items()},
                                        ids.long()), [ids], tol=3e-3, grad_tol=5e-3)


def test_lm_num_last_tokens_and_padded_vocab(device):
    model = MambaLMHeadModel(MambaConfig(**CONFIGS["mamba1"]), device=device)
    assert model.lm_head.weight.shape == (56, 32)  # 50 padded to a multiple of 8
    assert model.lm_head.weight is model.backbone.embedding.weight  # tied
    ids = torch.randint(0, 50, (2, 7), device=device)
    with torch.no_grad():
        full = model(ids).logits
        last = model(ids, num_last_tokens=2).logits
    assert full.shape == (2, 7, 56) and last.shape == (2, 2, 56)
    torch.testing.assert_close(last, full[:, -2:])
    assert type(model(ids)).__name__ == "CausalLMOutput" and model(ids)._fields == ("logits",)


def test_lm_state_dict_keys_and_shapes():
    cfg = MambaConfig(d_model=16, n_layer=2, vocab_size=50, d_intermediate=40,
                      ssm_cfg=dict(d_state=4), attn_layer_idx=[1],
                      attn_cfg=dict(num_heads=2, causal=True, rotary_emb_dim=4))
    # d_inner 32, dt_rank 1; GatedMLP hidden 40 -> 128; MHA head_dim 8, qkv 8 * (2 + 2 * 2)
    expected = [
        ("backbone.embedding.weight", (56, 16)),
        ("backbone.layers.0.norm.weight", (16,)),
        ("backbone.layers.0.mixer.A_log", (32, 4)),
        ("backbone.layers.0.mixer.D", (32,)),
        ("backbone.layers.0.mixer.in_proj.weight", (64, 16)),
        ("backbone.layers.0.mixer.conv1d.weight", (32, 1, 4)),
        ("backbone.layers.0.mixer.conv1d.bias", (32,)),
        ("backbone.layers.0.mixer.x_proj.weight", (9, 32)),
        ("backbone.layers.0.mixer.dt_proj.weight", (32, 1)),
        ("backbone.layers.0.mixer.dt_proj.bias", (32,)),
        ("backbone.layers.0.mixer.out_proj.weight", (16, 32)),
        ("backbone.layers.0.norm2.weight", (16,)),
        ("backbone.layers.0.mlp.fc1.weight", (256, 16)),
        ("backbone.layers.0.mlp.fc2.weight", (16, 128)),
        ("backbone.layers.1.norm.weight", (16,)),
        ("backbone.layers.1.mixer.in_proj.weight", (48, 16)),
        ("backbone.layers.1.mixer.in_proj.bias", (48,)),
        ("backbone.layers.1.mixer.out_proj.weight", (16, 16)),
        ("backbone.layers.1.mixer.out_proj.bias", (16,)),
        ("backbone.layers.1.norm2.weight", (16,)),
        ("backbone.layers.1.mlp.fc1.weight", (256, 16)),
        ("backbone.layers.1.mlp.fc2.weight", (16, 128)),
        ("backbone.norm_f.weight", (16,)),
        ("lm_head.weight", (56, 16)),
    ]
    model = MambaLMHeadModel(cfg)
    assert [(k, tuple(v.shape)) for k, v in model.state_dict().items()] == expected
    m2 = MambaLMHeadModel(MambaConfig(d_model=16, n_layer=1, vocab_size=16,
                                      ssm_cfg=dict(layer="Mamba2", d_state=8, headdim=8)))
    # d_inner 32, 4 heads; in_proj 2*32 + 2*8 + 4 = 84; conv 32 + 16
    assert [(k, tuple(v.shape)) for k, v in m2.state_dict().items()] == [
        ("backbone.embedding.weight", (16, 16)),
        ("backbone.layers.0.norm.weight", (16,)),
        ("backbone.layers.0.mixer.dt_bias", (4,)),
        ("backbone.layers.0.mixer.A_log", (4,)),
        ("backbone.layers.0.mixer.D", (4,)),
        ("backbone.layers.0.mixer.in_proj.weight", (84, 16)),
        ("backbone.layers.0.mixer.conv1d.weight", (48, 1, 4)),
        ("backbone.layers.0.mixer.conv1d.bias", (48,)),
        ("backbone.layers.0.mixer.norm.weight", (32,)),
        ("backbone.layers.0.mixer.out_proj.weight", (16, 32)),
        ("backbone.norm_f.weight", (16,)),
        ("lm_head.weight", (16, 16)),
    ]


def test_lm_module_tree():
    cfg = MambaConfig(**CONFIGS["hybrid-mlp-untied"])
    model = MambaLMHeadModel(cfg)
    layers = model.backbone.layers
    assert [type(layer.mixer) for layer in layers] == [Mamba2, MHA, Mamba2]
    assert [layer.layer_idx for layer in layers] == [0, 1, 2]
    assert [layer.mixer.layer_idx for layer in layers] == [0, 1, 2]
    assert isinstance(layers[0].norm, RMSNorm) and layers[0].fused_add_norm
    assert layers[0].residual_in_fp32 and isinstance(model.backbone.norm_f, RMSNorm)
    assert cfg.ssm_cfg["layer"] == "Mamba2"  # create_block does not consume the caller's dict
    assert model.lm_head.weight is not model.backbone.embedding.weight
    plain = MixerModel(d_model=16, n_layer=1, d_intermediate=0, vocab_size=10)
    assert isinstance(plain.norm_f, nn.LayerNorm) and not plain.fused_add_norm
    with pytest.raises(ValueError, match="Invalid ssm_layer"):
        create_block(16, 0, ssm_cfg=dict(layer="Mamba3"), layer_idx=0)


def test_init_weights():
    torch.manual_seed(5)
    cfg = MambaConfig(d_model=64, n_layer=4, vocab_size=64, d_intermediate=96,
                      ssm_cfg=dict(d_state=8), rms_norm=False, fused_add_norm=False)
    model = MambaLMHeadModel(cfg, initializer_cfg=dict(initializer_range=0.05))
    emb = model.backbone.embedding.weight
    assert abs(emb.std().item() - 0.05) < 0.005 and abs(emb.mean().item()) < 0.005
    for layer in model.backbone.layers:
        # out_proj / fc2: kaiming-uniform(a=sqrt 5) bound 1/sqrt(fan_in), scaled by
        # 1/sqrt(n_layer): MixerModel's pass divides by sqrt(2 * n_layer) (an MLP per block),
        # then MambaLMHeadModel's pass (n_residuals_per_layer 1) draws them again, as mamba-ssm
        for lin in (layer.mixer.out_proj, layer.mlp.fc2):
            bound = 1 / math.sqrt(lin.in_features) / math.sqrt(4)
            w = lin.weight
            assert w.abs().max() <= bound and w.abs().max() > 0.9 * bound
        dt_bias = torch.nn.functional.softplus(layer.mixer.dt_proj.bias)
        assert dt_bias.min() >= 1e-3 - 1e-6 and dt_bias.max() <= 0.1 + 1e-6  # kept (_no_reinit)
    lin = nn.Linear(3, 3)
    _init_weights(lin, n_layer=1)
    assert not lin.bias.any()
    # one seed, one model
    torch.manual_seed(11)
    a = MambaLMHeadModel(MambaConfig(**CONFIGS["mamba1"]))
    torch.manual_seed(11)
    b = MambaLMHeadModel(MambaConfig(**CONFIGS["mamba1"]))
    for k, v in a.state_dict().items():
        assert torch.equal(v, b.state_dict()[k]), k


def _same_state(a, b):
    sa, sb = a.state_dict(), b.state_dict()
    assert list(sa) == list(sb)
    for k in sa:
        assert sa[k].dtype == sb[k].dtype and torch.equal(sa[k].float(), sb[k].float()), k


def test_save_and_load_pretrained_directory(tmp_path):
    cfg = MambaConfig(**CONFIGS["hybrid-mlp-untied"])
    model = MambaLMHeadModel(cfg)
    out = tmp_path / "nested" / "ckpt"
    model.save_pretrained(str(out))
    assert sorted(os.listdir(out)) == ["config.json", "pytorch_model.bin"]
    with open(out / "config.json") as f:
        assert json.load(f) == cfg.__dict__
    loaded = MambaLMHeadModel.from_pretrained(str(out))
    assert loaded.config == cfg
    _same_state(model, loaded)
    ids = torch.randint(0, 40, (1, 6))
    with torch.no_grad():
        torch.testing.assert_close(loaded(ids).logits, model(ids).logits, rtol=0, atol=0)
    half = MambaLMHeadModel.from_pretrained(out, dtype=torch.bfloat16)
    assert half.lm_head.weight.dtype == torch.bfloat16


def test_from_pretrained_is_strict(tmp_path):
    model = MambaLMHeadModel(MambaConfig(**CONFIGS["mamba1"]))
    model.save_pretrained(tmp_path)
    sd = torch.load(tmp_path / "pytorch_model.bin")
    sd["backbone.layers.0.mixer.extra"] = torch.zeros(1)
    torch.save(sd, tmp_path / "pytorch_model.bin")
    with pytest.raises(RuntimeError, match="Unexpected key"):
        MambaLMHeadModel.from_pretrained(tmp_path)


def test_safetensors_and_missing_files(tmp_path):
    pytest.importorskip("safetensors", reason="safetensors not installed")
    from safetensors.torch import save_file

    from portssm.torch.hub import load_config_hf, load_state_dict_hf

    model = MambaLMHeadModel(MambaConfig(**CONFIGS["mamba2-layernorm-unfused"]))
    with open(tmp_path / "config.json", "w") as f:
        json.dump(model.config.__dict__, f)
    with pytest.raises(FileNotFoundError, match="pytorch_model.bin"):
        load_state_dict_hf(str(tmp_path))
    save_file({k: v.contiguous() for k, v in model.state_dict().items()
               if k != "lm_head.weight"}, str(tmp_path / "model.safetensors"))
    sd = load_state_dict_hf(str(tmp_path), dtype=torch.float16)
    assert all(v.dtype == torch.float16 for v in sd.values())
    loaded = MambaLMHeadModel.from_pretrained(str(tmp_path))  # tied: lm_head from the embedding
    _same_state(model, loaded)
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="config.json"):
        load_config_hf(str(tmp_path / "empty"))


def test_from_pretrained_hf_cache_layout(tmp_path):
    """A Hub id resolved from the Hugging Face cache (models--org--name/snapshots/<rev>/, refs/
    main), offline: the layout a download leaves, no network."""
    pytest.importorskip("huggingface_hub", reason="huggingface_hub not installed")
    cache = tmp_path / "hub"
    revision = "0123456789abcdef0123456789abcdef01234567"
    snapshot = cache / "models--portssm-test--tiny-mamba" / "snapshots" / revision
    model = MambaLMHeadModel(MambaConfig(**CONFIGS["mamba1"]))
    model.save_pretrained(str(snapshot))
    (cache / "models--portssm-test--tiny-mamba" / "refs").mkdir()
    (cache / "models--portssm-test--tiny-mamba" / "refs" / "main").write_text(revision)
    torch.save({k: v for k, v in model.state_dict().items()}, tmp_path / "expected.pt")
    script = textwrap.dedent("""
        import sys, torch
        from portssm.torch.models import MambaLMHeadModel
        from portssm.torch.hub import load_config_hf
        model = MambaLMHeadModel.from_pretrained("portssm-test/tiny-mamba")
        expected = torch.load(sys.argv[1])
        assert list(model.state_dict()) == list(expected)
        assert all(torch.equal(model.state_dict()[k], v) for k, v in expected.items())
        assert load_config_hf("portssm-test/tiny-mamba")["d_model"] == 32
        try:
            MambaLMHeadModel.from_pretrained("portssm-test/not-cached")
        except Exception as exc:  # offline and not cached: huggingface_hub says so
            print("missing:", type(exc).__name__)
        print("ok")
    """)
    env = dict(os.environ, HF_HUB_CACHE=str(cache), HF_HUB_OFFLINE="1",
               HF_HOME=str(tmp_path / "home"))
    run = subprocess.run([sys.executable, "-c", script, str(tmp_path / "expected.pt")],
                         env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "ok" in run.stdout and "missing: " in run.stdout, run.stdout


@pytest.mark.parametrize("name", ["mamba1", "hybrid-mlp-untied"])
def test_lm_bfloat16(device, name):
    """A bf16 model (16-bit weights, activations, caches; float32 residual stream) follows the
    float32 model within bf16 rounding, trains, and decodes the same with and without cg:
    the same tokens where both run the same arithmetic (cpu: cg steps run eagerly on the plain
    path's keys; Mamba layers alone), the same scores within bf16 rounding where a CUDA graph
    attends the whole cache under a mask (bitwise equality would fail at near-ties)."""
    model = MambaLMHeadModel(MambaConfig(**CONFIGS[name]), device=device)
    half = MambaLMHeadModel(MambaConfig(**CONFIGS[name]), device=device, dtype=torch.bfloat16)
    half.load_state_dict(model.state_dict())
    ids = torch.randint(0, CONFIGS[name]["vocab_size"], (2, 11), device=device)
    logits = half(ids).logits
    assert logits.dtype == torch.bfloat16
    with torch.no_grad():
        assert_close_rel(logits, model(ids).logits, "bf16 logits", 5e-2)
    logits.float().pow(2).mean().backward()
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in half.parameters())
    state = half.allocate_inference_cache(2, 16)[0]
    assert all(t.dtype == torch.bfloat16 for t in state if t is not None)
    out = half.generate(ids, max_length=16, output_scores=True, return_dict_in_generate=True)
    forced = half.generate(ids, max_length=16, cg=True, teacher_outputs=out.sequences,
                           output_scores=True, return_dict_in_generate=True)
    assert_close_rel(torch.stack(forced.scores), torch.stack(out.scores), "cg scores", 5e-2)
    if device == "cpu" or "attn_layer_idx" not in CONFIGS[name]:
        assert torch.equal(out.sequences, half.generate(ids, max_length=16, cg=True))
