"""mamba_ssm.ops.triton on portssm: the same module names as mamba-ssm's, none of them Triton
(portssm's kernels are libportssm's).  Submodules are imported on first attribute access."""

import importlib

# the modules portssm provides (importing the others raises ImportError saying why)
_SUBMODULES = ("selective_state_update", "ssd_combined", "layer_norm", "layernorm_gated")


def __getattr__(name):
    if name in _SUBMODULES:
        return importlib.import_module("%s.%s" % (__name__, name))
    raise AttributeError("module %r has no attribute %r" % (__name__, name))
