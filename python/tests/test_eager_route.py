"""Eager calls of the forward ops take the short road (portssm/torch/_registry.py, route()):
the implementation itself where no gradient will flow, the autograd.Function where one will,
never the custom op's dispatcher, which only torch.compile needs.  Both roads give the custom
op's results bit for bit: the same kernels run."""

import pytest
import torch
from torch.profiler import ProfilerActivity, profile

import portssm.torch as pt
from portssm.torch import _registry
from conftest import require_backward
from test_autograd_outputs import OPS

CUSTOM_OPS = {"conv": "portssm::causal_conv1d_fwd", "scan": "portssm::selective_scan_fwd",
              "ssd": "portssm::ssd_chunk_scan_fwd"}
FUNCTIONS = {"conv": "_ConvFwdBackward", "scan": "_ScanFwdBackward", "ssd": "_SsdFwdBackward"}


def _traced_road(monkeypatch):
    """Every routed op as while torch.compile traces: through the custom op."""
    if not pt.USES_CUSTOM_OP:
        pytest.skip("torch %s has no torch.library.custom_op" % torch.__version__)
    for name in ("conv_fwd", "scan_fwd", "ssd_fwd"):
        traced = getattr(_registry, name)
        monkeypatch.setattr(_registry, name + "_routed",
                            lambda grad, *args, _t=traced: _t(*args))


def _ops_seen(run):
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        result = run()
    return result, set(e.name for e in prof.events())


@pytest.mark.parametrize("op", sorted(OPS))
def test_eager_inference_skips_the_dispatcher(device, op, monkeypatch):
    run, _ = OPS[op](device)
    with torch.no_grad():
        got, names = _ops_seen(run)
        _traced_road(monkeypatch)
        want, traced_names = _ops_seen(run)
    assert CUSTOM_OPS[op] in traced_names  # (the profiler does see the custom op)
    assert CUSTOM_OPS[op] not in names, sorted(n for n in names if "portssm" in n)
    for g, w in zip(got, want):
        assert torch.equal(g, w)


@pytest.mark.parametrize("op", sorted(OPS))
def test_eager_training_takes_the_function(device, op, monkeypatch):
    if require_backward(device):
        pytest.skip("the %s backend has no backward" % device)
    run, leaves = OPS[op](device)
    out, _ = run()
    assert type(out.grad_fn).__name__ == FUNCTIONS[op]
    gout = torch.randn_like(out)
    got = torch.autograd.grad(out, leaves, gout)
    _traced_road(monkeypatch)
    out2, _ = run()
    assert type(out2.grad_fn).__name__ != FUNCTIONS[op]
    want = torch.autograd.grad(out2, leaves, gout)
    assert torch.equal(out, out2)
    for g, w in zip(got, want):
        assert torch.equal(g, w)
