"""mamba-ssm 2.3.2.post1's import surface, provided by portssm (portssm's import alias: loaded
as `mamba_ssm` where no real mamba-ssm is installed).  The ops are portssm.torch's; the module
layer (Mamba, Mamba2, MambaLMHeadModel) is imported on first use, like mamba-ssm's submodules
(mamba_ssm.ops, mamba_ssm.modules, ...), so that `import mamba_ssm` stays cheap.  Mamba3 is not
provided: asking for it raises ImportError saying so."""

import importlib

from _portssm_aliases import ALIASES, PORTSSM_VERSION

__version__ = "%s+portssm%s" % (ALIASES["mamba_ssm"][0], PORTSSM_VERSION)

from mamba_ssm.ops.selective_scan_interface import mamba_inner_fn, selective_scan_fn  # noqa: E402

# name -> the module that defines it (imported when the name is first asked for)
_LAZY = {
    "Mamba": "mamba_ssm.modules.mamba_simple",
    "Mamba2": "mamba_ssm.modules.mamba2",
    "MambaLMHeadModel": "mamba_ssm.models.mixer_seq_simple",
}
_SUBMODULES = ("ops", "modules", "models", "utils")

MAMBA3_GAP = ("Mamba-3 (mamba_ssm.Mamba3, mamba_ssm.modules.mamba3 and its kernels in "
              "ops.triton.mamba3, ops.tilelang, ops.cute) is not provided by portssm, which has "
              "no Mamba-3 kernels yet; use Mamba or Mamba2, or install mamba-ssm itself (a real "
              "install takes precedence over portssm's alias)")


def __getattr__(name):
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    if name == "Mamba3":
        raise ImportError(MAMBA3_GAP)
    if name in _SUBMODULES:
        return importlib.import_module("%s.%s" % (__name__, name))
    raise AttributeError("module %r has no attribute %r" % (__name__, name))


def __dir__():
    return sorted(set(globals()) | set(_LAZY) | set(_SUBMODULES))


__all__ = ["selective_scan_fn", "mamba_inner_fn", "Mamba", "Mamba2", "MambaLMHeadModel",
           "__version__"]
