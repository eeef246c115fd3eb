"""mamba_ssm.modules.mamba2: Mamba2 (the Mamba-2 mixer) on portssm (portssm.torch.modules.
mamba2), and the kernels the reference's module imports.  Tensor parallelism
(process_group, mamba_ssm.distributed) is not provided."""

from portssm.torch.causal_conv1d import causal_conv1d_fn, causal_conv1d_update
from portssm.torch.compat import causal_conv1d_varlen_states
from portssm.torch.modules.mamba2 import Mamba2
from portssm.torch.norms import GatedRMSNorm as RMSNormGated
from portssm.torch.ssd import mamba_chunk_scan_combined, mamba_split_conv1d_scan_combined
from portssm.torch.state_update import selective_state_update

__all__ = ["Mamba2", "causal_conv1d_fn", "causal_conv1d_update", "causal_conv1d_varlen_states",
           "selective_state_update", "RMSNormGated", "mamba_chunk_scan_combined",
           "mamba_split_conv1d_scan_combined"]
