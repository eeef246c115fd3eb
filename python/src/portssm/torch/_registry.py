"""portssm's ops as torch sees them.  With torch.library.custom_op (torch >= 2.4) each op is a
custom op "portssm::<name>" with a fake implementation (so torch.compile traces it without a
graph break) and, for the forward ops, an autograd formula through the library's backward ops.
Before torch 2.4 (or with PORTSSM_TORCH_NO_CUSTOM_OP=1, which is how the tests cover that road)
the same implementations run under plain torch.autograd.Function classes.

Exports, each taking and returning tensors (absent outputs are 0-element placeholders):
    conv_fwd(x, weight, bias, seq_idx, initial_states, return_final_states, silu) -> (out, final)
    conv_update(x, conv_state, weight, bias, silu, cache_seqlens, conv_state_indices) -> out
    scan_fwd(u, delta, A, B, C, D, z, delta_bias, initial_state, softplus, return_last_state,
             save_checkpoints) -> (out, last_state, checkpoints)
    state_update(state, x, dt, A, B, C, D, z, dt_bias, state_batch_indices, softplus) -> out
    ssd_fwd(x, dt, A, B, C, D, z, dt_bias, initial_states, seq_idx, cu_seqlens, dt_softplus,
            dt_limit, dt_min, dt_max, chunk_size, return_final_states, return_varlen_states,
            save_y, save_checkpoints) -> (out, final_states, varlen_states, y, checkpoints)
        save_y (with z): y before the gate as a fourth output, and save_checkpoints: the states
        entering the chunks as a fifth, both saved for the backward, which then need not
        compute them again (the caller asks for them only where grad will flow)
    conv_bwd, scan_bwd, ssd_bwd: the backward ops (custom ops where torch has them, else the
        implementations), which the fused mixers' own autograd nodes call while torch.compile
        traces them (selective_scan.mamba_inner_fn, ssd.mamba_split_conv1d_scan_combined)
"""


from typing import Optional, Tuple

import torch

from . import _impl, _impl_ssd
from ._runtime import USES_CUSTOM_OP, is_compiling

Tensor = torch.Tensor


def _grad_or_none(g):
    return g if g is not None and g.numel() > 0 else None


def _no_zero_grads(ctx):
    """Outputs that get no gradient (the saved y and checkpoints, placeholders, an unused final
    state) reach the backward as None instead of zero tensors: torch would otherwise fill one of
    each output's size per step (the SSD's y and checkpoints: 1.5x x's bytes, 39 us of fills a
    step at B4 L2048 H80 on the H200, run 88)."""
    ctx.set_materialize_grads(False)


def _dout_or_zeros(dout, like):
    # None only where nothing downstream used the output (e.g. only the final state was)
    return dout if dout is not None else torch.zeros_like(like)


# ---------------------------------------------------------------- the backward formulas


def _conv_save(ctx, x, weight, bias, seq_idx, initial_states, return_final_states, silu):
    ctx.save_for_backward(x, weight, bias, seq_idx, initial_states)
    ctx.return_final_states = return_final_states
    ctx.silu = silu
    _no_zero_grads(ctx)


def _conv_backward(ctx, dout, dfinal, conv_bwd):
    x, weight, bias, seq_idx, initial_states = ctx.saved_tensors
    want_dinit = initial_states is not None and ctx.needs_input_grad[4]
    dx, dweight, dbias, dinit = conv_bwd(
        x, weight, bias, seq_idx, initial_states, _dout_or_zeros(dout, x),
        _grad_or_none(dfinal) if ctx.return_final_states else None, want_dinit, ctx.silu)
    return (dx, dweight, dbias if bias is not None else None, None,
            dinit if want_dinit else None, None, None)


def _scan_save(ctx, inputs, checkpoints):
    u, delta, A, B, C, D, z, delta_bias, initial_state, softplus, return_last_state, _ = inputs
    ctx.save_for_backward(u, delta, A, B, C, D, z, delta_bias, initial_state, checkpoints)
    ctx.mark_non_differentiable(checkpoints)
    _no_zero_grads(ctx)
    ctx.softplus = softplus
    ctx.return_last_state = return_last_state


def _scan_backward(ctx, dout, dlast, scan_bwd):
    u, delta, A, B, C, D, z, delta_bias, initial_state, checkpoints = ctx.saved_tensors
    want_dinit = initial_state is not None and ctx.needs_input_grad[8]
    du, ddelta, dA, dB, dC, dD, dz, ddb, dinit = scan_bwd(
        u, delta, A, B, C, D, z, delta_bias, initial_state, _dout_or_zeros(dout, u),
        _grad_or_none(dlast) if ctx.return_last_state else None,
        checkpoints if checkpoints.numel() > 0 else None, ctx.softplus, want_dinit)
    return (du, ddelta, dA, dB, dC,
            dD if D is not None else None,
            dz if z is not None else None,
            ddb if delta_bias is not None else None,
            dinit if want_dinit else None, None, None, None)


