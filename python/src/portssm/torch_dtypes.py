"""torch dtype <-> portssm_dtype (imported only when torch is)."""

from __future__ import annotations

import torch

from . import _structs

CODES = {
    torch.float32: _structs.F32,
    torch.float16: _structs.F16,
    torch.bfloat16: _structs.BF16,
    torch.int32: _structs.I32,
}


def code_of(dtype):
    return CODES.get(dtype)
