"""mamba_ssm.modules.ssd_minimal: the minimal pure-torch SSD (portssm.torch.modules.
ssd_minimal) and mamba_chunk_scan_combined, which the reference's module imports."""

from portssm.torch.modules.ssd_minimal import segsum, segsum_unstable, ssd_minimal_discrete
from portssm.torch.ssd import mamba_chunk_scan_combined

__all__ = ["segsum", "segsum_unstable", "ssd_minimal_discrete", "mamba_chunk_scan_combined"]
