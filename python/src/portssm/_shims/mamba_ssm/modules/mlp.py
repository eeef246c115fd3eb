"""mamba_ssm.modules.mlp: GatedMLP on portssm (portssm.torch.modules.mlp)."""

from portssm.torch.modules.mlp import GatedMLP

__all__ = ["GatedMLP"]
