"""mamba-ssm 2.3.2.post1's models (mamba_ssm.models) on portssm: MambaConfig (config.py) and
MambaLMHeadModel, MixerModel, create_block, _init_weights (mixer_seq.py)."""

from __future__ import annotations

import importlib

_WHERE = {
    "MambaConfig": "config",
    "MambaLMHeadModel": "mixer_seq",
    "MixerModel": "mixer_seq",
    "create_block": "mixer_seq",
}

__all__ = list(_WHERE)


def __getattr__(name):
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError("module %r has no attribute %r" % (__name__, name))
    value = getattr(importlib.import_module("." + where, __name__), name)
    globals()[name] = value
    return value
