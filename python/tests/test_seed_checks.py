"""Issue 40 item 5: the checks every install guide of these kernels ends with, verbatim but for
the device (cpu here and in CI; cuda where torch sees a GPU), through the `mamba_ssm` import
name (portssm's alias where mamba-ssm is not installed)."""

import pytest
import torch

import conftest


@pytest.fixture(autouse=True)
def _aliased_mamba_ssm():
    import mamba_ssm
    from _portssm_aliases import aliased

    if not conftest.ALIASES_ACTIVE or not aliased(mamba_ssm):
        pytest.skip("mamba_ssm is not portssm's alias here (a real mamba-ssm is installed, or "
                    "PORTSSM_NO_ALIAS is set)")


def test_mamba_snippet(device):
    from mamba_ssm import Mamba
    model = Mamba(d_model=64, d_state=16, d_conv=4, expand=2).to(device)
    x = torch.randn(2, 128, 64, device=device, requires_grad=True)
    y = model(x); y.sum().backward(); print(y.shape, x.grad.shape)  # noqa: E702
    assert y.shape == (2, 128, 64) and x.grad.shape == (2, 128, 64)
    assert torch.isfinite(x.grad).all() and x.grad.abs().sum() > 0


def test_mamba2_snippet(device):
    from mamba_ssm import Mamba2
    model = Mamba2(d_model=256, d_state=64, headdim=32).to(device)
    x = torch.randn(2, 128, 256, device=device, requires_grad=True)
    y = model(x); y.sum().backward(); print(y.shape, x.grad.shape)  # noqa: E702
    assert y.shape == (2, 128, 256) and x.grad.shape == (2, 128, 256)
    assert torch.isfinite(x.grad).all() and x.grad.abs().sum() > 0


def test_lm_head_model_snippet(device):
    from mamba_ssm import MambaLMHeadModel
    from mamba_ssm.models.config_mamba import MambaConfig
    model = MambaLMHeadModel(MambaConfig(d_model=256, n_layer=4, vocab_size=1000)).to(device)
    input_ids = torch.randint(0, 1000, (2, 16), device=device)
    logits = model(input_ids).logits
    logits.sum().backward()
    print(logits.shape)
    assert logits.shape == (2, 16, 1000)
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in model.parameters())
    out = model.generate(input_ids, max_length=64)
    out_cg = model.generate(input_ids, max_length=64, cg=True)
    print(out.shape, out_cg.shape)
    assert out.shape == out_cg.shape == (2, 64)
    assert torch.equal(out[:, :16], input_ids) and torch.equal(out, out_cg)
