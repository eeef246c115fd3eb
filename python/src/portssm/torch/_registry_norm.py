"""The row norms as torch sees them, as _registry.py does the other ops: with
torch.library.custom_op (torch >= 2.4) "portssm::norm_fwd" and "portssm::norm_bwd" with fake
implementations and the forward's autograd formula through the backward op; before that (or
with PORTSSM_TORCH_NO_CUSTOM_OP=1) the same under a plain torch.autograd.Function.

    norm_fwd(x, residual, z, weight, bias, eps, rms, group_size, norm_before_gate,
             residual_out, save_stats) -> (out, residual_out, mean, rstd)
        x, residual, z: (rows, hidden); residual_out: _impl_norm.RESIDUAL_NONE / _ACT / _F32;
        save_stats: mean (LayerNorm) and rstd for the backward (asked for only where grad
        will flow)
    norm_fwd_routed(grad, *args): the custom op while torch.compile traces, else the Function
        where grad will flow, else the implementation itself
"""

from typing import Optional, Tuple

import torch

from . import _impl_norm
from ._registry import USES_CUSTOM_OP, _no_zero_grads, route

Tensor = torch.Tensor


def _present(t):
    return t is not None and t.numel() > 0


def _norm_save(ctx, inputs, res_out, mean, rstd):
    (x, residual, z, weight, bias, eps, rms, group_size, norm_before_gate, residual_out,
     save_stats) = inputs
    # the backward normalises what the forward did: its residual_out where it wrote one
    saved_x = res_out if residual_out != _impl_norm.RESIDUAL_NONE else x
    ctx.save_for_backward(saved_x, z, weight, bias, mean if _present(mean) else None, rstd)
    ctx.options = (rms, group_size, norm_before_gate)
    ctx.has_residual = residual is not None
    ctx.residual_f32 = residual is not None and residual.dtype != x.dtype
    ctx.has_residual_out = residual_out != _impl_norm.RESIDUAL_NONE
    ctx.mark_non_differentiable(mean, rstd)
    _no_zero_grads(ctx)


def _norm_backward(ctx, dout, dres_out, norm_bwd):
    x, z, weight, bias, mean, rstd = ctx.saved_tensors
    rms, group_size, norm_before_gate = ctx.options
    needs = ctx.needs_input_grad
    want_dz = z is not None and needs[2]
    want_dw = needs[3]
    want_db = bias is not None and needs[4]
    if dout is None:  # only residual_out was used downstream
        dout = torch.zeros(x.shape, dtype=ctx.out_dtype, device=x.device)
    dres_out = dres_out if ctx.has_residual_out else None
    dx, dres, dz, dw, db, _ = norm_bwd(x, z, weight, bias, mean, rstd, dout, dres_out, rms,
                                       group_size, norm_before_gate, ctx.residual_f32, want_dz,
                                       want_dw, want_db, False)
    dresidual = None
    if ctx.has_residual and needs[1]:
        dresidual = dres if ctx.residual_f32 else dx  # one gradient, the residual's dtype
    return (dx if needs[0] else None, dresidual, dz if want_dz else None,
            dw if want_dw else None, db if want_db else None) + (None,) * 6


class _NormFwd(torch.autograd.Function):
    @staticmethod
    def forward(ctx, *inputs):
        out, res, mean, rstd = _impl_norm.norm_fwd(*inputs)
        _norm_save(ctx, inputs, res, mean, rstd)
        ctx.out_dtype = out.dtype
        return out, res, mean, rstd

    @staticmethod
    def backward(ctx, dout, dres_out, dmean, drstd):
        return _norm_backward(ctx, dout, dres_out, _impl_norm.norm_bwd)


if USES_CUSTOM_OP:
    custom_op = torch.library.custom_op

    @custom_op("portssm::norm_fwd", mutates_args=())
    def norm_fwd(x: Tensor, residual: Optional[Tensor], z: Optional[Tensor], weight: Tensor,
                 bias: Optional[Tensor], eps: float, rms: bool, group_size: int,
                 norm_before_gate: bool, residual_out: int,
                 save_stats: bool) -> Tuple[Tensor, Tensor, Tensor, Tensor]:
        return _impl_norm.norm_fwd(x, residual, z, weight, bias, eps, rms, group_size,
                                   norm_before_gate, residual_out, save_stats)

    @norm_fwd.register_fake
    def _(x, residual, z, weight, bias, eps, rms, group_size, norm_before_gate, residual_out,
          save_stats):
        return _impl_norm.norm_fwd_outputs(x, rms, group_size, residual_out, save_stats)

    @custom_op("portssm::norm_bwd", mutates_args=())
    def norm_bwd(x: Tensor, z: Optional[Tensor], weight: Tensor, bias: Optional[Tensor],
                 mean: Optional[Tensor], rstd: Tensor, dout: Tensor,
                 dresidual_out: Optional[Tensor], rms: bool, group_size: int,
                 norm_before_gate: bool, dresidual_f32: bool, want_dz: bool, want_dweight: bool,
                 want_dbias: bool,
                 want_out: bool) -> Tuple[Tensor, Tensor, Tensor, Tensor, Tensor, Tensor]:
        return _impl_norm.norm_bwd(x, z, weight, bias, mean, rstd, dout, dresidual_out, rms,
                                   group_size, norm_before_gate, dresidual_f32, want_dz,
                                   want_dweight, want_dbias, want_out)

    @norm_bwd.register_fake
    def _(x, z, weight, bias, mean, rstd, dout, dresidual_out, rms, group_size,
          norm_before_gate, dresidual_f32, want_dz, want_dweight, want_dbias, want_out):
        return _impl_norm.norm_bwd_outputs(x, z, weight, bias, dout, dresidual_f32, want_dz,
                                           want_dweight, want_dbias, want_out)

    def _norm_setup(ctx, inputs, output):
        _norm_save(ctx, inputs, output[1], output[2], output[3])
        ctx.out_dtype = output[0].dtype

    torch.library.register_autograd(
        "portssm::norm_fwd",
        lambda ctx, dout, dres_out, dmean, drstd: _norm_backward(ctx, dout, dres_out, norm_bwd),
        setup_context=_norm_setup)

else:  # torch < 2.4: the autograd.Function on the traced road too
    norm_fwd = _NormFwd.apply
    norm_bwd = _impl_norm.norm_bwd

norm_fwd_routed = route(norm_fwd, _NormFwd.apply, _impl_norm.norm_fwd)