def _ssd_save(ctx, inputs, varlen, y, checkpoints):
    (x, dt, A, B, C, D, z, dt_bias, initial_states, seq_idx, cu_seqlens, dt_softplus, dt_limit,
     dt_min, dt_max, chunk_size, return_final_states, _, save_y, save_checkpoints) = inputs
    ctx.save_for_backward(x, dt, A, B, C, D, z, dt_bias, initial_states, seq_idx, cu_seqlens,
                          y if save_y and z is not None else None,
                          checkpoints if save_checkpoints else None)
    ctx.options = (dt_softplus, dt_limit, dt_min, dt_max, chunk_size)
    ctx.return_final_states = return_final_states
    ctx.mark_non_differentiable(varlen, y, checkpoints)
    _no_zero_grads(ctx)


def _ssd_backward(ctx, dout, dfinal, ssd_bwd):
    (x, dt, A, B, C, D, z, dt_bias, initial_states, seq_idx, cu_seqlens, y,
     checkpoints) = ctx.saved_tensors
    want_dinit = initial_states is not None and ctx.needs_input_grad[8]
    dx, ddt, dA, dB, dC, dD, dz, ddtb, dinit = ssd_bwd(
        x, dt, A, B, C, D, z, dt_bias, initial_states, seq_idx, cu_seqlens, _dout_or_zeros(dout, x),
        _grad_or_none(dfinal) if ctx.return_final_states else None, y, checkpoints,
        *ctx.options, want_dinit)
    return (dx, ddt, dA, dB, dC,
            dD if D is not None else None,
            dz if z is not None else None,
            ddtb if dt_bias is not None else None,
            dinit if want_dinit else None) + (None,) * 11


# ---------------------------------------------------------------- autograd.Function forms
# The forward ops with their backward as plain autograd.Function classes: the whole road before
# torch 2.4, and the eager road on every torch (route() below), where the custom op's
# dispatcher would only add host time (30 us a call on the SSD forward, against 11 for the
# Function's, measured on cpu at B1 L1).


class _ConvFwd(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias, seq_idx, initial_states, return_final_states, silu):
        _conv_save(ctx, x, weight, bias, seq_idx, initial_states, return_final_states, silu)
        return _impl.conv_fwd(x, weight, bias, seq_idx, initial_states, return_final_states,
                              silu)

    @staticmethod
    def backward(ctx, dout, dfinal):
        return _conv_backward(ctx, dout, dfinal, _impl.conv_bwd)


class _ScanFwd(torch.autograd.Function):
    @staticmethod
    def forward(ctx, *inputs):
        out, last, ckpt = _impl.scan_fwd(*inputs)
        _scan_save(ctx, inputs, ckpt)
        return out, last, ckpt

    @staticmethod
    def backward(ctx, dout, dlast, dckpt):
        return _scan_backward(ctx, dout, dlast, _impl.scan_bwd)


class _SsdFwd(torch.autograd.Function):
    @staticmethod
    def forward(ctx, *inputs):
        out, final, varlen, y, ckpt = _impl_ssd.ssd_fwd(*inputs)
        _ssd_save(ctx, inputs, varlen, y, ckpt)
        return out, final, varlen, y, ckpt

    @staticmethod
    def backward(ctx, dout, dfinal, dvarlen, dy, dckpt):
        return _ssd_backward(ctx, dout, dfinal, _impl_ssd.ssd_bwd)


