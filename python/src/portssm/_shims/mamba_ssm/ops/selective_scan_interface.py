"""mamba_ssm.ops.selective_scan_interface on portssm."""

from portssm.torch.causal_conv1d import causal_conv1d_fn
from portssm.torch.compat import (MambaInnerFn, SelectiveScanFn, causal_conv1d_bwd_function,
                                  causal_conv1d_fwd_function, causal_conv1d_update_function,
                                  rms_norm_forward)
from portssm.torch.reference import mamba_inner_ref, selective_scan_ref
from portssm.torch.selective_scan import mamba_inner_fn, selective_scan_fn

__all__ = ["SelectiveScanFn", "MambaInnerFn", "rms_norm_forward", "selective_scan_fn",
           "selective_scan_ref", "mamba_inner_fn", "mamba_inner_ref", "causal_conv1d_fn",
           "causal_conv1d_fwd_function", "causal_conv1d_bwd_function",
           "causal_conv1d_update_function"]
