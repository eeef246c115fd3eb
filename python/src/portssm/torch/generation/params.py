"""InferenceParams: mamba-ssm 2.3.2.post1's decoding state (mamba_ssm.utils.generation), passed
through the model so each layer finds its cache: key_value_memory_dict maps layer_idx to the
layer's states (Mamba: (conv_state, ssm_state); MHA: (kv_cache, conv_state))."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from torch import Tensor


@dataclass
class InferenceParams:
    max_seqlen: int
    max_batch_size: int
    seqlen_offset: int = 0  # tokens already in the caches; > 0 makes the mixers decode
    batch_size_offset: int = 0
    key_value_memory_dict: dict = field(default_factory=dict)
    lengths_per_sample: Optional[Tensor] = None  # per-sequence offsets (graph decoding)

    def reset(self, max_seqlen, max_batch_size):
        self.max_seqlen = max_seqlen
        self.max_batch_size = max_batch_size
        self.seqlen_offset = 0
        if self.lengths_per_sample is not None:
            self.lengths_per_sample.zero_()
