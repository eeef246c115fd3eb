"""mamba_ssm.modules.block: Block on portssm (portssm.torch.modules.block)."""

from portssm.torch.modules.block import Block
from portssm.torch.norms import RMSNorm, layer_norm_fn

__all__ = ["Block", "RMSNorm", "layer_norm_fn"]
