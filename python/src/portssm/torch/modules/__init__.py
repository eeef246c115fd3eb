"""mamba-ssm 2.3.2.post1's module layer (mamba_ssm.modules) on portssm's kernels: the mixers
and the blocks models are made of, with mamba-ssm's constructors, parameter names, shapes,
initialisation and inference caches, so that its checkpoints load with strict=True.

    Mamba           mamba_ssm.modules.mamba_simple.Mamba      (mamba1.py)
    Mamba2          mamba_ssm.modules.mamba2.Mamba2           (mamba2.py)
    Mamba2Simple    mamba_ssm.modules.mamba2_simple           (mamba2_simple.py)
    Block           mamba_ssm.modules.block.Block             (block.py)
    GatedMLP        mamba_ssm.modules.mlp.GatedMLP            (mlp.py)
    MHA             mamba_ssm.modules.mha.MHA                 (mha.py, rotary.py)
    Mamba3          not implemented yet: importing it raises ImportError (mamba3.py is its place)
    ssd_minimal     the paper's minimal pure-torch SSD (mamba_ssm.modules.ssd_minimal), a reference

The names load on first use, so importing this package imports no mixer (nor the norms).
"""

from __future__ import annotations

import importlib

_WHERE = {
    "Mamba": "mamba1",
    "Mamba2": "mamba2",
    "Mamba2Simple": "mamba2_simple",
    "Block": "block",
    "GatedMLP": "mlp",
    "MHA": "mha",
    "RotaryEmbedding": "rotary",
    "Mamba3": "mamba3",
}

__all__ = ["Mamba", "Mamba2", "Mamba2Simple", "Block", "GatedMLP", "MHA"]


def __getattr__(name):
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError("module %r has no attribute %r" % (__name__, name))
    # importing mamba3 raises ImportError naming the gap, which `from ... import Mamba3` passes on
    value = getattr(importlib.import_module("." + where, __name__), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_WHERE))
