"""torch.compile(fullgraph=True) traces a Mamba block built on portssm's ops (forward, backward
and the decode step) without graph breaks and gives eager's results; CUDA graphs capture and
replay the ops (cuda only)."""

import shutil

import pytest
import torch

import portssm.torch as pt
from conftest import require_backward, require_compile


def mamba_block(xz, conv_w, conv_b, A, Bv, Cv, D, db):
    x, z = xz.chunk(2, dim=1)
    x = pt.causal_conv1d_fn(x, conv_w, conv_b, activation="silu")
    return pt.selective_scan_fn(x, x * 0.1, A, Bv, Cv, D, z, db, delta_softplus=True)


def decode_step(x, conv_state, conv_w, conv_b, ssm_state, dt, A, Bv, Cv, D):
    h = pt.causal_conv1d_update(x, conv_state, conv_w, conv_b, "silu")
    return pt.selective_state_update(ssm_state, h, dt, A, Bv, Cv, D, None, None, True)


def _block_inputs(device, B=2, Dm=8, N=4, L=40, W=4):
    return [torch.randn(B, 2 * Dm, L, device=device), torch.randn(Dm, W, device=device),
            torch.randn(Dm, device=device), -torch.rand(Dm, N, device=device),
            torch.randn(B, N, L, device=device), torch.randn(B, N, L, device=device),
            torch.randn(Dm, device=device), torch.randn(Dm, device=device)]


def _backends(device):
    out = ["aot_eager"]
    if device == "cuda" or shutil.which("g++") or shutil.which("c++"):
        out.append("inductor")
    return out


def _assert_like_eager(compiled, inputs, device, tol):
    """compiled(mamba_block) gives eager mamba_block's output and, where the device has the
    backward ops, the same gradients of every input."""
    want_grad = not require_backward(device)
    leaves = [t.clone().requires_grad_(want_grad) for t in inputs]
    out = compiled(*leaves)
    torch.testing.assert_close(out, mamba_block(*inputs), rtol=tol, atol=tol)
    if want_grad:
        out.sum().backward()
        ref_leaves = [t.clone().requires_grad_() for t in inputs]
        mamba_block(*ref_leaves).sum().backward()
        for a, b in zip(leaves, ref_leaves):
            torch.testing.assert_close(a.grad, b.grad, rtol=tol, atol=tol)


@pytest.mark.parametrize("compiler", ["aot_eager", "inductor"])
def test_compile_mamba_block(device, compiler):
    require_compile()
    if compiler not in _backends(device):
        pytest.skip("inductor on cpu needs a C++ compiler, none found")
    torch._dynamo.reset()
    inputs = _block_inputs(device)
    _assert_like_eager(torch.compile(mamba_block, fullgraph=True, backend=compiler), inputs,
                       device, tol=1e-4)

    B, Dm, N = 2, 8, 4
    state_inputs = [torch.randn(B, Dm, device=device), torch.randn(B, Dm, 3, device=device),
                    inputs[1], inputs[2], torch.randn(B, Dm, N, device=device),
                    torch.rand(B, Dm, device=device), inputs[3],
                    torch.randn(B, N, device=device), torch.randn(B, N, device=device), inputs[6]]
    eager_states = [t.clone() for t in state_inputs]
    step = torch.compile(decode_step, fullgraph=True, backend=compiler)
    got = step(*state_inputs)
    want = decode_step(*eager_states)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(state_inputs[1], eager_states[1])  # conv_state mutated alike
    torch.testing.assert_close(state_inputs[4], eager_states[4])  # ssm state mutated alike


def test_compile_before_custom_op(device):
    """Before torch.library.custom_op (torch < 2.4, or PORTSSM_TORCH_NO_CUSTOM_OP=1, how
    test_before_custom_op.py runs this on any torch) dynamo cannot trace portssm's ops; each
    public op is then a torch._dynamo.disable()'d function: torch.compile without fullgraph runs
    it eagerly between graphs and gives eager's results and gradients, fullgraph=True stops at
    it with torch's message naming the op."""
    import inspect

    from conftest import compile_refusal

    if pt.USES_CUSTOM_OP:
        pytest.skip("torch %s traces portssm's custom ops (test_compile_mamba_block)"
                    % torch.__version__)
    refusal = compile_refusal()
    if refusal is not None:
        pytest.skip("torch %s refuses torch.compile here: %s" % (torch.__version__, refusal))
    assert inspect.unwrap(pt.causal_conv1d_fn) is not pt.causal_conv1d_fn
    torch._dynamo.reset()
    inputs = _block_inputs(device)
    _assert_like_eager(torch.compile(mamba_block, backend="aot_eager"), inputs, device, tol=1e-5)
    torch._dynamo.reset()
    with pytest.raises(Exception, match=r"(?s)disable.*causal_conv1d_fn"):
        torch.compile(mamba_block, fullgraph=True, backend="aot_eager")(*inputs)


def test_cuda_graph_capture_and_replay():
    if not torch.cuda.is_available():
        pytest.skip("CUDA graphs need a CUDA device; none visible to torch here")
    device = "cuda"
    inputs = _block_inputs(device)
    B, Dm, N = 2, 8, 4
    x = torch.randn(B, Dm, device=device)
    conv_state = torch.randn(B, Dm, 3, device=device)
    ssm_state = torch.randn(B, Dm, N, device=device)
    dt = torch.rand(B, Dm, device=device)
    Bv, Cv = torch.randn(B, N, device=device), torch.randn(B, N, device=device)
    static_xz = inputs[0]
    want_grad = not require_backward(device)
    leaves = [t.clone().requires_grad_(want_grad and i > 0) for i, t in enumerate(inputs)]

    def work():
        out = mamba_block(static_xz, *leaves[1:])
        if want_grad:
            out.sum().backward()
        return out, decode_step(x, conv_state, inputs[1], inputs[2], ssm_state, dt, inputs[3],
                                Bv, Cv, inputs[6])

    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):  # warm-up outside the capture (contexts, workspaces)
        work()
    torch.cuda.current_stream().wait_stream(s)
    for t in leaves:
        t.grad = None
    graph = torch.cuda.CUDAGraph()
    conv0, ssm0 = conv_state.clone(), ssm_state.clone()
    with torch.cuda.graph(graph):
        g_out, g_dec = work()
    # replay on new data, compare with eager on the same data
    static_xz.copy_(torch.randn_like(static_xz))
    conv_state.copy_(conv0)
    ssm_state.copy_(ssm0)
    graph.replay()
    torch.cuda.synchronize()
    ref_out = mamba_block(static_xz, *inputs[1:])
    c2, s2 = conv0.clone(), ssm0.clone()
    ref_dec = decode_step(x, c2, inputs[1], inputs[2], s2, dt, inputs[3], Bv, Cv, inputs[6])
    torch.testing.assert_close(g_out, ref_out)
    torch.testing.assert_close(g_dec, ref_dec)
    torch.testing.assert_close(ssm_state, s2)
