"""MHA: mamba-ssm 2.3.2.post1's mamba_ssm.modules.mha.MHA (multi-head / grouped-query
self-attention with optional conv on qkv, gated MLP channels and rotary embedding), the same
constructor, parameter names and shapes, on torch's scaled_dot_product_attention and portssm's
causal_conv1d ops.

The kv-cache decode follows flash-attn's flash_attn_with_kvcache, which mamba-ssm calls on GPU:
new keys and values are written at each sequence's offset and a query at position t sees the
keys up to t (causal, aligned at the end of the cache).  With inference_params.lengths_per_sample
(CUDA-graph decoding) offsets come from that tensor and the attention runs over the whole cache
under a mask, so that one captured graph serves every position.

Where it differs from mamba-ssm: flash-attn is never used (also when installed); rotary needs no
flash-attn (portssm's RotaryEmbedding, same math, no state_dict entry); the kv cache is
allocated zeroed; with d_conv > 0 the prefill keeps the conv's *input* in the conv state (mamba-ssm
keeps its output, so its decode after a prefill differs from its own forward); without
flash-attn mamba-ssm's decode aligns the causal mask at the start of the cache (a new token
sees only the first key), portssm aligns it at the end as flash-attn does.
"""

from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from ..causal_conv1d import causal_conv1d_fn, causal_conv1d_update
from ._init import conv_weight
from .rotary import RotaryEmbedding


def _update_kv_cache(kv, inference_params, layer_idx):
    """Writes kv (batch, seqlen, 2, nheads_kv, head_dim) into the layer's cache at
    inference_params.seqlen_offset (rows from batch_size_offset); returns the cache's keys and
    values up to the new end, (batch, seqlen_offset + seqlen, 2, nheads_kv, head_dim)."""
    if layer_idx not in inference_params.key_value_memory_dict:
        raise KeyError("no kv cache for layer %r in inference_params" % (layer_idx,))
    kv_cache, _ = inference_params.key_value_memory_dict[layer_idx]
    batch_start = inference_params.batch_size_offset
    batch_end = batch_start + kv.shape[0]
    sequence_start = inference_params.seqlen_offset
    sequence_end = sequence_start + kv.shape[1]
    if batch_end > kv_cache.shape[0] or sequence_end > kv_cache.shape[1]:
        raise ValueError("kv cache of shape %s is too small for batch rows %d..%d, positions "
                         "%d..%d" % (tuple(kv_cache.shape), batch_start, batch_end,
                                     sequence_start, sequence_end))
    kv_cache[batch_start:batch_end, sequence_start:sequence_end, ...] = kv
    return kv_cache[batch_start:batch_end, :sequence_end, ...]