if USES_CUSTOM_OP:
    custom_op = torch.library.custom_op

    @custom_op("portssm::causal_conv1d_fwd", mutates_args=())
    def conv_fwd(x: Tensor, weight: Tensor, bias: Optional[Tensor], seq_idx: Optional[Tensor],
                 initial_states: Optional[Tensor], return_final_states: bool,
                 silu: bool) -> Tuple[Tensor, Tensor]:
        return _impl.conv_fwd(x, weight, bias, seq_idx, initial_states, return_final_states, silu)

    @conv_fwd.register_fake
    def _(x, weight, bias, seq_idx, initial_states, return_final_states, silu):
        return _impl.conv_fwd_outputs(x, weight, return_final_states)

    @custom_op("portssm::causal_conv1d_bwd", mutates_args=())
    def conv_bwd(x: Tensor, weight: Tensor, bias: Optional[Tensor], seq_idx: Optional[Tensor],
                 initial_states: Optional[Tensor], dout: Tensor, dfinal_states: Optional[Tensor],
                 want_dinitial: bool, silu: bool) -> Tuple[Tensor, Tensor, Tensor, Tensor]:
        return _impl.conv_bwd(x, weight, bias, seq_idx, initial_states, dout, dfinal_states,
                              want_dinitial, silu)

    @conv_bwd.register_fake
    def _(x, weight, bias, seq_idx, initial_states, dout, dfinal_states, want_dinitial, silu):
        return _impl.conv_bwd_outputs(x, weight, bias, want_dinitial)

    def _conv_setup(ctx, inputs, output):
        _conv_save(ctx, *inputs)

    torch.library.register_autograd(
        "portssm::causal_conv1d_fwd",
        lambda ctx, dout, dfinal: _conv_backward(ctx, dout, dfinal, conv_bwd),
        setup_context=_conv_setup)

    @custom_op("portssm::causal_conv1d_update", mutates_args=("conv_state",))
    def conv_update(x: Tensor, conv_state: Tensor, weight: Tensor, bias: Optional[Tensor],
                    silu: bool, cache_seqlens: Optional[Tensor],
                    conv_state_indices: Optional[Tensor]) -> Tensor:
        return _impl.conv_update(x, conv_state, weight, bias, silu, cache_seqlens,
                                 conv_state_indices)

    @conv_update.register_fake
    def _(x, conv_state, weight, bias, silu, cache_seqlens, conv_state_indices):
        return torch.empty_like(x)

    @custom_op("portssm::selective_scan_fwd", mutates_args=())
    def scan_fwd(u: Tensor, delta: Tensor, A: Tensor, B: Tensor, C: Tensor, D: Optional[Tensor],
                 z: Optional[Tensor], delta_bias: Optional[Tensor],
                 initial_state: Optional[Tensor], softplus: bool, return_last_state: bool,
                 save_checkpoints: bool) -> Tuple[Tensor, Tensor, Tensor]:
        return _impl.scan_fwd(u, delta, A, B, C, D, z, delta_bias, initial_state, softplus,
                              return_last_state, save_checkpoints)

    @scan_fwd.register_fake
    def _(u, delta, A, B, C, D, z, delta_bias, initial_state, softplus, return_last_state,
          save_checkpoints):
        last, ckpt = _impl.scan_extra_outputs(u, A, return_last_state,
                                              _impl.fake_checkpoints_k(u, save_checkpoints))
        return torch.empty_like(u), last, ckpt

    @custom_op("portssm::selective_scan_bwd", mutates_args=())
    def scan_bwd(u: Tensor, delta: Tensor, A: Tensor, B: Tensor, C: Tensor, D: Optional[Tensor],
                 z: Optional[Tensor], delta_bias: Optional[Tensor],
                 initial_state: Optional[Tensor], dout: Tensor, dfinal_state: Optional[Tensor],
                 checkpoints: Optional[Tensor], softplus: bool,
                 want_dinitial: bool) -> Tuple[Tensor, Tensor, Tensor, Tensor, Tensor, Tensor,
                                               Tensor, Tensor, Tensor]:
        return _impl.scan_bwd(u, delta, A, B, C, D, z, delta_bias, initial_state, dout,
                              dfinal_state, checkpoints, softplus, want_dinitial)

    @scan_bwd.register_fake
    def _(u, delta, A, B, C, D, z, delta_bias, initial_state, dout, dfinal_state, checkpoints,
          softplus, want_dinitial):
        return _impl.scan_bwd_outputs(u, delta, A, B, C, D, z, delta_bias, want_dinitial)

    def _scan_setup(ctx, inputs, output):
        _scan_save(ctx, inputs, output[2])

    torch.library.register_autograd(
        "portssm::selective_scan_fwd",
        lambda ctx, dout, dlast, dckpt: _scan_backward(ctx, dout, dlast, scan_bwd),
        setup_context=_scan_setup)

    @custom_op("portssm::selective_state_update", mutates_args=("state",))
    def state_update(state: Tensor, x: Tensor, dt: Tensor, A: Tensor, B: Tensor, C: Tensor,
                     D: Optional[Tensor], z: Optional[Tensor], dt_bias: Optional[Tensor],
                     state_batch_indices: Optional[Tensor], softplus: bool) -> Tensor:
        return _impl.state_update(state, x, dt, A, B, C, D, z, dt_bias, state_batch_indices,
                                  softplus)

    @state_update.register_fake
    def _(state, x, dt, A, B, C, D, z, dt_bias, state_batch_indices, softplus):
        return torch.empty_like(x)

    @custom_op("portssm::ssd_chunk_scan_fwd", mutates_args=())
    def ssd_fwd(x: Tensor, dt: Tensor, A: Tensor, B: Tensor, C: Tensor, D: Optional[Tensor],
                z: Optional[Tensor], dt_bias: Optional[Tensor],
                initial_states: Optional[Tensor], seq_idx: Optional[Tensor],
                cu_seqlens: Optional[Tensor], dt_softplus: bool, dt_limit: bool, dt_min: float,
                dt_max: float, chunk_size: int, return_final_states: bool,
                return_varlen_states: bool, save_y: bool,
                save_checkpoints: bool) -> Tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
        return _impl_ssd.ssd_fwd(x, dt, A, B, C, D, z, dt_bias, initial_states, seq_idx,
                                 cu_seqlens, dt_softplus, dt_limit, dt_min, dt_max, chunk_size,
                                 return_final_states, return_varlen_states, save_y,
                                 save_checkpoints)

    @ssd_fwd.register_fake
    def _(x, dt, A, B, C, D, z, dt_bias, initial_states, seq_idx, cu_seqlens, dt_softplus,
          dt_limit, dt_min, dt_max, chunk_size, return_final_states, return_varlen_states,
          save_y, save_checkpoints):
        return _impl_ssd.ssd_fwd_outputs(x, B, z, return_final_states, return_varlen_states,
                                         cu_seqlens, save_y, save_checkpoints, chunk_size)

    @custom_op("portssm::ssd_chunk_scan_bwd", mutates_args=())
    def ssd_bwd(x: Tensor, dt: Tensor, A: Tensor, B: Tensor, C: Tensor, D: Optional[Tensor],
                z: Optional[Tensor], dt_bias: Optional[Tensor],
                initial_states: Optional[Tensor], seq_idx: Optional[Tensor],
                cu_seqlens: Optional[Tensor], dout: Tensor, dfinal_states: Optional[Tensor],
                y: Optional[Tensor], checkpoints: Optional[Tensor], dt_softplus: bool,
                dt_limit: bool, dt_min: float, dt_max: float, chunk_size: int,
                want_dinitial: bool) -> Tuple[Tensor, Tensor, Tensor, Tensor, Tensor, Tensor,
                                              Tensor, Tensor, Tensor]:
        return _impl_ssd.ssd_bwd(x, dt, A, B, C, D, z, dt_bias, initial_states, seq_idx,
                                 cu_seqlens, dout, dfinal_states, y, checkpoints, dt_softplus,
                                 dt_limit, dt_min, dt_max, chunk_size, want_dinitial)

    @ssd_bwd.register_fake
    def _(x, dt, A, B, C, D, z, dt_bias, initial_states, seq_idx, cu_seqlens, dout,
          dfinal_states, y, checkpoints, dt_softplus, dt_limit, dt_min, dt_max, chunk_size,
          want_dinitial):
        return _impl_ssd.ssd_bwd_outputs(x, dt, A, B, D, z, dt_bias, want_dinitial)

    def _ssd_setup(ctx, inputs, output):
        _ssd_save(ctx, inputs, output[2], output[3], output[4])

    torch.library.register_autograd(
        "portssm::ssd_chunk_scan_fwd",
        lambda ctx, dout, dfinal, dvarlen, dy, dckpt: _ssd_backward(ctx, dout, dfinal, ssd_bwd),
        setup_context=_ssd_setup)

else:  # torch < 2.4: the autograd.Function classes above on the traced road too
    conv_fwd = _ConvFwd.apply
    scan_fwd = _ScanFwd.apply
    ssd_fwd = _SsdFwd.apply
    conv_bwd = _impl.conv_bwd
    scan_bwd = _impl.scan_bwd
    ssd_bwd = _impl_ssd.ssd_bwd
    conv_update = _impl.conv_update
    state_update = _impl.state_update


def route(traced, function, impl):
    """call(grad, *args) of one forward op: the custom op while torch.compile traces (it sees
    one op, with its fake and autograd formula); in eager, the autograd.Function where grad
    will flow, else the implementation itself, past the dispatcher (what the decode ops do)."""

    def call(grad, *args):
        if is_compiling():
            return traced(*args)
        return function(*args) if grad else impl(*args)

    return call


conv_fwd_routed = route(conv_fwd, _ConvFwd.apply, _impl.conv_fwd)
scan_fwd_routed = route(scan_fwd, _ScanFwd.apply, _impl.scan_fwd)
ssd_fwd_routed = route(ssd_fwd, _SsdFwd.apply, _impl_ssd.ssd_fwd)
