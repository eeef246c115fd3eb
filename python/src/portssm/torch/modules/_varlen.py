"""causal_conv1d_varlen_states (causal-conv1d 1.7.0's causal_conv1d.causal_conv1d_varlen): the
conv states of packed sequences, for Mamba2's packed prefill.  A gather of the last state_len
tokens of each sequence, zero where a sequence is shorter: no arithmetic, so one indexing op on
the tensor's own device is the whole implementation."""

from __future__ import annotations

import torch


def causal_conv1d_varlen_states(x, cu_seqlens, state_len):
    """
    x: (total_tokens, dim), the packed sequences one after the other.
    cu_seqlens: (batch + 1,) sorted offsets of the sequences in x, from 0.
    state_len: how many of each sequence's last tokens form its state.
    Returns states (batch, dim, state_len), laid out (batch, state_len, dim) in memory like the
    reference's; a position before its sequence's first token is 0.  No gradient.
    """
    if x.dim() != 2:
        raise ValueError("causal_conv1d_varlen_states: x must be (total_tokens, dim), got shape %s"
                         % (tuple(x.shape),))
    if cu_seqlens.dim() != 1 or cu_seqlens.shape[0] < 1:
        raise ValueError("causal_conv1d_varlen_states: cu_seqlens must be (batch + 1,), got shape "
                         "%s" % (tuple(cu_seqlens.shape),))
    cu = cu_seqlens.to(device=x.device, dtype=torch.long)
    starts, ends = cu[:-1], cu[1:]
    # token of state slot j of sequence i: ends[i] - state_len + j, if it is in that sequence
    pos = ends.unsqueeze(1) - state_len + torch.arange(state_len, device=x.device)
    inside = pos >= starts.unsqueeze(1)
    rows = x.detach()[pos.clamp(min=0)]  # (batch, state_len, dim)
    states = torch.where(inside.unsqueeze(-1), rows, torch.zeros((), dtype=x.dtype,
                                                                 device=x.device))
    return states.transpose(1, 2)
