"""mamba-ssm 2.3.2.post1's mamba_ssm.modules.ssd_minimal: the Mamba-2 paper's minimal SSD in
plain torch (segsum, segsum_unstable, ssd_minimal_discrete), the pure-torch reference users
check kernels against.  Not a kernel path: the modules run mamba_chunk_scan_combined."""

from __future__ import annotations

import torch


def segsum_unstable(x):
    """(..., T) -> (..., T, T): out[..., i, j] = x[..., j+1] + ... + x[..., i] for j <= i, -inf
    above the diagonal; as a difference of cumulative sums (cancellation for long T)."""
    T = x.size(-1)
    c = torch.cumsum(x, dim=-1)
    out = c[..., :, None] - c[..., None, :]
    below = torch.ones(T, T, device=x.device, dtype=torch.bool).tril()
    return out.masked_fill(~below, -torch.inf)


def segsum(x):
    """segsum_unstable's result summed directly (no cancellation): the (i, j) entry adds
    x[..., k] for j < k <= i."""
    T = x.size(-1)
    k_after_j = torch.ones(T, T, device=x.device, dtype=torch.bool).tril(-1)  # [k, j]: k > j
    terms = x[..., :, None].expand(*x.shape, T).masked_fill(~k_after_j, 0)
    out = torch.cumsum(terms, dim=-2)  # [i, j] = sum over k <= i of terms[k, j]
    below = torch.ones(T, T, device=x.device, dtype=torch.bool).tril()
    return out.masked_fill(~below, -torch.inf)


def ssd_minimal_discrete(X, A, B, C, block_len, initial_states=None):
    """
    The discrete SSD, s_t = exp(A_t) s_{t-1} + B_t X_t^T, Y_t = C_t s_t, computed chunk by chunk
    of block_len tokens (quadratic within a chunk, the state carried between chunks).
        X: (batch, length, n_heads, d_head)   (already scaled by dt)
        A: (batch, length, n_heads)           (log-decay, dt * A)
        B, C: (batch, length, n_heads, d_state) (size-1 heads broadcast)
        initial_states: (batch, 1, n_heads, d_head, d_state) or None (zeros)
    Returns Y (batch, length, n_heads, d_head) and the final state (batch, n_heads, d_head,
    d_state).  length must be a multiple of block_len; X, A, B, C of one dtype.
    """
    if not X.dtype == A.dtype == B.dtype == C.dtype:
        raise ValueError("ssd_minimal_discrete: X, A, B, C must share a dtype, got %s, %s, %s, %s"
                         % (X.dtype, A.dtype, B.dtype, C.dtype))
    batch, length, heads, d_head = X.shape
    if length % block_len:
        raise ValueError("ssd_minimal_discrete: length %d is not a multiple of block_len %d"
                         % (length, block_len))
    d_state = B.shape[-1]
    if initial_states is None:
        state = X.new_zeros(batch, heads, d_head, d_state)
    else:
        state = initial_states[:, 0]
    ys = []
    for t0 in range(0, length, block_len):
        x, b, c = (t[:, t0:t0 + block_len] for t in (X, B, C))
        a = A[:, t0:t0 + block_len].transpose(1, 2)  # (batch, heads, l)
        cum = torch.cumsum(a, dim=-1)
        decay = torch.exp(segsum(a))  # (batch, heads, l, l): token s's weight at token l
        y_inside = torch.einsum("blhn,bshn,bhls,bshp->blhp", c, b, decay, x)
        y_carried = torch.einsum("blhn,bhpn,bhl->blhp", c, state, torch.exp(cum))
        ys.append(y_inside + y_carried)
        to_end = torch.exp(cum[..., -1:] - cum)  # (batch, heads, l): decay to the chunk's end
        state = state * torch.exp(cum[..., -1])[..., None, None] + \
            torch.einsum("bshn,bhs,bshp->bhpn", b, to_end, x)
    return torch.cat(ys, dim=1), state
