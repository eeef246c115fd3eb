"""What portssm's mamba_ssm alias does not provide, worded once."""

TRITON_BLOCKS_GAP = (
    "portssm does not provide mamba-ssm's Triton building blocks of the SSD (ssd_bmm, "
    "ssd_chunk_state, ssd_chunk_scan, ssd_state_passing, k_activations, softplus): its SSD is "
    "one library op; use mamba_chunk_scan_combined / mamba_split_conv1d_scan_combined (or "
    "install mamba-ssm itself: a real install takes precedence over portssm's alias)")


def missing_module(name, gap):
    """The ImportError a gap module raises when imported."""
    return ImportError("%s is not provided by portssm: %s" % (name, gap))
