"""mamba_ssm.ops.triton.layernorm_gated on portssm's fused norms (portssm.torch.norms): the
gated RMSNorm / LayerNorm (z, group_size, norm_before_gate) as RMSNorm, LayerNorm, rmsnorm_fn,
layernorm_fn; rms_norm_ref is portssm's pure-torch reference."""

from portssm.torch.norms import GatedLayerNorm as LayerNorm
from portssm.torch.norms import GatedRMSNorm as RMSNorm
from portssm.torch.norms import layernorm_fn, rmsnorm_fn
from portssm.torch.reference import rms_norm_gated_ref as rms_norm_ref

__all__ = ["RMSNorm", "LayerNorm", "rmsnorm_fn", "layernorm_fn", "rms_norm_ref"]
