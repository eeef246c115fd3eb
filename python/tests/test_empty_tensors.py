"""Empty tensors (L = 0, batch 0, channels or heads 0, rows 0) through the torch ops: empty
outputs of the right shapes, states carried through no step (L = 0: the final state is the
initial one, and its gradient flows back unchanged), gradients of sums over nothing zero, and a
bad argument next to an empty tensor still refused with the library's exception.  The C suite
(tests/test_validation.c) checks the same on every backend byte by byte; this checks the torch
layer passes such tensors through."""

import pytest
import torch

from portssm.errors import InvalidArgumentError
import portssm.torch as pt


def rand(*shape, device, lo=-1.0, hi=1.0):
    return torch.rand(*shape, device=device) * (hi - lo) + lo


def leaf(*shape, device, lo=-1.0, hi=1.0):
    return rand(*shape, device=device, lo=lo, hi=hi).requires_grad_()


@pytest.mark.parametrize("B,D,L", [(2, 4, 0), (0, 4, 5), (2, 0, 5)])
def test_causal_conv1d(device, B, D, L):
    W = 4
    x, w, b = leaf(B, D, L, device=device), leaf(D, W, device=device), leaf(D, device=device)
    init = leaf(B, D, W - 1, device=device)
    out, final = pt.causal_conv1d_fn(x, w, b, initial_states=init, return_final_states=True,
                                     activation="silu")
    assert out.shape == (B, D, L) and final.shape == (B, D, W - 1)
    if L == 0:
        assert torch.equal(final, init.detach())
    g = rand(B, D, W - 1, device=device)
    (final * g).sum().backward()
    assert torch.equal(w.grad, torch.zeros_like(w)) and torch.equal(b.grad, torch.zeros_like(b))
    assert x.grad.shape == x.shape
    if L == 0:
        assert torch.equal(init.grad, g)


@pytest.mark.parametrize("B,D,L", [(2, 4, 0), (0, 4, 5), (2, 0, 5)])
def test_selective_scan(device, B, D, L):
    N = 3
    u, delta = leaf(B, D, L, device=device), leaf(B, D, L, device=device, lo=0.1, hi=0.5)
    A, Dd = leaf(D, N, device=device, lo=-1.0, hi=-0.1), leaf(D, device=device)
    Bm, Cm = leaf(B, N, L, device=device), leaf(B, N, L, device=device)
    out, last = pt.selective_scan_fn(u, delta, A, Bm, Cm, D=Dd, delta_softplus=True,
                                     return_last_state=True)
    assert out.shape == (B, D, L) and last.shape == (B, D, N)
    if L == 0:
        assert torch.equal(last, torch.zeros_like(last))
    (out.sum() + last.sum()).backward()
    assert torch.equal(A.grad, torch.zeros_like(A)) and torch.equal(Dd.grad, torch.zeros_like(Dd))
    assert u.grad.shape == u.shape and Bm.grad.shape == Bm.shape


@pytest.mark.parametrize("B,L,H", [(2, 0, 2), (0, 5, 2), (2, 5, 0)])
def test_ssd(device, B, L, H):
    P, G, N = 3, 1, 4
    x, dt = leaf(B, L, H, P, device=device), leaf(B, L, H, device=device, lo=0.1, hi=0.5)
    A, Dd = leaf(H, device=device, lo=-1.0, hi=-0.1), leaf(H, device=device)
    dt_bias = leaf(H, device=device)
    Bm, Cm = leaf(B, L, G, N, device=device), leaf(B, L, G, N, device=device)
    init = leaf(B, H, P, N, device=device)
    out, final = pt.mamba_chunk_scan_combined(x, dt, A, Bm, Cm, chunk_size=64, D=Dd,
                                              dt_bias=dt_bias, initial_states=init,
                                              dt_softplus=True, return_final_states=True)
    assert out.shape == (B, L, H, P) and final.shape == (B, H, P, N)
    if L == 0:
        assert torch.equal(final, init.detach())
    g = rand(B, H, P, N, device=device)
    (out.sum() + (final * g).sum()).backward()
    for p in (A, Dd, dt_bias):
        assert torch.equal(p.grad, torch.zeros_like(p))
    if L == 0:
        assert torch.equal(init.grad, g)


@pytest.mark.parametrize("B,D", [(0, 4), (2, 0)])
def test_decode_leaves_state(device, B, D):
    N, W, S = 3, 4, 3
    x = rand(B, D, device=device)
    conv_state, ssm_state = rand(B, D, S, device=device), rand(B, D, N, device=device)
    conv_before, ssm_before = conv_state.clone(), ssm_state.clone()
    out = pt.causal_conv1d_update(x, conv_state, rand(D, W, device=device), None, "silu")
    assert out.shape == (B, D)
    out = pt.selective_state_update(ssm_state, x, rand(B, D, device=device, lo=0.1, hi=0.5),
                                    rand(D, N, device=device, lo=-1.0, hi=-0.1),
                                    rand(B, N, device=device), rand(B, N, device=device))
    assert out.shape == (B, D)
    assert torch.equal(conv_state, conv_before) and torch.equal(ssm_state, ssm_before)


def test_norm_no_rows(device):
    y = pt.rms_norm_fn(rand(0, 8, device=device), rand(8, device=device), None)
    assert y.shape == (0, 8)


def test_bad_argument_beside_empty_tensor(device):
    x, w = rand(2, 4, 0, device=device), rand(4, 4, device=device)
    with pytest.raises(InvalidArgumentError, match="weight"):
        pt.causal_conv1d_fn(x, w[:3], None, activation="silu")
    with pytest.raises(InvalidArgumentError, match="initial_states"):
        pt.causal_conv1d_fn(x, w, None, initial_states=rand(2, 4, 2, device=device),
                            return_final_states=True, activation="silu")
