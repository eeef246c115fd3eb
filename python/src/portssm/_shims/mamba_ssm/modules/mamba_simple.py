"""mamba_ssm.modules.mamba_simple: Mamba (the Mamba-1 mixer) on portssm (portssm.torch.modules.
mamba1), and the kernels the reference's module imports."""

from portssm.torch.causal_conv1d import causal_conv1d_fn, causal_conv1d_update
from portssm.torch.modules.mamba1 import Mamba
from portssm.torch.norms import RMSNorm, layer_norm_fn, rms_norm_fn
from portssm.torch.selective_scan import mamba_inner_fn, selective_scan_fn
from portssm.torch.state_update import selective_state_update

__all__ = ["Mamba", "selective_scan_fn", "mamba_inner_fn", "causal_conv1d_fn",
           "causal_conv1d_update", "selective_state_update", "RMSNorm", "layer_norm_fn",
           "rms_norm_fn"]
