"""mamba_ssm.ops on portssm (submodules imported on first attribute access, as transformers
walks mamba_ssm.ops.triton.ssd_combined.<function> by attributes)."""

import importlib

_SUBMODULES = ("selective_scan_interface", "triton")  # (tilelang, cute: Mamba-3, not provided)


def __getattr__(name):
    if name in _SUBMODULES:
        return importlib.import_module("%s.%s" % (__name__, name))
    raise AttributeError("module %r has no attribute %r" % (__name__, name))
