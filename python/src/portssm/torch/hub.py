"""mamba-ssm 2.3.2.post1's mamba_ssm.utils.hf: load_config_hf and load_state_dict_hf, for a
local directory or a Hugging Face Hub id.

A directory is read directly.  Any other name goes through huggingface_hub's hf_hub_download,
which answers from the local cache (HF_HOME / HF_HUB_CACHE, layout
models--<org>--<name>/snapshots/<revision>/...) and, unless HF_HUB_OFFLINE=1, downloads what is
missing; mamba-ssm goes through transformers' cached_file, the same resolution.

Where it differs from mamba-ssm: transformers is not needed (huggingface_hub is, for Hub ids);
a missing file raises FileNotFoundError naming it (mamba-ssm fails on open(None)); the weights
may also be model.safetensors where pytorch_model.bin is absent; load_state_dict_hf applies its
dtype and device arguments (mamba-ssm returns before its conversion, leaving the tensors float32
on the cpu when dtype is not float32; load_state_dict casts them either way).
"""

from __future__ import annotations

import json
import os

import torch

CONFIG_NAME = "config.json"
WEIGHTS_NAME = "pytorch_model.bin"
SAFE_WEIGHTS_NAME = "model.safetensors"


def _resolve(model_name, filename):
    """(the local path of filename for model_name, a directory or a Hub id; None if it has no
    such file, with the Hub's exception saying why)."""
    model_name = os.fspath(model_name)
    if os.path.isdir(model_name):
        path = os.path.join(model_name, filename)
        if os.path.isfile(path):
            return path, None
        return None, FileNotFoundError("%s has no %s" % (model_name, filename))
    try:
        from huggingface_hub import hf_hub_download
        from huggingface_hub.errors import EntryNotFoundError, LocalEntryNotFoundError
    except ImportError as exc:
        raise ImportError("%r is not a directory; loading it from the Hugging Face Hub (or its "
                          "cache) needs huggingface_hub (pip install huggingface_hub)"
                          % (model_name,)) from exc
    try:
        return hf_hub_download(model_name, filename), None
    except (EntryNotFoundError, LocalEntryNotFoundError) as exc:  # absent, or not cached offline
        return None, exc


def load_config_hf(model_name):
    """The dict of model_name's config.json."""
    path, missing = _resolve(model_name, CONFIG_NAME)
    if path is None:
        raise missing
    with open(path) as f:
        return json.load(f)


def load_state_dict_hf(model_name, device=None, dtype=None):
    """model_name's state_dict (pytorch_model.bin, else model.safetensors), converted to dtype
    and moved to device when given.  A 16-bit dtype loads on the cpu first, then converts, then
    moves (no float32 copy of the model on the GPU)."""
    mapped_device = "cpu" if dtype not in (torch.float32, None) else device
    path, missing = _resolve(model_name, WEIGHTS_NAME)
    if path is not None:
        state_dict = torch.load(path, map_location=mapped_device, weights_only=True)
    else:
        path, _ = _resolve(model_name, SAFE_WEIGHTS_NAME)
        if path is None:
            raise missing  # about pytorch_model.bin, the file mamba-ssm's checkpoints have
        from safetensors.torch import load_file
        state_dict = load_file(path, device=str(mapped_device or "cpu"))
    if dtype is not None:
        state_dict = {k: v.to(dtype=dtype) if v.is_floating_point() else v
                      for k, v in state_dict.items()}
    if device is not None:
        state_dict = {k: v.to(device=device) for k, v in state_dict.items()}
    return state_dict
