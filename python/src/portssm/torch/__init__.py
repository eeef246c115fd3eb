"""portssm.torch: drop-ins for causal-conv1d 1.7.0 and mamba-ssm 2.3.2.post1 on portssm, for cpu
tensors (cpu backend) and cuda tensors (cuda backend; hip under a ROCm torch).

    causal_conv1d_fn, causal_conv1d_update          (causal_conv1d)
    selective_scan_fn, mamba_inner_fn               (mamba_ssm.ops.selective_scan_interface)
    selective_state_update                          (mamba_ssm.ops.triton.selective_state_update)
    mamba_chunk_scan_combined,                      (mamba_ssm.ops.triton.ssd_combined)
    mamba_split_conv1d_scan_combined
    patch_transformers()                            transformers' Mamba / Mamba-2 on these
    layer_norm_fn, rms_norm_fn, RMSNorm             (mamba_ssm.ops.triton.layer_norm)
    layernorm_fn, rmsnorm_fn, GatedRMSNorm,         (mamba_ssm.ops.triton.layernorm_gated:
    GatedLayerNorm                                   its RMSNorm and LayerNorm)

Each op is a torch custom op ("portssm::...") with a fake implementation where torch has
torch.library.custom_op (>= 2.4), so torch.compile(fullgraph=True) traces it; autograd goes
through libportssm's backward ops; no op waits for the host, so CUDA graphs capture them.
"""

from __future__ import annotations

from ._registry import USES_CUSTOM_OP
from .causal_conv1d import causal_conv1d_fn, causal_conv1d_update
from .norms import (GatedLayerNorm, GatedRMSNorm, RMSNorm, layer_norm_fn, layernorm_fn,
                    rms_norm_fn, rmsnorm_fn)
from .selective_scan import mamba_inner_fn, selective_scan_fn
from .ssd import mamba_chunk_scan_combined, mamba_split_conv1d_scan_combined
from .state_update import selective_state_update
from .transformers_patch import patch_transformers

__all__ = ["causal_conv1d_fn", "causal_conv1d_update", "selective_scan_fn", "mamba_inner_fn",
           "selective_state_update", "mamba_chunk_scan_combined",
           "mamba_split_conv1d_scan_combined", "patch_transformers", "USES_CUSTOM_OP",
           "layer_norm_fn", "rms_norm_fn", "RMSNorm", "layernorm_fn", "rmsnorm_fn",
           "GatedRMSNorm", "GatedLayerNorm"]
