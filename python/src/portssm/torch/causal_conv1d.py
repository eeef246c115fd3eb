"""Drop-ins for causal-conv1d 1.7.0's causal_conv1d_fn and causal_conv1d_update: the same names,
argument order, defaults and return values.  Where portssm goes further the call simply works
(any layout with final states, seq_idx with initial states, any width); options it lacks raise
NotImplementedError naming them."""

from __future__ import annotations

import torch

from . import _checks, _impl, _registry
from ._runtime import compile_boundary, is_compiling

_ACTIVATIONS = (None, "silu", "swish")


def _silu(activation) -> bool:
    if activation not in _ACTIVATIONS:
        raise NotImplementedError("activation must be None, silu, or swish")
    return activation is not None


@compile_boundary
def causal_conv1d_fn(
    x,
    weight,
    bias=None,
    seq_idx=None,
    initial_states=None,
    return_final_states=False,
    final_states_out=None,
    activation=None,
):
    """
    x: (batch, dim, seqlen), channel-first or channel-last (x.stride(1) == 1)
    weight: (dim, width)
    bias: (dim,)
    seq_idx: (batch, seqlen) int32
    initial_states: (batch, dim, width - 1)
    final_states_out: (batch, dim, width - 1), to be written to
    activation: either None or "silu" or "swish"

    out: (batch, dim, seqlen); (out, final_states) with return_final_states
    """
    silu = _silu(activation)
    _check_fn_args(x, weight, bias, seq_idx, initial_states,
                   final_states_out if return_final_states else None)
    grad = torch.is_grad_enabled() and any(
        t is not None and t.requires_grad for t in (x, weight, bias, initial_states))
    out, final = _registry.conv_fwd_routed(grad, x, weight, bias, seq_idx, initial_states,
                                           bool(return_final_states), silu)
    if not return_final_states:
        return out
    if final_states_out is not None:
        final_states_out.copy_(final)
        final = final_states_out
    return out, final


def _check_fn_args(x, weight, bias, seq_idx, initial_states, final_states_out):
    """The ranks causal_conv1d_fn reads shapes of (the library checks the rest), and
    final_states_out's shape, dtype and device (it is written after the op: checked before)."""
    fn = "causal_conv1d_fn"
    _checks.tensor(fn, "x", x, "(batch, dim, seqlen)", 3)
    _checks.tensor(fn, "weight", weight, "(dim, width)", 2)
    _checks.tensor(fn, "bias", bias, "(dim,)", 1)
    _checks.tensor(fn, "seq_idx", seq_idx, "(batch, seqlen)", 2)
    _checks.tensor(fn, "initial_states", initial_states, "(batch, dim, width - 1)", 3)
    if final_states_out is not None:
        _checks.output(fn, "final_states_out", final_states_out,
                       (x.shape[0], x.shape[1], weight.shape[1] - 1), x.dtype, x.device)


@compile_boundary
def causal_conv1d_update(x, conv_state, weight, bias=None, activation=None, cache_seqlens=None,
                         conv_state_indices=None):
    """
    x: (batch, dim) or (batch, dim, seqlen)
    conv_state: (batch, dim, state_len), state_len >= width - 1, updated in place
    weight: (dim, width)
    bias: (dim,)
    cache_seqlens: (batch,) int32: conv_state is a ring buffer written at cache_seqlens % state_len
    conv_state_indices: (batch,) int32: the row of conv_state each sequence uses (a negative
        index gives a zero output and leaves the state untouched)

    out: (batch, dim) or (batch, dim, seqlen)
    """
    silu = activation is not None and _silu(activation)
    if is_compiling():
        return _registry.conv_update(x, conv_state, weight, bias, silu, cache_seqlens,
                                     conv_state_indices)
    # eager decode: straight to the implementation, past the dispatcher (host time is the
    # cost of a decode step)
    return _impl.conv_update(x, conv_state, weight, bias, silu, cache_seqlens,
                             conv_state_indices)
