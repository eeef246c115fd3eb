"""mamba_ssm.ops.triton.ssd_combined on portssm.  mamba-ssm's Triton building blocks that this
module also imports (chunk_state, chunk_scan, state_passing, their _ref forms,
chunk_state_varlen) are not provided: asking for them raises ImportError saying so."""

from portssm.torch.compat import (MambaChunkScanCombinedFn, MambaSplitConv1dScanCombinedFn,
                                  ensure_stride, init_to_zero, mamba_chunk_scan,
                                  selective_scan_bwd, ssd_selective_scan)
from portssm.torch.reference import (mamba_conv1d_scan_ref, mamba_split_conv1d_scan_ref,
                                     ssd_chunk_scan_combined_ref)
from portssm.torch.ssd import mamba_chunk_scan_combined, mamba_split_conv1d_scan_combined

from mamba_ssm.ops.triton._gaps import TRITON_BLOCKS_GAP

_TRITON_BLOCKS = ("chunk_state", "chunk_state_ref", "chunk_state_varlen", "state_passing",
                  "state_passing_ref", "chunk_scan", "chunk_scan_ref")


def __getattr__(name):
    if name in _TRITON_BLOCKS:
        raise ImportError("mamba_ssm.ops.triton.ssd_combined.%s: %s" % (name, TRITON_BLOCKS_GAP))
    if name == "rmsnorm_fn":  # the gated norm, from portssm's fused norms
        from mamba_ssm.ops.triton.layernorm_gated import rmsnorm_fn

        return rmsnorm_fn
    raise AttributeError("module %r has no attribute %r" % (__name__, name))


__all__ = ["mamba_chunk_scan_combined", "mamba_split_conv1d_scan_combined",
           "MambaChunkScanCombinedFn", "MambaSplitConv1dScanCombinedFn", "mamba_chunk_scan",
           "ssd_chunk_scan_combined_ref", "ssd_selective_scan", "mamba_conv1d_scan_ref",
           "mamba_split_conv1d_scan_ref", "selective_scan_bwd", "init_to_zero", "ensure_stride"]
