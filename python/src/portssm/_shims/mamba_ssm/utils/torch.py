"""mamba_ssm.utils.torch on portssm (portssm.torch.amp): custom_fwd, custom_bwd,
custom_amp_decorator."""

from portssm.torch.amp import custom_amp_decorator, custom_bwd, custom_fwd

__all__ = ["custom_fwd", "custom_bwd", "custom_amp_decorator"]
