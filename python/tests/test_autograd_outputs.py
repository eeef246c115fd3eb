"""The forward ops' outputs that take no gradient (the SSD's saved y and checkpoints, the scan's
checkpoints, final states nobody used) cost the backward nothing: torch would fill a zero
tensor of each one's size per step unless told not to (for the SSD 1.5x x's bytes a step).
And a loss on the final state alone, with the output unused, still gives every gradient: the
same ones as an explicit zero gradient of the output."""

import pytest
import torch
from torch.profiler import ProfilerActivity, profile

import portssm.torch as pt
from conftest import require_backward

FILLS = ("aten::zeros", "aten::zeros_like", "aten::zero_", "aten::fill_", "aten::ones_like")


def rand(*shape, device, lo=-1.0, hi=1.0):
    return (torch.rand(*shape, device=device) * (hi - lo) + lo).requires_grad_()


def _conv(device):
    x, w, b = rand(2, 8, 40, device=device), rand(8, 4, device=device), rand(8, device=device)
    init = rand(2, 8, 3, device=device)

    def run():
        return pt.causal_conv1d_fn(x, w, b, None, init, True, None, "silu")
    return run, [x, w, b, init]


def _scan(device):
    Bt, D, L, N = 2, 8, 40, 4
    u, dt = rand(Bt, D, L, device=device), rand(Bt, D, L, device=device, lo=0.05, hi=0.5)
    A = rand(D, N, device=device, lo=-1.5, hi=-0.2)
    B, C = rand(Bt, N, L, device=device), rand(Bt, N, L, device=device)
    Dv, z = rand(D, device=device), rand(Bt, D, L, device=device)

    def run():
        return pt.selective_scan_fn(u, dt, A, B, C, Dv, z, None, True, return_last_state=True)
    return run, [u, dt, A, B, C, Dv, z]


def _ssd(device):
    Bt, L, H, P, G, N = 2, 150, 2, 64, 1, 128  # the GPU backends' fast kernels' shape
    x, z = rand(Bt, L, H, P, device=device), rand(Bt, L, H, P, device=device)
    dt = rand(Bt, L, H, device=device, lo=0.02, hi=0.3)
    A = rand(H, device=device, lo=-1.5, hi=-0.2)
    B, C = rand(Bt, L, G, N, device=device), rand(Bt, L, G, N, device=device)
    Dv, dtb = rand(H, P, device=device), rand(H, device=device)

    def run():
        return pt.mamba_chunk_scan_combined(x, dt, A, B, C, 64, D=Dv, z=z, dt_bias=dtb,
                                            dt_softplus=True, return_final_states=True)
    return run, [x, z, dt, A, B, C, Dv, dtb]


OPS = {"conv": _conv, "scan": _scan, "ssd": _ssd}


def _forward(device, op):
    """(out, final state, the leaves) of op's forward on fresh inputs."""
    if require_backward(device):
        pytest.skip("the %s backend has no backward" % device)
    run, leaves = OPS[op](device)
    return run() + (leaves,)


@pytest.mark.parametrize("op", sorted(OPS))
def test_backward_fills_no_zero_gradients(device, op):
    out, _, leaves = _forward(device, op)
    gout = torch.randn_like(out)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        grads = torch.autograd.grad(out, leaves, gout)
    names = set(e.name for e in prof.events())
    # (the profiler saw the op's backward node, so an absence of fills means something)
    assert any("evaluate_function" in n and ("Fwd" in n or "_fwd" in n) for n in names), names
    fills = sorted(names.intersection(FILLS))
    assert not fills, "the backward filled tensors: %s" % fills
    assert all(g is not None and torch.isfinite(g).all() for g in grads)


@pytest.mark.parametrize("op", sorted(OPS))
def test_backward_through_final_state_only(device, op):
    """(Also with the zero fills back on, where it guards the None dout path.)"""
    out, final, leaves = _forward(device, op)
    gfinal = torch.randn_like(final)
    alone = torch.autograd.grad(final, leaves, gfinal, retain_graph=True, allow_unused=True)
    both = torch.autograd.grad([out, final], leaves, [torch.zeros_like(out), gfinal],
                               allow_unused=True)
    for i, (a, b) in enumerate(zip(alone, both)):
        if b is None:
            assert a is None, i
            continue
        assert a is not None, i
        torch.testing.assert_close(a, b, rtol=0, atol=0, msg="gradient %d" % i)
    assert any(b is not None and b.abs().sum() > 0 for b in both)
