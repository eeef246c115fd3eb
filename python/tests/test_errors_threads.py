"""Bad input raises an exception naming the argument and changes no output (in-place states
included); two threads on two contexts give the results of one."""

import threading

import pytest
import torch

import portssm.torch as pt
from conftest import run_in_threads
from portssm import errors


def _update_args(device):
    B, D, N = 2, 6, 4
    return dict(state=torch.randn(B, D, N, device=device), x=torch.randn(B, D, device=device),
                dt=torch.rand(B, D, device=device), A=-torch.rand(D, N, device=device),
                B=torch.randn(B, N, device=device), C=torch.randn(B, N, device=device))


@pytest.mark.parametrize("bad, name, exc", [
    ("shape", "'B'", errors.InvalidArgumentError),
    ("dtype", "'x'", TypeError),
    ("device", "'C'", ValueError),
    ("index_dtype", "'state_batch_indices'", errors.InvalidArgumentError),
])
def test_state_update_bad_input(device, bad, name, exc):
    a = _update_args(device)
    idx = None
    if bad == "shape":
        a["B"] = torch.randn(2, 5, device=device)
    elif bad == "dtype":
        a["x"] = a["x"].double()
    elif bad == "device":
        a["C"] = a["C"].to("meta")
    elif bad == "index_dtype":
        idx = torch.tensor([0, 1], device=device, dtype=torch.float32)
    before = a["state"].clone()
    with pytest.raises(exc, match=name):
        pt.selective_state_update(a["state"], a["x"], a["dt"], a["A"], a["B"], a["C"],
                                  state_batch_indices=idx)
    assert torch.equal(a["state"], before)


def test_conv_update_bad_input_leaves_state(device):
    x = torch.randn(2, 4, device=device)
    state = torch.randn(2, 4, 3, device=device)
    before = state.clone()
    with pytest.raises(errors.InvalidArgumentError, match="'weight'"):
        pt.causal_conv1d_update(x, state, torch.randn(4, 9, device=device))  # S < W-1
    with pytest.raises(errors.InvalidArgumentError, match="'cache_seqlens'"):
        pt.causal_conv1d_update(x, state, torch.randn(4, 4, device=device),
                                cache_seqlens=torch.zeros(3, dtype=torch.int32, device=device))
    assert torch.equal(state, before)


def test_conv_fn_bad_input(device):
    x = torch.randn(2, 4, 10, device=device)
    with pytest.raises(errors.InvalidArgumentError, match="'bias'"):
        pt.causal_conv1d_fn(x, torch.randn(4, 4, device=device), torch.randn(3, device=device))
    with pytest.raises(TypeError, match="'seq_idx'"):
        pt.causal_conv1d_fn(x, torch.randn(4, 4, device=device),
                            seq_idx=torch.zeros(2, 10, dtype=torch.int64, device=device))


def test_wrong_device_across_cpu_and_cuda():
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device visible to torch here")
    a = _update_args("cuda")
    with pytest.raises(ValueError, match="'A' is on cpu"):
        pt.selective_state_update(a["state"], a["x"], a["dt"], a["A"].cpu(), a["B"], a["C"])


def test_odd_strides_are_fine(device):
    """portssm takes any strides: a non-contiguous input gives the contiguous input's result."""
    a = _update_args(device)
    x_wide = torch.randn(2, 12, device=device)
    x = x_wide[:, ::2]
    assert not x.is_contiguous()
    s1, s2 = a["state"].clone(), a["state"].clone()
    o1 = pt.selective_state_update(s1, x, a["dt"], a["A"], a["B"], a["C"])
    o2 = pt.selective_state_update(s2, x.contiguous(), a["dt"], a["A"], a["B"], a["C"])
    assert torch.equal(o1, o2) and torch.equal(s1, s2)


def test_two_threads_two_contexts(device):
    from portssm.torch import _runtime

    B, D, L, N = 2, 8, 200, 4
    inputs = [(torch.randn(B, D, L, device=device), torch.rand(B, D, L, device=device) * 0.5,
               -torch.rand(D, N, device=device), torch.randn(B, N, L, device=device),
               torch.randn(B, N, L, device=device)) for _ in range(2)]
    expected = [pt.selective_scan_fn(*a) for a in inputs]
    results, contexts = [None, None], [None, None]
    both_alive = threading.Barrier(2, timeout=120)  # each thread's context lives until both ran

    def work(i):
        try:
            if device == "cuda":
                torch.cuda.set_stream(torch.cuda.Stream())
            for _ in range(5):
                results[i] = pt.selective_scan_fn(*inputs[i])
            if device == "cuda":
                torch.cuda.current_stream().synchronize()
            contexts[i] = _runtime.context_of(inputs[i][0]).handle
        finally:
            both_alive.wait()

    failures = run_in_threads(work, 2)
    assert not failures, failures
    assert contexts[0] != contexts[1]  # one context per thread
    for r, e in zip(results, expected):
        assert torch.equal(r, e)
