"""Comparisons shared by the module-layer tests: a float32 module's output and gradients against
the float64 formulas of module_references.py."""

import torch

from module_references import double_params


def assert_close_rel(got, ref, name, tol=2e-3):
    """max |got - ref| <= tol * max |ref| (tolerant of the float32 rounding of long sums, exact
    enough to catch any wrong term), and got finite."""
    got64 = got.detach().double().cpu()
    ref64 = ref.detach().double().cpu()
    assert got64.shape == ref64.shape, "%s: shape %s, expected %s" % (
        name, tuple(got64.shape), tuple(ref64.shape))
    assert torch.isfinite(got64).all(), "%s: not finite" % name
    scale = ref64.abs().max().item()
    err = (got64 - ref64).abs().max().item()
    assert err <= tol * scale + 1e-12, "%s: max |diff| %.3g, max |ref| %.3g (tol %g)" % (
        name, err, scale, tol)


def check_against_reference(module, ref_fn, inputs, tol=2e-3, grad_tol=3e-3, **kwargs):
    """module(*inputs, **kwargs) and its gradients (inputs and parameters, for a random
    upstream gradient) against ref_fn(params64, *inputs64, **kwargs) in float64."""
    p64 = double_params(module)
    x64 = [t.detach().cpu().double().requires_grad_(t.is_floating_point()) for t in inputs]
    xs = [t.detach().clone().requires_grad_(t.is_floating_point()) for t in inputs]
    module.zero_grad(set_to_none=True)
    out = module(*xs, **kwargs)
    ref = ref_fn(p64, *x64, **{k: (v.cpu() if isinstance(v, torch.Tensor) else v)
                               for k, v in kwargs.items()})
    assert_close_rel(out, ref, "output", tol)
    dout = torch.randn_like(out)
    out.backward(dout)
    ref.backward(dout.double().cpu())
    for i, (x, x_ref) in enumerate(zip(xs, x64)):
        if x.is_floating_point():
            assert_close_rel(x.grad, x_ref.grad, "d input %d" % i, grad_tol)
    for name, param in module.named_parameters():
        ref_grad = p64[name].grad
        if ref_grad is None:
            assert param.grad is None or not param.grad.any(), "%s: gradient where none" % name
            continue
        assert param.grad is not None, "%s: no gradient" % name
        assert_close_rel(param.grad, ref_grad, "d " + name, grad_tol)
    return out
