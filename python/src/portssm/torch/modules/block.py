"""Block: mamba-ssm 2.3.2.post1's mamba_ssm.modules.block.Block, a mixer (and optional MLP)
with the add-then-norm ordering: Add -> Norm -> Mixer (-> Add -> Norm -> MLP), returning the
mixer's (or MLP's) output and the residual, so that the add and the norm fuse into one op
(fused_add_norm: portssm's layer_norm_fn / rms_norm_fn)."""

from __future__ import annotations

from typing import Optional

import torch
from torch import Tensor, nn

from ..norms import RMSNorm, layer_norm_fn


class Block(nn.Module):
    def __init__(self, dim, mixer_cls, mlp_cls, norm_cls=nn.LayerNorm, fused_add_norm=False,
                 residual_in_fp32=False):
        """mixer_cls(dim) and norm_cls(dim) build the mixer and its norm; mlp_cls(dim) the MLP
        (nn.Identity: none).  residual_in_fp32 keeps the residual stream in float32."""
        super().__init__()
        self.residual_in_fp32 = residual_in_fp32
        self.fused_add_norm = fused_add_norm
        self.norm = norm_cls(dim)
        self.mixer = mixer_cls(dim)
        if mlp_cls is not nn.Identity:
            self.norm2 = norm_cls(dim)
            self.mlp = mlp_cls(dim)
        else:
            self.mlp = None
        if self.fused_add_norm and not isinstance(self.norm, (nn.LayerNorm, RMSNorm)):
            raise ValueError("Block(fused_add_norm=True) fuses nn.LayerNorm or RMSNorm only, got "
                             "norm_cls giving %s" % type(self.norm).__name__)

    def _add_norm(self, hidden_states, residual, norm):
        """(norm(hidden_states + residual), hidden_states + residual), the sum in float32 with
        residual_in_fp32; residual None on the first block."""
        if not self.fused_add_norm:
            residual = (hidden_states + residual) if residual is not None else hidden_states
            hidden_states = norm(residual.to(dtype=norm.weight.dtype))
            if self.residual_in_fp32:
                residual = residual.to(torch.float32)
            return hidden_states, residual
        return layer_norm_fn(hidden_states, norm.weight, norm.bias, residual=residual,
                             prenorm=True, residual_in_fp32=self.residual_in_fp32, eps=norm.eps,
                             is_rms_norm=isinstance(norm, RMSNorm))

    def forward(self, hidden_states: Tensor, residual: Optional[Tensor] = None,
                inference_params=None, **mixer_kwargs):
        """hidden_states: the previous block's output; residual: the residual stream so far
        (None for the first block).  Returns (this block's output, the new residual)."""
        hidden_states, residual = self._add_norm(hidden_states, residual, self.norm)
        hidden_states = self.mixer(hidden_states, inference_params=inference_params,
                                   **mixer_kwargs)
        if self.mlp is not None:
            hidden_states, residual = self._add_norm(hidden_states, residual, self.norm2)
            hidden_states = self.mlp(hidden_states)
        return hidden_states, residual

    def allocate_inference_cache(self, batch_size, max_seqlen, dtype=None, **kwargs):
        return self.mixer.allocate_inference_cache(batch_size, max_seqlen, dtype=dtype, **kwargs)
