"""Drop-ins for mamba-ssm 2.3.2.post1's fused norms, on libportssm's norm ops (forward and
backward, deterministic), with the same names, argument order, defaults and return values:

    layer_norm_fn, rms_norm_fn, RMSNorm         (mamba_ssm.ops.triton.layer_norm)
    layernorm_fn, rmsnorm_fn,                   (mamba_ssm.ops.triton.layernorm_gated; its
    GatedLayerNorm, GatedRMSNorm                 LayerNorm and RMSNorm modules)

Leading dims are flattened to rows (a view where torch can make one: any row stride works, no
copy); the last dim may have any stride.  Options portssm does not implement (dropout_p > 0,
x1 / weight1 / bias1, rowscale) raise NotImplementedError naming the option.  Weights (and
residuals) of a 16-bit dtype that is neither float32 nor x's are used through an exact float32
copy, so every combination of float32, float16 and bfloat16 works; float64 is refused (a
DtypeError naming the argument), as by every portssm op.
"""

from __future__ import annotations

import torch

from ..errors import InvalidArgumentError
from . import _checks, _impl_norm, _registry_norm
from ._runtime import compile_boundary

_F32 = torch.float32

__all__ = ["layer_norm_fn", "rms_norm_fn", "RMSNorm", "layernorm_fn", "rmsnorm_fn",
           "GatedLayerNorm", "GatedRMSNorm"]


def _unsupported(option, what):
    raise NotImplementedError(
        "portssm: %s=%s is not implemented by portssm's fused norm (%s); call it without "
        "that option" % (option, what, "mamba_ssm.ops.triton.layer_norm"))


def _rows(t):
    """(..., H) as (rows, H): a view where torch can make one."""
    return t.reshape(-1, t.shape[-1])


def _params(fn, x, weight, bias):
    """weight and bias as the C op takes them: float32 or x's dtype, one dtype for both (an
    exact float32 copy of a float16/bfloat16 one otherwise; autograd rounds their gradients
    back to their dtype)."""
    wanted = (_F32, x.dtype)
    if weight.dtype in wanted and (bias is None or bias.dtype == weight.dtype):
        return weight, bias
    return _checks.f32(fn, "weight", weight), _checks.f32(fn, "bias", bias)


def _needs_grad(*tensors):
    return torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in tensors)


def _check_args(fn, x, weight, bias, other_name, other):
    """x has a last dim (rows are made of it), weight and bias are (hidden,) (the library
    checks their sizes), residual or z (other) has x's shape; x's dtype and other's are ones
    portssm computes in."""
    _checks.tensor(fn, "x", x, "(..., hidden)", 1, 2, 3, 4, 5, 6, 7, 8)
    _checks.tensor(fn, "weight", weight, "(hidden,)", 1)
    _checks.tensor(fn, "bias", bias, "(hidden,)", 1)
    _checks.tensor(fn, other_name, other, "x's shape %s" % (tuple(x.shape),), x.dim())
    if other is not None and other.shape != x.shape:
        raise InvalidArgumentError("%s: '%s' has shape %s but x has %s: they must be the same"
                                   % (fn, other_name, tuple(other.shape), tuple(x.shape)))
    _checks.floating(fn, "x", x)
    _checks.floating(fn, other_name, other)


def _norm(fn, x, weight, bias, residual, z, eps, rms, group_size, norm_before_gate,
          residual_dtype):
    """out (x's shape and dtype) and residual_out (None where not asked for: residual_dtype
    None) of the C op over the rows of x."""
    shape = x.shape
    x2 = _rows(x)
    w, b = _params(fn, x, weight, bias)
    res2 = _rows(residual) if residual is not None else None
    z2 = _rows(z) if z is not None else None
    res_kind, res_cast = _impl_norm.RESIDUAL_NONE, None
    if residual_dtype is not None:
        if residual_dtype == x.dtype:
            res_kind = _impl_norm.RESIDUAL_ACT
        else:
            # float32, or (another 16-bit dtype) computed in float32 and rounded once after
            res_kind = _impl_norm.RESIDUAL_F32
            res_cast = residual_dtype if residual_dtype != _F32 else None
    if res2 is not None and res2.dtype not in (_F32, x.dtype):
        res2 = res2.float()  # exact
    grad = _needs_grad(x, residual, z, weight, bias)
    out, res_out, _, _ = _registry_norm.norm_fwd_routed(
        grad, x2, res2, z2, w, b, float(eps), bool(rms), int(group_size or 0),
        bool(norm_before_gate), res_kind, grad)
    out = out.reshape(shape)
    if res_kind == _impl_norm.RESIDUAL_NONE:
        return out, None
    res_out = res_out.reshape(shape)
    return out, res_out if res_cast is None else res_out.to(res_cast)


# ---------------------------------------------------------------- mamba_ssm.ops.triton.layer_norm


