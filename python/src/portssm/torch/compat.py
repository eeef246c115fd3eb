"""The rest of the public names of causal-conv1d 1.7.0 and mamba-ssm 2.3.2.post1's op modules,
on portssm's ops: the autograd-Function classes' `apply` entry points, causal-conv1d's
cpp_functions (the raw forward / backward / update without autograd, as mamba-ssm's fused
functions call them), causal_conv1d_varlen_states, rms_norm_forward, mamba_chunk_scan,
ssd_selective_scan and the two small helpers of ssd_combined.  The import aliases
(`causal_conv1d`, `mamba_ssm`) re-export these; the `*_ref` functions are in reference.py.
"""

from __future__ import annotations

import torch

from . import _impl
from .causal_conv1d import causal_conv1d_fn
from .selective_scan import mamba_inner_fn, selective_scan_fn
from .ssd import mamba_chunk_scan_combined, mamba_split_conv1d_scan_combined


def _entry(name, fn):
    """A class named like the reference's torch.autograd.Function whose apply(...) takes the
    same positional arguments as that Function's apply and runs portssm's function (autograd
    through portssm's backward ops).  It is not a torch.autograd.Function subclass."""
    doc = ("%s.apply(*args): %s(*args) on portssm (the reference's autograd.Function takes the "
           "same positional arguments)." % (name, fn.__name__))
    return type(name, (), {"apply": staticmethod(fn), "__doc__": doc,
                           "__module__": __name__})


CausalConv1dFn = _entry("CausalConv1dFn", causal_conv1d_fn)
SelectiveScanFn = _entry("SelectiveScanFn", selective_scan_fn)
MambaInnerFn = _entry("MambaInnerFn", mamba_inner_fn)
MambaChunkScanCombinedFn = _entry("MambaChunkScanCombinedFn", mamba_chunk_scan_combined)
MambaSplitConv1dScanCombinedFn = _entry("MambaSplitConv1dScanCombinedFn",
                                        mamba_split_conv1d_scan_combined)


# ---------------------------------------------------------------- causal_conv1d.cpp_functions

def causal_conv1d_fwd_function(x, weight, bias, seq_idx, initial_states, final_states_out,
                               silu_activation: bool):
    """The forward without autograd: out (x's shape); final_states_out (batch, dim, width - 1),
    when given, receives the final states."""
    want_final = final_states_out is not None
    out, final = _impl.conv_fwd(x, weight, bias, seq_idx, initial_states, want_final,
                                bool(silu_activation))
    if want_final:
        final_states_out.copy_(final)
    return out


def causal_conv1d_bwd_function(x, weight, bias, dout, seq_idx, initial_states, dfinal_states, dx,
                               return_dinitial_states, silu_activation: bool):
    """The backward without autograd: (dx, dweight, dbias, dinitial_states), dweight and dbias in
    weight's and bias's dtypes, dbias and dinitial_states None where not asked for; dx, when
    given, receives dx."""
    gx, dweight, dbias, dinit = _impl.conv_bwd(x, weight, bias, seq_idx, initial_states, dout,
                                               dfinal_states, bool(return_dinitial_states),
                                               bool(silu_activation))
    if dx is not None:
        dx.copy_(gx)
        gx = dx
    return (gx, dweight.to(weight.dtype), dbias.to(bias.dtype) if bias is not None else None,
            dinit if return_dinitial_states else None)


def causal_conv1d_update_function(x, conv_state, weight, bias, silu_activation: bool,
                                  cache_seqlens, conv_state_indices):
    """The decode step without the activation-name check: x (batch, dim, seqlen), conv_state
    updated in place; returns out like x."""
    return _impl.conv_update(x, conv_state, weight, bias, bool(silu_activation), cache_seqlens,
                             conv_state_indices)


# ---------------------------------------------------------------- causal_conv1d_varlen

def causal_conv1d_varlen_states(x, cu_seqlens, state_len: int):
    """
    x: (total_tokens, dim) of sequences packed back to back; cu_seqlens: (batch + 1) sorted
    offsets; returns (batch, dim, state_len): the last state_len tokens of each sequence,
    right-aligned, zeros where a sequence is shorter (no autograd, like the reference).  One
    gather, no per-sequence loop.
    """
    total, dim = x.shape
    batch = cu_seqlens.shape[0] - 1
    cu = cu_seqlens.to(device=x.device, dtype=torch.long)
    starts, ends = cu[:-1], cu[1:]
    rows = ends.unsqueeze(1) - state_len + torch.arange(state_len, device=x.device)
    valid = rows >= starts.unsqueeze(1)  # (batch, state_len)
    gathered = x[rows.clamp(min=0, max=max(total - 1, 0))] if total else \
        x.new_zeros(batch, state_len, dim)
    states = torch.where(valid.unsqueeze(-1), gathered, gathered.new_zeros(()))
    # (batch, state_len, dim) seen as (batch, dim, state_len), the reference's layout
    return states.detach().contiguous().transpose(1, 2)