class MHA(nn.Module):
    """Multi-head self-attention (MQA / GQA with num_heads_kv)."""

    def __init__(
        self,
        embed_dim,
        num_heads,
        num_heads_kv=None,
        head_dim=None,  # embed_dim // num_heads if None
        mlp_dim=0,
        qkv_proj_bias=True,
        out_proj_bias=True,
        softmax_scale=None,
        causal=False,
        layer_idx=None,
        d_conv=0,
        rotary_emb_dim=0,
        rotary_emb_base=10000.0,
        rotary_emb_interleaved=False,
        device=None,
        dtype=None,
    ) -> None:
        factory_kwargs = {"device": device, "dtype": dtype}
        super().__init__()
        self.embed_dim = embed_dim
        self.layer_idx = layer_idx
        self.d_conv = d_conv
        self.rotary_emb_dim = rotary_emb_dim
        self.softmax_scale = softmax_scale
        self.causal = causal

        self.num_heads = num_heads
        self.num_heads_kv = num_heads_kv if num_heads_kv is not None else num_heads
        if self.num_heads % self.num_heads_kv:
            raise ValueError("MHA: num_heads (%d) must be divisible by num_heads_kv (%d)"
                             % (self.num_heads, self.num_heads_kv))
        if head_dim is None and self.embed_dim % num_heads:
            raise ValueError("MHA: embed_dim (%d) must be divisible by num_heads (%d)"
                             % (self.embed_dim, num_heads))
        self.head_dim = head_dim if head_dim is not None else self.embed_dim // num_heads
        self.mlp_dim = math.ceil(mlp_dim / 256) * 256
        qkv_dim = self.head_dim * (self.num_heads + 2 * self.num_heads_kv)
        out_dim = self.head_dim * self.num_heads

        if self.rotary_emb_dim > 0:
            self.rotary_emb = RotaryEmbedding(self.rotary_emb_dim, base=rotary_emb_base,
                                              interleaved=rotary_emb_interleaved, device=device)

        self.in_proj = nn.Linear(embed_dim, qkv_dim + self.mlp_dim, bias=qkv_proj_bias,
                                 **factory_kwargs)
        if self.d_conv > 0:
            self.conv1d = nn.Conv1d(qkv_dim, qkv_dim, kernel_size=self.d_conv,
                                    padding=self.d_conv - 1, groups=qkv_dim, **factory_kwargs)
        self.out_proj = nn.Linear(out_dim + self.mlp_dim // 2, embed_dim, bias=out_proj_bias,
                                  **factory_kwargs)

    def allocate_inference_cache(self, batch_size, max_seqlen, dtype=None):
        """(kv_cache (batch, max_seqlen, 2, num_heads_kv, head_dim), conv_state (batch, qkv_dim,
        d_conv) or None).  Zeroed: cached-graph decoding attends over the whole cache under a
        mask, and a masked NaN would still poison the weighted sum."""
        dtype = self.out_proj.weight.dtype if dtype is None else dtype
        device = self.out_proj.weight.device
        if self.d_conv > 0:
            conv_state = torch.zeros(batch_size, self.conv1d.weight.shape[0], self.d_conv,
                                     device=device, dtype=dtype)
        else:
            conv_state = None
        kv_cache = torch.zeros(batch_size, max_seqlen, 2, self.num_heads_kv, self.head_dim,
                               dtype=dtype, device=device)
        return kv_cache, conv_state

    def _update_kv_cache(self, kv, inference_params):
        if self.layer_idx is None:
            raise ValueError("MHA: generation needs layer_idx given to the constructor")
        return _update_kv_cache(kv, inference_params, self.layer_idx)

    def _attention(self, q, k, v, attn_mask=None, is_causal=False):
        """q (b, lq, h, d), k/v (b, lk, h_kv, d) -> (b, lq, h, d)."""
        if self.num_heads != self.num_heads_kv:
            k = torch.repeat_interleave(k, dim=2, repeats=self.num_heads // self.num_heads_kv)
            v = torch.repeat_interleave(v, dim=2, repeats=self.num_heads // self.num_heads_kv)
        return F.scaled_dot_product_attention(
            q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), attn_mask=attn_mask,
            is_causal=is_causal, scale=self.softmax_scale).transpose(1, 2)

    def _update_kvcache_attention(self, q, kv, inference_params):
        """Writes kv into the cache, then attends q to the cache (flash_attn_with_kvcache's
        semantics).  The prompt (seqlen_offset 0) is attended causally on its own keys whether
        or not lengths_per_sample is set, so cached (cg=True) and plain generation share the
        prompt's arithmetic."""
        lengths = inference_params.lengths_per_sample
        if lengths is None or inference_params.seqlen_offset == 0:
            offset = inference_params.seqlen_offset
            kv = self._update_kv_cache(kv, inference_params)
            k, v = kv.unbind(dim=-3)
            lq, lk = q.shape[1], k.shape[1]
            if not self.causal or lq == 1:
                return self._attention(q, k, v)
            if offset == 0:
                return self._attention(q, k, v, is_causal=True)
            # query i is at position offset + i and sees keys 0 .. offset + i
            mask = torch.ones(lq, lk, dtype=torch.bool, device=q.device).tril(lk - lq)
            return self._attention(q, k, v, attn_mask=mask)
        return self._cached_graph_attention(q, kv, inference_params, lengths)

    def _cached_graph_attention(self, q, kv, inference_params, lengths):
        """Per-sequence offsets from lengths_per_sample.  Under CUDA graph capture the shapes
        are static (the whole cache under a mask), so the graph replays at any position.
        Otherwise (cg=True on cpu) the keys end at the longest sequence's last new token: with
        equal lengths that is the plain path's arithmetic (attention over more keys, even
        masked ones, rounds differently in 16-bit types)."""
        kv_cache, _ = inference_params.key_value_memory_dict[self.layer_idx]
        batch, lq = q.shape[:2]
        start = inference_params.batch_size_offset
        rows = torch.arange(start, start + batch, device=q.device).unsqueeze(1)
        lengths = lengths[start:start + batch].to(torch.long)
        positions = lengths.unsqueeze(1) + torch.arange(lq, device=q.device)  # (b, lq)
        kv_cache[rows, positions] = kv.to(kv_cache.dtype)
        k, v = kv_cache[start:start + batch].unbind(dim=2)  # (b, max_seqlen, h_kv, d)
        if not (q.is_cuda and torch.cuda.is_current_stream_capturing()):
            end = int(lengths.max()) + lq
            k, v = k[:, :end], v[:, :end]
        keys = torch.arange(k.shape[1], device=q.device)
        if self.causal:
            visible = keys.view(1, 1, -1) <= positions.unsqueeze(-1)  # (b, lq, max_seqlen)
        else:
            visible = (keys.view(1, 1, -1) < (lengths + lq).view(-1, 1, 1)).expand(-1, lq, -1)
        return self._attention(q, k, v, attn_mask=visible.unsqueeze(1))

    def forward(self, x, inference_params=None):
        """x: (batch, seqlen, embed_dim).  inference_params: generation (see
        portssm.torch.generation.InferenceParams); this layer's (kv_cache, conv_state) are
        allocated in it on first use."""
        if inference_params is not None and \
                self.layer_idx not in inference_params.key_value_memory_dict:
            inference_params.key_value_memory_dict[self.layer_idx] = \
                self.allocate_inference_cache(x.shape[0], inference_params.max_seqlen,
                                              dtype=x.dtype)
        if inference_params is None:
            seqlen_offset = 0
        elif inference_params.lengths_per_sample is not None:
            seqlen_offset = inference_params.lengths_per_sample[
                inference_params.batch_size_offset:
                inference_params.batch_size_offset + x.shape[0]]
        else:
            seqlen_offset = inference_params.seqlen_offset
        qkv = self.in_proj(x)
        if self.mlp_dim > 0:
            qkv, x_mlp = qkv.split([qkv.shape[-1] - self.mlp_dim, self.mlp_dim], dim=-1)
            x_mlp_up, x_mlp_gate = x_mlp.chunk(2, dim=-1)
            x_mlp = x_mlp_up * F.silu(x_mlp_gate)
        if self.d_conv > 0:
            qkv = self._conv(qkv, inference_params)
        q, kv = qkv.split([self.num_heads * self.head_dim,
                           self.num_heads_kv * 2 * self.head_dim], dim=-1)
        q = q.unflatten(-1, (self.num_heads, self.head_dim))
        kv = kv.unflatten(-1, (2, self.num_heads_kv, self.head_dim))
        if self.rotary_emb_dim > 0:
            q, kv = self.rotary_emb(q, kv, seqlen_offset=seqlen_offset,
                                    max_seqlen=None if inference_params is None
                                    else inference_params.max_seqlen)
        if inference_params is None:
            k, v = kv.unbind(dim=-3)
            context = self._attention(q, k, v, is_causal=self.causal)
        else:
            context = self._update_kvcache_attention(q, kv, inference_params)
        context = context.flatten(-2)
        if self.mlp_dim > 0:
            context = torch.cat([context, x_mlp], dim=-1)
        return self.out_proj(context)

    def _conv(self, qkv, inference_params):
        """The depthwise causal conv over qkv (no activation): whole sequences, or one decode
        step through the layer's conv state."""
        weight = conv_weight(self.conv1d)
        if inference_params is None or inference_params.seqlen_offset == 0:
            qkv_t = qkv.transpose(1, 2)
            if inference_params is not None:
                _, conv_state = inference_params.key_value_memory_dict[self.layer_idx]
                # the last d_conv inputs, zero-padded in front when the prompt is shorter
                conv_state.copy_(F.pad(qkv_t, (self.d_conv - qkv_t.shape[-1], 0)))
            return causal_conv1d_fn(qkv_t, weight, self.conv1d.bias).transpose(1, 2)
        if qkv.shape[1] != 1:
            raise ValueError("MHA with d_conv > 0 decodes one token at a time, got %d"
                             % qkv.shape[1])
        _, conv_state = inference_params.key_value_memory_dict[self.layer_idx]
        return causal_conv1d_update(qkv.squeeze(1), conv_state, weight,
                                    self.conv1d.bias).unsqueeze(1)
