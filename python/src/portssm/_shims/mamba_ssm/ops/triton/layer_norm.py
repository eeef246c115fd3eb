"""mamba_ssm.ops.triton.layer_norm on portssm's fused norms (portssm.torch.norms): RMSNorm,
layer_norm_fn, rms_norm_fn with residual, prenorm and residual_in_fp32.  Other names of
mamba-ssm's module are looked up in portssm.torch.norms on first use; one it lacks raises
ImportError saying so."""

from portssm.torch import norms as _norms
from portssm.torch.norms import RMSNorm, layer_norm_fn, rms_norm_fn


# the rest of mamba-ssm's public names in this module
_OTHERS = ("layer_norm_ref", "rms_norm_ref", "LayerNormFn", "LayerNormLinearFn",
           "layer_norm_linear_fn", "LayerNorm")


def __getattr__(name):
    if name not in _OTHERS:
        raise AttributeError("module %r has no attribute %r" % (__name__, name))
    value = getattr(_norms, name, None)
    if value is None:
        raise ImportError("mamba_ssm.ops.triton.layer_norm.%s is not provided by portssm "
                          "(portssm.torch.norms has no %s); use RMSNorm, layer_norm_fn or "
                          "rms_norm_fn" % (name, name))
    return value


__all__ = ["RMSNorm", "layer_norm_fn", "rms_norm_fn"]
