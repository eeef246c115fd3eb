"""transformers' Mamba and Mamba-2 on portssm with patch_transformers(): small random models from
configs (no download), run once on their own torch path and once patched; the patched run must
go through portssm (calls counted per kernel) and give the same logits and parameter gradients.
transformers 5.x calls its kernel functions for cpu tensors too, so this runs in CI on cpu.
The import aliases being active (conftest), the two modeling files are imported again without
them, so that the unpatched models run transformers' own torch code."""

import sys

import pytest
import torch

transformers = pytest.importorskip("transformers")

from conftest import reimport_without_aliases, require_backward  # noqa: E402
from portssm.torch.transformers_patch import (MINIMUM_MAMBA2,  # noqa: E402
                                              MINIMUM_TRANSFORMERS)

_MODELING = {}


def _modeling(family):
    """transformers' modeling file of the family, bound to its torch code (imported once more
    with the aliases off, in sys.modules, where patch_transformers() finds it)."""
    if family not in _MODELING:
        try:
            import importlib

            importlib.import_module("transformers.models.%s" % family)
        except ImportError:
            pytest.skip("transformers %s has no %s" % (transformers.__version__, family))
        _MODELING[family] = reimport_without_aliases(
            "transformers.models.%s.modeling_%s" % (family, family))
    return _MODELING[family]


def _mamba(device):
    cfg = transformers.MambaConfig(vocab_size=64, hidden_size=16, state_size=4, num_hidden_layers=2,
                                   expand=2, conv_kernel=4, time_step_rank=4, use_cache=True)
    torch.manual_seed(torch.initial_seed() % (2 ** 31))
    return _modeling("mamba").MambaForCausalLM(cfg).to(device)


def _norm_is_grouped():
    """Whether this transformers' Mamba-2 gated RMSNorm normalises per group of channels, as
    mamba-ssm's fused kernel (and portssm's drop-in) does.  Before that fix (transformers 5.17 on
    the H200 has it) the torch path normalises over all channels: the model's own slow path then
    differs from the kernel path whenever n_groups > 1, with mamba-ssm as with portssm."""
    import inspect

    modeling_mamba2 = _modeling("mamba2")
    norm = getattr(modeling_mamba2, "Mamba2RMSNormGated", None)  # (its name from 5.25)
    norm = norm or modeling_mamba2.MambaRMSNormGated
    return "group_size" in inspect.signature(norm.__init__).parameters


def _mamba2(device):
    _modeling("mamba2")  # (skips where transformers has no Mamba-2)
    cfg = transformers.Mamba2Config(vocab_size=64, hidden_size=32, state_size=8, num_heads=4,
                                    head_dim=16, n_groups=2 if _norm_is_grouped() else 1,
                                    num_hidden_layers=2, expand=2,
                                    conv_kernel=4, chunk_size=8, use_cache=True)
    return _modeling("mamba2").Mamba2ForCausalLM(cfg).to(device)


def _older_than(version):
    from portssm.torch.transformers_patch import _version_tuple

    return _version_tuple(transformers.__version__) < _version_tuple(version)


def _bindings(modeling):
    """What patch_transformers() may change in a modeling module, by identity: its globals and
    its classes' attributes (transformers before 5.16 also keeps a cache of kernel modules)."""
    out = {("global", k): id(v) for k, v in vars(modeling).items()}
    for k, cls in vars(modeling).items():
        if isinstance(cls, type) and cls.__module__ == modeling.__name__:
            out.update({(k, a): id(v) for a, v in vars(cls).items()})
    hub = sys.modules.get("transformers.integrations.hub_kernels")
    for k, v in getattr(hub, "_KERNEL_MODULE_MAPPING", {}).items():
        out[("lazy_load_kernel", k)] = id(v)
    return out


def _forward_backward(model, ids):
    model.zero_grad()
    out = model(ids, labels=ids)
    out.loss.backward()
    grads = {n: p.grad.detach().clone() for n, p in model.named_parameters() if p.grad is not None}
    return out.logits.detach().clone(), grads


def _decode_logits(model, ids, steps=3):
    """Greedy generation with the cache (prefill, then one token per step through the decode
    kernels); the logits of every step."""
    with torch.no_grad():
        out = model.generate(ids, max_new_tokens=steps, do_sample=False, use_cache=True,
                             output_logits=True, return_dict_in_generate=True)
    return torch.stack(out.logits)