# ---------------------------------------------------------------- mamba_ssm.ops

def rms_norm_forward(x, weight, bias, eps=1e-6, is_rms_norm=True):
    """mamba-ssm's helper of the Mamba-1 B/C/dt norms: RMSNorm (LayerNorm if not is_rms_norm) of
    x (rows, dim) with weight and bias, through portssm's fused norm."""
    from .norms import layer_norm_fn

    return layer_norm_fn(x, weight, bias, eps=eps, is_rms_norm=is_rms_norm)


def mamba_chunk_scan(x, dt, A, B, C, chunk_size, D=None, z=None, dt_bias=None,
                     dt_softplus=False):
    """The SSD without states or seq_idx (mamba-ssm builds it from its Triton blocks; the result
    is mamba_chunk_scan_combined's): out (batch, seqlen, nheads, headdim)."""
    return mamba_chunk_scan_combined(x, dt, A, B, C, chunk_size, D=D, z=z, dt_bias=dt_bias,
                                     dt_softplus=dt_softplus)


def ssd_selective_scan(x, dt, A, B, C, D=None, z=None, dt_bias=None, dt_softplus=False,
                       dt_limit=(0.0, float("inf"))):
    """
    The SSD through the Mamba-1 selective scan, each (head, headdim) channel a scan channel:
    x (batch, seqlen, nheads, headdim); dt (batch, seqlen, nheads) or (..., nheads, headdim); A
    (nheads,) or (dim, dstate); B, C (batch, seqlen, ngroups, dstate); D (nheads, headdim) or
    (nheads,); z like x; dt_bias (nheads,) or (nheads, headdim).  out (batch, seqlen, nheads,
    headdim).
    """
    batch, seqlen, nheads, headdim = x.shape
    dstate = B.shape[-1]
    dim = nheads * headdim
    u = x.reshape(batch, seqlen, dim).transpose(1, 2)
    delta = dt if dt.dim() == 4 else dt.unsqueeze(-1).expand(batch, seqlen, nheads, headdim)
    delta = delta.reshape(batch, seqlen, dim).transpose(1, 2)
    if A.dim() == 1:
        A = A.float().repeat_interleave(headdim).unsqueeze(-1).expand(dim, dstate)
    Bv = B.permute(0, 2, 3, 1)  # (batch, ngroups, dstate, seqlen)
    Cv = C.permute(0, 2, 3, 1)
    if D is not None:
        D = D.reshape(dim) if D.dim() == 2 else D.repeat_interleave(headdim)
    if z is not None:
        z = z.reshape(batch, seqlen, dim).transpose(1, 2)
    if dt_bias is not None:
        dt_bias = dt_bias.reshape(dim) if dt_bias.dim() == 2 else \
            dt_bias.repeat_interleave(headdim)
    if tuple(dt_limit) != (0.0, float("inf")):
        # the clamp comes after the bias and softplus, which the scan would apply after it
        if dt_bias is not None:
            delta = delta + dt_bias.to(delta.dtype).unsqueeze(-1)
        if dt_softplus:
            delta = torch.nn.functional.softplus(delta)
        delta = delta.clamp(min=dt_limit[0], max=dt_limit[1]).to(x.dtype)
        dt_bias, dt_softplus = None, False
    out = selective_scan_fn(u, delta, A, Bv, Cv, D=D, z=z, delta_bias=dt_bias,
                            delta_softplus=dt_softplus)
    return out.transpose(1, 2).reshape(batch, seqlen, nheads, headdim)


def selective_scan_bwd(dout, x, dt, A, B, C, D=None, z=None):
    """mamba-ssm's debugging helper that runs the backward of its `selective_scan` extension
    module on SSD-shaped inputs: portssm has no such module; the SSD's gradients come from
    autograd through mamba_chunk_scan_combined."""
    raise NotImplementedError(
        "selective_scan_bwd (mamba-ssm's debugging helper over its `selective_scan` extension) "
        "is not provided by portssm: take the SSD's gradients through autograd on "
        "mamba_chunk_scan_combined")


def init_to_zero(names):
    """The Triton autotuner pre-hook factory of mamba-ssm: zeroes the named arguments."""
    def hook(nargs):
        for name in names:
            if nargs[name] is not None:
                nargs[name].zero_()

    return hook


def ensure_stride(inp):
    """inp (batch, length, channels), channels a multiple of 8, with stride(1) a multiple of 8
    (made contiguous otherwise), as mamba-ssm hands channel-last inputs to causal-conv1d.
    portssm's conv takes any stride, so this only keeps callers' code working."""
    if inp.shape[2] % 8:
        raise ValueError("ensure_stride: the number of convolution channels must be a multiple "
                         "of 8, got %d" % inp.shape[2])
    return inp if inp.stride(1) % 8 == 0 else inp.contiguous()
