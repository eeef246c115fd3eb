"""mamba_ssm.modules.mamba2_simple: Mamba2Simple on portssm (portssm.torch.modules.
mamba2_simple), and the kernels and norms the reference's module imports."""

from portssm.torch.causal_conv1d import causal_conv1d_fn
from portssm.torch.modules.mamba2_simple import Mamba2Simple
from portssm.torch.norms import GatedLayerNorm as LayerNorm
from portssm.torch.norms import GatedRMSNorm as RMSNormGated
from portssm.torch.ssd import mamba_chunk_scan_combined, mamba_split_conv1d_scan_combined

__all__ = ["Mamba2Simple", "causal_conv1d_fn", "RMSNormGated", "LayerNorm",
           "mamba_chunk_scan_combined", "mamba_split_conv1d_scan_combined"]