def _compare(a, b, what, rtol=2e-4, atol=2e-4):
    torch.testing.assert_close(a, b, rtol=rtol, atol=atol, msg=lambda m: "%s: %s" % (what, m))


@pytest.mark.parametrize("family", ["mamba", "mamba2"])
def test_transformers_fast_path_through_portssm(device, family):
    import portssm.torch as pt

    model = (_mamba if family == "mamba" else _mamba2)(device)
    ids = torch.randint(0, 64, (2, 12), device=device)
    training = not require_backward(device)

    model.eval()
    slow_eval = model(ids).logits.detach().clone()
    slow_decode = _decode_logits(model, ids)
    if training:
        model.train()
        slow_logits, slow_grads = _forward_backward(model, ids)

    modeling = _modeling(family)
    before = _bindings(modeling)
    if family == "mamba2" and _older_than(MINIMUM_MAMBA2):
        with pytest.warns(UserWarning, match="transformers >= %s runs Mamba-2" % MINIMUM_MAMBA2):
            patch = pt.patch_transformers()
        try:
            assert not [b for b in patch.bound if b[0] is modeling], patch.bound
            assert _bindings(modeling) == before
        finally:
            patch.restore()
        pytest.skip("transformers %s's Mamba-2 is left on its torch code (before %s)"
                    % (transformers.__version__, MINIMUM_MAMBA2))
    patch = pt.patch_transformers()
    try:
        assert _bindings(modeling) != before  # something of the family is on portssm now
        model.eval()
        patch.calls.clear()
        _compare(model(ids).logits, slow_eval, "eval logits")
        assert patch.calls["causal_conv1d_fn"] > 0, dict(patch.calls)
        if family == "mamba":
            assert patch.calls["selective_scan_fn"] > 0, dict(patch.calls)
        else:
            assert patch.calls["mamba_chunk_scan_combined"] > 0, dict(patch.calls)
        patch.calls.clear()
        _compare(_decode_logits(model, ids), slow_decode, "decode logits")
        assert patch.calls["causal_conv1d_update"] > 0, dict(patch.calls)
        assert patch.calls["selective_state_update"] > 0, dict(patch.calls)
        if training:
            model.train()
            patch.calls.clear()
            fast_logits, fast_grads = _forward_backward(model, ids)
            # Mamba-2: the fused kernel, or (transformers 5.25, whose training forward has a
            # cache too) the conv and the chunk scan; either way portssm's backward
            expect = ["mamba_inner_fn"] if family == "mamba" else [
                "mamba_split_conv1d_scan_combined", "mamba_chunk_scan_combined"]
            assert any(patch.calls[e] > 0 for e in expect), dict(patch.calls)
            _compare(fast_logits, slow_logits, "training logits")
            assert fast_grads.keys() == slow_grads.keys()
            for name in slow_grads:
                _compare(fast_grads[name], slow_grads[name], "grad of " + name,
                         rtol=2e-3, atol=2e-4)
        print("%s ran through portssm: %s" % (family, dict(patch.calls)))
    finally:
        patch.restore()
    # restored: every binding as it was, the torch path again, no portssm call
    assert _bindings(modeling) == before
    patch.calls.clear()
    model.eval()
    model(ids)
    assert sum(patch.calls.values()) == 0
    if not training:
        pytest.xfail("backward ops missing on %s: training path not compared" % device)


@pytest.mark.parametrize("version", ["4.38.2", "3.5.1", "4.39.0.dev0"])
def test_patch_transformers_names_the_minimum_version(version):
    """Below the oldest checked transformers the patch refuses with the minimum and the
    alternative; from it on the version check passes."""
    from portssm.torch import transformers_patch

    if transformers_patch._version_tuple(version) >= transformers_patch._version_tuple(
            MINIMUM_TRANSFORMERS):
        transformers_patch._check_version(version)
        return
    with pytest.raises(ImportError, match=r"transformers >= %s .*this is %s.*import aliases"
                       % (MINIMUM_TRANSFORMERS, version)):
        transformers_patch._check_version(version)
