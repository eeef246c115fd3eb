"""Rotary position embedding for MHA, the semantics of flash-attn's
flash_attn.layers.rotary.RotaryEmbedding (which mamba-ssm's MHA requires for rotary_emb_dim > 0):
inv_freq = 1 / base^(2i / dim) (a non-persistent buffer, so checkpoints hold no rotary entry),
angles from float32 positions, cos/sin rounded to the activations' dtype, the rotation computed
in float32 on the first `dim` channels of q and k; GPT-NeoX halves, or GPT-J pairs when
interleaved.  Written in torch: it is elementwise work beside the attention itself."""

from __future__ import annotations

import torch
from torch import nn


class RotaryEmbedding(nn.Module):
    def __init__(self, dim: int, base=10000.0, interleaved=False, device=None):
        super().__init__()
        if dim <= 0 or dim % 2:
            raise ValueError("RotaryEmbedding: dim must be a positive even number, got %r"
                             % (dim,))
        self.dim = dim
        self.base = float(base)
        self.interleaved = interleaved
        inv_freq = 1.0 / (self.base ** (torch.arange(0, dim, 2, device=device,
                                                     dtype=torch.float32) / dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def _cos_sin(self, positions, dtype):
        """cos, sin (..., dim / 2) of the positions, rounded to dtype as flash-attn's cache."""
        inv_freq = self.inv_freq
        if inv_freq.dtype != torch.float32:  # a model cast with .to(dtype): recompute
            inv_freq = 1.0 / (self.base ** (torch.arange(0, self.dim, 2, device=positions.device,
                                                         dtype=torch.float32) / self.dim))
        freqs = positions.to(torch.float32).unsqueeze(-1) * inv_freq.to(positions.device)
        return torch.cos(freqs).to(dtype).float(), torch.sin(freqs).to(dtype).float()

    def rotate(self, x, positions):
        """x (batch, seqlen, heads, head_dim) rotated at positions (batch or 1, seqlen)."""
        cos, sin = self._cos_sin(positions, x.dtype)
        cos, sin = cos.unsqueeze(2), sin.unsqueeze(2)  # (b, l, 1, dim/2)
        rot = x[..., :self.dim].float()
        if self.interleaved:
            x1, x2 = rot[..., 0::2], rot[..., 1::2]
            out = torch.stack([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1).flatten(-2)
        else:
            x1, x2 = rot.chunk(2, dim=-1)
            out = torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)
        return torch.cat([out.to(x.dtype), x[..., self.dim:]], dim=-1)

    def forward(self, q, kv, seqlen_offset=0, max_seqlen=None):
        """q (batch, seqlen, heads, head_dim), kv (batch, seqlen, 2, heads_kv, head_dim): q and k
        rotated at positions seqlen_offset + 0 .. seqlen - 1 (seqlen_offset an int, or a
        (batch,) tensor of per-sequence offsets); v unchanged.  Returns new (q, kv).
        max_seqlen is accepted for flash-attn's signature (it sizes its cache)."""
        seqlen = q.shape[1]
        steps = torch.arange(seqlen, device=q.device)
        if isinstance(seqlen_offset, torch.Tensor):
            positions = seqlen_offset.to(q.device).view(-1, 1) + steps
        else:
            positions = (steps + int(seqlen_offset)).unsqueeze(0)
        k, v = kv.unbind(dim=2)
        return self.rotate(q, positions), torch.stack([self.rotate(k, positions), v], dim=2)
