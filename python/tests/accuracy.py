"""Checks of a 16-bit result that took another (equally valid) order of roundings than the
composition it replaces: elementwise tolerances do not hold there (a gradient summed over
thousands of bf16 terms differs by an ulp of its largest terms, which is more than its small
elements' tolerance), so the result is judged against a float32 run of the same formulas: it
must be as close to it as the composition is, and close to the composition."""

import torch


def rel_l2(got, ref):
    """||got - ref|| / ||ref||, in float64."""
    g, r = got.double(), ref.double().to(got.device)
    return ((g - r).norm() / r.norm().clamp_min(1e-300)).item()


def assert_as_accurate(got, composition, exact, name, slack=2.0, floor=4e-3, apart=2e-2):
    """got's relative L2 error against exact (float32) at most slack times the composition's
    plus floor (half of bf16's epsilon: on a few elements such errors are noisy, a wrong
    gradient's is of order 1), and got within apart (relative L2) of the composition."""
    assert got.shape == composition.shape == exact.shape, name
    assert torch.isfinite(got).all(), name + ": not finite"
    e_got, e_comp = rel_l2(got, exact), rel_l2(composition, exact)
    assert e_got <= slack * e_comp + floor, (
        "%s: error against float32 %.3g, the composition's %.3g" % (name, e_got, e_comp))
    d = rel_l2(got, composition)
    assert d <= apart, "%s: %.3g apart from the composition" % (name, d)