@compile_boundary
def layer_norm_fn(
    x,
    weight,
    bias,
    residual=None,
    x1=None,
    weight1=None,
    bias1=None,
    eps=1e-6,
    dropout_p=0.0,
    rowscale=None,
    prenorm=False,
    residual_in_fp32=False,
    is_rms_norm=False,
    return_dropout_mask=False,
):
    """LayerNorm (RMSNorm with is_rms_norm) of x + residual over the last dim.  Returns out,
    or (out, residual_out) with prenorm: x + residual in residual's dtype (float32 with
    residual_in_fp32 and no residual; x itself when neither asks for another tensor).  With
    return_dropout_mask the (absent, dropout_p being 0) masks follow, as None."""
    for name, value in (("x1", x1), ("weight1", weight1), ("bias1", bias1),
                        ("rowscale", rowscale)):
        if value is not None:
            _unsupported(name, "<tensor>")
    if dropout_p > 0.0:
        _unsupported("dropout_p", dropout_p)
    _check_args("rms_norm_fn" if is_rms_norm else "layer_norm_fn", x, weight, bias, "residual",
                residual)
    if residual is not None:
        residual_dtype = residual.dtype
    else:
        residual_dtype = _F32 if residual_in_fp32 else None
    if residual is None and residual_dtype == x.dtype:
        residual_dtype = None  # residual_out would be x itself
    if not prenorm and not _needs_grad(x, weight, bias, residual):
        residual_dtype = None  # nobody reads residual_out: not written
    out, residual_out = _norm("rms_norm_fn" if is_rms_norm else "layer_norm_fn", x, weight, bias,
                              residual, None, eps, is_rms_norm, 0, True, residual_dtype)
    if residual_out is None:
        residual_out = x
    result = (out, residual_out) if prenorm else (out,)
    if return_dropout_mask:
        result = result + (None, None)
    return result if len(result) > 1 else result[0]


@compile_boundary
def rms_norm_fn(
    x,
    weight,
    bias,
    residual=None,
    x1=None,
    weight1=None,
    bias1=None,
    eps=1e-6,
    dropout_p=0.0,
    rowscale=None,
    prenorm=False,
    residual_in_fp32=False,
    return_dropout_mask=False,
):
    """layer_norm_fn with is_rms_norm=True."""
    return layer_norm_fn(x, weight, bias, residual, x1, weight1, bias1, eps, dropout_p, rowscale,
                         prenorm, residual_in_fp32, True, return_dropout_mask)


class RMSNorm(torch.nn.Module):
    """mamba_ssm.ops.triton.layer_norm.RMSNorm: weight (hidden_size) of ones, no bias."""

    def __init__(self, hidden_size, eps=1e-5, dropout_p=0.0, device=None, dtype=None):
        factory_kwargs = {"device": device, "dtype": dtype}
        super().__init__()
        self.eps = eps
        if dropout_p > 0.0:
            self.drop = torch.nn.Dropout(dropout_p)
        else:
            self.drop = None
        self.weight = torch.nn.Parameter(torch.empty(hidden_size, **factory_kwargs))
        self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        torch.nn.init.ones_(self.weight)

    def forward(self, x, residual=None, prenorm=False, residual_in_fp32=False):
        return rms_norm_fn(
            x,
            self.weight,
            self.bias,
            residual=residual,
            eps=self.eps,
            dropout_p=self.drop.p if self.drop is not None and self.training else 0.0,
            prenorm=prenorm,
            residual_in_fp32=residual_in_fp32,
        )


# ---------------------------------------------------------------- mamba_ssm.ops.triton.layernorm_gated


@compile_boundary
def layernorm_fn(x, weight, bias, z=None, eps=1e-6, group_size=None, norm_before_gate=True,
                 is_rms_norm=False):
    """LayerNorm (RMSNorm with is_rms_norm) over groups of group_size channels (None: all);
    with z, norm(x) * silu(z) if norm_before_gate, else norm(x * silu(z)).  Returns out in
    x's dtype and shape."""
    fn = "rmsnorm_fn" if is_rms_norm else "layernorm_fn"
    _check_args(fn, x, weight, bias, "z", z)
    out, _ = _norm(fn, x, weight, bias, None, z, eps, is_rms_norm, group_size, norm_before_gate,
                   None)
    return out


@compile_boundary
def rmsnorm_fn(x, weight, bias, z=None, eps=1e-6, group_size=None, norm_before_gate=True):
    """layernorm_fn with is_rms_norm=True."""
    return layernorm_fn(x, weight, bias, z, eps, group_size, norm_before_gate, True)


class GatedLayerNorm(torch.nn.Module):
    """mamba_ssm.ops.triton.layernorm_gated.LayerNorm: weight of ones, bias of zeros;
    group_size None is one group of hidden_size."""

    def __init__(self, hidden_size, eps=1e-5, group_size=None, norm_before_gate=True,
                 device=None, dtype=None):
        factory_kwargs = {"device": device, "dtype": dtype}
        super().__init__()
        self.eps = eps
        self.weight = torch.nn.Parameter(torch.empty(hidden_size, **factory_kwargs))
        self.bias = torch.nn.Parameter(torch.empty(hidden_size, **factory_kwargs))
        self.group_size = group_size
        self.norm_before_gate = norm_before_gate
        self.reset_parameters()

    def reset_parameters(self):
        torch.nn.init.ones_(self.weight)
        torch.nn.init.zeros_(self.bias)

    def forward(self, x, z=None):
        return layernorm_fn(x, self.weight, self.bias, z=z, group_size=self.group_size,
                            eps=self.eps, norm_before_gate=self.norm_before_gate)


class GatedRMSNorm(torch.nn.Module):
    """mamba_ssm.ops.triton.layernorm_gated.RMSNorm: weight of ones, no bias; group_size None
    is one group of hidden_size."""

    def __init__(self, hidden_size, eps=1e-5, group_size=None, norm_before_gate=True,
                 device=None, dtype=None):
        factory_kwargs = {"device": device, "dtype": dtype}
        super().__init__()
        self.eps = eps
        self.weight = torch.nn.Parameter(torch.empty(hidden_size, **factory_kwargs))
        self.register_parameter("bias", None)
        self.group_size = group_size
        self.norm_before_gate = norm_before_gate
        self.reset_parameters()

    def reset_parameters(self):
        torch.nn.init.ones_(self.weight)

    def forward(self, x, z=None):
        return rmsnorm_fn(x, self.weight, self.bias, z=z, eps=self.eps,
                          group_size=self.group_size, norm_before_gate=self.norm_before_gate)
